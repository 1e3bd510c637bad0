//! `berth-fuzz`: bounded loops of random and mutated inputs against the parts of Berth that
//! read what others wrote — the host protocol's frames and messages, the JSONC config reader
//! with the whole config graph and scan, plugin specs, the static facts reader (oxc, over
//! mutated real plugin sources) and the page server's request handling. Each target runs for
//! its time budget under an address-space limit of 1 GiB (an unbounded allocation aborts the
//! run), every case is watched for a panic and for a hang past its bound, and the figures are
//! printed as `name value unit` lines.
//!
//! Usage: berth-fuzz [--seconds N] [--only frame,spec,facts,config,serve] [--seed S] [--hang-ms M]
//!   --seconds  per target (default 10); --seed makes a run repeatable (default: the clock);
//!   --hang-ms  how long one case may run (default 10,000). `--only canary-panic` and
//!   `--only canary-hang` are the harness's negative controls: each must fail the run.
//! Exits 1 on any panic or hang, printing the input that caused it.
//!
//! Owns: the mutators, the seeds and the watchdog. Must not: write outside its temporary
//! folders or reach the network (the page server listens on loopback only).

mod mutate;
mod targets;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mutate::Rng;

/// The longest one case may take before the run counts it as a hang (`--hang-ms` overrides).
static HANG_MS: AtomicU64 = AtomicU64::new(10_000);

/// The address space the run may use: an unbounded allocation fails instead of growing.
const ADDRESS_SPACE: u64 = 1 << 30;

/// What a target is given for each case, and what it reports.
pub struct Case<'a> {
    pub rng: &'a mut Rng,
    watch: &'a Watch,
}

impl Case<'_> {
    /// Notes the input the case is about to feed (reported if it panics or hangs).
    pub fn note(&mut self, bytes: &[u8]) {
        *self.watch.input.lock().unwrap_or_else(|p| p.into_inner()) = bytes.to_vec();
    }
}

type Target = Box<dyn FnMut(&mut Case<'_>)>;

/// Where the watchdog sees each case start.
struct Watch {
    started_ms: AtomicU64,
    target: Mutex<&'static str>,
    input: Mutex<Vec<u8>>,
}

fn main() {
    let flags = berth_chaos::Flags::from_env();
    let seconds: u64 = flags.number("--seconds", 10);
    let seed = flags.seed();
    HANG_MS.store(flags.number("--hang-ms", 10_000), Ordering::SeqCst);
    let only: Option<Vec<String>> = flags
        .value("--only")
        .map(|v| v.split(',').map(str::to_string).collect());
    limit_address_space();
    println!("fuzz_seed {seed}");

    let panics: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorded = panics.clone();
    std::panic::set_hook(Box::new(move |info| {
        recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(info.to_string());
    }));
    let watch = Arc::new(Watch {
        started_ms: AtomicU64::new(0),
        target: Mutex::new(""),
        input: Mutex::new(Vec::new()),
    });
    start_watchdog(watch.clone());

    let mut failed = false;
    let named = |n: &str| only.as_ref().is_some_and(|o| o.iter().any(|x| x == n));
    let chosen: Vec<_> = targets::all()
        .into_iter()
        .filter(|(n, _)| only.is_none() || named(n))
        .chain(targets::controls().into_iter().filter(|(n, _)| named(n)))
        .collect();
    for (name, make) in chosen {
        let mut target: Target = make();
        let mut rng = Rng::new(seed ^ name.len() as u64);
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut cases = 0u64;
        *watch.target.lock().unwrap() = name;
        while Instant::now() < deadline {
            let mut case = Case {
                rng: &mut rng,
                watch: &watch,
            };
            watch.started_ms.store(now_ms(), Ordering::SeqCst);
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| target(&mut case)));
            watch.started_ms.store(0, Ordering::SeqCst);
            cases += 1;
            if outcome.is_err() {
                let why = panics.lock().unwrap().pop().unwrap_or_default();
                println!("fuzz_{name}_panic {why}");
                println!(
                    "fuzz_{name}_panic_input {:?}",
                    String::from_utf8_lossy(&watch.input.lock().unwrap_or_else(|p| p.into_inner()))
                );
                failed = true;
                break;
            }
        }
        println!("fuzz_{name}_cases {cases} cases");
    }
    println!("fuzz_panics {} panics", if failed { 1 } else { 0 });
    println!("fuzz_hangs 0 hangs");
    std::process::exit(if failed { 1 } else { 0 });
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(1)
        .max(1)
}

/// A case that runs past `HANG` ends the run (with its target and the last input before it).
fn start_watchdog(watch: Arc<Watch>) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(50));
        let started = watch.started_ms.load(Ordering::SeqCst);
        let hang = HANG_MS.load(Ordering::SeqCst);
        if started != 0 && now_ms().saturating_sub(started) > hang {
            let target = *watch.target.lock().unwrap_or_else(|p| p.into_inner());
            let input = watch
                .input
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            println!("fuzz_{target}_hang a case ran past {hang} ms");
            println!(
                "fuzz_{target}_hang_input {:?}",
                String::from_utf8_lossy(&input)
            );
            println!("fuzz_hangs 1 hangs");
            std::process::exit(1);
        }
    });
}

fn limit_address_space() {
    // glibc reserves an arena per thread; a few are enough, and keep the limit meaningful.
    // SAFETY: plain libc calls with valid arguments, before other threads start.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        let lim = libc::rlimit {
            rlim_cur: ADDRESS_SPACE,
            rlim_max: ADDRESS_SPACE,
        };
        if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
            eprintln!("berth-fuzz: cannot limit the address space; running without the limit");
        }
    }
}
