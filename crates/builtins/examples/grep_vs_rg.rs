//! The built-in grep against ripgrep on one directory, interleaved runs in one process:
//! median and p99 wall time of each and the ratio of the medians. ripgrep runs as OpenCode 1.18.4
//! runs it (`rg --no-config --json --hidden --no-messages --glob=!**/.git/** -- <pattern> .`).
//! Pick a pattern with fewer than 100 matches: the built-in stops at 100, rg does not.
//!
//! cargo run --release -p berth-builtins --example grep_vs_rg -- <dir> <pattern> [runs (default 21)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let mut argv = std::env::args().skip(1);
    let (Some(dir), Some(pattern)) = (argv.next(), argv.next()) else {
        eprintln!("usage: grep_vs_rg <dir> <pattern> [runs]");
        std::process::exit(2);
    };
    let runs: usize = argv
        .next()
        .map_or(21, |r| r.parse().expect("runs is a number"));
    let dir = PathBuf::from(dir)
        .canonicalize()
        .expect("the directory exists");
    let ctx = berth_builtins::CallContext::new(&dir);
    let args = serde_json::json!({ "pattern": pattern });

    let builtin = || {
        let t = Instant::now();
        let out = berth_builtins::call_blocking("grep", args.clone(), &ctx)
            .expect("the built-in grep answers");
        (t.elapsed(), out.metadata["matches"].as_u64().unwrap_or(0))
    };
    let rg = || {
        let t = Instant::now();
        let out = Command::new("rg")
            .args([
                "--no-config",
                "--json",
                "--hidden",
                "--no-messages",
                "--glob=!**/.git/**",
                "--",
                &pattern,
                ".",
            ])
            .current_dir(&dir)
            .stderr(Stdio::null())
            .output()
            .expect("rg on PATH");
        let matches = out
            .stdout
            .split(|b| *b == b'\n')
            .filter(|l| l.starts_with(br#"{"type":"match""#))
            .count();
        (t.elapsed(), matches as u64)
    };

    // One warm-up of each (page cache, the collator's data), then interleaved measured runs.
    let (_, berth_matches) = builtin();
    let (_, rg_matches) = rg();
    let (mut b, mut r) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        b.push(builtin().0);
        r.push(rg().0);
    }
    let (bm, rm) = (percentile(&mut b, 50.0), percentile(&mut r, 50.0));
    println!("dir {}  pattern {pattern:?}  runs {runs}", dir.display());
    println!("matches: built-in {berth_matches} (stops at 100), rg {rg_matches}");
    println!(
        "built-in grep  median {:>8.2} ms  p99 {:>8.2} ms",
        ms(bm),
        ms(percentile(&mut b, 99.0))
    );
    println!(
        "rg             median {:>8.2} ms  p99 {:>8.2} ms",
        ms(rm),
        ms(percentile(&mut r, 99.0))
    );
    println!(
        "ratio (built-in / rg, medians) {:.2}",
        bm.as_secs_f64() / rm.as_secs_f64()
    );
    if berth_matches >= 100 {
        println!("note: the built-in stopped at 100 matches; choose a rarer pattern for a like-for-like figure");
    }
}

/// Nearest-rank percentile.
fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
