//! Landlock through its three raw system calls: asking the ABI, building a ruleset in the
//! parent (an `O_CLOEXEC` fd with its path rules added), and enforcing it in the child.
//!
//! Owns: the access-right bits per ABI, `Ruleset`, `restrict_self`. Must not: choose which
//! paths a child gets (that is `plan` and `landlock_tier`), or allocate in `restrict_self`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::SandboxError;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;

/// Filesystem access rights (`LANDLOCK_ACCESS_FS_*`).
pub mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const TRUNCATE: u64 = 1 << 14;
    pub const IOCTL_DEV: u64 = 1 << 15;
    /// The rights that make sense on a file that is not a directory.
    pub const FILE_ONLY: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    /// Read and execute: files, directory listings, programs.
    pub const READ: u64 = EXECUTE | READ_FILE | READ_DIR;
    /// Every right (masked to what the ABI knows when used).
    pub const ALL: u64 = u64::MAX;
}

const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version the kernel offers, or `None` when Landlock is off or absent.
pub fn abi() -> Option<u32> {
    // SAFETY: a NULL attr with size 0 and the VERSION flag only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|&v| v >= 1)
}

/// The filesystem rights ABI `abi` knows.
pub fn fs_rights(abi: u32) -> u64 {
    match abi {
        0 => 0,
        1 => (1 << 13) - 1,
        2 => (1 << 14) - 1,
        3 | 4 => (1 << 15) - 1,
        _ => (1 << 16) - 1,
    }
}

/// What a ruleset takes over from the kernel's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handled {
    pub fs: u64,
    pub net: u64,
    pub scoped: u64,
}

impl Handled {
    /// Everything ABI `abi` can restrict: all filesystem rights, TCP when `network` is off
    /// (ABI ≥ 4), abstract UNIX sockets and signals (ABI ≥ 6).
    pub fn everything(abi: u32, network: bool) -> Handled {
        Handled {
            fs: fs_rights(abi),
            net: if abi >= 4 && !network {
                NET_BIND_TCP | NET_CONNECT_TCP
            } else {
                0
            },
            scoped: if abi >= 6 {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
        }
    }
}

/// A ruleset under construction in the parent; its fd is close-on-exec.
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
    handled: Handled,
}

impl Ruleset {
    pub fn new(handled: Handled) -> Result<Ruleset, SandboxError> {
        let attr = RulesetAttr {
            handled_access_fs: handled.fs,
            handled_access_net: handled.net,
            scoped: handled.scoped,
        };
        // SAFETY: attr is a valid struct of the size passed; the kernel copies it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if fd < 0 {
            return Err(SandboxError::last_os("create a Landlock ruleset"));
        }
        // SAFETY: the kernel just returned this fd and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(Ruleset { fd, handled })
    }

    /// Allows `access` beneath `path` (following a symlink at `path` itself). A missing
    /// path is skipped: returns whether a rule was added.
    pub fn allow(&mut self, path: &Path, access: u64) -> Result<bool, SandboxError> {
        let Some(target) = open_path(path)? else {
            return Ok(false);
        };
        let mut allowed = access & self.handled.fs;
        if !is_dir(&target, path)? {
            allowed &= fs::FILE_ONLY;
        }
        if allowed == 0 {
            return Ok(false);
        }
        let attr = PathBeneathAttr {
            allowed_access: allowed,
            parent_fd: target.as_raw_fd(),
        };
        // SAFETY: attr is a valid packed struct; both fds are open.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if rc != 0 {
            return Err(SandboxError::at(
                "add a Landlock rule for",
                path,
                io::Error::last_os_error(),
            ));
        }
        Ok(true)
    }

    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

/// Enforces the ruleset `fd` on the calling thread (and what it execs).
///
/// # Safety
/// Async-signal-safe (one raw syscall); call after `PR_SET_NO_NEW_PRIVS`.
pub unsafe fn restrict_self(fd: RawFd) -> io::Result<()> {
    if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An `O_PATH` fd for `path`, or `None` when it does not exist.
fn open_path(path: &Path) -> Result<Option<OwnedFd>, SandboxError> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::at("open", path, "the path has a NUL byte"))?;
    // SAFETY: c is a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => Ok(None),
            _ => Err(SandboxError::at("open", path, e)),
        };
    }
    // SAFETY: the fd was just opened and is owned here.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn is_dir(fd: &OwnedFd, path: &Path) -> Result<bool, SandboxError> {
    // SAFETY: a zeroed stat is a valid out-buffer for fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is a valid buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(SandboxError::at("stat", path, io::Error::last_os_error()));
    }
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_grow_with_the_abi() {
        assert_eq!(fs_rights(1), 0x1fff);
        assert_eq!(fs_rights(3), 0x7fff);
        assert_eq!(fs_rights(7), 0xffff);
        let h = Handled::everything(7, false);
        assert_eq!((h.net, h.scoped), (3, 3));
        assert_eq!(Handled::everything(7, true).net, 0);
        assert_eq!(
            Handled::everything(3, false),
            Handled {
                fs: 0x7fff,
                net: 0,
                scoped: 0
            }
        );
    }
}
