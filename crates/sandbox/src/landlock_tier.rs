//! Tier Landlock (where user namespaces are missing): the child keeps the host's mount and
//! PID view, but a Landlock domain limits which files it may read, write or execute, which
//! TCP ports it may bind or connect (none, with network off; ABI ≥ 4), and scopes abstract
//! UNIX sockets and signals to its own domain (ABI ≥ 6); the same seccomp filter covers the
//! rest (non-UNIX sockets with network off, namespaces, io_uring, keyrings…).
//!
//! Owns: the ruleset for a boundary (built and filled in the parent) and the child's private
//! temp folder: a fresh 0700 folder under `std::env::temp_dir()`, granted read-write, that
//! `TMPDIR` (and `TMP`/`TEMP` when set) points at; removed when the `Wrapped` is dropped.
//! Must not: enforce anything in the parent, or start bubblewrap (never nest the tiers).
//!
//! Limit: Landlock rules only add rights, so a protected path inside a `write` root is kept
//! read-only by sealing its parent folders (see `plan`): new entries cannot be created
//! directly in those folders (e.g. a new top-level file in a project with `.git/hooks`
//! protected, or `.git/index.lock`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bwrap::SYSTEM_PATHS;
use crate::env::point_tmp_at;
use crate::error::SandboxError;
use crate::landlock::{fs, Handled, Ruleset};
use crate::plan::{self, Access};
use crate::probe::Probe;
use crate::seccomp::Filter;
use crate::wrapped::{Hook, Wrapped};
use crate::Boundary;

/// Device files a child may use, and how.
const DEVICES: &[(&str, u64)] = &[
    ("/dev/null", fs::READ_FILE | fs::WRITE_FILE | fs::TRUNCATE),
    ("/dev/full", fs::READ_FILE | fs::WRITE_FILE),
    ("/dev/zero", fs::READ_FILE),
    ("/dev/random", fs::READ_FILE),
    ("/dev/urandom", fs::READ_FILE),
];

pub(crate) fn wrap(
    program: &Path,
    args: &[OsString],
    b: &Boundary,
    probe: &Probe,
    program_paths: &[PathBuf],
) -> Result<Wrapped, SandboxError> {
    let abi = probe
        .landlock_abi
        .ok_or_else(|| SandboxError::new("use Landlock", "this kernel does not enforce it"))?;
    let grants = plan::grants(b, program_paths, false)?;
    let tmp = crate::wrapped::private_tmp()?;
    let mut ruleset = Ruleset::new(Handled::everything(abi, b.network))?;
    allow_system(&mut ruleset)?;
    for g in &grants {
        let access = match g.access {
            Access::Read => fs::READ,
            Access::Write => fs::ALL,
        };
        ruleset.allow(&g.path, access)?;
    }
    ruleset.allow(tmp.path(), fs::ALL)?;
    let mut env = b.env.clone();
    point_tmp_at(&mut env, tmp.path());
    // SAFETY: geteuid has no preconditions.
    let is_root = unsafe { libc::geteuid() } == 0;
    Ok(Wrapped {
        program: program.to_path_buf(),
        args: args.to_vec(),
        env,
        workdir: b.workdir.clone().unwrap_or_else(|| PathBuf::from("/")),
        hook: Hook::Landlock {
            ruleset: Arc::new(ruleset.into_fd()),
            filter: Arc::new(Filter::build(b.network)),
            drop_caps: is_root,
        },
        private_tmp: Some(tmp),
    })
}

/// The minimal system view: read+execute on the system folders, read on `/proc`, the
/// harmless device files, and folder listings (names only) everywhere.
fn allow_system(ruleset: &mut Ruleset) -> Result<(), SandboxError> {
    for p in SYSTEM_PATHS {
        ruleset.allow(Path::new(p), fs::READ)?;
    }
    ruleset.allow(Path::new("/proc"), fs::READ_FILE | fs::READ_DIR)?;
    // Listing folders (their names, not the files in them) everywhere: Bun's module resolver
    // reads every folder on the way from `/` to a package and gives up at the first it cannot
    // (`Probe::cannot_stop` says so).
    ruleset.allow(Path::new("/"), fs::READ_DIR)?;
    for (p, access) in DEVICES {
        ruleset.allow(Path::new(p), *access)?;
    }
    Ok(())
}
