//! `berth-soak`: many calls at once while faults land at random, on both backends. For each
//! backend (Bun, and Node with Bun hidden) `berth serve` runs a project with the fault tools
//! (`fixtures/tools/faults.ts`) and a plugin with a tool of its own and both tool hooks
//! (`fixtures/soak/soak-hooks.ts`). Callers make receipted calls, each counting its run (and its
//! hook's) in a file of its own; a chaos thread meanwhile kills a host (SIGKILL), stops one past
//! the liveness limit (SIGSTOP), cancels calls, times them out, floods stdout, returns oversized
//! outputs, makes a host exit mid-call, revokes and re-approves a source and edits a tool file —
//! and, as the person would, resumes what Berth paused. Afterwards:
//!
//! - every receipt is final (`completed`/`failed`/`cancelled`/`unknown`);
//! - no call and no hook ran twice (a retry with the same key runs nothing again);
//! - no process Berth started is left (neither while it runs, outside its tree, nor after it
//!   stops);
//! - after a 5 s settle Berth's RSS is within 10 % of its start and its open files within ±2;
//! - every tool answers again; the store's integrity check is `ok` and its WAL is bounded.
//!
//! Prints `name value unit` lines (calls, faults by kind, outcomes by code, replays, leaks,
//! p50/p99 of the calls that completed); exits 1 on any replay, leak or failed check.
//! Usage: berth-soak [--minutes M] [--warmup-seconds S] [--callers N] [--faults all|off|KIND,…]
//!        [--seed S] [--berth PATH]
//!
//! Owns: the soak and its checks. Must not: touch anything outside its temporary folders.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_chaos::machine::{Machine, Serving};
use berth_chaos::procs::{
    anon_kib, descendants, name, next, open_fds, rss_kib, running, start_time,
};
use serde_json::{json, Value};

/// What the chaos thread does, each chosen at random.
const FAULTS: [&str; 11] = [
    "kill-host",
    "stop-host",
    "cancel",
    "timeout",
    "spin-timeout",
    "host-exits",
    "stdout-flood",
    "oversized-output",
    "oversized-frame",
    "revoke",
    "edit",
];

/// A stopped host stays stopped this long: past the 3 s a request may wait for its
/// acknowledgement.
const STOPPED_FOR: Duration = Duration::from_secs(4);

fn main() {
    let flags = berth_chaos::Flags::from_env();
    let minutes: f64 = flags.number("--minutes", 2.0);
    let callers: usize = flags.number("--callers", 3);
    // `--faults off`: the same calls with no fault (the floor); `--faults KIND,…`: only those.
    let faults: Vec<&'static str> = match flags.value("--faults").as_deref() {
        None | Some("all") => FAULTS.to_vec(),
        Some("off") => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|k| {
                *FAULTS
                    .iter()
                    .find(|f| **f == k)
                    .unwrap_or_else(|| panic!("no fault {k}; the faults: {FAULTS:?}"))
            })
            .collect(),
    };
    let seed = flags.seed();
    let berth = flags.berth();
    println!("soak_seed {seed}");
    let length = Duration::from_secs_f64(minutes * 60.0);
    let warmup = Duration::from_secs(flags.number("--warmup-seconds", 20));
    let runs: Vec<_> = ["bun", "node"]
        .into_iter()
        .enumerate()
        .map(|(i, backend)| {
            let (berth, faults) = (berth.clone(), faults.clone());
            let seed = seed.wrapping_add(i as u64 * 0x9E37_79B9_7F4A_7C15).max(1);
            std::thread::spawn(move || {
                soak(&berth, backend, callers, (warmup, length), seed, faults)
            })
        })
        .collect();
    let mut failed = false;
    for run in runs {
        let report = run.join().expect("a soak thread");
        report.print();
        failed |= !report.failures.is_empty();
    }
    std::process::exit(i32::from(failed));
}

/// One backend's soak, start to end.
fn soak(
    berth: &std::path::Path,
    backend: &'static str,
    callers: usize,
    (warmup, length): (Duration, Duration),
    seed: u64,
    faults: Vec<&'static str>,
) -> Report {
    let mut machine = Machine::new(
        berth,
        &[
            ("fixtures/tools/faults.ts", ".opencode/tools/faults.ts"),
            (
                "fixtures/soak/soak-hooks.ts",
                ".opencode/plugins/soak-hooks.ts",
            ),
        ],
    );
    if backend == "node" {
        machine = machine.with_env("BERTH_BUN", "/nonexistent");
    }
    let run = Arc::new(Run {
        serving: machine.serve(),
        machine,
        backend,
        stop: AtomicBool::new(false),
        report: Mutex::new(Report::new(backend)),
        seen: Mutex::default(),
        keys: AtomicU64::new(0),
    });
    let pid = run.serving.child.id();
    for id in run.sources().keys() {
        run.approve(id);
    }
    if !run.answers_again() {
        run.fail("the tools did not answer before the soak began".into());
    }
    let hosts = run.serving.get("/api/status")["hosts"].clone();
    if hosts
        .as_array()
        .is_none_or(|h| h.iter().any(|h| h["backend"] != backend))
    {
        run.fail(format!("expected every host on {backend}: {hosts}"));
    }
    // Warm up with the same mix for a while (the code, caches and allocator arenas its paths
    // touch come in), settle, and take that as the start: what grows after is growth. The
    // memory after the first calls is printed too.
    let (cold_rss, cold_anon) = (rss_kib(pid), anon_kib(pid));
    phase(&run, callers, &faults, warmup, seed);
    let start = run.settle(pid);
    {
        let mut r = run.report();
        r.rss.0 = start.rss;
        r.anon.0 = start.anon;
        r.fds.0 = start.fds;
        r.cold = (cold_rss, cold_anon);
    }
    phase(&run, callers, &faults, length, seed.rotate_left(17));
    // The store's WAL after all those writes: bounded (it wraps at 16 MiB of frames), never
    // the size of everything written.
    let wal = std::fs::metadata(run.machine.data.join("berth.db-wal")).map_or(0, |m| m.len());
    run.report().wal = wal;
    if wal > WAL_BOUND {
        run.fail(format!("the store's WAL is {wal} bytes (over {WAL_BOUND})"));
    }
    let end = run.settle(pid);
    {
        let mut r = run.report();
        r.rss.1 = end.rss;
        r.anon.1 = end.anon;
        r.fds.1 = end.fds;
    }
    if end.rss as f64 > start.rss as f64 * 1.10 {
        run.fail(format!(
            "RSS grew from {} KiB to {} KiB (over 10 %)",
            start.rss, end.rss
        ));
    }
    if end.fds.abs_diff(start.fds) > 2 {
        run.fail(format!("open files went from {} to {}", start.fds, end.fds));
    }
    let run = Arc::into_inner(run).expect("every thread ended");
    run.finish()
}

/// Callers, the chaos thread and the process watcher for `length`, then all stopped.
fn phase(run: &Arc<Run>, callers: usize, faults: &[&'static str], length: Duration, seed: u64) {
    let deadline = Instant::now() + length;
    run.stop.store(false, Ordering::SeqCst);
    let mut threads: Vec<_> = (0..callers)
        .map(|c| {
            let run = run.clone();
            let mut rng = (seed ^ (c as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)).max(1);
            std::thread::spawn(move || {
                while !run.stop.load(Ordering::SeqCst) {
                    run.call_once(c, &mut rng);
                }
            })
        })
        .collect();
    threads.push({
        let run = run.clone();
        let faults = faults.to_vec();
        let mut rng = seed;
        std::thread::spawn(move || {
            while !faults.is_empty() && !run.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(300 + next(&mut rng) % 900));
                let kind = faults[(next(&mut rng) % faults.len() as u64) as usize];
                let i = run.keys.fetch_add(1, Ordering::SeqCst);
                if run.inject(kind, i, &mut rng) {
                    *run.report().faults.entry(kind).or_default() += 1;
                }
                run.resume_if_paused();
            }
        })
    });
    threads.push({
        let run = run.clone();
        std::thread::spawn(move || {
            while !run.stop.load(Ordering::SeqCst) {
                run.watch();
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    });
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    run.stop.store(true, Ordering::SeqCst);
    for t in threads {
        let _ = t.join();
    }
    run.watch();
}

/// Berth's memory and open files after a settle.
struct Settled {
    rss: u64,
    anon: u64,
    fds: usize,
}

struct Run {
    machine: Machine,
    serving: Serving,
    backend: &'static str,
    stop: AtomicBool,
    report: Mutex<Report>,
    /// Every process seen below Berth, by pid and start time.
    seen: Mutex<BTreeSet<(u32, u64)>>,
    keys: AtomicU64,
}

impl Run {
    fn report(&self) -> std::sync::MutexGuard<'_, Report> {
        self.report.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, what: String) {
        eprintln!("soak ({}): {what}", self.backend);
        self.report().failures.push(what);
    }

    /// The sources now: id → (state, digest).
    fn sources(&self) -> BTreeMap<String, (String, String)> {
        let status = self.serving.get("/api/status");
        status["sources"]
            .as_array()
            .map(|s| {
                s.iter()
                    .map(|s| {
                        let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
                        (text("id"), (text("state"), text("digest")))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Approves `id` as shown now (with its digest), as the page does.
    fn approve(&self, id: &str) {
        let Some((_, digest)) = self.sources().remove(id) else {
            return self.fail(format!("{id} is not among the sources"));
        };
        let body = json!({ "ids": [id], "digests": { id: digest } });
        match self.serving.post("approve", &body) {
            Some((200, _)) => {}
            other => self.fail(format!("approving {id}: {other:?}")),
        }
    }

    /// A caller's call: `faults_count` or the plugin's `soak_echo`, with a key of its own; an
    /// answer that does not say whether the tool ran (none, `unknown`, the host lost) is asked
    /// again with the same key, which must run nothing again and answer with the same receipt.
    fn call_once(&self, caller: usize, rng: &mut u64) {
        let key = format!(
            "{}-{caller}-{}",
            self.backend,
            self.keys.fetch_add(1, Ordering::SeqCst)
        );
        let file = self.machine.calls.join(&key);
        let echo = next(rng).is_multiple_of(2);
        let body = if echo {
            json!({ "tool": "soak_echo", "args": { "file": file, "text": key }, "idempotency_key": key })
        } else {
            json!({ "tool": "faults_count", "args": { "file": file }, "idempotency_key": key })
        };
        let started = Instant::now();
        let first = self.serving.post("invoke", &body);
        let mut outcome = outcome(&first);
        let mut answer = first.clone();
        // Not final for the caller, who cannot know whether the tool ran: asked again, as a
        // client would, with the same key.
        if outcome == "no-answer"
            || outcome.starts_with("unknown")
            || outcome.ends_with(":worker-lost")
        {
            self.report().retries += 1;
            answer = self.serving.post("invoke", &body);
            let id = |a: &Option<(u16, Value)>| match a {
                Some((200, v)) => v["receipt_id"].as_str().map(String::from),
                _ => None,
            };
            if let (Some(a), Some(b)) = (id(&first), id(&answer)) {
                if a != b {
                    self.fail(format!("{key}: the retry got receipt {b}, not {a}"));
                }
            }
            outcome = self::outcome(&answer);
        }
        let took = started.elapsed();
        if outcome == "completed" {
            let output = answer.as_ref().map(|(_, v)| v["output"].clone());
            let want = if echo {
                json!(format!("{key}+after"))
            } else {
                json!("counted")
            };
            if output != Some(want.clone()) {
                self.fail(format!("{key} answered {output:?}, not {want}"));
            }
        }
        let mut report = self.report();
        report.calls += 1;
        *report.outcomes.entry(outcome.clone()).or_default() += 1;
        if outcome == "completed" {
            report.latencies.push(took);
        }
        drop(report);
        if outcome != "completed" {
            // A tool withdrawn for a moment (revoked, edited, paused) is not asked in a loop.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One fault; false when there was nothing to inject it into.
    fn inject(&self, kind: &'static str, i: u64, rng: &mut u64) -> bool {
        let faulty = |tool: &str, extra: Value| {
            let mut body = json!({ "tool": tool, "args": {} });
            if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
            let answer = self.serving.post("invoke", &body);
            let mut report = self.report();
            *report
                .fault_outcomes
                .entry(format!("{kind} {}", outcome(&answer)))
                .or_default() += 1;
        };
        match kind {
            "kill-host" | "stop-host" => {
                let Some(host) = self.a_host(rng) else {
                    return false;
                };
                let tree: Vec<(u32, u64)> = std::iter::once(host)
                    .chain(descendants(host))
                    .filter_map(|p| Some((p, start_time(p)?)))
                    .collect();
                self.seen.lock().unwrap().extend(tree);
                let signal = if kind == "kill-host" {
                    libc::SIGKILL
                } else {
                    libc::SIGSTOP
                };
                // SAFETY: a plain signal to a host this run's Berth started.
                unsafe { libc::kill(host as i32, signal) };
                if kind == "stop-host" {
                    std::thread::sleep(STOPPED_FOR);
                    // SAFETY: as above; a host Berth killed meanwhile is gone and this fails.
                    unsafe { libc::kill(host as i32, libc::SIGCONT) };
                }
            }
            "cancel" => {
                let call = format!("soak-cancel-{i}");
                std::thread::scope(|s| {
                    s.spawn(|| faulty("faults_waits", json!({ "call": call })));
                    std::thread::sleep(Duration::from_millis(100 + next(rng) % 300));
                    let _ = self.serving.post("cancel", &json!({ "call": call }));
                });
            }
            "timeout" => faulty("faults_waits", json!({ "timeout_ms": 150 })),
            "spin-timeout" => faulty("faults_spins", json!({ "timeout_ms": 300 })),
            "host-exits" => faulty("faults_exits", json!({})),
            "stdout-flood" => faulty("faults_floods_stdout", json!({})),
            "oversized-output" => faulty("faults_floods_output", json!({})),
            "oversized-frame" => faulty("faults_oversized_frame", json!({})),
            "revoke" => {
                let sources = self.sources();
                let ids: Vec<&String> = sources.keys().collect();
                let id = ids[(next(rng) % ids.len() as u64) as usize].clone();
                match self.serving.post("deny", &json!({ "ids": [id] })) {
                    Some((200, _)) => {}
                    other => self.fail(format!("revoking {id}: {other:?}")),
                }
                std::thread::sleep(Duration::from_millis(200 + next(rng) % 400));
                self.approve(&id);
            }
            "edit" => {
                let file = self.machine.project.join(".opencode/tools/faults.ts");
                let before = self.sources();
                let old = before.iter().find(|(id, _)| id.starts_with("tool-faults"));
                let Some((id, (_, old_digest))) = old else {
                    return false;
                };
                let mut text = std::fs::read_to_string(&file).unwrap();
                text.push_str(&format!("// edited by the soak ({i})\n"));
                std::fs::write(&file, text).unwrap();
                let until = Instant::now() + Duration::from_secs(10);
                while self.sources().get(id).is_some_and(|(_, d)| d == old_digest) {
                    if Instant::now() > until {
                        self.fail(format!("the edit of {id} was not seen within 10 s"));
                        return true;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                self.approve(id);
            }
            _ => unreachable!("{kind}"),
        }
        true
    }

    /// A plugin host's process (the runtime itself, below Berth or its sandbox), at random.
    fn a_host(&self, rng: &mut u64) -> Option<u32> {
        let hosts: Vec<u32> = descendants(self.serving.child.id())
            .into_iter()
            .filter(|p| matches!(name(*p).as_str(), "bun" | "node") && running(*p))
            .collect();
        (!hosts.is_empty()).then(|| hosts[(next(rng) % hosts.len() as u64) as usize])
    }

    /// As the person would: a source Berth paused (its budget spent) is resumed.
    fn resume_if_paused(&self) {
        if self.sources().values().any(|(state, _)| state == "paused") {
            self.report().resumes += 1;
            let _ = self.serving.post("resume", &json!({}));
        }
    }

    /// The sources not active now, with their state.
    fn not_active(&self) -> Vec<(String, String)> {
        self.sources()
            .into_iter()
            .filter(|(_, (state, _))| state != "active")
            .map(|(id, (state, _))| (id, state))
            .collect()
    }

    /// Notes every process below Berth now.
    fn watch(&self) {
        let now: Vec<(u32, u64)> = descendants(self.serving.child.id())
            .into_iter()
            .filter_map(|p| Some((p, start_time(p)?)))
            .collect();
        self.seen.lock().unwrap().extend(now);
    }

    /// Processes seen earlier that still run (the same pid and start time).
    fn still_running(&self) -> BTreeSet<u32> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, t)| running(*p) && start_time(*p) == Some(*t))
            .map(|(p, _)| *p)
            .collect()
    }

    /// `soak_echo` and `faults_count` complete (10 s to get there, resuming what is paused).
    fn answers_again(&self) -> bool {
        let until = Instant::now() + Duration::from_secs(20);
        for (tool, want) in [("soak_echo", "ok+after"), ("faults_count", "counted")] {
            loop {
                let n = self.keys.fetch_add(1, Ordering::SeqCst);
                let file = self
                    .machine
                    .calls
                    .join(format!("{}-check-{n}", self.backend));
                let mut args = json!({ "file": file });
                if tool == "soak_echo" {
                    args["text"] = json!("ok");
                }
                let body =
                    json!({ "tool": tool, "args": args, "idempotency_key": format!("check-{n}") });
                let answer = self.serving.post("invoke", &body);
                if matches!(&answer, Some((200, v)) if v["status"] == "completed" && v["output"] == want)
                {
                    break;
                }
                if Instant::now() > until {
                    self.fail(format!("{tool} does not answer again: {answer:?}"));
                    return false;
                }
                self.resume_if_paused();
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        true
    }

    /// After a phase: receipts final, sources active, tools answering, nothing left outside
    /// Berth's tree; then 5 s of quiet and its memory and open files.
    fn settle(&self, pid: u32) -> Settled {
        self.resume_if_paused();
        let until = Instant::now() + Duration::from_secs(15);
        let mut open = self.machine.open_receipts();
        while !open.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            open = self.machine.open_receipts();
        }
        if !open.is_empty() {
            let db = self.machine.db();
            let some: Vec<String> = open
                .iter()
                .take(5)
                .map(|id| {
                    db.query_row(
                        "SELECT tool || ' ' || status || ' ' || coalesce(error_code, '-') FROM receipts WHERE receipt_id = ?1",
                        [id],
                        |r| r.get::<_, String>(0),
                    )
                    .unwrap_or_default()
                })
                .collect();
            self.fail(format!(
                "{} receipts still open after 15 s, among them {some:?}",
                open.len()
            ));
        }
        self.answers_again();
        let until = Instant::now() + Duration::from_secs(10);
        let mut waiting = self.not_active();
        while !waiting.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            waiting = self.not_active();
        }
        if !waiting.is_empty() {
            self.fail(format!("not active 10 s after the soak: {waiting:?}"));
        }
        std::thread::sleep(Duration::from_secs(5));
        let settled = Settled {
            rss: rss_kib(pid),
            anon: anon_kib(pid),
            fds: open_fds(pid),
        };
        self.watch();
        let inside: BTreeSet<u32> = descendants(pid).into_iter().collect();
        let outside: Vec<u32> = self.still_running().difference(&inside).copied().collect();
        if !outside.is_empty() {
            self.report().leaks += outside.len();
            self.fail(format!("alive outside Berth's tree: {outside:?}"));
        }
        settled
    }

    /// Stops Berth and reads what is left: processes, replays, the store's integrity.
    fn finish(self) -> Report {
        let Run {
            machine, serving, ..
        } = &self;
        let tree: Vec<u32> = descendants(serving.child.id());
        // SAFETY: a plain signal to the child this run started.
        unsafe { libc::kill(serving.child.id() as i32, libc::SIGTERM) };
        // Its end (10 s at most), then the 1 s its tree has to be gone.
        let until = Instant::now() + Duration::from_secs(10);
        while running(serving.child.id()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_secs(1));
        let left = self.still_running();
        if !left.is_empty() {
            self.report().leaks += left.len();
            self.fail(format!(
                "alive 1 s after Berth stopped: {left:?} (its tree: {tree:?})"
            ));
            for p in left {
                // SAFETY: a plain signal to a process this run's Berth started.
                unsafe { libc::kill(p as i32, libc::SIGKILL) };
            }
        }
        let seen = self.seen.lock().unwrap().len();
        self.report().processes = seen;
        for entry in std::fs::read_dir(&machine.calls).unwrap().flatten() {
            let runs = std::fs::read_to_string(entry.path())
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if runs > 1 {
                self.report().replays += 1;
                self.fail(format!(
                    "{} ran {runs} times",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
        match machine.integrity() {
            Ok(ok) if ok == "ok" => {}
            other => self.fail(format!("integrity_check: {other:?}")),
        }
        let Run {
            mut serving,
            report,
            ..
        } = self;
        let _ = serving.child.wait();
        report.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

/// A call's outcome as a caller sees it: `completed`, `<status>:<code>`, `refused:<code>` (an
/// error document instead of a receipt) or `no-answer`.
fn outcome(answer: &Option<(u16, Value)>) -> String {
    match answer {
        None => "no-answer".into(),
        Some((200, v)) if v["status"] == "completed" => "completed".into(),
        Some((200, v)) => format!(
            "{}:{}",
            v["status"].as_str().unwrap_or("?"),
            v["error"]["code"].as_str().unwrap_or("?")
        ),
        Some((_, v)) => format!("refused:{}", v["error"]["code"].as_str().unwrap_or("?")),
    }
}

struct Report {
    backend: &'static str,
    calls: u64,
    retries: u64,
    resumes: u64,
    faults: BTreeMap<&'static str, u64>,
    outcomes: BTreeMap<String, u64>,
    fault_outcomes: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
    replays: usize,
    leaks: usize,
    processes: usize,
    rss: (u64, u64),
    /// RSS and anonymous memory after the first calls, before the warm-up.
    cold: (u64, u64),
    /// Its anonymous memory (the heap; RSS also counts the program's pages it has read).
    anon: (u64, u64),
    fds: (usize, usize),
    /// The store's WAL file at the end of the measured phase, in bytes.
    wal: u64,
    failures: Vec<String>,
}

/// The largest WAL a run may leave: 16 MiB of frames wrap it, plus what lands meanwhile.
const WAL_BOUND: u64 = 64 << 20;

impl Report {
    fn new(backend: &'static str) -> Report {
        Report {
            backend,
            calls: 0,
            retries: 0,
            resumes: 0,
            faults: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            fault_outcomes: BTreeMap::new(),
            latencies: Vec::new(),
            replays: 0,
            leaks: 0,
            processes: 0,
            rss: (0, 0),
            cold: (0, 0),
            anon: (0, 0),
            fds: (0, 0),
            wal: 0,
            failures: Vec::new(),
        }
    }

    fn print(&self) {
        let b = self.backend;
        println!("soak_{b}_calls {} calls", self.calls);
        println!("soak_{b}_retries_same_key {} calls", self.retries);
        println!(
            "soak_{b}_faults {} faults",
            self.faults.values().sum::<u64>()
        );
        for (kind, n) in &self.faults {
            println!("soak_{b}_fault[{kind}] {n} faults");
        }
        for (code, n) in &self.outcomes {
            println!("soak_{b}_outcome[{code}] {n} calls");
        }
        for (what, n) in &self.fault_outcomes {
            println!("soak_{b}_fault_call[{what}] {n} calls");
        }
        println!("soak_{b}_resumes {} resumes", self.resumes);
        let mut l = self.latencies.clone();
        l.sort();
        let at = |q: f64| {
            l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1)))
                .map(|d| d.as_secs_f64() * 1000.0)
                .unwrap_or(0.0)
        };
        println!("soak_{b}_completed_p50 {:.2} ms", at(0.50));
        println!("soak_{b}_completed_p99 {:.2} ms", at(0.99));
        println!("soak_{b}_rss_cold {} KiB", self.cold.0);
        println!("soak_{b}_rss_anon_cold {} KiB", self.cold.1);
        println!("soak_{b}_rss_start {} KiB", self.rss.0);
        println!("soak_{b}_rss_anon_start {} KiB", self.anon.0);
        println!("soak_{b}_rss_anon_settled {} KiB", self.anon.1);
        println!("soak_{b}_rss_settled {} KiB", self.rss.1);
        println!("soak_{b}_fds_start {} files", self.fds.0);
        println!("soak_{b}_fds_settled {} files", self.fds.1);
        println!("soak_{b}_wal {} KiB", self.wal / 1024);
        println!("soak_{b}_processes_watched {} processes", self.processes);
        println!("soak_{b}_replays {} calls", self.replays);
        println!("soak_{b}_leaked_processes {} processes", self.leaks);
        println!("soak_{b}_failures {} checks", self.failures.len());
    }
}
