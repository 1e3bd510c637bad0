//! Which file a local import loads: the rules of the runtime that will run it (Bun, or Node
//! for `import` and `require`), from the importing file's real path, ending in a real path.
//! The scan follows these to know every file a source will execute; the plugin host's loader
//! then refuses any file the scan did not list, so a difference between these rules and the
//! runtime's shows as a refused load, never as unlisted code running. `tests/cli/resolve.rs`
//! compares every rule with what real Bun and real Node load.
//!
//! Owns: local specifiers (relative, absolute, `file:` URLs). Must not: resolve packages
//! (bare specifiers come from what Berth prepared, not from the filesystem around the file),
//! read file contents, or run anything.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The runtime whose resolution rules apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Runtime {
    #[default]
    Bun,
    Node,
}

/// How the specifier is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportKind {
    /// `import`, `export … from`, `import()`.
    Import,
    /// `require()`.
    Require,
}

/// A specifier that names a file on disk rather than a package or a builtin.
pub fn is_local_specifier(spec: &str) -> bool {
    spec.starts_with("./")
        || spec.starts_with("../")
        || spec == "."
        || spec == ".."
        || spec.starts_with('/')
        || spec.starts_with("file:")
}

/// The real path of the file `spec`, imported from the file `importer` (a real path), loads on
/// `runtime`; None when it loads nothing (the runtime fails the import too).
pub fn resolve_local(
    runtime: Runtime,
    importer: &Path,
    spec: &str,
    kind: ImportKind,
) -> Option<PathBuf> {
    let base = importer.parent()?;
    let target = if let Some(url) = spec.strip_prefix("file://") {
        PathBuf::from(percent_decode(strip_query(url)))
    } else if spec.starts_with('/') {
        PathBuf::from(strip_query(spec))
    } else {
        base.join(strip_query(spec))
    };
    let target = crate::spec::normalize(&target);
    let found = match (runtime, kind) {
        // Node's ESM loader takes the path as written: no extensions, no index, no folders.
        (Runtime::Node, ImportKind::Import) => target.is_file().then(|| target.clone()),
        (Runtime::Node, ImportKind::Require) => node_require(&target),
        (Runtime::Bun, _) => bun(&target),
    }?;
    std::fs::canonicalize(&found).ok()
}

/// Bun's order for a path without a matching file: the path, then each extension, then
/// `.js`-family specifiers mapped to their TypeScript files, then a folder's `package.json`
/// entry, then its index files.
const BUN_EXTENSIONS: &[&str] = &["tsx", "jsx", "ts", "mjs", "js", "cjs", "json"];

fn bun(target: &Path) -> Option<PathBuf> {
    if target.is_file() {
        return Some(target.to_path_buf());
    }
    // TypeScript sources import `./x.js` meaning `./x.ts`.
    let s = target.to_string_lossy();
    for (js, ts) in [
        (".js", &[".ts", ".tsx"][..]),
        (".jsx", &[".tsx"][..]),
        (".mjs", &[".mts"][..]),
        (".cjs", &[".cts"][..]),
    ] {
        if let Some(stem) = s.strip_suffix(js) {
            for t in ts {
                let candidate = PathBuf::from(format!("{stem}{t}"));
                if candidate.is_file() {
                    return Some(candidate);
                }
            }
        }
    }
    with_extensions(target, BUN_EXTENSIONS).or_else(|| folder(target, BUN_EXTENSIONS))
}

const NODE_EXTENSIONS: &[&str] = &["js", "json", "node"];

fn node_require(target: &Path) -> Option<PathBuf> {
    if target.is_file() {
        return Some(target.to_path_buf());
    }
    with_extensions(target, NODE_EXTENSIONS).or_else(|| folder(target, NODE_EXTENSIONS))
}

fn with_extensions(target: &Path, exts: &[&str]) -> Option<PathBuf> {
    exts.iter()
        .map(|e| PathBuf::from(format!("{}.{e}", target.display())))
        .find(|c| c.is_file())
}

/// A folder: its `package.json` `main` (as a file, with extensions, or as a folder's index),
/// then its index files.
fn folder(dir: &Path, exts: &[&str]) -> Option<PathBuf> {
    if !dir.is_dir() {
        return None;
    }
    let main = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("main").and_then(Value::as_str).map(str::to_string));
    if let Some(main) = main {
        let m = crate::spec::normalize(&dir.join(main));
        if let Some(found) = (m.is_file().then(|| m.clone()))
            .or_else(|| with_extensions(&m, exts))
            .or_else(|| index(&m, exts))
        {
            return Some(found);
        }
    }
    index(dir, exts)
}

fn index(dir: &Path, exts: &[&str]) -> Option<PathBuf> {
    exts.iter()
        .map(|e| dir.join(format!("index.{e}")))
        .find(|c| c.is_file())
}

fn strip_query(s: &str) -> &str {
    &s[..s.find(['?', '#']).unwrap_or(s.len())]
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
