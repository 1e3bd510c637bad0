//! The fuzz harness can fail: a target that panics on some input, and one that hangs, each end
//! the run with exit 1 and the target, the cause and the input named.

use std::process::Command;

fn run(only: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_berth-fuzz"))
        .args([
            "--only",
            only,
            "--seconds",
            "20",
            "--hang-ms",
            "500",
            "--seed",
            "7",
        ])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_panic_found_fails_the_run_and_names_its_input() {
    let (code, out) = run("canary-panic");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("fuzz_canary-panic_panic"), "{out}");
    assert!(out.contains("nested braces"), "{out}");
    assert!(out.contains("fuzz_canary-panic_panic_input"), "{out}");
}

#[test]
fn a_case_that_hangs_fails_the_run() {
    let started = std::time::Instant::now();
    let (code, out) = run("canary-hang");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("fuzz_canary-hang_hang"), "{out}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
