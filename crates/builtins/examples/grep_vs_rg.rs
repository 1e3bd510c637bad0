//! The built-in grep against ripgrep on one directory, interleaved runs in one process:
//! median and p99 wall time of each and the ratio of the medians. ripgrep runs as OpenCode 1.18.4
//! runs it (`rg --no-config --json --hidden --no-messages --glob=!**/.git/** -- <pattern> .`).
//! Pick a pattern with fewer than 100 matches: the built-in stops at 100, rg does not.
//! `berth-bench --only builtins` prints the same figures on this repository's tree.
//!
//! cargo run --release -p berth-builtins --example grep_vs_rg -- <dir> <pattern> [runs (default 21)]

use std::path::PathBuf;
use std::time::Duration;

#[path = "../bench/grep_vs_rg.rs"]
mod grep_vs_rg;
use grep_vs_rg::{compare, percentile, rg_available};

fn main() {
    let mut argv = std::env::args().skip(1);
    let (Some(dir), Some(pattern)) = (argv.next(), argv.next()) else {
        eprintln!("usage: grep_vs_rg <dir> <pattern> [runs]");
        std::process::exit(2);
    };
    let runs: usize = argv
        .next()
        .map_or(21, |r| r.parse().expect("runs is a number"));
    if !rg_available() {
        eprintln!("grep_vs_rg: no `rg` on PATH (install ripgrep)");
        std::process::exit(2);
    }
    let dir = PathBuf::from(dir)
        .canonicalize()
        .expect("the directory exists");

    let mut c = compare(&dir, &pattern, runs);
    let (bm, rm) = (
        percentile(&mut c.builtin, 50.0),
        percentile(&mut c.rg, 50.0),
    );
    println!("dir {}  pattern {pattern:?}  runs {runs}", dir.display());
    println!(
        "matches: built-in {} (stops at 100), rg {}",
        c.builtin_matches, c.rg_matches
    );
    println!(
        "built-in grep  median {:>8.2} ms  p99 {:>8.2} ms",
        ms(bm),
        ms(percentile(&mut c.builtin, 99.0))
    );
    println!(
        "rg             median {:>8.2} ms  p99 {:>8.2} ms",
        ms(rm),
        ms(percentile(&mut c.rg, 99.0))
    );
    println!(
        "ratio (built-in / rg, medians) {:.2}",
        bm.as_secs_f64() / rm.as_secs_f64()
    );
    if c.builtin_matches >= 100 {
        println!("note: the built-in stopped at 100 matches; choose a rarer pattern for a like-for-like figure");
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
