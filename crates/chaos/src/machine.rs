//! The scratch machine a reliability run drives: a home, a git project holding the run's fixture
//! files, a data dir and a folder for the calls' marker files, all in one temporary folder; and
//! `berth serve` started on it.
//!
//! Owns: that layout, the commands run on it and reading its store. Must not: hold a run's
//! checks, or touch anything outside its temporary folder.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Machine {
    _dir: tempfile::TempDir,
    berth: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
    pub data: PathBuf,
    pub calls: PathBuf,
    env: Vec<(String, String)>,
}

impl Machine {
    /// `files`: (a fixture's path in this repository, where it goes in the project).
    pub fn new(berth: &Path, files: &[(&str, &str)]) -> Machine {
        let dir = tempfile::tempdir().expect("a temp dir");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap();
        let (home, project, data, calls) = (
            dir.path().join("home"),
            dir.path().join("project"),
            dir.path().join("data"),
            dir.path().join("calls"),
        );
        for d in [&home, &project.join(".git"), &calls] {
            std::fs::create_dir_all(d).unwrap();
        }
        for (fixture, place) in files {
            let to = project.join(place);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(root.join(fixture), &to).unwrap();
        }
        Machine {
            _dir: dir,
            berth: berth.to_path_buf(),
            home,
            project,
            data,
            calls,
            env: Vec::new(),
        }
    }

    /// Every command run on this machine gets `key=value`.
    pub fn with_env(mut self, key: &str, value: &str) -> Machine {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.berth);
        c.args(args)
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--project")
            .arg(&self.project)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("OPENCODE_CONFIG")
            .env_remove("OPENCODE_CONFIG_DIR")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// `berth ARGS --json`, which must succeed.
    pub fn cli(&self, args: &[&str]) {
        let out = self
            .command(args)
            .arg("--json")
            .output()
            .expect("berth runs");
        assert!(
            out.status.success(),
            "berth {args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    pub fn serve(&self) -> Serving {
        let mut child = self
            .command(&["serve", "--json", "--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("berth serve starts");
        let (addr, token) = crate::served_address(&mut child);
        Serving { child, addr, token }
    }

    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.data.join("berth.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE,
        )
        .expect("the store opens")
    }

    pub fn integrity(&self) -> rusqlite::Result<String> {
        self.db()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
    }

    /// The receipts not final yet (`accepted` or `running`).
    pub fn open_receipts(&self) -> BTreeSet<String> {
        let db = self.db();
        let mut st = db
            .prepare("SELECT receipt_id FROM receipts WHERE status IN ('accepted', 'running')")
            .unwrap();
        let ids = st.query_map([], |r| r.get(0)).unwrap();
        ids.filter_map(Result::ok).collect()
    }
}

/// `berth serve` running on a machine.
pub struct Serving {
    pub child: Child,
    pub addr: String,
    pub token: String,
}

impl Serving {
    /// `GET path` as JSON, retried until it answers 200 (10 s at most).
    pub fn get(&self, path: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some((200, v)) = self.json("GET", path, None) {
                return v;
            }
            assert!(Instant::now() < deadline, "GET {path} did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `POST /api/<path>` with a JSON body: its status and JSON answer.
    pub fn post(&self, path: &str, body: &Value) -> Option<(u16, Value)> {
        self.json("POST", &format!("/api/{path}"), Some(body))
    }

    fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
        post_json(&self.addr, &self.token, method, path, body)
    }

    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ends it the way a person does (SIGTERM), its hosts shut down.
    pub fn stop(mut self) {
        // SAFETY: a plain signal to the child this run started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// One request with a JSON body (or none) and a JSON answer (`null` when it is not JSON).
pub fn post_json(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Option<(u16, Value)> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let (status, answer) =
        crate::request(addr, token, method, path, &body, Duration::from_secs(30))?;
    Some((
        status,
        serde_json::from_slice(&answer).unwrap_or(Value::Null),
    ))
}
