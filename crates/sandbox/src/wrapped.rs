//! A wrapped command: the program and arguments that run a child inside its boundary, its
//! complete environment, and what the forked child must do before exec.
//!
//! Owns: `Wrapped`, its `apply` to a tokio command, and the pre-exec hooks. Must not: build
//! boundaries (that is done before, in `wrap`), or allocate, lock or log in a hook: hooks run
//! between fork and exec and use only raw syscalls on data prepared in the parent.
//!
//! Inherited fds: every fd above stdio is closed at exec (the hook marks them
//! close-on-exec), except the seccomp fd bubblewrap reads; a caller cannot pass extra fds.
//!
//! Lifetime: the fds a hook needs are shared (`Arc`) with the command it was applied to, so
//! they stay open until that command is dropped. The Landlock tier's private temp folder
//! belongs to the `Wrapped` and is removed when it is dropped: keep the `Wrapped` as long as
//! the child runs.

use crate::error::SandboxError;
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::landlock;
use crate::seccomp::Filter;
use crate::Tier;

/// The command that runs a program inside its boundary. Built by `wrap`.
#[derive(Debug)]
pub struct Wrapped {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) workdir: PathBuf,
    pub(crate) hook: Hook,
    pub(crate) private_tmp: Option<tempfile::TempDir>,
}

/// What the forked child does before exec.
#[derive(Debug, Clone)]
pub(crate) enum Hook {
    /// Hand bubblewrap its own fresh read of the seccomp program at the fd number its
    /// arguments name (each spawn reopens the memfd, so a `Wrapped` can be applied again).
    Bwrap {
        memfd: Arc<OwnedFd>,
        reopen_path: Arc<CString>,
    },
    /// Drop capabilities (when root), no_new_privs, enforce Landlock, load seccomp.
    Landlock {
        ruleset: Arc<OwnedFd>,
        filter: Arc<Filter>,
        drop_caps: bool,
    },
}

impl Wrapped {
    /// The program to start (bubblewrap, or the program itself in the Landlock tier).
    pub fn program(&self) -> &Path {
        &self.program
    }

    pub fn args(&self) -> &[OsString] {
        &self.args
    }

    /// The complete environment the child gets.
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    pub fn tier(&self) -> Tier {
        match self.hook {
            Hook::Bwrap { .. } => Tier::Bwrap,
            Hook::Landlock { .. } => Tier::Landlock,
        }
    }

    /// The child's private temp folder (both tiers; its `TMPDIR`).
    pub fn private_tmp(&self) -> Option<&Path> {
        self.private_tmp.as_ref().map(|t| t.path())
    }

    /// Applies itself to a command built from `program()` and `args()`: clears the
    /// environment and sets the boundary's, sets the working folder, and adds the pre-exec
    /// hook. Compatible with `process_group(0)` (std sets the group before pre-exec hooks).
    /// If the hook fails, spawning fails: the child never runs unrestricted.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        cmd.env_clear();
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.current_dir(&self.workdir);
        let hook = self.hook.clone();
        // SAFETY: the hook only makes async-signal-safe raw syscalls on prepared data.
        unsafe {
            cmd.pre_exec(move || hook.run_in_child());
        }
    }
}

impl Hook {
    /// Runs between fork and exec. Async-signal-safe. First marks every fd above stdio
    /// close-on-exec, so nothing the parent leaked (an inherited pipe, a socket) reaches the
    /// child; the one fd a tier hands over is set up after that.
    fn run_in_child(&self) -> io::Result<()> {
        // SAFETY: raw syscalls only.
        unsafe { close_on_exec_above_stdio()? };
        match self {
            Hook::Bwrap { memfd, reopen_path } => {
                // SAFETY: raw syscalls on an open fd and a prepared C string.
                unsafe { hand_over_fresh(memfd.as_raw_fd(), reopen_path) }
            }
            Hook::Landlock {
                ruleset,
                filter,
                drop_caps,
            } => {
                // SAFETY: raw syscalls on an open fd and a prepared program.
                unsafe { confine_self(ruleset.as_raw_fd(), filter, *drop_caps) }
            }
        }
    }
}

/// Marks fds 3 and up close-on-exec: `close_range` (Linux 5.11), else one by one up to
/// the open-file limit.
unsafe fn close_on_exec_above_stdio() -> io::Result<()> {
    let flags = libc::CLOSE_RANGE_CLOEXEC;
    if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, flags) == 0 {
        return Ok(());
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
        return Err(io::Error::last_os_error());
    }
    let last = limit.rlim_cur.min(1 << 20) as i32;
    for fd in 3..last {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC); // EBADF for closed fds: fine
    }
    Ok(())
}

/// Replaces `fd` (close-on-exec in the parent) with a fresh open of the same memfd, so this
/// child has its own offset 0, and leaves it open across exec.
unsafe fn hand_over_fresh(fd: i32, reopen_path: &CString) -> io::Result<()> {
    let fresh = libc::open(reopen_path.as_ptr(), libc::O_RDONLY);
    if fresh < 0 {
        return Err(io::Error::last_os_error());
    }
    let moved = libc::dup2(fresh, fd);
    let err = io::Error::last_os_error();
    libc::close(fresh);
    if moved < 0 {
        return Err(err);
    }
    Ok(())
}

/// The Landlock tier's child setup, in order: capabilities away (root only), no new
/// privileges, Landlock, seccomp.
unsafe fn confine_self(ruleset: i32, filter: &Filter, drop_caps: bool) -> io::Result<()> {
    if drop_caps {
        drop_all_capabilities()?;
    }
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err(io::Error::last_os_error());
    }
    landlock::restrict_self(ruleset)?;
    filter.load()
}

/// Empties the bounding, ambient, inheritable, permitted and effective sets, so a root
/// child execs with no capabilities at all.
unsafe fn drop_all_capabilities() -> io::Result<()> {
    for cap in 0..64 {
        if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                break; // past the last capability this kernel knows
            }
            return Err(io::Error::last_os_error());
        }
    }
    let clear_all = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
    if libc::prctl(libc::PR_CAP_AMBIENT, clear_all, 0, 0, 0) != 0 {
        return Err(io::Error::last_os_error());
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let none = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    if libc::syscall(libc::SYS_capset, &header as *const Header, none.as_ptr()) != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A fresh 0700 folder under the system temp folder: the child's own temp folder (its
/// `TMPDIR`), removed when the `Wrapped` is dropped.
pub(crate) fn private_tmp() -> Result<tempfile::TempDir, SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("berth-sandbox-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| SandboxError::new("create the child's private temp folder", e.to_string()))
}
