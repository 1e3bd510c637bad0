//! Execution versions (seed 003 §4): what exactly ran for a source, recorded when it is
//! registered — scope and load order, entries, the config folder's `package.json`, npm config
//! and lockfile digests, the packages with their versions and integrity, backend and platform,
//! native modules, content and capability digests, contributions — and the exact bytes kept so
//! that a rollback runs that version and nothing rebuilt from today's source: an npm install
//! stays in its folder (checked against its file list), a local file's bytes (and the local
//! files it imports) are copied content-addressed into the data dir at load.
//!
//! Owns: the record's facts, the content-addressed copies (`<data dir>/versions/blobs`), and
//! the answer to "can this version run again, byte for byte". Must not: decide whether a
//! version may run (approval and policy do), run or import anything, or rewrite a recorded
//! version (a later run of the same bytes only moves its time and reason).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use berth_discovery::{Source, SourceKind};
use serde_json::{json, Value};

/// Where the content-addressed copies of local sources' files live.
pub fn blobs_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("versions").join("blobs")
}

/// Where Berth keeps its copy of the bytes with `digest` (they may not be there).
pub fn kept_copy(data_dir: &Path, digest: &str) -> PathBuf {
    blob_path(data_dir, digest)
}

fn blob_path(data_dir: &Path, digest: &str) -> PathBuf {
    blobs_dir(data_dir).join(digest.trim_start_matches("sha256:"))
}

/// The facts of the version of `source` that runs now. `install`: the prepared npm install it
/// loads from, if any; `contributions`: what it registered.
pub fn record(
    source: &Source,
    install: Option<&Path>,
    backend: (&str, Option<&str>),
    contributions: &berth_store::Contributions,
) -> Value {
    let files: BTreeMap<String, String> = source
        .manifest
        .files
        .iter()
        .map(|(p, d)| (p.display().to_string(), d.clone()))
        .collect();
    let config_dir = match source.kind {
        SourceKind::NpmPlugin => None,
        _ => berth_discovery::config_dir_of(Path::new(&source.entry)),
    };
    let digest_of = |p: PathBuf| -> Value {
        match std::fs::read(&p) {
            Ok(bytes) => json!(berth_discovery::sha256_hex(&bytes)),
            Err(_) => Value::Null,
        }
    };
    let folder = config_dir.as_ref().map(|d| {
        json!({
            "path": d.display().to_string(),
            "package_json": digest_of(d.join("package.json")),
            "lockfile": digest_of(d.join("package-lock.json")),
        })
    });
    let packages = install.map(packages_of).unwrap_or_default();
    let natives = install.map(native_modules).unwrap_or_default();
    let retained = match (source.kind, install) {
        (SourceKind::NpmPlugin, Some(dir)) => json!({
            "kind": "npm",
            "install": dir.display().to_string(),
            "file_list": berth_discovery::prepared::list_digest(dir),
        }),
        _ => json!({ "kind": "files", "files": files }),
    };
    json!({
        "scope": source.scope,
        "order": source.order,
        "origin": source.origin.display().to_string(),
        "entries": [source.entry],
        "files": files,
        "config_folder": folder,
        "npm_config": npm_config(config_dir.as_deref()),
        "packages": packages,
        "backend": { "name": backend.0, "version": backend.1 },
        "platform": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "native_modules": natives,
        "content_digest": source.digest,
        "capability_digest": source.capability_digest,
        "contributions": { "tools": contributions.tools, "hooks": contributions.hooks },
        "retained": retained,
    })
}

/// The backend name MCP servers' execution versions are recorded under (a prepared server
/// runs with Node, outside any plugin host).
pub const MCP_BACKEND: &str = "mcp";

/// The facts of a prepared MCP server's version (`berth prepare`): the package, its exact
/// version and integrity, the program that runs, and the install kept as it was prepared (its
/// file list), so that a rollback runs exactly that install again.
pub fn record_prepared_mcp(prepared: &berth_store::McpPrepared) -> Value {
    let install = Path::new(&prepared.install);
    json!({
        "kind": "mcp-prepared",
        "prepared": prepared,
        "entries": [prepared.program.join(" ")],
        "packages": packages_of(install),
        "native_modules": native_modules(install),
        "backend": { "name": "node" },
        "platform": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "content_digest": prepared.list_digest,
        "retained": {
            "kind": "npm",
            "install": prepared.install,
            "file_list": prepared.list_digest,
        },
    })
}

/// The npm configuration files that would shape an install for this source (the user's
/// `~/.npmrc`, the config folder's `.npmrc`) by digest — never their contents, which may hold
/// tokens — and the names of `npm_config_*` variables set.
fn npm_config(config_dir: Option<&Path>) -> Value {
    let mut files = BTreeMap::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".npmrc"));
    }
    if let Some(d) = config_dir {
        candidates.push(d.join(".npmrc"));
    }
    for p in candidates {
        if let Ok(bytes) = std::fs::read(&p) {
            files.insert(p.display().to_string(), berth_discovery::sha256_hex(&bytes));
        }
    }
    let mut env: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.to_ascii_lowercase().starts_with("npm_config_"))
        .collect();
    env.sort();
    json!({ "files": files, "env": env })
}

/// Every package of a prepared install with its resolved version and integrity, from its
/// lockfile. An entry without `integrity` proves nothing about its bytes, and says so.
fn packages_of(install: &Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(install.join("package-lock.json")) else {
        return Vec::new();
    };
    let lock: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    lock["packages"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(path, _)| !path.is_empty())
        .map(|(path, p)| {
            let name = path.rsplit("node_modules/").next().unwrap_or(path);
            let integrity = p["integrity"].as_str();
            json!({
                "name": name,
                "version": p["version"],
                "integrity": integrity,
                "proves": if integrity.is_some() { "its bytes (the registry's integrity)" } else { "nothing: the lockfile has no integrity for it" },
            })
        })
        .collect()
}

/// The native modules (`.node` files) an install holds, relative to it.
fn native_modules(install: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![install.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "node") {
                if let Ok(rel) = path.strip_prefix(install) {
                    out.push(rel.display().to_string());
                }
            }
        }
    }
    out.sort();
    out
}

/// Keeps the bytes of every file `source` runs (its manifest), content-addressed, so that this
/// version can run again after the file changes. A file whose bytes no longer match the
/// digest the gate cleared is not kept (it is not the version that ran). Returns how many
/// files are kept for it.
pub fn retain(data_dir: &Path, source: &Source) -> usize {
    if source.kind == SourceKind::NpmPlugin {
        return 0;
    }
    let dir = blobs_dir(data_dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return 0;
    }
    let mut kept = 0;
    for (path, digest) in &source.manifest.files {
        let target = blob_path(data_dir, digest);
        if target.is_file() {
            kept += 1;
            continue;
        }
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        if &berth_discovery::sha256_hex(&bytes) != digest {
            continue;
        }
        let staging = target.with_extension(format!("tmp-{}", std::process::id()));
        if std::fs::write(&staging, &bytes).is_ok() && std::fs::rename(&staging, &target).is_ok() {
            kept += 1;
        }
    }
    kept
}

/// `source` as the earlier version `version` of it, for a local source rolled back to that
/// version: its recorded files and digests, the capability summary it was approved with
/// (`approved`), and for each file the kept copy the host reads its bytes from (path → copy).
/// `None` when a copy is missing (the version cannot run again; nothing is rebuilt).
pub fn pinned(
    data_dir: &Path,
    source: &Source,
    version: &berth_store::ExecutionVersion,
    approved: berth_discovery::Capabilities,
) -> Option<(Source, BTreeMap<PathBuf, PathBuf>)> {
    let files = version.record["files"].as_object()?;
    let mut manifest = BTreeMap::new();
    let mut kept = BTreeMap::new();
    for (path, digest) in files {
        let digest = digest.as_str()?;
        let copy = blob_path(data_dir, digest);
        if !copy.is_file() {
            return None;
        }
        manifest.insert(PathBuf::from(path), digest.to_string());
        kept.insert(PathBuf::from(path), copy);
    }
    let mut pinned = source.clone();
    let entry = source.capabilities.files.first().cloned();
    pinned.capabilities = approved;
    pinned.capabilities.files =
        entry
            .into_iter()
            .chain(manifest.keys().cloned())
            .fold(Vec::new(), |mut all, f| {
                if !all.contains(&f) {
                    all.push(f);
                }
                all
            });
    pinned.capabilities.contents_unknown = false;
    pinned.digest = version.digest.clone();
    pinned.capability_digest = version.record["capability_digest"]
        .as_str()
        .unwrap_or(&source.capability_digest)
        .to_string();
    pinned.manifest.files = manifest;
    Some((pinned, kept))
}

/// One version as the page and `berth versions` show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VersionView {
    pub id: i64,
    pub digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it runs (or ran).
    pub why: String,
    pub first_at_ms: i64,
    pub last_at_ms: i64,
    pub activations: i64,
    /// The version that runs now (or ran last).
    pub current: bool,
    /// Whether its exact bytes are here to run again, and in words what is kept or missing
    /// ("previous version not recoverable: …").
    pub recoverable: bool,
    pub kept: String,
    /// Packages it loaded, and how many of them carry no integrity (which proves nothing).
    pub packages: usize,
    pub without_integrity: usize,
    pub native_modules: Vec<String>,
    pub backend: Value,
    pub platform: String,
    /// The whole record (`berth versions`, `/api/versions`); left out of the status snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<Value>,
}

/// The versions of a source as views, the current first. `full`: with each whole record and
/// every kept byte checked (else a cheap check, for the status snapshot).
pub fn views(
    data_dir: &Path,
    rows: &[berth_store::ExecutionVersion],
    full: bool,
) -> Vec<VersionView> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let kept = check(data_dir, &r.record, full);
            let packages = r.record["packages"].as_array().map(Vec::len).unwrap_or(0);
            let without_integrity = r.record["packages"]
                .as_array()
                .map(|a| a.iter().filter(|p| p["integrity"].is_null()).count())
                .unwrap_or(0);
            VersionView {
                id: r.id,
                digest: r.digest.clone(),
                version: r.version.clone(),
                why: r.why.clone(),
                first_at_ms: r.first_at_ms,
                last_at_ms: r.last_at_ms,
                activations: r.activations,
                current: i == 0,
                recoverable: kept.is_ok(),
                kept: kept.unwrap_or_else(|e| e),
                packages,
                without_integrity,
                native_modules: r.record["native_modules"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                backend: r.record["backend"].clone(),
                platform: format!(
                    "{}/{}",
                    r.record["platform"].as_str().unwrap_or("?"),
                    r.record["arch"].as_str().unwrap_or("?")
                ),
                record: full.then(|| r.record.clone()),
            }
        })
        .collect()
}

/// Whether the version `record` describes can run again exactly: `Ok` with what would run,
/// or why not ("previous version not recoverable" and what is missing). Every kept byte is
/// hashed.
pub fn recoverable(data_dir: &Path, record: &Value) -> Result<String, String> {
    check(data_dir, record, true)
}

/// `recoverable`; `thorough: false` only looks that each kept file is there (the snapshot's
/// cheap check; a rollback checks every byte, and the host's gate again at load).
fn check(data_dir: &Path, record: &Value, thorough: bool) -> Result<String, String> {
    let retained = &record["retained"];
    match retained["kind"].as_str() {
        Some("npm") => {
            let install = PathBuf::from(retained["install"].as_str().unwrap_or_default());
            let want = retained["file_list"].as_str();
            if !install.is_dir() {
                return Err(format!(
                    "previous version not recoverable: its install {} is gone",
                    install.display()
                ));
            }
            // Cheap here; the load checks every file against the list before anything runs
            // (`integrity::verify`), so a changed file is refused then.
            let now = berth_discovery::prepared::list_digest(&install);
            match (want, now) {
                (Some(w), Some(n)) if w == n => Ok(install.display().to_string()),
                (None, _) => Err(
                    "previous version not recoverable: no file list was kept for its install"
                        .into(),
                ),
                _ => Err(format!(
                    "previous version not recoverable: the files of {} changed since it ran",
                    install.display()
                )),
            }
        }
        Some("files") => {
            let files = retained["files"].as_object().cloned().unwrap_or_default();
            if files.is_empty() {
                return Err("previous version not recoverable: none of its files was kept".into());
            }
            for (path, digest) in &files {
                let digest = digest.as_str().unwrap_or_default();
                let blob = blob_path(data_dir, digest);
                let kept = if thorough {
                    std::fs::read(&blob).is_ok_and(|b| berth_discovery::sha256_hex(&b) == digest)
                } else {
                    blob.is_file()
                };
                if !kept {
                    return Err(format!(
                        "previous version not recoverable: the bytes of {path} it ran were not kept"
                    ));
                }
            }
            Ok(format!("{} kept file(s)", files.len()))
        }
        _ => Err("previous version not recoverable: nothing of it was kept".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_is_recoverable_and_a_tampered_copy_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let file = tmp.path().join("tool.ts");
        std::fs::write(&file, "export default 1\n").unwrap();
        let digest = berth_discovery::sha256_hex(b"export default 1\n");
        std::fs::create_dir_all(blobs_dir(&data)).unwrap();
        std::fs::write(blob_path(&data, &digest), "export default 1\n").unwrap();
        let record = json!({ "retained": { "kind": "files", "files": { file.display().to_string(): digest } } });
        assert!(recoverable(&data, &record).is_ok());
        std::fs::write(blob_path(&data, &digest), "export default 2\n").unwrap();
        let why = recoverable(&data, &record).unwrap_err();
        assert!(why.starts_with("previous version not recoverable"), "{why}");
        let nothing = json!({ "retained": null });
        assert!(recoverable(&data, &nothing).is_err());
    }
}
