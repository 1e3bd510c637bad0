//! A real Linux OS boundary around a child process Berth starts (a plugin's Bun or Node
//! worker): which files it may read or write, whether it reaches any network, which UNIX
//! sockets it can connect to, which environment it sees, and which system calls it may make.
//!
//! Two tiers, chosen by the caller from `probe()`:
//! - `Tier::Bwrap` (preferred): bubblewrap namespaces + a minimal read-only system view +
//!   seccomp (see `bwrap`).
//! - `Tier::Landlock` (where user namespaces are missing): Landlock + seccomp on the host's
//!   own view, capabilities dropped when root (see `landlock_tier`).
//!
//! Owns: the public API (`Boundary`, `wrap`, `Wrapped`, `probe`, `env_allowlist`) and the
//! check that the program exists. Must not: spawn or supervise children (the caller does),
//! pick a tier silently, or fall back to running a child unrestricted.
//!
//! Use: `let w = wrap(&node, &args, &b)?; let mut cmd = Command::new(w.program());
//! cmd.args(w.args()); w.apply(&mut cmd); cmd.process_group(0)…spawn()`, keeping `w` alive
//! as long as the child runs.

mod bwrap;
mod env;
mod error;
mod landlock;
mod landlock_tier;
mod plan;
mod probe;
mod seccomp;
mod wrapped;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use bwrap::SYSTEM_PATHS;
pub use env::{env_allowlist, looks_secret, CORE_NAMES, SECRET_WORDS};
pub use error::SandboxError;
pub use probe::{probe, probe_now, Probe};
pub use seccomp::ALWAYS_DENIED_NAMES;
pub use wrapped::Wrapped;

/// How the boundary is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// bubblewrap (namespaces, minimal mounts) + seccomp.
    Bwrap,
    /// Landlock + seccomp.
    Landlock,
}

/// The boundary for one child. Paths are absolute; missing ones are skipped (not an error),
/// except the program. A deeper path's rule wins over its parent's: a `read` or `protect`
/// path at or under a `write` path stays read-only.
#[derive(Debug, Clone)]
pub struct Boundary {
    pub tier: Tier,
    /// Readable and executable: the runtime, the host script folder, the plugin package,
    /// config files. (The program itself is always added.)
    pub read: Vec<PathBuf>,
    /// Readable and writable (e.g. the project, in read-write mode).
    pub write: Vec<PathBuf>,
    /// Paths inside a `write` path that must stay read-only (`.git/hooks`, `.opencode`…).
    /// Existing ones are laid read-only over the writable tree (bubblewrap); otherwise the
    /// folders on the way to them are sealed read-only, entries kept (see `plan`).
    pub protect: Vec<PathBuf>,
    /// Pathname UNIX sockets the child must be able to connect to (already listening).
    pub sockets: Vec<PathBuf>,
    /// false = no network at all (no IP of any kind, no netlink, no raw sockets).
    pub network: bool,
    /// The complete environment the child gets (see `env_allowlist`). The tier points
    /// `TMPDIR` at the child's own temp folder.
    pub env: Vec<(OsString, OsString)>,
    /// The child's working folder; `/` when `None`. Should be inside `read` or `write`.
    pub workdir: Option<PathBuf>,
}

impl Boundary {
    /// A boundary that allows nothing beyond the system view: no paths, no network, no
    /// environment.
    pub fn new(tier: Tier) -> Boundary {
        Boundary {
            tier,
            read: Vec::new(),
            write: Vec::new(),
            protect: Vec::new(),
            sockets: Vec::new(),
            network: false,
            env: Vec::new(),
            workdir: None,
        }
    }
}

/// Turns (program, args) into the command that runs it inside boundary `b`. Fails when the
/// tier does not work here (see `probe().why_not`), the program is missing, or a path is
/// not absolute.
pub fn wrap(program: &Path, args: &[OsString], b: &Boundary) -> Result<Wrapped, SandboxError> {
    let probe = probe();
    if let Some(why) = probe.why_not(b.tier) {
        return Err(SandboxError::new(format!("use the {:?} tier", b.tier), why));
    }
    let program_paths = program_paths(program)?;
    match b.tier {
        Tier::Bwrap => bwrap::wrap(program, args, b, probe, &program_paths),
        Tier::Landlock => landlock_tier::wrap(program, args, b, probe, &program_paths),
    }
}

/// The program as given and, when that is a symlink, where it really is: both must be
/// readable inside.
fn program_paths(program: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    if !program.is_absolute() {
        return Err(SandboxError::at("run", program, "the path is not absolute"));
    }
    let real = program
        .canonicalize()
        .map_err(|e| SandboxError::at("run", program, e))?;
    let mut out = vec![program.to_path_buf()];
    if real != program {
        out.push(real);
    }
    Ok(out)
}
