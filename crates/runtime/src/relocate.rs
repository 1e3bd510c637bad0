//! A config folder's own `package.json` and `package-lock.json` as Berth hands them to npm in
//! its data dir (D-001): only the dependency lists travel, local folders (`file:./lib`) are
//! named relative to where npm runs so they still point at the config folder, every package
//! comes from the registry by name and version and is checked against the lockfile's
//! `integrity` (a `resolved` download URL is dropped, so a lockfile cannot send npm to another
//! server), links stay inside the config folder, and an entry npm would clone (git) or read
//! from a tarball is refused (deviations ledger D-025).
//!
//! Owns: rewriting those two files. Must not: run npm, or write anything.

use std::path::{Component, Path, PathBuf};

use berth_discovery::spec::{classify_dependency, NpmSpecClass};
use serde_json::{Map, Value};

/// The `package.json` npm gets in `target` (the folder it runs in, or a sibling of it): the
/// dependency lists of `pkg`, local specs re-pointed from `target` to the config folder.
pub fn manifest(pkg: &Value, config_dir: &Path, target: &Path) -> Value {
    let mut out = serde_json::json!({ "name": "berth-config-dir-deps", "private": true });
    for key in ["dependencies", "optionalDependencies"] {
        if let Some(deps) = pkg.get(key).and_then(Value::as_object) {
            out[key] = Value::Object(relocate_specs(deps, config_dir, target));
        }
    }
    out
}

fn relocate_specs(
    deps: &Map<String, Value>,
    config_dir: &Path,
    target: &Path,
) -> Map<String, Value> {
    deps.iter()
        .map(|(name, spec)| {
            let s = spec.as_str().unwrap_or_default();
            let moved = match classify_dependency(name, s, config_dir) {
                Ok(NpmSpecClass::Directory { path } | NpmSpecClass::File { path }) => {
                    Value::String(format!("file:{}", relative(&path, target)))
                }
                _ => spec.clone(),
            };
            (name.clone(), moved)
        })
        .collect()
}

/// The lockfile npm gets in `target`: paths re-pointed from `target` to the config folder,
/// download URLs dropped, links checked to stay inside the folder, git and tarballs refused.
pub fn lockfile(
    bytes: &[u8],
    pkg: &Value,
    config_dir: &Path,
    target: &Path,
) -> Result<Vec<u8>, String> {
    let mut lock: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("package-lock.json is not JSON: {e}"))?;
    let moved = |rel: &str| relative(&config_dir.join(rel), target);
    if let Some(packages) = lock.get_mut("packages").and_then(Value::as_object_mut) {
        let mut out = Map::new();
        for (key, mut entry) in std::mem::take(packages) {
            if key.is_empty() {
                // The root must match the package.json npm gets.
                out.insert(key, manifest(pkg, config_dir, target));
                continue;
            }
            check_entry(&key, &mut entry, config_dir, &moved)?;
            // Entries of linked folders are keyed by their path from the lockfile's folder.
            let key = if key.starts_with("node_modules/") {
                key
            } else {
                moved(&key)
            };
            out.insert(key, entry);
        }
        *packages = out;
    }
    // Lockfile v1 nests its tree under `dependencies`.
    if let Some(deps) = lock.get_mut("dependencies").and_then(Value::as_object_mut) {
        walk_v1(deps, config_dir, &moved)?;
    }
    serde_json::to_vec_pretty(&lock).map_err(|e| e.to_string())
}

fn walk_v1(
    deps: &mut Map<String, Value>,
    config_dir: &Path,
    moved: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    for (key, entry) in deps.iter_mut() {
        check_entry(key, entry, config_dir, moved)?;
        if let Some(nested) = entry.get_mut("dependencies").and_then(Value::as_object_mut) {
            walk_v1(nested, config_dir, moved)?;
        }
    }
    Ok(())
}

fn check_entry(
    key: &str,
    entry: &mut Value,
    config_dir: &Path,
    moved: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    let Some(e) = entry.as_object_mut() else {
        return Ok(());
    };
    let resolved = e
        .get("resolved")
        .and_then(Value::as_str)
        .map(str::to_string);
    if e.get("link").and_then(Value::as_bool) == Some(true) {
        let rel = resolved.unwrap_or_default();
        let target = config_dir.join(&rel);
        if !berth_discovery::scan::stays_inside(&target, config_dir) {
            return Err(format!(
                "the lockfile links {key} to {}, outside the config folder",
                target.display()
            ));
        }
        e.insert("resolved".into(), Value::String(moved(&rel)));
    } else if let Some(r) = resolved {
        if r.starts_with("https://") || r.starts_with("http://") {
            e.remove("resolved");
        } else {
            return Err(format!(
                "the lockfile installs {key} from `{r}`; Berth installs registry and local packages only"
            ));
        }
    }
    Ok(())
}

/// `path` relative to the folder `from` (both absolute), `/`-separated.
fn relative(path: &Path, from: &Path) -> String {
    let path = berth_discovery::spec::normalize(path);
    let from = berth_discovery::spec::normalize(from);
    let a: Vec<Component<'_>> = path.components().collect();
    let b: Vec<Component<'_>> = from.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &a[common..] {
        out.push(c.as_os_str());
    }
    let s = out.to_string_lossy().into_owned();
    if s.is_empty() {
        ".".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_folders_keep_pointing_at_the_config_folder_from_where_npm_runs() {
        let pkg = serde_json::json!({ "name": "c", "scripts": { "postinstall": "x" }, "dependencies": { "good": "file:./deps/good", "zod": "^4" } });
        let m = manifest(
            &pkg,
            Path::new("/home/u/.config/opencode"),
            Path::new("/data/config-deps/ab12"),
        );
        assert_eq!(
            m["dependencies"]["good"],
            "file:../../../home/u/.config/opencode/deps/good"
        );
        assert_eq!(m["dependencies"]["zod"], "^4");
        assert!(m.get("scripts").is_none());
    }

    #[test]
    fn a_lockfile_cannot_send_npm_elsewhere() {
        let pkg = serde_json::json!({ "dependencies": { "a": "^1" } });
        let cfg = Path::new("/c");
        let to = Path::new("/d/x");
        let lock = |entry: Value| {
            serde_json::to_vec(&serde_json::json!({ "lockfileVersion": 3, "packages": { "": {}, "node_modules/a": entry } })).unwrap()
        };
        let ok = lockfile(&lock(serde_json::json!({ "version": "1.0.0", "resolved": "https://evil.example/a.tgz", "integrity": "sha512-x" })), &pkg, cfg, to).unwrap();
        let ok: Value = serde_json::from_slice(&ok).unwrap();
        assert!(ok["packages"]["node_modules/a"].get("resolved").is_none());
        assert_eq!(ok["packages"]["node_modules/a"]["integrity"], "sha512-x");
        assert!(lockfile(
            &lock(serde_json::json!({ "resolved": "git+ssh://git@host/r.git" })),
            &pkg,
            cfg,
            to
        )
        .is_err());
        assert!(lockfile(
            &lock(serde_json::json!({ "resolved": "file:/tmp/a.tgz" })),
            &pkg,
            cfg,
            to
        )
        .is_err());
        assert!(lockfile(
            &lock(serde_json::json!({ "resolved": "../../outside", "link": true })),
            &pkg,
            cfg,
            to
        )
        .is_err());
    }
}
