//! The built-in grep against ripgrep on one directory, interleaved in one process: shared by
//! `examples/grep_vs_rg.rs` and `berth-bench --only builtins` (each includes this file with
//! `#[path]`). It lives outside `src/` because it spawns `rg`, which the library never does.
//!
//! ripgrep runs as OpenCode 1.18.4 runs it (`rg --no-config --json --hidden --no-messages
//! --glob=!**/.git/** -- <pattern> .`). Pick a pattern with fewer than 100 matches: the
//! built-in stops at 100, rg does not.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wall times of both, sampled alternately, and what each found.
pub struct Comparison {
    pub builtin: Vec<Duration>,
    pub rg: Vec<Duration>,
    pub builtin_matches: u64,
    pub rg_matches: u64,
}

/// `rg --version` answers from PATH.
pub fn rg_available() -> bool {
    Command::new("rg")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One warm-up of each (page cache, the collator's data), then `runs` interleaved measured
/// runs. `dir` must be canonical (the built-in's project root).
pub fn compare(dir: &Path, pattern: &str, runs: usize) -> Comparison {
    let ctx = berth_builtins::CallContext::new(dir);
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
                pattern,
                ".",
            ])
            .current_dir(dir)
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
    let (_, builtin_matches) = builtin();
    let (_, rg_matches) = rg();
    let (mut b, mut r) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        b.push(builtin().0);
        r.push(rg().0);
    }
    Comparison {
        builtin: b,
        rg: r,
        builtin_matches,
        rg_matches,
    }
}

/// Nearest-rank percentile (`p` in 0–100).
pub fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}
