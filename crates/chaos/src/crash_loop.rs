//! `berth-crash-loop`: `berth serve` killed with SIGKILL at a random moment, over and over,
//! while callers drive receipted calls and the person's policy changes; after each kill:
//!
//! - no process Berth had started (plugin hosts and what they spawned) is alive 1 s later;
//! - `PRAGMA integrity_check` of the store is `ok`;
//! - every receipt a caller saw `completed` is still `completed`; after the restart, the
//!   calls that were open read `unknown` (or how they ended), none is open any more;
//! - the approval still holds and the last policy value Berth acknowledged is in force;
//! - nothing ran twice: each call appends one line to a file of its own, and a restart runs
//!   nothing again.
//!
//! Prints `name value unit` lines; exits 1 on any corruption, lost receipt, replay or leak.
//! Usage: berth-crash-loop [--iterations N] [--seed S] [--berth PATH]
//!
//! Owns: the loop and its checks. Must not: touch anything outside its temporary folder.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn main() {
    let flags = berth_chaos::Flags::from_env();
    let iterations: usize = flags.number("--iterations", 50);
    let seed = flags.seed();
    let berth = flags.berth();
    println!("crash_loop_seed {seed}");
    let machine = Machine::new(&berth);
    let mut rng = seed.max(1);
    let mut report = Report::default();
    machine.cli(&["approve", "--all"]);

    let mut open_before_kill: BTreeSet<String> = BTreeSet::new();
    let mut acknowledged_policy: Option<u64> = None;
    let mut lines_before: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for i in 0..=iterations {
        let serving = machine.serve();
        // What the restart must have settled: nothing open, and the open ones ended `unknown`
        // (or as they ended before the kill); what was acknowledged holds.
        let status = serving.get("/api/status");
        let approved = status["sources"]
            .as_array()
            .map(|s| s.iter().all(|s| s["approval"]["decision"] == "allow"))
            .unwrap_or(false);
        if !approved {
            report.fail(i, "the approval did not survive the kill".into());
        }
        if let Some(v) = acknowledged_policy {
            let now = status["policy"]["entries"]
                .as_array()
                .and_then(|e| e.iter().find(|e| e["key"] == "budget.hook"))
                .map(|e| e["value"].clone());
            if now != Some(json!(v)) {
                report.fail(
                    i,
                    format!("budget.hook was set to {v} and acknowledged; now {now:?}"),
                );
            }
        }
        let db = machine.db();
        for id in &open_before_kill {
            match receipt_status(&db, id).as_deref() {
                Some("unknown" | "completed" | "failed" | "cancelled") => report.settled += 1,
                other => report.fail(
                    i,
                    format!("{id} was open at the kill and is {other:?} after the restart"),
                ),
            }
        }
        if i == iterations {
            // The restart ran nothing again.
            std::thread::sleep(Duration::from_millis(500));
            if i > 0 {
                report.check_unchanged(i, &machine.call_lines(i - 1), &lines_before);
            }
            serving.stop();
            break;
        }

        // Callers and the person, until the kill.
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let callers: Vec<_> = (0..3)
            .map(|c| {
                let (stop, seen, addr, token) =
                    (stop.clone(), seen.clone(), serving.addr.clone(), serving.token.clone());
                let calls = machine.calls.clone();
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let key = format!("{i}-{c}-{n}");
                        let file = calls.join(&key);
                        let body = json!({ "tool": "faults_count", "args": { "file": file }, "idempotency_key": key });
                        if let Some((200, r)) = post(&addr, &token, "invoke", &body) {
                            if let (Some(id), Some(st)) = (r["receipt_id"].as_str(), r["status"].as_str()) {
                                seen.lock().unwrap().push((id.to_string(), st.to_string()));
                            }
                        }
                        n += 1;
                    }
                })
            })
            .collect();
        let value = 5_000 + i as u64;
        if let Some((200, _)) = post(
            &serving.addr,
            &serving.token,
            "policy",
            &json!({ "key": "budget.hook", "value": value }),
        ) {
            acknowledged_policy = Some(value);
        }
        std::thread::sleep(Duration::from_millis(100 + next(&mut rng) % 1_400));
        let tree = descendants(serving.child.id());
        report.watched += tree.len();
        serving.kill();
        stop.store(true, Ordering::SeqCst);
        for c in callers {
            let _ = c.join();
        }
        std::thread::sleep(Duration::from_secs(1));
        let alive: Vec<u32> = tree.iter().copied().filter(|p| running(*p)).collect();
        if !alive.is_empty() {
            report.leaks += alive.len();
            report.fail(i, format!("still alive 1 s after the kill: {alive:?}"));
            for p in alive {
                // SAFETY: a plain signal to a process this run started.
                unsafe { libc::kill(p as i32, libc::SIGKILL) };
            }
        }
        match machine.integrity() {
            Ok(ok) if ok == "ok" => {}
            other => {
                report.corruptions += 1;
                report.fail(i, format!("integrity_check: {other:?}"));
            }
        }
        let db = machine.db();
        for (id, status) in seen.lock().unwrap().iter() {
            report.receipts += 1;
            if status == "completed" && receipt_status(&db, id).as_deref() != Some("completed") {
                report.lost += 1;
                report.fail(
                    i,
                    format!("{id} was completed for its caller and is not any more"),
                );
            }
        }
        open_before_kill = machine.open_receipts();
        if i > 0 {
            report.check_unchanged(i, &machine.call_lines(i - 1), &lines_before);
        }
        lines_before = machine.call_lines(i);
        report.check_once(i, &lines_before);
        report.iterations += 1;
    }
    report.print();
    std::process::exit(if report.failures.is_empty() { 0 } else { 1 });
}

fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

#[derive(Default)]
struct Report {
    iterations: usize,
    receipts: usize,
    settled: usize,
    corruptions: usize,
    lost: usize,
    replays: usize,
    leaks: usize,
    /// Processes below Berth at the kills (its hosts and theirs): what the leak check watched.
    watched: usize,
    failures: Vec<String>,
}

impl Report {
    fn fail(&mut self, iteration: usize, what: String) {
        eprintln!("crash-loop: iteration {iteration}: {what}");
        self.failures.push(what);
    }

    /// Each of these calls ran once: its file holds one line at most.
    fn check_once(&mut self, i: usize, files: &BTreeMap<PathBuf, usize>) {
        for (file, &n) in files {
            if n > 1 {
                self.replays += 1;
                self.fail(i, format!("{} ran {n} times", file.display()));
            }
        }
    }

    /// A restart ran none of the calls before it again: their files are as they were.
    fn check_unchanged(
        &mut self,
        i: usize,
        now: &BTreeMap<PathBuf, usize>,
        before: &BTreeMap<PathBuf, usize>,
    ) {
        if now != before {
            self.replays += 1;
            self.fail(i, "a restart ran a call of the run before it again".into());
        }
    }

    fn print(&self) {
        println!("crash_loop_iterations {} kills", self.iterations);
        println!("crash_loop_receipts_checked {} receipts", self.receipts);
        println!("crash_loop_open_at_kill_settled {} receipts", self.settled);
        println!("crash_loop_corruptions {} stores", self.corruptions);
        println!("crash_loop_lost_completed {} receipts", self.lost);
        println!("crash_loop_replays {} calls", self.replays);
        println!("crash_loop_processes_watched {} processes", self.watched);
        println!("crash_loop_leaked_processes {} processes", self.leaks);
    }
}

/// The scratch machine: a home, a git project with the fault tools, a data dir, the calls'
/// marker files.
struct Machine {
    _dir: tempfile::TempDir,
    berth: PathBuf,
    home: PathBuf,
    project: PathBuf,
    data: PathBuf,
    calls: PathBuf,
}

impl Machine {
    fn new(berth: &Path) -> Machine {
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
        for d in [
            &home,
            &project.join(".git"),
            &project.join(".opencode/tools"),
            &calls,
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::copy(
            root.join("fixtures/tools/faults.ts"),
            project.join(".opencode/tools/faults.ts"),
        )
        .unwrap();
        Machine {
            _dir: dir,
            berth: berth.to_path_buf(),
            home,
            project,
            data,
            calls,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
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
            .env_remove("OPENCODE_CONFIG_DIR");
        c
    }

    fn cli(&self, args: &[&str]) {
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

    fn serve(&self) -> Serving {
        let mut child = self
            .command(&["serve", "--json", "--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("berth serve starts");
        let (addr, token) = berth_chaos::served_address(&mut child);
        Serving { child, addr, token }
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.data.join("berth.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE,
        )
        .expect("the store opens")
    }

    fn integrity(&self) -> rusqlite::Result<String> {
        self.db()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
    }

    fn open_receipts(&self) -> BTreeSet<String> {
        let db = self.db();
        let mut st = db
            .prepare("SELECT receipt_id FROM receipts WHERE status IN ('accepted', 'running')")
            .unwrap();
        let ids = st.query_map([], |r| r.get(0)).unwrap();
        ids.filter_map(Result::ok).collect()
    }

    /// The marker files of iteration `i`'s calls, with their line counts.
    fn call_lines(&self, i: usize) -> BTreeMap<PathBuf, usize> {
        let prefix = format!("{i}-");
        std::fs::read_dir(&self.calls)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .map(|e| {
                        let n = std::fs::read_to_string(e.path())
                            .map(|t| t.lines().count())
                            .unwrap_or(0);
                        (e.path(), n)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

struct Serving {
    child: Child,
    addr: String,
    token: String,
}

impl Serving {
    fn get(&self, path: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some((200, v)) = request(&self.addr, &self.token, "GET", path, None) {
                return v;
            }
            assert!(Instant::now() < deadline, "GET {path} did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last run ends the way a person ends it (SIGTERM), its hosts shut down.
    fn stop(mut self) {
        // SAFETY: a plain signal to the child this run started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn post(addr: &str, token: &str, path: &str, body: &Value) -> Option<(u16, Value)> {
    request(addr, token, "POST", &format!("/api/{path}"), Some(body))
}

fn request(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Option<(u16, Value)> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let (status, answer) =
        berth_chaos::request(addr, token, method, path, &body, Duration::from_secs(30))?;
    Some((
        status,
        serde_json::from_slice(&answer).unwrap_or(Value::Null),
    ))
}

fn receipt_status(db: &rusqlite::Connection, id: &str) -> Option<String> {
    db.query_row(
        "SELECT status FROM receipts WHERE receipt_id = ?1",
        [id],
        |r| r.get(0),
    )
    .ok()
}

/// Every process below `pid` now (children of children), read from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// Alive and not a zombie waiting for its reaper.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit(')').next().map(|r| r.trim_start().chars().next()))
        .flatten()
        .is_some_and(|state| state != 'Z' && state != 'X')
}
