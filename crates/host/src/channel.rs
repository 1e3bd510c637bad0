//! Where the host channel lives and who may use it: a fresh directory only this user can
//! enter (created with an unpredictable name, its owner and mode checked before every use),
//! and the peer check of each connection to a socket in it (`SO_PEERCRED`: this user, and the
//! process the supervisor spawned).
//!
//! Owns: the socket directory and the peer check. Must not: speak the protocol or hold child
//! processes (the supervisor in `mod.rs` does both).

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The longest socket path this module hands out (the kernel's limit is 107 bytes).
const MAX_SOCKET_PATH: usize = 100;
/// Room the directory and socket names take below a base folder.
const NAMES_LEN: usize =
    "/berth-run-4294967295-0123456789abcdef/h4294967295-99999999-01234567.sock".len();

/// A private directory for host sockets, removed when dropped.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates `<base>/berth-run-<pid>-<random>` (mode 0700, exclusively: an existing name is
    /// never reused) in the first base that is private to this user and short enough for a
    /// socket path, and verifies it. Directories this process's earlier incarnations left
    /// behind (same naming, dead pid) are removed on the way.
    pub fn create(bases: &[PathBuf]) -> Result<RunDir, String> {
        let mut why = Vec::new();
        for base in bases {
            if base.as_os_str().len() + NAMES_LEN > MAX_SOCKET_PATH {
                why.push(format!("{} is too long for a socket path", base.display()));
                continue;
            }
            // A base that is not ours could be swapped under us; the temp dir is the exception
            // (sticky and world-writable by design), where only the fresh child is trusted.
            if !is_temp_dir(base) {
                if let Err(e) = check_private(base) {
                    why.push(e);
                    continue;
                }
            }
            remove_stale(base);
            for _ in 0..8 {
                let path = base.join(format!(
                    "berth-run-{}-{}",
                    std::process::id(),
                    berth_base::random_hex(8)
                ));
                match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                    Ok(()) => {
                        let dir = RunDir { path };
                        dir.verify()?;
                        return Ok(dir);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => {
                        why.push(format!("cannot create a folder in {}: {e}", base.display()));
                        break;
                    }
                }
            }
        }
        Err(format!(
            "no private folder for the plugin host's socket: {}",
            why.join("; ")
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Owner and mode, checked again before each socket is made in it.
    pub fn verify(&self) -> Result<(), String> {
        check_private(&self.path)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The folders a [`RunDir`] may go in, best first: `$XDG_RUNTIME_DIR` (per user, private,
/// cleared at logout), Berth's data dir, then the temp dir.
pub fn socket_bases(data_dir: &Path) -> Vec<PathBuf> {
    let mut bases = Vec::new();
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        let x = PathBuf::from(x);
        if x.is_absolute() {
            bases.push(x);
        }
    }
    bases.push(data_dir.to_path_buf());
    bases.push(std::env::temp_dir());
    bases
}

fn is_temp_dir(p: &Path) -> bool {
    p == std::env::temp_dir()
}

/// A real directory (not a symlink to one), owned by this user, that nobody else can enter
/// or write.
pub fn check_private(path: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
    if !meta.file_type().is_dir() {
        return Err(format!("{} is not a directory", path.display()));
    }
    let uid = own_uid();
    if meta.uid() != uid {
        return Err(format!(
            "{} belongs to uid {}, not to this user (uid {uid})",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} can be reached by other users (mode {:o})",
            path.display(),
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

/// Makes `dir` (created if missing) a private folder of this user — mode 0700 — and returns its
/// real path. Err when it belongs to someone else or cannot be narrowed.
pub fn private_folder(dir: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let real =
        std::fs::canonicalize(dir).map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
    let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
    if meta.uid() == own_uid() && meta.mode() & 0o077 != 0 {
        let _ = std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700));
    }
    check_private(&real)?;
    Ok(real)
}

/// The connection comes from this user and from the process `pid` (the host the supervisor
/// spawned; a host never hands its connection to a child).
pub fn check_peer(stream: &tokio::net::UnixStream, pid: u32, wrapped: bool) -> Result<u32, String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    if cred.uid() != own_uid() {
        return Err(format!(
            "a process of uid {} connected to the host socket",
            cred.uid()
        ));
    }
    match cred.pid() {
        Some(p) if p as u32 == pid => Ok(pid),
        // Inside an OS boundary the runtime is a descendant of the wrapper Berth started.
        Some(p) if wrapped && descends_from(p as u32, pid) => Ok(p as u32),
        other => Err(format!(
            "process {} connected to the host socket in place of the host (pid {pid})",
            other.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
        )),
    }
}

/// Whether `ancestor` is on `pid`'s chain of parents (read from /proc, a few steps at most).
fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    for _ in 0..16 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{at}/stat")) else {
            return false;
        };
        // The fields after the command's closing parenthesis: state, ppid, …
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            return false;
        };
        if ppid == ancestor {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        at = ppid;
    }
    false
}

fn own_uid() -> u32 {
    // SAFETY: getuid has no failure mode and touches no memory of ours.
    unsafe { libc::getuid() }
}

/// Removes `berth-run-<pid>-*` folders of `base` whose process is gone (left by a crash).
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("berth-run-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive && check_private(&e.path()).is_ok() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_folder_others_can_write_is_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let private = dir.path().join("private");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        let run = RunDir::create(&[open.clone(), private.clone()]).unwrap();
        assert!(run.path().starts_with(&private), "{}", run.path().display());
        let meta = std::fs::symlink_metadata(run.path()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert!(RunDir::create(&[open]).is_err());
        let path = run.path().to_path_buf();
        drop(run);
        assert!(!path.exists(), "the folder goes with its owner");
    }

    #[test]
    fn a_symlink_to_a_private_folder_is_not_a_private_folder() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("private");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        assert!(check_private(&link).is_err());
        assert!(check_private(&private).is_ok());
    }

    #[tokio::test]
    async fn a_connection_from_another_process_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let listener = tokio::net::UnixListener::bind(&sock).unwrap();
        let _client = tokio::net::UnixStream::connect(&sock).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        // The peer is this test process: right user, but not the expected host.
        assert_eq!(
            check_peer(&server, std::process::id(), false),
            Ok(std::process::id())
        );
        let err = check_peer(&server, std::process::id() + 1, false).unwrap_err();
        assert!(err.contains("in place of the host"), "{err}");
        // A wrapped host's runtime is a descendant of the wrapper: this process descends from
        // its parent, and is accepted for it only when the host is wrapped.
        let parent = std::os::unix::process::parent_id();
        assert!(check_peer(&server, parent, false).is_err());
        assert_eq!(check_peer(&server, parent, true), Ok(std::process::id()));
        // Not a descendant: refused even when wrapped.
        assert!(check_peer(&server, std::process::id() + 1, true).is_err());
    }
}
