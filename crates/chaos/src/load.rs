//! `berth-load`: the local page and API under load. `berth serve` on loopback gets 200
//! event-stream clients at once and, for the run's length, a bounded burst of API requests
//! (status reads and small decisions) from a few workers; every few seconds a tool file
//! appears in the project, and each of the 200 clients must see it within 300 ms.
//!
//! Prints requests, p50/p99 latency, errors, the slowest event delivery, and Berth's RSS
//! before and after; exits 1 on an error or an event later than 300 ms.
//! Usage: berth-load [--seconds N] [--clients N] [--berth PATH]
//!
//! Owns: the load and its figures. Must not: touch anything outside its temporary folder.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When each client saw each marker: per client, (marker, moment).
type Sightings = Mutex<Vec<Vec<(String, Instant)>>>;

/// The longest a change may take to reach every event-stream client.
const EVENT_BOUND: Duration = Duration::from_millis(300);

fn main() {
    let flags = berth_chaos::Flags::from_env();
    let seconds: u64 = flags.number("--seconds", 30);
    let clients: usize = flags.number("--clients", 200);
    let berth = flags.berth();
    let dir = tempfile::tempdir().expect("a temp dir");
    let (home, project) = (dir.path().join("home"), dir.path().join("project"));
    let tools = project.join(".opencode/tools");
    for d in [&home, &project.join(".git"), &tools] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut child = Command::new(&berth)
        .args(["serve", "--json", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--project")
        .arg(&project)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("berth serve starts");
    let (addr, token) = berth_chaos::served_address(&mut child);
    std::thread::sleep(Duration::from_millis(300));
    let rss_before = berth_chaos::procs::rss_kib(child.id());

    // The event-stream clients: each records when it saw each marker.
    let seen: Arc<Sightings> = Arc::new(Mutex::new(vec![Vec::new(); clients]));
    let connected = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    for c in 0..clients {
        let (addr, token, seen, connected) =
            (addr.clone(), token.clone(), seen.clone(), connected.clone());
        std::thread::spawn(move || stream_client(&addr, &token, c, &seen, &connected));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while connected.load(Ordering::SeqCst) < clients as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }

    // The burst: a few workers, each one request at a time, as fast as answered.
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (addr, token, stop, latencies, errors) = (
                addr.clone(),
                token.clone(),
                stop.clone(),
                latencies.clone(),
                errors.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let (method, path, body) = match n % 4 {
                        0 | 1 => ("GET", "/api/status", String::new()),
                        2 => ("POST", "/api/deny", r#"{"ids":[]}"#.to_string()),
                        _ => ("GET", "/main.js", String::new()),
                    };
                    let t = Instant::now();
                    let answer = berth_chaos::request(
                        &addr,
                        &token,
                        method,
                        path,
                        &body,
                        Duration::from_secs(10),
                    );
                    match answer.map(|(code, _)| code) {
                        Some(code) if code < 400 || (method == "POST" && code == 422) => {
                            latencies.lock().unwrap().push(t.elapsed())
                        }
                        other => {
                            eprintln!("berth-load: worker {w}: {method} {path} → {other:?}");
                            errors.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    n += 1;
                }
            })
        })
        .collect();

    // Changes, and how long each took to reach every client.
    let mut changes: Vec<(String, Instant)> = Vec::new();
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut k = 0;
    while Instant::now() + Duration::from_secs(2) < end {
        std::thread::sleep(Duration::from_millis(1500));
        let marker = format!("load_marker_{k}");
        std::fs::write(
            tools.join(format!("{marker}.ts")),
            "export default { description: 'd', args: {}, async execute() { return 'x' } }\n",
        )
        .unwrap();
        changes.push((marker, Instant::now()));
        k += 1;
    }
    std::thread::sleep(end.saturating_duration_since(Instant::now()) + Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        let _ = w.join();
    }
    std::thread::sleep(Duration::from_secs(1));
    let rss_after = berth_chaos::procs::rss_kib(child.id());

    let mut slowest = Duration::ZERO;
    let mut late = 0usize;
    let mut missed = 0usize;
    {
        let seen = seen.lock().unwrap();
        for (marker, at) in &changes {
            for client in seen.iter() {
                match client.iter().find(|(m, _)| m == marker) {
                    Some((_, when)) => {
                        let d = when.saturating_duration_since(*at);
                        slowest = slowest.max(d);
                        if d > EVENT_BOUND {
                            late += 1;
                        }
                    }
                    None => missed += 1,
                }
            }
        }
    }
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    let errors = errors.load(Ordering::SeqCst);
    println!(
        "load_stream_clients {} connected",
        connected.load(Ordering::SeqCst)
    );
    println!(
        "load_requests {} requests in {seconds} s",
        lat.len() as u64 + errors
    );
    println!("load_request_p50 {:.2} ms", pct(0.5).as_secs_f64() * 1e3);
    println!("load_request_p99 {:.2} ms", pct(0.99).as_secs_f64() * 1e3);
    println!("load_errors {errors} requests");
    println!("load_changes {} changes", changes.len());
    println!(
        "load_event_slowest {:.1} ms (bound {} ms)",
        slowest.as_secs_f64() * 1e3,
        EVENT_BOUND.as_millis()
    );
    println!("load_events_late {late} deliveries");
    println!("load_events_missed {missed} deliveries");
    println!("load_rss_before {rss_before} KiB");
    println!("load_rss_after {rss_after} KiB");
    let _ = child.kill();
    let _ = child.wait();
    let ok = errors == 0
        && late == 0
        && missed == 0
        && !changes.is_empty()
        && connected.load(Ordering::SeqCst) == clients as u64;
    std::process::exit(if ok { 0 } else { 1 });
}

/// One event-stream client: notes the moment each `load_marker_N` first appears in its stream.
fn stream_client(addr: &str, token: &str, c: usize, seen: &Sightings, connected: &AtomicU64) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return;
    };
    let req = format!("GET /api/events?token={token} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return;
    }
    connected.fetch_add(1, Ordering::SeqCst);
    let mut buf = vec![0u8; 1 << 16];
    let mut tail = String::new();
    let mut next = 0usize;
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let now = Instant::now();
        tail.push_str(&String::from_utf8_lossy(&buf[..n]));
        loop {
            let marker = format!("load_marker_{next}");
            if tail.contains(&marker) {
                seen.lock().unwrap()[c].push((marker, now));
                next += 1;
            } else {
                break;
            }
        }
        // Keep only what a marker split across reads may need.
        if tail.len() > 64 {
            let cut = tail.len() - 64;
            let cut = (cut..tail.len())
                .find(|i| tail.is_char_boundary(*i))
                .unwrap_or(tail.len());
            tail.drain(..cut);
        }
    }
}
