//! Prints the median start time of `node -e 0` run plainly, under the Bwrap tier and under
//! the Landlock tier (20 runs each; tiers this machine lacks are skipped with the reason).
//! An absolute program path as the first argument measures that runtime instead (e.g. bun):
//! `cargo run -p berth-sandbox --example start_cost [-- /path/to/bun]`.
//!
//! Owns: nothing but this measurement. Must not: assert anything (it is not a test).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use berth_sandbox::{env_allowlist, probe, wrap, Boundary, Tier};

const RUNS: usize = 20;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = match std::env::args_os().nth(1) {
        Some(p) => PathBuf::from(p),
        None => find("node").ok_or("node is not in PATH")?,
    };
    let args: Vec<OsString> = vec!["-e".into(), "0".into()];
    println!("program: {} -e 0, {RUNS} runs each", node.display());
    let env = env_allowlist(std::env::vars_os(), &[], &[]);
    let plain = median(RUNS, || run(&node, &args, None, &env)).await?;
    println!("plain:    {:>7.1} ms", ms(plain));
    for tier in [Tier::Bwrap, Tier::Landlock] {
        if let Some(why) = probe().why_not(tier) {
            println!("{tier:?}: skipped ({why})");
            continue;
        }
        let mut b = Boundary::new(tier);
        b.env = env.clone();
        let t = median(RUNS, || run(&node, &args, Some(&b), &env)).await?;
        println!("{:<9} {:>7.1} ms", format!("{tier:?}:"), ms(t));
    }
    Ok(())
}

/// One start, timed from before `wrap` to the child's exit; plain runs get the same
/// allow-listed environment (a full one can be slower: e.g. NODE_EXTRA_CA_CERTS).
async fn run(
    program: &Path,
    args: &[OsString],
    b: Option<&Boundary>,
    env: &[(OsString, OsString)],
) -> Result<Duration, String> {
    let start = Instant::now();
    let wrapped = b
        .map(|b| wrap(program, args, b))
        .transpose()
        .map_err(|e| e.to_string())?;
    let mut cmd = match &wrapped {
        Some(w) => {
            let mut cmd = tokio::process::Command::new(w.program());
            cmd.args(w.args());
            w.apply(&mut cmd);
            cmd
        }
        None => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args)
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)));
            cmd
        }
    };
    let status = cmd.status().await.map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("the child failed: {status}"));
    }
    Ok(start.elapsed())
}

async fn median<F, Fut>(n: usize, mut f: F) -> Result<Duration, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Duration, String>>,
{
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        times.push(f().await?);
    }
    times.sort();
    Ok(times[n / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
