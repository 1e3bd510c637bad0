//! The prepared installs hold what was approved, at every load. An npm plugin's install and a
//! config folder's prepared dependencies load natively in the plugin host (they are Berth's
//! own folders), so before the host loads anything of a source the runtime checks each install
//! the source loads from against its file list (`berth_discovery::prepared`): the list must be
//! the one the approval covered, every file under `node_modules` must be listed with its
//! bytes unchanged — none added, none removed — and no symlink may lead into another of
//! Berth's own folders, where nothing would check what it loads.
//!
//! The check runs before the load, and the runtime then reads the files itself: a process of
//! the same user that rewrites a file in that instant is not caught here (the folder is
//! private to the user; the OS sandbox of the policy work is to keep plugin processes from
//! writing it at all).
//!
//! Hashing a 170 MB install on every load would cost a quarter of a second, so each file's
//! digest is remembered beside the list with the file's identity and change time
//! (`.berth-stamps.json`: device, inode, size, modification and status-change times). A write,
//! rename or `chmod` sets the status-change time to the clock's now, which no unprivileged
//! process can set back: a file whose stamp is unchanged holds the bytes it was hashed with.
//! A file changed within the clock's coarse tick of its last stamp could keep the stamp, so a
//! file whose status changed in the last two seconds is not remembered (as git treats "racily
//! clean" entries). The stamps file is as private as the approvals themselves (the data dir is
//! 0700).
//!
//! Owns: the check and the stamps file. Must not: change anything of an install but its
//! stamps, or let a mismatch through as a warning.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

const STAMPS: &str = ".berth-stamps.json";

/// Remembered digests, valid for the list whose digest they carry.
#[derive(Default, Serialize, Deserialize)]
struct Stamps {
    list: String,
    /// list key → (stamp, digest)
    files: BTreeMap<String, (String, String)>,
}

/// The file's stamp, if it is old enough to be trusted later (see the module's comment).
fn stamp(m: &std::fs::Metadata, now: i64) -> Option<String> {
    if now - m.ctime() < 2 {
        return None;
    }
    Some(format!(
        "{}:{}:{}:{}.{}:{}.{}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// Checks `install` against its file list; with `approved`, the list must have that digest.
/// `trusted` are the folders whose files load without the host's gate (by real path): a
/// symlink in the install may not lead into one of them outside the install — except to
/// exactly one of the package folders Berth provides (`provided`, D-044: its own `effect`,
/// linked into an OpenCode 2 plugin's install). Err names the first file that differs, in
/// words for the person.
pub fn verify(
    install: &Path,
    approved: Option<&str>,
    trusted: &[PathBuf],
    provided: &[PathBuf],
) -> Result<(), String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(i64::MAX);
    verify_at(install, approved, trusted, provided, now)
}

/// `verify` as if the clock read `now` (seconds since the epoch).
fn verify_at(
    install: &Path,
    approved: Option<&str>,
    trusted: &[PathBuf],
    provided: &[PathBuf],
    now: i64,
) -> Result<(), String> {
    let (digest, list) = berth_discovery::prepared::read(install).ok_or_else(|| {
        format!(
            "{} has no file list of what was prepared",
            install.display()
        )
    })?;
    if approved.is_some_and(|want| want != digest) {
        return Err(format!(
            "the file list of {} is not the one that was approved",
            install.display()
        ));
    }
    let stamps_path = install.join(STAMPS);
    let mut known: Stamps = std::fs::read(&stamps_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|s: &Stamps| s.list == digest)
        .unwrap_or_default();
    let mut fresh = Stamps {
        list: digest,
        files: BTreeMap::new(),
    };
    let tree = berth_discovery::prepared::walk(install)
        .map_err(|e| format!("cannot read {}: {e}", install.display()))?;
    // A symlink is not in the list (npm makes `.bin` ones, and links `file:` folders to where
    // they are). What it leads to elsewhere passes the host's gate by its real path — unless
    // that lies in another of Berth's own folders, which load unchecked.
    let root = std::fs::canonicalize(install).unwrap_or_else(|_| install.to_path_buf());
    let provided: Vec<PathBuf> = if tree.links.is_empty() {
        Vec::new()
    } else {
        provided
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect()
    };
    for link in &tree.links {
        if let Ok(target) = std::fs::canonicalize(link) {
            if !target.starts_with(&root)
                && !provided.contains(&target)
                && trusted.iter().any(|t| target.starts_with(t))
            {
                return Err(format!(
                    "{} leads out of what Berth prepared (to {})",
                    link.display(),
                    target.display()
                ));
            }
        }
    }
    let on_disk = tree.files;
    let mut hashed = 0usize;
    for (rel, path, meta) in &on_disk {
        let Some(want) = list.files.get(rel) else {
            return Err(format!(
                "{} was added after Berth prepared it",
                path.display()
            ));
        };
        let s = stamp(meta, now);
        let got = match (known.files.remove(rel), &s) {
            (Some((old, d)), Some(s)) if &old == s => d,
            _ => {
                hashed += 1;
                berth_discovery::digest::file_digest(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?
            }
        };
        if &got != want {
            return Err(format!(
                "{} changed since Berth prepared it",
                path.display()
            ));
        }
        if let Some(s) = s {
            fresh.files.insert(rel.clone(), (s, got));
        }
    }
    if on_disk.len() != list.files.len() {
        let present: std::collections::HashSet<&str> =
            on_disk.iter().map(|(r, _, _)| r.as_str()).collect();
        let gone = list
            .files
            .keys()
            .find(|k| !present.contains(k.as_str()))
            .map(String::as_str)
            .unwrap_or("a file");
        return Err(format!(
            "{} was removed since Berth prepared it",
            install.join(gone).display()
        ));
    }
    // Written only when something was hashed (or a remembered entry went); best effort:
    // without it the next check hashes again.
    if hashed == 0 && known.files.is_empty() {
        return Ok(());
    }
    if let Ok(bytes) = serde_json::to_vec(&fresh) {
        let tmp = install.join(format!("{STAMPS}.{}", std::process::id()));
        if std::fs::write(&tmp, bytes).is_ok() {
            let _ = std::fs::rename(&tmp, &stamps_path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("node_modules/a");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("index.js"), "export default 1").unwrap();
        let list = berth_discovery::prepared::compute(dir.path()).unwrap();
        std::fs::write(
            dir.path().join(berth_discovery::prepared::FILES_LIST),
            berth_discovery::prepared::to_bytes(&list),
        )
        .unwrap();
        dir
    }

    /// Writes `entries` (file key → digest) as the remembered stamps, each with the file's
    /// stamp as it is now (as if hashed long ago).
    fn remember(install: &Path, list: &str, entries: &[(&str, &str)]) {
        let mut s = Stamps {
            list: list.to_string(),
            files: BTreeMap::new(),
        };
        for (key, digest) in entries {
            let meta = std::fs::metadata(install.join(key)).unwrap();
            let st = stamp(&meta, i64::MAX).expect("an old enough stamp");
            s.files.insert(key.to_string(), (st, digest.to_string()));
        }
        std::fs::write(install.join(STAMPS), serde_json::to_vec(&s).unwrap()).unwrap();
    }

    #[test]
    fn a_remembered_stamp_stands_for_the_bytes_only_while_the_file_is_untouched() {
        let dir = install();
        let list = berth_discovery::prepared::list_digest(dir.path()).unwrap();
        let key = "node_modules/a/index.js";
        verify(dir.path(), Some(&list), &[], &[]).unwrap();
        assert!(verify(dir.path(), Some("sha256:other"), &[], &[])
            .unwrap_err()
            .contains("not the one that was approved"));
        // A file written just now is not remembered (its change time may not move again).
        let s: Stamps =
            serde_json::from_slice(&std::fs::read(dir.path().join(STAMPS)).unwrap()).unwrap();
        assert!(s.files.is_empty());
        // An hour later, the file's stamp is old enough to be trusted.
        let later = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + 3600;
        // Positive control: a remembered stamp is trusted without hashing — remembered with a
        // wrong digest, the untouched file is reported changed.
        remember(dir.path(), &list, &[(key, "sha256:not-its-bytes")]);
        assert!(verify_at(dir.path(), Some(&list), &[], &[], later)
            .unwrap_err()
            .contains("index.js changed"));
        // Remembered with its right digest, then rewritten (same size): the stamp no longer
        // matches, the bytes are hashed, and the change is found.
        let right = berth_discovery::prepared::read(dir.path()).unwrap().1.files[key].clone();
        remember(dir.path(), &list, &[(key, &right)]);
        let ino = || std::fs::metadata(dir.path().join(STAMPS)).unwrap().ino();
        let before = ino();
        verify_at(dir.path(), Some(&list), &[], &[], later).unwrap();
        assert_eq!(
            ino(),
            before,
            "nothing was hashed, so the stamps are not written again"
        );
        // Past the clock's coarse tick, so the rewrite moves the change time (what the two
        // seconds of `stamp` guard against in real use).
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::fs::write(dir.path().join(key), "export default 2").unwrap();
        assert!(verify_at(dir.path(), Some(&list), &[], &[], later)
            .unwrap_err()
            .contains("index.js changed"));
    }

    #[test]
    fn a_file_added_or_removed_fails_the_check() {
        let dir = install();
        std::fs::write(dir.path().join("node_modules/a/extra.js"), "").unwrap();
        assert!(verify(dir.path(), None, &[], &[])
            .unwrap_err()
            .contains("extra.js was added"));
        std::fs::remove_file(dir.path().join("node_modules/a/extra.js")).unwrap();
        verify(dir.path(), None, &[], &[]).unwrap();
        std::fs::remove_file(dir.path().join("node_modules/a/index.js")).unwrap();
        assert!(verify(dir.path(), None, &[], &[])
            .unwrap_err()
            .contains("index.js was removed"));
    }

    /// An attacker who can write into the install adds a symlink to code in another of Berth's
    /// folders (which load unchecked), or puts one where a listed file was: the check refuses
    /// both. npm's own `.bin` links, which stay inside, pass, and so does a link to a folder
    /// outside Berth's (what it loads passes the gate by its real path).
    #[test]
    fn a_symlink_that_leads_into_another_of_berths_folders_fails_the_check() {
        let dir = install();
        let evil = tempfile::tempdir().unwrap();
        let trusted = [std::fs::canonicalize(evil.path()).unwrap()];
        std::fs::write(evil.path().join("evil.js"), "export default 666").unwrap();
        let bin = dir.path().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink("../a/index.js", bin.join("a")).unwrap();
        verify(dir.path(), None, &trusted, &[]).unwrap();

        let added = dir.path().join("node_modules/a/extra.js");
        std::os::unix::fs::symlink(evil.path().join("evil.js"), &added).unwrap();
        verify(dir.path(), None, &[], &[]).unwrap();
        assert!(verify(dir.path(), None, &trusted, &[])
            .unwrap_err()
            .contains("extra.js leads out of what Berth prepared"));
        std::fs::remove_file(&added).unwrap();

        let entry = dir.path().join("node_modules/a/index.js");
        std::fs::remove_file(&entry).unwrap();
        std::os::unix::fs::symlink(evil.path().join("evil.js"), &entry).unwrap();
        assert!(verify(dir.path(), None, &trusted, &[])
            .unwrap_err()
            .contains("index.js leads out of what Berth prepared"));
    }

    /// A package folder Berth provides (its own `effect`, in its trusted host dependencies) may
    /// be linked into an install as a whole (D-044); a file inside it, or a sibling, may not.
    #[test]
    fn a_link_to_exactly_a_package_berth_provides_passes_and_nothing_else_there_does() {
        let dir = install();
        let deps = tempfile::tempdir().unwrap();
        let trusted = [std::fs::canonicalize(deps.path()).unwrap()];
        let effect = deps.path().join("node_modules/effect");
        std::fs::create_dir_all(&effect).unwrap();
        std::fs::write(effect.join("index.js"), "export const Effect = 1").unwrap();
        let provided = [effect.clone()];
        let link = dir.path().join("node_modules/effect");
        std::os::unix::fs::symlink(&effect, &link).unwrap();
        verify(dir.path(), None, &trusted, &provided).unwrap();
        // The control: the same link without the exception is refused.
        assert!(verify(dir.path(), None, &trusted, &[])
            .unwrap_err()
            .contains("leads out of what Berth prepared"));
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(effect.join("index.js"), &link).unwrap();
        assert!(verify(dir.path(), None, &trusted, &provided).is_err());
    }
}
