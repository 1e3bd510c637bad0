//! Shared by the Rust integration tests: a scratch machine (HOME, XDG folders, a git project),
//! the real `berth` binary run against it with OpenCode's variables cleared, and a test npm
//! registry on loopback (`registry`).

#![allow(dead_code)]

pub mod registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Sandbox {
    pub root: tempfile::TempDir,
}

impl Sandbox {
    /// A fresh HOME and a git-initialised project under it.
    pub fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let s = Sandbox { root };
        std::fs::create_dir_all(s.home()).unwrap();
        std::fs::create_dir_all(s.project()).unwrap();
        git_init(&s.project());
        s
    }

    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    pub fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }
    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }
    pub fn global_config(&self) -> PathBuf {
        self.home().join(".config").join("opencode")
    }

    pub fn write(&self, rel_to_root: &str, text: &str) -> PathBuf {
        let p = self.root.path().join(rel_to_root);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Copies `fixtures/<fixture>` (a file) to `<root>/<dest>`; returns where it went.
    pub fn copy_fixture(&self, fixture: &str, dest: &str) -> PathBuf {
        let p = self.root.path().join(dest);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let from = repo_root().join("fixtures").join(fixture);
        std::fs::copy(&from, &p).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        p
    }

    /// `berth ARGS --data-dir D --project P` with this sandbox's environment.
    pub fn berth(&self, args: &[&str]) -> Command {
        let mut c = Command::new(berth_bin());
        c.args(args)
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--project")
            .arg(self.project());
        self.apply_env(&mut c);
        c
    }

    pub fn apply_env(&self, c: &mut Command) {
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("OPENCODE_") || k.starts_with("XDG_") {
                c.env_remove(&k);
            }
        }
        c.env("HOME", self.home())
            .env(
                "OPENCODE_TEST_MANAGED_CONFIG_DIR",
                self.root.path().join("managed"),
            )
            .current_dir(self.project());
    }

    pub fn run_json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let out = self.berth(args).arg("--json").output().unwrap();
        parse_json_output(&out)
    }
}

pub fn parse_json_output(out: &Output) -> (i32, serde_json::Value) {
    let text = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{text}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

pub fn berth_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_berth"))
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

pub fn git_init(dir: &Path) {
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        // Worktree detection only needs the marker OpenCode looks for.
        std::fs::create_dir_all(dir.join(".git")).unwrap();
    }
}

/// Validates `value` against `docs/cli/<name>.schema.json` (with the shared definitions).
pub fn assert_schema(name: &str, value: &serde_json::Value) {
    let dir = repo_root().join("docs").join("cli");
    let load = |n: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{n}.schema.json"))).unwrap(),
        )
        .unwrap()
    };
    let validator = jsonschema::options()
        .with_retriever(SchemaDir(load("common")))
        .build(&load(name))
        .unwrap_or_else(|e| panic!("schema {name} does not compile: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "output does not match docs/cli/{name}.schema.json:\n{}\n{}",
        errors.join("\n"),
        serde_json::to_string_pretty(value).unwrap()
    );
}

/// Resolves `urn:berth:cli:common` to the committed shared definitions; nothing else.
struct SchemaDir(serde_json::Value);

impl jsonschema::Retrieve for SchemaDir {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        if uri.as_str() == "urn:berth:cli:common" {
            Ok(self.0.clone())
        } else {
            Err(format!("unknown schema {uri}").into())
        }
    }
}

/// Approves every waiting source once and activates: what the loaded modules register is
/// registered without a second question (an npm plugin's fetch, when it is the first step, is
/// the caller's own `approve`). `run` runs one `berth` command.
pub fn approve_and_load(run: impl Fn(&[&str]) -> (i32, serde_json::Value)) {
    assert_eq!(run(&["approve", "--all"]).0, 0);
    assert_eq!(run(&["tools"]).0, 0);
    // One decision per source: what the loaded module registers is registered, not asked for.
    let (_, v) = run(&["sources"]);
    for s in v["sources"].as_array().into_iter().flatten() {
        assert_ne!(s["state"], "pending-activation", "asked twice: {s}");
    }
}

/// `berth hook NAME --input INPUT --output OUTPUT` through `run`.
pub fn run_hook(
    run: impl Fn(&[&str]) -> (i32, serde_json::Value),
    name: &str,
    input: &str,
    output: &str,
) -> (i32, serde_json::Value) {
    run(&["hook", name, "--input", input, "--output", output])
}

/// A sandbox whose project has `fixtures/plugins/<file>` for each file as a plugin.
pub fn plugin_sandbox(files: &[&str]) -> Sandbox {
    let s = Sandbox::new();
    for f in files {
        s.copy_fixture(
            &format!("plugins/{f}"),
            &format!("project/.opencode/plugins/{f}"),
        );
    }
    s
}

/// A module's first lines writing `marker` (the evidence that its code ran), or nothing.
pub fn writes_marker(marker: Option<&Path>) -> String {
    marker
        .map(|m| {
            format!(
                "import {{ writeFileSync }} from 'node:fs'\nwriteFileSync({:?}, 'ran')\n",
                m.display().to_string()
            )
        })
        .unwrap_or_default()
}

/// Runs `cmd` with `stdin` written to it and closed, stdout and stderr captured.
pub fn output_with_stdin(cmd: &mut Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Whether process `pid` still runs; a zombie (state Z in /proc/<pid>/stat) has ended.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit(')').next().unwrap_or("").trim().starts_with('Z'))
        .unwrap_or(false)
}

/// Fails if `needle` is in any file under `dir` (logs, the database, its WAL, prepared
/// packages). Returns how many files were searched.
pub fn assert_not_in_any_file(dir: &Path, needle: &str) -> usize {
    let mut searched = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
                continue;
            }
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            searched += 1;
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "the secret was found in {}",
                e.path().display()
            );
        }
    }
    searched
}

/// Runs `scripts/oracle/<script> <args>` against the real OpenCode installed by the set-up and
/// returns what it printed, failing the test (with its stderr) when it fails.
pub fn run_oracle(script: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new("node")
        .arg(repo_root().join("scripts/oracle").join(script))
        .args(args)
        .output()
        .expect("node runs the oracle script");
    assert!(
        out.status.success(),
        "live OpenCode failed ({script}; run scripts/setup): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A recording printed by a live oracle run (`--live` modes), checked to come from 1.18.4.
pub fn live_recording(script: &str, args: &[&str]) -> serde_json::Value {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let live: serde_json::Value = serde_json::from_slice(&run_oracle(script, &args)).unwrap();
    assert_eq!(live["opencode_version"], "1.18.4", "{script}");
    live
}

/// The source in a `sources`/`status` document whose entry ends with `entry_suffix`.
pub fn source<'a>(v: &'a serde_json::Value, entry_suffix: &str) -> &'a serde_json::Value {
    v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["entry"].as_str().unwrap().ends_with(entry_suffix))
        .unwrap_or_else(|| panic!("no source {entry_suffix} in {v}"))
}

/// The id of the source whose entry ends with `entry_suffix`.
pub fn id_of(v: &serde_json::Value, entry_suffix: &str) -> String {
    source(v, entry_suffix)["id"].as_str().unwrap().to_string()
}

/// The source whose spec (what the config asked for, e.g. an npm package) contains `needle`.
pub fn source_by_spec<'a>(v: &'a serde_json::Value, needle: &str) -> &'a serde_json::Value {
    v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["spec"].as_str().unwrap().contains(needle))
        .unwrap_or_else(|| panic!("no source with spec {needle} in {v}"))
}

/// The MCP fixture server (`fixtures/mcp/fixture-server.mjs`) started with `args` (`--http 0`,
/// `--sse-only 0`, `--tls …`, `--oauth` …), logging to `log` when given; stopped when dropped.
pub struct McpFixture {
    child: std::process::Child,
    /// The endpoint it printed.
    pub url: String,
}

impl McpFixture {
    pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S], log: Option<&Path>) -> McpFixture {
        use std::io::BufRead;
        let mut cmd = Command::new("node");
        cmd.arg(repo_root().join("fixtures/mcp/fixture-server.mjs"))
            .args(args)
            .stdout(std::process::Stdio::piped());
        if let Some(log) = log {
            cmd.env("MCP_FIXTURE_LOG", log);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = serde_json::from_str::<serde_json::Value>(&line)
            .unwrap_or_else(|e| panic!("the fixture printed no URL ({e}): {line}"))["url"]
            .as_str()
            .unwrap()
            .to_string();
        McpFixture { child, url }
    }
}

impl Drop for McpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
