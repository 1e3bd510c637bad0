//! What really works on this machine, found by trying it: a bubblewrap that starts a sandbox
//! with the flags Berth uses, a Landlock ruleset that a forked child enforces (and is then
//! denied by), a seccomp filter that a forked child loads (and is then denied by). Also the
//! plain-words list of what each tier cannot stop.
//!
//! Owns: `Probe`, its cache, the forked test children. Must not: build boundaries for real
//! children, or read anything but the kernel's answers (no version tables).

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::landlock::{self, Handled, Ruleset};
use crate::seccomp::Filter;
use crate::Tier;

/// What works here. `Err`/`None` say why a piece does not.
#[derive(Debug, Clone)]
pub struct Probe {
    /// A bwrap that really started a sandbox; `Err` = why not.
    pub bwrap: Result<PathBuf, String>,
    /// Whether that bwrap ran with `--unshare-user` (false only as root where it failed).
    pub bwrap_userns: bool,
    /// The Landlock ABI, when a forked child really enforced a ruleset.
    pub landlock_abi: Option<u32>,
    /// Whether a forked child really loaded the seccomp filter and was denied by it.
    pub seccomp: Result<(), String>,
}

static PROBE: OnceLock<Probe> = OnceLock::new();

/// The probe, run once per process.
pub fn probe() -> &'static Probe {
    PROBE.get_or_init(probe_now)
}

/// Runs the probe now (not cached).
pub fn probe_now() -> Probe {
    let (bwrap, bwrap_userns) = probe_bwrap();
    Probe {
        bwrap,
        bwrap_userns,
        landlock_abi: probe_landlock(),
        seccomp: probe_seccomp(),
    }
}

impl Probe {
    /// The strongest tier that works here, if any.
    pub fn best(&self) -> Option<Tier> {
        [Tier::Bwrap, Tier::Landlock]
            .into_iter()
            .find(|&t| self.supports(t))
    }

    pub fn supports(&self, t: Tier) -> bool {
        self.why_not(t).is_none()
    }

    /// Why tier `t` cannot run here, or `None` when it can.
    pub fn why_not(&self, t: Tier) -> Option<String> {
        if let Err(e) = &self.seccomp {
            return Some(format!("seccomp does not work: {e}"));
        }
        match t {
            Tier::Bwrap => self
                .bwrap
                .as_ref()
                .err()
                .map(|e| format!("bubblewrap does not work: {e}")),
            Tier::Landlock if self.landlock_abi.is_none() => {
                Some("this kernel does not enforce Landlock".to_string())
            }
            Tier::Landlock => None,
        }
    }

    /// What a child inside tier `t` can still do, in plain words.
    pub fn cannot_stop(&self, t: Tier) -> Vec<&'static str> {
        let mut out = vec![
            "reading the system folders, mounted or allowed read-only (/usr, /etc: e.g. \
             /etc/passwd; when Berth runs as root, also root-only files like /etc/shadow)",
            "using up CPU, memory, disk space or process slots (no resource limits)",
            "with network on: anything on the network, including services on this \
             machine's loopback (127.0.0.1)",
        ];
        match t {
            Tier::Bwrap => {
                out.push(
                    "with network on: connecting to the host's abstract UNIX sockets \
                     (e.g. X11's), since the network namespace is shared",
                );
                if !self.bwrap_userns {
                    out.push(
                        "acting as the real root user (without capabilities): root-owned \
                         files it can see are its own",
                    );
                }
            }
            Tier::Landlock => out.extend(landlock_gaps(self.landlock_abi.unwrap_or(0))),
        }
        out
    }
}

fn landlock_gaps(abi: u32) -> Vec<&'static str> {
    let mut out = vec![
        "connecting to pathname UNIX sockets it can name, e.g. the D-Bus session bus \
         (/run/user/UID/bus) and through it the desktop's secret service (Landlock controls \
         this only from ABI 9, which this tier does not use)",
        "seeing other processes: listing /proc and reading their command lines (no PID \
         namespace)",
        "listing the names in any folder (not reading the files): Bun's module resolver \
         reads every folder on the way from / to a package",
        "outliving a kill of its process group: a detached grandchild keeps running, still \
         inside the boundary, until it exits or is killed by its pid",
    ];
    if abi < 6 {
        out.push(
            "connecting to abstract UNIX sockets (e.g. X11's) and sending signals to Berth \
             and other processes of the same user (Landlock ABI 6 scopes these)",
        );
    }
    if abi < 5 {
        out.push("ioctl on the device files it may open (Landlock ABI 5)");
    }
    if abi < 3 {
        out.push("truncating files it may only read (Landlock ABI 3)");
    }
    out
}

fn probe_bwrap() -> (Result<PathBuf, String>, bool) {
    let Some(path) = find_bwrap() else {
        return (Err("no bwrap in PATH or /usr/bin".to_string()), false);
    };
    match try_bwrap(&path, true) {
        Ok(()) => (Ok(path), true),
        // SAFETY: geteuid has no preconditions.
        Err(first) if unsafe { libc::geteuid() } == 0 => match try_bwrap(&path, false) {
            Ok(()) => (Ok(path), false),
            Err(e) => (Err(format!("{first}; without --unshare-user: {e}")), false),
        },
        Err(e) => (Err(e), false),
    }
}

fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|d| d.join("bwrap"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs `true` in a sandbox made with the namespace flags Berth uses.
fn try_bwrap(bwrap: &Path, userns: bool) -> Result<(), String> {
    let mut cmd = Command::new(bwrap);
    cmd.arg("--unshare-all");
    if userns {
        cmd.arg("--unshare-user");
    }
    cmd.args(["--die-with-parent", "--new-session", "--cap-drop", "ALL"])
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--tmpfs", "/tmp", "--", "true"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = cmd
        .output()
        .map_err(|e| format!("could not run {}: {e}", bwrap.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!("{} ({})", stderr.trim(), out.status))
}

fn probe_landlock() -> Option<u32> {
    let abi = landlock::abi()?;
    let handled = Handled {
        fs: landlock::fs::READ_DIR,
        net: 0,
        scoped: 0,
    };
    let fd = Ruleset::new(handled).ok()?.into_fd();
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let root: &CStr = c"/";
    // SAFETY: the child only makes raw syscalls on prepared data.
    let code = unsafe {
        in_forked_child(|| {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return 2;
            }
            if landlock::restrict_self(raw).is_err() {
                return 3;
            }
            let dir = libc::open(root.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            match (dir >= 0, errno()) {
                (true, _) => 4,
                (false, libc::EACCES) => 0,
                _ => 5,
            }
        })
    };
    (code == Ok(0)).then_some(abi)
}

fn probe_seccomp() -> Result<(), String> {
    let filter = Filter::build(false);
    // SAFETY: the child only makes raw syscalls on prepared data.
    let code = unsafe {
        in_forked_child(|| {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return 2;
            }
            if filter.load().is_err() {
                return 3;
            }
            let inet = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            if inet >= 0 || errno() != libc::EPERM {
                return 4;
            }
            if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) < 0 {
                return 5;
            }
            0
        })
    }?;
    match code {
        0 => Ok(()),
        2 => Err("PR_SET_NO_NEW_PRIVS failed".to_string()),
        3 => Err("the kernel refused the filter".to_string()),
        4 => Err("the filter loaded but an AF_INET socket was not denied".to_string()),
        5 => Err("the filter loaded but denied an AF_UNIX socket".to_string()),
        n => Err(format!("the test child exited with {n}")),
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Forks; the child runs `f` and exits with its code; returns that code.
///
/// # Safety
/// `f` runs in a forked copy of a possibly multi-threaded process: it must be
/// async-signal-safe (raw syscalls only, no allocation, no locks, no panics).
unsafe fn in_forked_child(f: impl FnOnce() -> i32) -> Result<i32, String> {
    let pid = libc::fork();
    if pid < 0 {
        return Err(format!("fork failed: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        libc::_exit(f());
    }
    let mut status = 0;
    loop {
        let r = libc::waitpid(pid, &mut status, 0);
        if r == pid {
            break;
        }
        if r < 0 && errno() != libc::EINTR {
            return Err(format!(
                "waitpid failed: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status))
    } else {
        Err(format!(
            "the test child died by signal {}",
            libc::WTERMSIG(status)
        ))
    }
}
