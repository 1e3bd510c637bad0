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
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_chaos::machine::Machine;
use berth_chaos::procs::{descendants, next, running};

use serde_json::json;

fn main() {
    let flags = berth_chaos::Flags::from_env();
    let iterations: usize = flags.number("--iterations", 50);
    let seed = flags.seed();
    let berth = flags.berth();
    println!("crash_loop_seed {seed}");
    let machine = Machine::new(
        &berth,
        &[("fixtures/tools/faults.ts", ".opencode/tools/faults.ts")],
    );
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
                report.check_unchanged(i, &call_lines(&machine, i - 1), &lines_before);
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
                        if let Some((200, r)) = berth_chaos::machine::post_json(&addr, &token, "POST", "/api/invoke", Some(&body)) {
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
        if let Some((200, _)) =
            serving.post("policy", &json!({ "key": "budget.hook", "value": value }))
        {
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
            report.check_unchanged(i, &call_lines(&machine, i - 1), &lines_before);
        }
        lines_before = call_lines(&machine, i);
        report.check_once(i, &lines_before);
        report.iterations += 1;
    }
    report.print();
    std::process::exit(if report.failures.is_empty() { 0 } else { 1 });
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

/// The marker files of iteration `i`'s calls, with their line counts.
fn call_lines(machine: &Machine, i: usize) -> BTreeMap<PathBuf, usize> {
    let prefix = format!("{i}-");
    std::fs::read_dir(&machine.calls)
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

fn receipt_status(db: &rusqlite::Connection, id: &str) -> Option<String> {
    db.query_row(
        "SELECT status FROM receipts WHERE receipt_id = ?1",
        [id],
        |r| r.get(0),
    )
    .ok()
}
