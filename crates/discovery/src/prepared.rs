//! The file list of a prepared install (`<install>/.berth-files.json`): every file under its
//! `node_modules` with the digest of its bytes, written once when Berth prepares the install
//! (in its own data dir, install scripts off). A source that loads packages from the install
//! carries the list's digest, and before the plugin host loads anything of a source the runtime
//! checks the install against the list (`berth_runtime`'s `integrity`): a byte changed since
//! preparation, a file added or removed, and nothing of the source is loaded.
//!
//! Owns: the list's format, walking the tree, computing the list, reading it. Must not: write
//! anything (the runtime writes the list it computes here), or follow symlinks out of the tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The list's file name, beside the install's `node_modules`.
pub const FILES_LIST: &str = ".berth-files.json";

/// Files under `node_modules` by path relative to the install folder (`/`-separated), each
/// with its `sha256:` digest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileList {
    pub v: u32,
    pub files: BTreeMap<String, String>,
}

/// What is under `<install>/node_modules`: every regular file, by its key in the list (its
/// path relative to the install, `/`-separated), with its metadata; and every symlink (not
/// followed: what one points to inside the tree is listed as itself; npm's `.bin` entries are
/// symlinks).
#[derive(Debug, Default)]
pub struct Tree {
    pub files: Vec<(String, PathBuf, std::fs::Metadata)>,
    pub links: Vec<PathBuf>,
}

/// Walks `<install>/node_modules` once.
pub fn walk(install: &Path) -> std::io::Result<Tree> {
    let mut tree = Tree::default();
    let mut stack: Vec<PathBuf> = vec![install.join("node_modules")];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for e in entries {
            let e = e?;
            let ft = e.file_type()?;
            let path = e.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_symlink() {
                tree.links.push(path);
            } else if ft.is_file() {
                let rel = path
                    .strip_prefix(install)
                    .map_err(std::io::Error::other)?
                    .to_string_lossy()
                    .into_owned();
                let meta = e.metadata()?;
                tree.files.push((rel, path, meta));
            }
        }
    }
    Ok(tree)
}

/// Hashes every regular file under `<install>/node_modules`. Fails on the first unreadable file.
pub fn compute(install: &Path) -> std::io::Result<FileList> {
    let mut files = BTreeMap::new();
    for (rel, path, _) in walk(install)?.files {
        files.insert(rel, crate::digest::file_digest(&path)?);
    }
    Ok(FileList { v: 1, files })
}

/// The digest of `<install>/.berth-files.json` as it is on disk, if there is one.
pub fn list_digest(install: &Path) -> Option<String> {
    std::fs::read(install.join(FILES_LIST))
        .ok()
        .map(|b| crate::sha256_hex(&b))
}

/// The list on disk, its digest and its contents (None: missing or not a list).
pub fn read(install: &Path) -> Option<(String, FileList)> {
    let bytes = std::fs::read(install.join(FILES_LIST)).ok()?;
    let list = serde_json::from_slice(&bytes).ok()?;
    Some((crate::sha256_hex(&bytes), list))
}

/// The list's bytes as they are written (stable: sorted keys, one line).
pub fn to_bytes(list: &FileList) -> Vec<u8> {
    serde_json::to_vec(list).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_every_file_of_the_tree_and_only_those() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("node_modules/a");
        std::fs::create_dir_all(pkg.join("lib")).unwrap();
        std::fs::write(pkg.join("index.js"), "x").unwrap();
        std::fs::write(pkg.join("lib/b.js"), "y").unwrap();
        std::fs::write(dir.path().join("outside.js"), "z").unwrap();
        std::os::unix::fs::symlink("../a/index.js", dir.path().join("node_modules/link.js"))
            .unwrap();
        let list = compute(dir.path()).unwrap();
        let names: Vec<&str> = list.files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["node_modules/a/index.js", "node_modules/a/lib/b.js"]
        );
        assert_eq!(
            list.files["node_modules/a/index.js"],
            crate::sha256_hex(b"x")
        );
    }
}
