//! Shared by the integration tests: the runtimes (node, bun), the tiers this machine really
//! supports, a boundary to start from, and running the `effects.mjs` fixture inside one.
//!
//! Owns: spawning wrapped children the way Berth does and reading their JSON lines. Must not:
//! assert on effects (each test does, on the real outcome).
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use berth_sandbox::{env_allowlist, probe, wrap, Boundary, Tier, Wrapped};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

pub const MARKER_NAME: &str = "BERTH_SANDBOX_TEST_MARKER";

/// A JavaScript runtime to run the fixture with.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub name: &'static str,
    pub path: PathBuf,
}

/// node and bun; both must be installed (scripts/setup installs them).
pub fn runtimes() -> Vec<Runtime> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bun = [repo.join(".tools/bin/bun")]
        .into_iter()
        .chain(in_path("bun"));
    let node = in_path("node");
    vec![
        Runtime {
            name: "node",
            path: node.into_iter().next().expect("node is installed"),
        },
        Runtime {
            name: "bun",
            path: bun
                .into_iter()
                .find(|p| p.is_file())
                .expect("bun is installed (scripts/setup)"),
        },
    ]
}

pub fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The tiers that work here; prints why a tier is skipped.
pub fn tiers() -> Vec<Tier> {
    let mut out = Vec::new();
    for t in [Tier::Bwrap, Tier::Landlock] {
        match probe().why_not(t) {
            None => out.push(t),
            Some(why) => eprintln!("skipping tier {t:?}: {why}"),
        }
    }
    out
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A unique marker value for this test run, kept in the child's environment.
pub fn marker(label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{label}-{}-{nanos}", std::process::id())
}

/// A boundary with the fixtures readable and an allow-listed environment carrying `marker`.
pub fn boundary(tier: Tier, marker: &str) -> Boundary {
    let mut b = Boundary::new(tier);
    b.read = vec![fixtures()];
    let keep = [(OsString::from(MARKER_NAME), OsString::from(marker))];
    b.env = env_allowlist(std::env::vars_os(), &[], &keep);
    b
}

/// Spawns `program args` inside `b` the way Berth does (own process group, killed on drop).
pub fn spawn(program: &Path, args: &[OsString], b: &Boundary) -> (Child, Wrapped) {
    let w = wrap(program, args, b).unwrap_or_else(|e| panic!("wrap failed: {e}"));
    let mut cmd = Command::new(w.program());
    cmd.args(w.args());
    w.apply(&mut cmd);
    cmd.process_group(0)
        .kill_on_drop(true)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn failed: {e}"));
    (child, w)
}

/// What a finished child printed.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The JSON line of step `name`.
    pub fn step(&self, name: &str) -> Value {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no step {name}: {self:?}"))
    }

    /// Whether step `name` succeeded (and its detail).
    pub fn ok(&self, name: &str) -> (bool, String) {
        let v = self.step(name);
        (v["ok"] == true, v["detail"].to_string())
    }
}

/// Runs `program args` inside `b` to its end; after 30 s it is killed (`code` is `None`).
pub async fn run(program: &Path, args: &[OsString], b: &Boundary) -> Output {
    let (mut child, _w) = spawn(program, args, b);
    let stdout = tokio::spawn(read_all(child.stdout.take().expect("stdout")));
    let stderr = tokio::spawn(read_all(child.stderr.take().expect("stderr")));
    let code = match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
        Ok(status) => status.expect("wait").code(),
        Err(_) => {
            child.kill().await.expect("kill the stuck child");
            None
        }
    };
    Output {
        code,
        stdout: stdout.await.expect("stdout task"),
        stderr: stderr.await.expect("stderr task"),
    }
}

async fn read_all(mut from: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut s = String::new();
    let _ = from.read_to_string(&mut s).await;
    s
}

/// Runs the fixture with `rt` inside `b`, with `plan` (`{"steps": [...]}`).
pub async fn run_plan(rt: &Runtime, b: &Boundary, plan: &Value) -> Output {
    let out = run(&rt.path, &plan_args(plan), b).await;
    assert_eq!(
        out.code,
        Some(0),
        "{} under {:?} failed: {out:?}",
        rt.name,
        b.tier
    );
    out
}

pub fn plan_args(plan: &Value) -> Vec<OsString> {
    let script = fixtures().join("effects.mjs");
    vec![script.into(), plan.to_string().into()]
}

/// Reads the child's stdout lines until the `done` step.
pub async fn read_until_done(child: &mut Child) -> Vec<String> {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.expect("read a line") {
            let done = line.contains("\"name\":\"done\"");
            seen.push(line);
            if done {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the child reported done within 30 s");
    seen
}

/// Pids of live processes whose environment holds `MARKER_NAME=marker`.
pub fn processes_with_marker(marker: &str) -> Vec<i32> {
    let needle = format!("{MARKER_NAME}={marker}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            environ.split(|&b| b == 0).any(|kv| kv == needle.as_bytes())
        })
        .collect()
}

pub fn path_arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
