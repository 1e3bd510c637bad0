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

use crate::spec::percent_decode;

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
    // Node's `require` takes no URLs.
    if runtime == Runtime::Node && kind == ImportKind::Require && spec.starts_with("file:") {
        return None;
    }
    let dir_only = spec.ends_with('/') || matches!(spec, "." | "..");
    let target = if let Some(url) = spec.strip_prefix("file://") {
        PathBuf::from(percent_decode(cut(url, &['?', '#'])))
    } else {
        // Node reads a relative specifier as a URL (query and fragment cut, `%xx` decoded);
        // Bun cuts a query only and takes the rest as written.
        let path = match runtime {
            Runtime::Node if kind == ImportKind::Import => percent_decode(cut(spec, &['?', '#'])),
            Runtime::Node => spec.to_string(),
            Runtime::Bun => {
                if spec.contains('#') {
                    return None;
                }
                cut(spec, &['?']).to_string()
            }
        };
        if path.starts_with('/') {
            PathBuf::from(path)
        } else {
            base.join(path)
        }
    };
    let target = crate::spec::normalize(&target);
    let found = match (runtime, kind) {
        // Node's ESM loader takes the path as written: no extensions, no index, no folders.
        (Runtime::Node, ImportKind::Import) => {
            (!dir_only && target.is_file()).then(|| target.clone())
        }
        (Runtime::Node, ImportKind::Require) => node_require(&target, dir_only),
        (Runtime::Bun, ImportKind::Import) => bun(&target, dir_only, BUN_IMPORT),
        (Runtime::Bun, ImportKind::Require) => bun(&target, dir_only, BUN_REQUIRE),
    }?;
    std::fs::canonicalize(&found).ok()
}

/// Bun's extension order for `import` (and `Bun.resolveSync`), as observed on Bun 1.3.
const BUN_IMPORT: &[&str] = &["tsx", "jsx", "mts", "ts", "mjs", "js", "cts", "cjs", "json"];
/// Bun's extension order for `require`, `import.meta.require` and `createRequire`.
const BUN_REQUIRE: &[&str] = &[
    "tsx", "ts", "jsx", "cts", "cjs", "js", "mjs", "mts", "json", "node",
];

/// Bun: the path itself (its last component matched without regard to case, as Bun does on
/// Linux), then the path plus each extension (even after an extension: `x.js.ts`), then a
/// `.js`-family name mapped to its TypeScript file, then the path as a folder.
fn bun(target: &Path, dir_only: bool, exts: &[&str]) -> Option<PathBuf> {
    if !dir_only {
        if let Some(f) = file_ignoring_case(target) {
            return Some(f);
        }
        if let Some(f) = with_extensions(target, exts) {
            return Some(f);
        }
        let s = target.to_string_lossy();
        for (js, ts) in [
            (".js", &[".ts", ".tsx", ".mts"][..]),
            (".jsx", &[".ts", ".tsx", ".mts"][..]),
            (".mjs", &[".mts"][..]),
        ] {
            if let Some(stem) = s.strip_suffix(js) {
                if let Some(f) = ts
                    .iter()
                    .map(|t| PathBuf::from(format!("{stem}{t}")))
                    .find(|c| c.is_file())
                {
                    return Some(f);
                }
            }
        }
    }
    bun_folder(target, exts)
}

/// A folder for Bun: its `package.json` `main` (`module` and `exports` are not read for a
/// relative import, and an unreadable package.json is ignored), then its index files.
fn bun_folder(dir: &Path, exts: &[&str]) -> Option<PathBuf> {
    folder(dir, exts, package_main(dir).ok().flatten())
}

const NODE_EXTENSIONS: &[&str] = &["js", "json", "node"];

/// Node's `require`: the file, the file plus `.js`, `.json`, `.node`, then the folder
/// (`package.json` `main` — an unreadable package.json fails the require — then `index`).
fn node_require(target: &Path, dir_only: bool) -> Option<PathBuf> {
    if !dir_only {
        if target.is_file() {
            return Some(target.to_path_buf());
        }
        if let Some(f) = with_extensions(target, NODE_EXTENSIONS) {
            return Some(f);
        }
    }
    folder(target, NODE_EXTENSIONS, package_main(target).ok()?)
}

/// A folder as both runtimes read it: `main` (a file, with extensions, or a folder's index),
/// then the folder's own index files.
fn folder(dir: &Path, exts: &[&str], main: Option<String>) -> Option<PathBuf> {
    if !dir.is_dir() {
        return None;
    }
    if let Some(main) = main {
        let m = crate::spec::normalize(&dir.join(main));
        let found = (m.is_file().then(|| m.clone()))
            .or_else(|| with_extensions(&m, exts))
            .or_else(|| index(&m, exts));
        if found.is_some() {
            return found;
        }
    }
    index(dir, exts)
}

/// `main` of `dir/package.json`: Ok(None) without a file or a `main`, Err when it is not JSON.
fn package_main(dir: &Path) -> Result<Option<String>, ()> {
    let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
        return Ok(None);
    };
    let v: Value = serde_json::from_str(&text).map_err(|_| ())?;
    Ok(v.get("main").and_then(Value::as_str).map(str::to_string))
}

/// The file whose name matches the last component without regard to case (Bun's lookup on
/// Linux). Two names that differ only in case: which one Bun reads is not defined (it read the
/// lower-case one for both names when measured), so neither is claimed and the gate refuses
/// whichever Bun reads.
fn file_ignoring_case(target: &Path) -> Option<PathBuf> {
    let (dir, name) = (target.parent()?, target.file_name()?.to_str()?);
    let mut matches = std::fs::read_dir(dir).ok()?.flatten().filter(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
            && e.path().is_file()
    });
    let first = matches.next()?;
    matches.next().is_none().then(|| first.path())
}

fn with_extensions(target: &Path, exts: &[&str]) -> Option<PathBuf> {
    exts.iter()
        .map(|e| PathBuf::from(format!("{}.{e}", target.display())))
        .find(|c| c.is_file())
}

fn index(dir: &Path, exts: &[&str]) -> Option<PathBuf> {
    exts.iter()
        .map(|e| dir.join(format!("index.{e}")))
        .find(|c| c.is_file())
}

fn cut<'a>(s: &'a str, at: &[char]) -> &'a str {
    &s[..s.find(at).unwrap_or(s.len())]
}
