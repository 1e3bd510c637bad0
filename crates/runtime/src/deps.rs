//! The plugin host's npm dependencies (`@opencode-ai/plugin` 1.18.4 with zod 4.1.8, and
//! sucrase for TypeScript on Node), prepared in Berth's data dir — never in the user's
//! OpenCode folders (deviations ledger D-001) — from the pinned lockfile, with install scripts
//! off. A local copy made by the set-up (`.tools/host-deps`, same lockfile) is linked in
//! instead of downloading again.
//!
//! Must not: run any package's install script, or write outside `<data dir>/deps/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{code, BerthError};

const PACKAGE_JSON: &str = include_str!("../../../scripts/tools/host-deps/package.json");
const PACKAGE_LOCK: &str = include_str!("../../../scripts/tools/host-deps/package-lock.json");
const STAMP: &str = ".berth-prepared";

fn lock_digest() -> String {
    berth_discovery::sha256_hex(PACKAGE_LOCK.as_bytes())
}

/// Returns the prepared folder (`<data dir>/deps/host`), preparing it first when needed.
/// Concurrent preparations of one data dir are serialised by a lock file.
pub fn prepare_host_deps(data_dir: &Path, seed: Option<&Path>) -> Result<PathBuf, BerthError> {
    let deps = data_dir.join("deps");
    let target = deps.join("host");
    let want = lock_digest();
    if std::fs::read_to_string(target.join(STAMP)).is_ok_and(|s| s.trim() == want) {
        return Ok(target);
    }
    let failed = |msg: String| {
        BerthError::new(code::DEPENDENCY_FAILED, "dependencies", msg, "check the network (npm registry) and disk space, then retry; run scripts/setup to prepare a local copy")
    };
    std::fs::create_dir_all(&deps)
        .map_err(|e| failed(format!("cannot create {}: {e}", deps.display())))?;
    let lock_file = std::fs::File::create(deps.join(".host.lock"))
        .map_err(|e| failed(format!("cannot create the install lock: {e}")))?;
    let _guard = FileLock::acquire(&lock_file);
    // Another process may have finished while we waited for the lock.
    if std::fs::read_to_string(target.join(STAMP)).is_ok_and(|s| s.trim() == want) {
        return Ok(target);
    }
    let staging = deps.join(format!(".host-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| failed(format!("cannot create {}: {e}", staging.display())))?;
    std::fs::write(staging.join("package.json"), PACKAGE_JSON)
        .map_err(|e| failed(e.to_string()))?;
    std::fs::write(staging.join("package-lock.json"), PACKAGE_LOCK)
        .map_err(|e| failed(e.to_string()))?;
    let seeded = seed
        .filter(|s| {
            std::fs::read_to_string(s.join("package-lock.json")).is_ok_and(|l| l == PACKAGE_LOCK)
                && s.join("node_modules").is_dir()
        })
        .map(|s| link_tree(&s.join("node_modules"), &staging.join("node_modules")))
        .transpose()
        .map_err(|e| failed(format!("cannot link the local dependency copy: {e}")))?
        .is_some();
    if !seeded {
        let out = Command::new("npm")
            .args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .current_dir(&staging)
            .output()
            .map_err(|e| failed(format!("cannot run npm: {e}")))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(failed(format!(
                "npm ci failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    std::fs::write(staging.join(STAMP), format!("{want}\n")).map_err(|e| failed(e.to_string()))?;
    let _ = std::fs::remove_dir_all(&target);
    std::fs::rename(&staging, &target).map_err(|e| {
        failed(format!(
            "cannot move the prepared dependencies into place: {e}"
        ))
    })?;
    tracing::info!(seeded, path = %target.display(), "plugin host dependencies prepared");
    Ok(target)
}

/// Recreates `from` at `to` with hard links (a copy where links are impossible).
fn link_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type()?;
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if ft.is_dir() {
            link_tree(&src, &dst)?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// An exclusive advisory lock held until dropped.
struct FileLock<'f>(&'f std::fs::File);

impl<'f> FileLock<'f> {
    fn acquire(f: &'f std::fs::File) -> FileLock<'f> {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; blocks until the lock is ours.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        FileLock(f)
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: releases the lock taken in `acquire`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
