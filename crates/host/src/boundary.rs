//! Restricted hosts: which OS boundary this machine can enforce (bubblewrap + seccomp, else
//! Landlock + seccomp, found by really trying; `BERTH_SANDBOX_TIER` forces one or `none`), and
//! the boundary one restricted host gets — what the runtime allows its source (the project,
//! its own files, its cache, network or not, extra environment names) plus what the host
//! itself needs (its runtime, its code and dependencies, its channel socket).
//!
//! Owns: the tier choice and that union. Must not: decide which sources are restricted (the
//! runtime's policy does), or fall back to an unrestricted host when no tier works — the
//! spawn fails and the runtime reports the source `policy-limited`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use berth_sandbox::{Boundary, Probe, Tier};

use crate::procs;

/// What the runtime lets one restricted source reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restriction {
    /// Readable: the source's approved files and prepared installs.
    pub read: Vec<PathBuf>,
    /// Readable and writable: the source's own cache folder (its `HOME`), and the project
    /// when the policy makes it read-write.
    pub write: Vec<PathBuf>,
    /// Inside a writable path, kept read-only (`.git/hooks`, `.opencode`, `opencode.json`,
    /// Berth's data dir).
    pub protect: Vec<PathBuf>,
    /// Any network at all.
    pub network: bool,
    /// Environment names passed besides the core set (secret-looking ones never are).
    pub env_extra: Vec<String>,
    /// The source's own writable folder, its `HOME` inside.
    pub home: PathBuf,
    /// Where the host starts (the project).
    pub workdir: PathBuf,
}

/// What this machine can enforce, and what each tier cannot stop.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BoundaryInfo {
    /// The tier restricted hosts use, or null when none works (then no restricted source runs).
    pub tier: Option<Tier>,
    /// Why there is none, or why the forced one does not work.
    pub unavailable: Option<String>,
    /// Set when `BERTH_SANDBOX_TIER` chose the tier.
    pub forced: Option<String>,
    pub bwrap: Option<String>,
    pub landlock_abi: Option<u32>,
    pub seccomp: bool,
    /// What the chosen tier cannot stop, in plain words.
    pub cannot_stop: Vec<&'static str>,
}

/// The tier restricted hosts use here: the best that works, or the one `BERTH_SANDBOX_TIER`
/// names (`bwrap`, `landlock`; `none` makes every restricted source wait, as on a machine
/// with neither).
pub fn tier() -> Result<Tier, String> {
    let probe = berth_sandbox::probe();
    match forced().as_deref() {
        Some("none") => Err("no OS boundary may be used here (BERTH_SANDBOX_TIER=none)".into()),
        Some("bwrap") => probe.why_not(Tier::Bwrap).map_or(Ok(Tier::Bwrap), Err),
        Some("landlock") => probe
            .why_not(Tier::Landlock)
            .map_or(Ok(Tier::Landlock), Err),
        Some(other) => Err(format!(
            "BERTH_SANDBOX_TIER={other} is not a tier (bwrap, landlock or none)"
        )),
        None => probe.best().ok_or_else(|| {
            format!(
                "this machine can enforce no OS boundary: bubblewrap: {}; Landlock: {}",
                probe.why_not(Tier::Bwrap).unwrap_or_default(),
                probe.why_not(Tier::Landlock).unwrap_or_default()
            )
        }),
    }
}

/// The probe's findings and the tier in use, for the status page.
pub fn info() -> BoundaryInfo {
    let probe = berth_sandbox::probe();
    let chosen = tier();
    BoundaryInfo {
        tier: chosen.as_ref().ok().copied(),
        unavailable: chosen.as_ref().err().cloned(),
        forced: forced(),
        bwrap: probe.bwrap.as_ref().ok().map(|p| p.display().to_string()),
        landlock_abi: probe.landlock_abi,
        seccomp: probe.seccomp.is_ok(),
        cannot_stop: chosen.map(|t| probe.cannot_stop(t)).unwrap_or_default(),
    }
}

fn forced() -> Option<String> {
    std::env::var("BERTH_SANDBOX_TIER")
        .ok()
        .filter(|v| !v.is_empty())
}

/// The boundary of one restricted host: the source's `r`, plus the host's runtime, code,
/// dependencies and channel socket; its environment from the allow-list, with the tree mark
/// that lets its escaped descendants be reclaimed.
pub fn boundary_for(
    r: &Restriction,
    tier: Tier,
    host_code: &[PathBuf],
    socket: &Path,
    tree: &str,
) -> Boundary {
    let mut b = Boundary::new(tier);
    b.read = r.read.iter().chain(host_code).cloned().collect();
    b.write = r.write.clone();
    b.protect = r.protect.clone();
    b.sockets = vec![socket.to_path_buf()];
    b.network = r.network;
    b.workdir = Some(r.workdir.clone());
    let extra: Vec<&str> = r.env_extra.iter().map(String::as_str).collect();
    let keep = [
        (OsString::from(procs::TREE_VAR), OsString::from(tree)),
        (OsString::from("HOME"), r.home.clone().into_os_string()),
        (
            OsString::from("XDG_CACHE_HOME"),
            r.home.join(".cache").into_os_string(),
        ),
    ];
    b.env = berth_sandbox::env_allowlist(std::env::vars_os(), &extra, &keep);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boundary_joins_the_hosts_needs_and_drops_secret_names() {
        std::env::set_var("BERTH_TEST_SOME_TOKEN", "x");
        std::env::set_var("BERTH_TEST_PLAIN", "y");
        let r = Restriction {
            read: vec!["/p/plugin.ts".into()],
            write: vec!["/home/cache".into()],
            protect: vec![],
            network: false,
            env_extra: vec!["BERTH_TEST_SOME_TOKEN".into(), "BERTH_TEST_PLAIN".into()],
            home: "/home/cache".into(),
            workdir: "/proj".into(),
        };
        let b = boundary_for(
            &r,
            Tier::Bwrap,
            &["/host".into()],
            Path::new("/run/s.sock"),
            "t-1",
        );
        assert_eq!(
            b.read,
            vec![PathBuf::from("/p/plugin.ts"), PathBuf::from("/host")]
        );
        assert_eq!(b.sockets, vec![PathBuf::from("/run/s.sock")]);
        let names: Vec<String> = b
            .env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"BERTH_TEST_PLAIN".to_string()), "{names:?}");
        assert!(
            !names.contains(&"BERTH_TEST_SOME_TOKEN".to_string()),
            "{names:?}"
        );
        assert!(b
            .env
            .contains(&(OsString::from(procs::TREE_VAR), OsString::from("t-1"))));
        assert!(b
            .env
            .contains(&(OsString::from("HOME"), OsString::from("/home/cache"))));
    }
}
