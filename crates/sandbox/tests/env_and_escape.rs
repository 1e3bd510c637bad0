//! The child's environment and process tree: secrets never reach it, the allow-listed and
//! `keep` variables do, it holds no capabilities, and a detached double-forked grandchild
//! can neither write outside nor (under bubblewrap) outlive a kill of the process group.

mod common;

use std::ffi::OsString;
use std::time::{Duration, Instant};

use berth_sandbox::{env_allowlist, probe, Tier};
use common::{
    boundary, marker, path_arg, plan_args, processes_with_marker, read_until_done, run_plan,
    runtimes, spawn, tiers, MARKER_NAME,
};
use serde_json::json;

#[tokio::test]
async fn secrets_stay_out_and_allowed_variables_come_in() {
    assert!(
        std::env::var_os("CARGO_MANIFEST_DIR").is_some(),
        "cargo sets it for tests"
    );
    for tier in tiers() {
        for rt in runtimes() {
            let mark = marker("env");
            let mut b = boundary(tier, &mark);
            let parent = std::env::vars_os().chain([("MY_API_KEY".into(), "canary123".into())]);
            let keep = [(OsString::from(MARKER_NAME), OsString::from(&mark))];
            b.env = env_allowlist(parent, &["MY_API_KEY"], &keep);
            let names = [
                "MY_API_KEY",
                "CARGO_MANIFEST_DIR",
                "PATH",
                "HOME",
                MARKER_NAME,
                "TMPDIR",
            ];
            let plan = json!({"steps": [
                {"name": "env", "op": "env", "names": names},
                {"name": "caps", "op": "caps"},
            ]});
            let out = run_plan(&rt, &b, &plan).await;
            let what = format!("{} under {tier:?}", rt.name);
            let env = &out.step("env")["detail"];
            assert!(env["MY_API_KEY"].is_null(), "{what}: {env}");
            assert!(!out.stdout.contains("canary123"), "{what}");
            assert!(
                env["CARGO_MANIFEST_DIR"].is_null(),
                "{what}: the parent's env leaked"
            );
            assert_eq!(
                env["PATH"].as_str(),
                std::env::var("PATH").ok().as_deref(),
                "{what}"
            );
            assert_eq!(
                env["HOME"].as_str(),
                std::env::var("HOME").ok().as_deref(),
                "{what}"
            );
            assert_eq!(env[MARKER_NAME], mark.as_str(), "{what}");
            let tmp = env["TMPDIR"].as_str().unwrap_or_default();
            // Both tiers: a temp folder of the child's own.
            let _ = tier;
            assert!(tmp.contains("berth-sandbox-"), "{what}: {tmp}");
            let caps = &out.step("caps")["detail"];
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            let mut sets = vec!["CapInh", "CapPrm", "CapEff", "CapAmb"];
            if root || tier == Tier::Bwrap {
                sets.push("CapBnd"); // emptied when it held anything (a non-root one may not)
            }
            for set in sets {
                assert_eq!(caps[set], "0000000000000000", "{what}: {set} in {caps}");
            }
        }
    }
}

#[tokio::test]
async fn a_detached_grandchild_cannot_write_outside_or_outlive_bwrap() {
    for tier in tiers() {
        for rt in runtimes() {
            let mark = marker("escape");
            let project = tempfile::tempdir().expect("tempdir");
            let outside = tempfile::tempdir().expect("tempdir");
            let escaped = outside.path().join("escaped.txt");
            let report = project.path().join("escape-report.txt");
            let mut b = boundary(tier, &mark);
            b.write = vec![project.path().to_path_buf()];
            let plan = json!({"hold": true, "steps": [
                {"name": "escape", "op": "escape", "outside": path_arg(&escaped),
                 "report": path_arg(&report)},
            ]});
            let what = format!("{} under {tier:?}", rt.name);
            let (mut child, _w) = spawn(&rt.path, &plan_args(&plan), &b);
            let lines = read_until_done(&mut child).await.join("\n");
            let tried = std::fs::read_to_string(&report).unwrap_or_default();
            eprintln!("{what}: the grandchild's write outside: {tried}");
            assert!(
                !tried.is_empty() && tried != "written",
                "{what}: {lines} / {tried}"
            );
            assert!(!escaped.exists(), "{what}: the grandchild wrote outside");
            let pgid = child.id().expect("pid") as i32;
            // SAFETY: signals the child's own process group, created by process_group(0).
            assert_eq!(unsafe { libc::kill(-pgid, libc::SIGKILL) }, 0);
            child.wait().await.expect("reap");
            let left = wait_for_no_marker(&mark, Duration::from_secs(2)).await;
            match tier {
                Tier::Bwrap => assert!(left.is_empty(), "{what}: {left:?} survived"),
                Tier::Landlock => {
                    // The documented limit, pinned: no PID namespace, so it survives.
                    assert!(!left.is_empty(), "{what}: expected the detached grandchild");
                    let gaps = probe().cannot_stop(Tier::Landlock).join(" ");
                    assert!(gaps.contains("process group"), "{gaps}");
                    kill_all(&left);
                }
            }
            assert!(!escaped.exists(), "{what}: the grandchild wrote outside");
        }
    }
}

async fn wait_for_no_marker(mark: &str, within: Duration) -> Vec<i32> {
    let start = Instant::now();
    loop {
        let left = processes_with_marker(mark);
        if left.is_empty() || start.elapsed() > within {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn kill_all(pids: &[i32]) {
    for &pid in pids {
        // SAFETY: these pids carry this test's unique marker.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}
