//! Finding the script runtimes (Bun, Node) that plugin hosts will run on: `BERTH_BUN` /
//! `BERTH_NODE`, then `PATH`, then the runtime folder the set-up installed (`.tools/bin` next
//! to the checkout, or `BERTH_RUNTIME_DIR`). Probes with `--version`; runs nothing else.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    Bun,
    Node,
}

impl RuntimeKind {
    /// Whose module resolution the scan follows for sources that run on this backend.
    pub fn resolve_rules(self) -> berth_discovery::Runtime {
        match self {
            RuntimeKind::Bun => berth_discovery::Runtime::Bun,
            RuntimeKind::Node => berth_discovery::Runtime::Node,
        }
    }

    fn binary(self) -> &'static str {
        match self {
            RuntimeKind::Bun => "bun",
            RuntimeKind::Node => "node",
        }
    }
    fn env_var(self) -> &'static str {
        match self {
            RuntimeKind::Bun => "BERTH_BUN",
            RuntimeKind::Node => "BERTH_NODE",
        }
    }
    /// Oldest major version Berth supports.
    fn min_major(self) -> u64 {
        match self {
            RuntimeKind::Bun => 1,
            RuntimeKind::Node => 20,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RuntimeInfo {
    pub name: RuntimeKind,
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    /// `env`, `path` or `setup`.
    pub found_via: Option<&'static str>,
    /// Why it cannot be used, when it cannot.
    pub problem: Option<String>,
}

/// Probes both runtimes in parallel.
pub fn probe_all() -> Vec<RuntimeInfo> {
    let bun = std::thread::spawn(|| probe(RuntimeKind::Bun));
    let node = probe(RuntimeKind::Node);
    vec![
        bun.join()
            .unwrap_or_else(|_| missing(RuntimeKind::Bun, "probe crashed")),
        node,
    ]
}

fn missing(kind: RuntimeKind, why: &str) -> RuntimeInfo {
    RuntimeInfo {
        name: kind,
        path: None,
        version: None,
        found_via: None,
        problem: Some(why.to_string()),
    }
}

pub fn probe(kind: RuntimeKind) -> RuntimeInfo {
    let Some((path, via)) = locate(kind) else {
        return missing(
            kind,
            &format!(
                "{} not found: set {} or run the set-up script",
                kind.binary(),
                kind.env_var()
            ),
        );
    };
    match version_of(&path) {
        Some(v) => {
            let major = v
                .trim_start_matches('v')
                .split('.')
                .next()
                .and_then(|m| m.parse::<u64>().ok());
            let problem = match major {
                Some(m) if m >= kind.min_major() => None,
                _ => Some(format!(
                    "{} {v} is too old; {} or newer is needed",
                    kind.binary(),
                    kind.min_major()
                )),
            };
            RuntimeInfo {
                name: kind,
                path: Some(path),
                version: Some(v),
                found_via: Some(via),
                problem,
            }
        }
        None => RuntimeInfo {
            name: kind,
            path: Some(path),
            version: None,
            found_via: Some(via),
            problem: Some("`--version` did not answer".into()),
        },
    }
}

fn locate(kind: RuntimeKind) -> Option<(PathBuf, &'static str)> {
    if let Some(p) = std::env::var_os(kind.env_var()).filter(|v| !v.is_empty()) {
        return Some((PathBuf::from(p), "env"));
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let c = dir.join(kind.binary());
            if is_executable(&c) {
                return Some((c, "path"));
            }
        }
    }
    setup_dirs()
        .into_iter()
        .map(|d| d.join(kind.binary()))
        .find(|c| is_executable(c))
        .map(|c| (c, "setup"))
}

/// `BERTH_RUNTIME_DIR`, then `.tools/bin` in any ancestor of the running executable.
fn setup_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("BERTH_RUNTIME_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe() {
        for a in exe.ancestors().skip(1) {
            let c = a.join(".tools").join("bin");
            if c.is_dir() {
                dirs.push(c);
                break;
            }
        }
    }
    dirs
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn version_of(path: &Path) -> Option<String> {
    let mut child = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!v.is_empty()).then_some(v)
}
