//! Tier Bwrap: bubblewrap puts the child in new user, mount, PID, IPC, UTS, cgroup and
//! (network off) network namespaces, on an empty root with a minimal read-only system view,
//! the boundary's paths bound at the same places, a private temp folder of its own (`TMPDIR`;
//! the rest of `/tmp` is not there), the sandbox's root read-only, and the seccomp filter
//! loaded by bubblewrap itself after its own setup (it needs mounts and netlink).
//!
//! Owns: the bubblewrap argument list and the seccomp memfd. Must not: bind `/` whole (a
//! UNIX socket on a read-only bind can still be connected to), nest inside Landlock, or
//! touch the parent's environment.
//!
//! Caller duty: `--die-with-parent` ties the sandbox to the thread that spawns it (Linux's
//! parent-death signal follows the forking thread): spawn from a long-lived thread (a tokio
//! worker), not from a short-lived `spawn_blocking` one.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::env::point_tmp_at;
use crate::error::SandboxError;
use crate::plan::{self, depth, exists, Access, Grant};
use crate::probe::Probe;
use crate::seccomp::Filter;
use crate::wrapped::{Hook, Wrapped};
use crate::Boundary;

/// The read-only system view, in this order; a symlink (merged /usr) stays a symlink.
pub const SYSTEM_PATHS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc"];

/// Everything besides the paths that shapes the sandbox.
#[derive(Debug, Clone)]
pub struct Layout {
    pub network: bool,
    pub userns: bool,
    pub workdir: PathBuf,
    pub seccomp_fd: RawFd,
}

pub(crate) fn wrap(
    program: &Path,
    args: &[OsString],
    b: &Boundary,
    probe: &Probe,
    program_paths: &[PathBuf],
) -> Result<Wrapped, SandboxError> {
    let bwrap = probe
        .bwrap
        .clone()
        .map_err(|why| SandboxError::new("use bubblewrap", why))?;
    let mut grants = plan::grants(b, program_paths, true)?;
    // A temp folder of its own, bound where it is: a write to any other path, `/tmp` included,
    // fails (EROFS) rather than landing in a scratch copy that looks like the real folder.
    let tmp = crate::wrapped::private_tmp()?;
    grants.push(Grant {
        path: tmp.path().to_path_buf(),
        access: Access::Write,
    });
    let memfd = seccomp_memfd(&Filter::build(b.network))?;
    let layout = Layout {
        network: b.network,
        userns: probe.bwrap_userns,
        workdir: b.workdir.clone().unwrap_or_else(|| PathBuf::from("/")),
        seccomp_fd: memfd.as_raw_fd(),
    };
    let mut argv = bwrap_args(&grants, &b.sockets, &layout);
    argv.push(program.into());
    argv.extend(args.iter().cloned());
    let mut env = b.env.clone();
    point_tmp_at(&mut env, tmp.path());
    let reopen = format!("/proc/self/fd/{}", memfd.as_raw_fd());
    let reopen_path = CString::new(reopen)
        .map_err(|_| SandboxError::new("name the seccomp memfd", "NUL byte"))?;
    Ok(Wrapped {
        program: bwrap,
        args: argv,
        env,
        workdir: PathBuf::from("/"),
        hook: Hook::Bwrap {
            memfd: Arc::new(memfd),
            reopen_path: Arc::new(reopen_path),
        },
        private_tmp: Some(tmp),
    })
}

/// bubblewrap's arguments up to and including `--`; the program and its arguments follow.
pub fn bwrap_args(grants: &[Grant], sockets: &[PathBuf], layout: &Layout) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["--unshare-all".into()];
    if layout.userns {
        argv.push("--unshare-user".into());
    }
    if layout.network {
        argv.push("--share-net".into());
    }
    for flag in ["--die-with-parent", "--new-session", "--cap-drop", "ALL"] {
        argv.push(flag.into());
    }
    for (_, op) in mounts(grants, sockets, layout.network) {
        argv.extend(op);
    }
    // The sandbox's own root (where bubblewrap made the folders the binds hang on) is read-only
    // too: a write anywhere but a writable bind fails (EROFS) instead of landing in a
    // scratch folder that looks like the real one.
    argv.extend(["--remount-ro".into(), "/".into()]);
    argv.push("--chdir".into());
    argv.push(layout.workdir.clone().into());
    argv.push("--seccomp".into());
    argv.push(layout.seccomp_fd.to_string().into());
    argv.push("--".into());
    argv
}

/// Every mount operation with its destination depth, parents first.
fn mounts(grants: &[Grant], sockets: &[PathBuf], network: bool) -> Vec<(usize, Vec<OsString>)> {
    let mut ops = system_view(network);
    for g in grants {
        let flag = match g.access {
            Access::Read => "--ro-bind",
            Access::Write => "--bind",
        };
        ops.push(bind(flag, &g.path));
    }
    for s in sockets.iter().filter(|s| exists(s)) {
        ops.push(bind("--bind", s));
    }
    ops.sort_by_key(|(d, _)| *d);
    ops
}

fn system_view(network: bool) -> Vec<(usize, Vec<OsString>)> {
    let mut ops = Vec::new();
    for p in SYSTEM_PATHS.iter().map(Path::new) {
        let Ok(meta) = p.symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            if let Ok(target) = std::fs::read_link(p) {
                ops.push((1, vec!["--symlink".into(), target.into(), p.into()]));
            }
        } else if meta.is_dir() {
            ops.push(bind("--ro-bind", p));
        }
    }
    ops.push((1, vec!["--proc".into(), "/proc".into()]));
    ops.push((1, vec!["--dev".into(), "/dev".into()]));
    if network {
        if let Some(target) = resolver_outside_etc() {
            ops.push(bind("--ro-bind", &target));
        }
    }
    ops
}

/// Where `/etc/resolv.conf` really is, when a symlink leads outside `/etc` (e.g. into
/// `/run/systemd/resolve`): DNS needs it once the network is on.
fn resolver_outside_etc() -> Option<PathBuf> {
    let link = Path::new("/etc/resolv.conf");
    let is_link = link.symlink_metadata().ok()?.file_type().is_symlink();
    let target = link.canonicalize().ok()?;
    (is_link && !target.starts_with("/etc")).then_some(target)
}

fn bind(flag: &str, p: &Path) -> (usize, Vec<OsString>) {
    (depth(p), vec![flag.into(), p.into(), p.into()])
}

/// A close-on-exec memfd holding the compiled filter, at fd 3 or above (0–2 are stdio).
fn seccomp_memfd(filter: &Filter) -> Result<OwnedFd, SandboxError> {
    // SAFETY: a valid C string name and flags.
    let raw = unsafe { libc::memfd_create(c"berth-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(SandboxError::last_os("create the seccomp memfd"));
    }
    // SAFETY: the fd was just created and is owned here.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    file.write_all(&filter.to_bytes())
        .and_then(|_| file.seek(SeekFrom::Start(0)).map(|_| ()))
        .map_err(|e| SandboxError::new("write the seccomp memfd", e.to_string()))?;
    let fd = OwnedFd::from(file);
    if fd.as_raw_fd() >= 3 {
        return Ok(fd);
    }
    // SAFETY: fd is open; F_DUPFD_CLOEXEC returns a new fd ≥ 3.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if moved < 0 {
        return Err(SandboxError::last_os("move the seccomp memfd above stdio"));
    }
    // SAFETY: the new fd is owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(network: bool) -> Layout {
        Layout {
            network,
            userns: true,
            workdir: PathBuf::from("/w"),
            seccomp_fd: 7,
        }
    }

    fn strings(argv: &[OsString]) -> Vec<String> {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn position(argv: &[String], window: &[&str]) -> Option<usize> {
        argv.windows(window.len()).position(|w| w == window)
    }

    #[test]
    fn namespaces_session_and_seccomp_come_first_and_last() {
        let argv = strings(&bwrap_args(&[], &[], &layout(false)));
        assert_eq!(argv[..2], ["--unshare-all", "--unshare-user"]);
        assert!(!argv.contains(&"--share-net".to_string()));
        assert!(position(&argv, &["--die-with-parent", "--new-session"]).is_some());
        assert!(position(&argv, &["--cap-drop", "ALL"]).is_some());
        let tail = &argv[argv.len() - 7..];
        assert_eq!(
            tail,
            ["--remount-ro", "/", "--chdir", "/w", "--seccomp", "7", "--"]
        );
        let with_net = strings(&bwrap_args(&[], &[], &layout(true)));
        assert_eq!(with_net[2], "--share-net");
    }

    #[test]
    fn the_system_view_is_minimal_and_keeps_merged_usr_symlinks() {
        let argv = strings(&bwrap_args(&[], &[], &layout(false)));
        assert!(position(&argv, &["--ro-bind", "/usr", "/usr"]).is_some());
        assert!(position(&argv, &["--ro-bind", "/etc", "/etc"]).is_some());
        assert!(position(&argv, &["--tmpfs", "/tmp"]).is_none());
        assert!(position(&argv, &["--ro-bind", "/", "/"]).is_none());
        if Path::new("/bin").is_symlink() {
            let target = std::fs::read_link("/bin").expect("readlink");
            let target = target.to_string_lossy();
            assert!(position(&argv, &["--symlink", &target, "/bin"]).is_some());
        }
    }

    #[test]
    fn grants_and_sockets_bind_in_place_parents_first() {
        let t = tempfile::tempdir().expect("tempdir");
        let sock = t.path().join("ch.sock");
        std::fs::write(&sock, "").expect("write");
        let deep = t.path().join("a/b");
        let grants = [
            Grant {
                path: deep.clone(),
                access: Access::Read,
            },
            Grant {
                path: t.path().to_path_buf(),
                access: Access::Write,
            },
        ];
        let argv = strings(&bwrap_args(
            &grants,
            std::slice::from_ref(&sock),
            &layout(false),
        ));
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let usr = position(&argv, &["--ro-bind", "/usr", "/usr"]).expect("usr");
        let root = position(&argv, &["--bind", &s(t.path()), &s(t.path())]).expect("rw");
        let ro = position(&argv, &["--ro-bind", &s(&deep), &s(&deep)]).expect("ro");
        let so = position(&argv, &["--bind", &s(&sock), &s(&sock)]).expect("socket");
        assert!(usr < root && root < ro && root < so);
    }
}
