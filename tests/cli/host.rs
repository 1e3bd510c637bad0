//! Standalone tools through the real `berth` binary and real Bun/Node hosts: the import gate,
//! both backends, idempotency, and every fault ending in its own code without a replay.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Bun,
    Node,
}

/// A project with the fault fixtures installed as `.opencode/tools/faults.ts`, approved.
fn tools_sandbox(backend: Backend, files: &[&str]) -> Sandbox {
    let s = Sandbox::new();
    for f in files {
        s.copy_fixture(
            &format!("tools/{f}"),
            &format!("project/.opencode/tools/{f}"),
        );
    }
    let (code, v) = run(&s, backend, &["approve", "--all"]);
    assert_eq!(code, 0, "{v}");
    s
}

fn run(s: &Sandbox, backend: Backend, args: &[&str]) -> (i32, serde_json::Value) {
    let mut cmd = s.berth(args);
    cmd.arg("--json")
        .env("BERTH_TEST_MARKER", s.root.path().join("MARKER"));
    if let Backend::Node = backend {
        cmd.env("BERTH_BUN", s.root.path().join("no-bun"));
    }
    parse_json_output(&cmd.output().unwrap())
}

fn invoke(
    s: &Sandbox,
    backend: Backend,
    tool: &str,
    args: serde_json::Value,
    extra: &[&str],
) -> (i32, serde_json::Value) {
    let a = args.to_string();
    let mut argv = vec!["invoke", tool, "--args", a.as_str()];
    argv.extend_from_slice(extra);
    run(s, backend, &argv)
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn no_byte_of_a_tool_is_imported_before_approval_and_activation() {
    let s = Sandbox::new();
    let marker = s.root.path().join("MARKER");
    s.copy_fixture(
        "tools/writes-marker-on-import.ts",
        "project/.opencode/tools/marker.ts",
    );
    for step in [&["sources"][..], &["status"], &["tools"]] {
        let (code, _) = run(&s, Backend::Bun, step);
        assert_eq!(code, 0);
        assert!(
            !marker.exists(),
            "imported before approval (after `{}`)",
            step[0]
        );
    }
    let (code, _) = run(&s, Backend::Bun, &["approve", "--all"]);
    assert_eq!(code, 0);
    assert!(!marker.exists(), "approval alone must not import");
    let (code, v) = run(&s, Backend::Bun, &["tools"]);
    assert_eq!(code, 0);
    assert_eq!(v["tools"][0]["name"], "marker");
    assert!(marker.exists(), "activation imports the approved tool");
    // D-001: nothing was written into the user's OpenCode folder.
    let oc = s.project().join(".opencode");
    for f in [
        "package.json",
        "package-lock.json",
        "node_modules",
        ".gitignore",
        "bun.lock",
    ] {
        assert!(
            !oc.join(f).exists(),
            "Berth wrote {f} into {}",
            oc.display()
        );
    }
    assert!(s
        .data_dir()
        .join("deps/host/node_modules/@opencode-ai/plugin")
        .is_dir());
}

fn tools_list_and_call(backend: Backend) {
    let s = tools_sandbox(backend, &["faults.ts"]);
    let (code, v) = run(&s, backend, &["tools"]);
    assert_eq!(code, 0, "{v}");
    assert_schema("tools", &v);
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"faults_count") && names.contains(&"faults_spins"),
        "{names:?}"
    );
    let backend_name = format!("{backend:?}").to_lowercase();
    assert!(v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["provider"]["backend"] == backend_name.as_str()));

    let counter = s.root.path().join("count.txt");
    let (code, r) = invoke(
        &s,
        backend,
        "faults_count",
        serde_json::json!({ "file": path_arg(&counter) }),
        &[],
    );
    assert_eq!(code, 0, "{r}");
    assert_schema("receipt", &r);
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"], "counted");
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "ran\n");
}

#[test]
fn tools_are_listed_and_called_on_bun() {
    tools_list_and_call(Backend::Bun);
}

#[test]
fn tools_are_listed_and_called_on_node() {
    tools_list_and_call(Backend::Node);
}

#[test]
fn repeated_idempotency_key_does_not_execute_twice() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let counter = s.root.path().join("count.txt");
    let args = serde_json::json!({ "file": path_arg(&counter) });
    let (_, first) = invoke(
        &s,
        Backend::Bun,
        "faults_count",
        args.clone(),
        &["--idempotency-key", "k-1"],
    );
    let (_, second) = invoke(
        &s,
        Backend::Bun,
        "faults_count",
        args,
        &["--idempotency-key", "k-1"],
    );
    assert_eq!(first["receipt_id"], second["receipt_id"]);
    assert_eq!(second["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap(),
        "ran\n",
        "executed twice"
    );
}

#[test]
fn invalid_arguments_are_refused_by_the_tools_own_schema() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let (code, r) = invoke(
        &s,
        Backend::Bun,
        "faults_count",
        serde_json::json!({ "file": 42 }),
        &[],
    );
    assert_eq!(code, 1);
    assert_schema("receipt", &r);
    assert_eq!(r["error"]["code"], "invalid-arguments");
}

#[test]
fn status_shows_the_latest_calls_newest_first_without_arguments_or_output() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let counter = s.root.path().join("count-args-stay-private.txt");
    let (code, done) = invoke(
        &s,
        Backend::Bun,
        "faults_count",
        serde_json::json!({ "file": path_arg(&counter) }),
        &[],
    );
    assert_eq!(code, 0, "{done}");
    let (code, refused) = invoke(
        &s,
        Backend::Bun,
        "faults_count",
        serde_json::json!({ "file": 42 }),
        &[],
    );
    assert_eq!(code, 1, "{refused}");
    let (code, v) = run(&s, Backend::Bun, &["status"]);
    assert_eq!(code, 0);
    assert_schema("status", &v);
    let calls = v["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{v}");
    assert_eq!(calls[0]["receipt_id"], refused["receipt_id"]);
    assert_eq!(calls[0]["status"], "failed");
    assert_eq!(calls[0]["error"]["code"], "invalid-arguments");
    assert_eq!(calls[1]["receipt_id"], done["receipt_id"]);
    assert_eq!(calls[1]["status"], "completed");
    assert_eq!(calls[1]["tool"], "faults_count");
    let text = v["calls"].to_string();
    assert!(
        !text.contains("count-args-stay-private"),
        "arguments leaked: {text}"
    );
    assert!(!text.contains("counted"), "output leaked: {text}");
}

fn elapsed_ms(r: &serde_json::Value) -> i64 {
    r["updated_at_ms"].as_i64().unwrap() - r["created_at_ms"].as_i64().unwrap()
}

#[test]
fn cancel_kills_blocked_worker_within_grace() {
    for backend in [Backend::Bun, Backend::Node] {
        let s = tools_sandbox(backend, &["faults.ts"]);
        let (code, r) = invoke(
            &s,
            backend,
            "faults_spins",
            serde_json::json!({}),
            &["--timeout-ms", "200"],
        );
        assert_eq!(code, 1);
        assert_eq!(r["error"]["code"], "timeout", "{backend:?}: {r}");
        assert_eq!(r["status"], "cancelled");
        // deadline 200 ms + 500 ms grace + the kill; the receipt includes host start-up.
        assert!(
            elapsed_ms(&r) < 200 + 750 + 1500,
            "{backend:?}: took {} ms",
            elapsed_ms(&r)
        );
    }
}

#[test]
fn a_tool_that_honours_abort_stops_without_a_kill() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let (code, r) = invoke(
        &s,
        Backend::Bun,
        "faults_waits",
        serde_json::json!({}),
        &["--timeout-ms", "200"],
    );
    assert_eq!(code, 1);
    assert_eq!(r["error"]["code"], "timeout");
}

#[test]
fn each_fault_ends_in_its_own_code() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    for (tool, expected) in [
        ("faults_exits", "worker-lost"),
        ("faults_plain_object", "invalid-response"),
        ("faults_oversized_frame", "invalid-response"),
        ("faults_throws", "plugin-failed"),
    ] {
        let (code, r) = invoke(&s, Backend::Bun, tool, serde_json::json!({}), &[]);
        assert_eq!(code, 1, "{tool}: {r}");
        assert_schema("receipt", &r);
        assert_eq!(r["error"]["code"], expected, "{tool}: {r}");
    }
    // 2 MiB of output is over the frame budget: it reaches Berth by file, truncated as
    // OpenCode truncates it, the full text kept (D-015).
    let (code, r) = invoke(
        &s,
        Backend::Bun,
        "faults_floods_output",
        serde_json::json!({}),
        &[],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["metadata"]["truncated"], true, "{r}");
    let kept = r["metadata"]["outputPath"].as_str().unwrap();
    assert_eq!(std::fs::metadata(kept).unwrap().len(), 2 * 1024 * 1024);
    let (code, r) = invoke(
        &s,
        Backend::Bun,
        "faults_floods_stdout",
        serde_json::json!({}),
        &[],
    );
    assert_eq!(code, 0, "a stdout flood must not break the channel: {r}");
    assert_eq!(r["output"], "still here");
}

#[test]
fn a_detached_grandchild_is_reclaimed_with_its_host() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let pidfile = s.root.path().join("grandchild.pid");
    let (code, r) = invoke(
        &s,
        Backend::Bun,
        "faults_detaches",
        serde_json::json!({ "pidfile": path_arg(&pidfile) }),
        &["--timeout-ms", "400"],
    );
    assert_eq!(code, 1);
    assert_eq!(r["error"]["code"], "timeout");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(pid),
        "the detached grandchild {pid} outlived its host"
    );
}

/// A tool whose host child left its session (`detached: true`) and whose event loop is
/// blocked, called from the one-shot CLI with a deadline: the call ends `timeout`, and the
/// detached child is gone too — every time (a 1-in-3 race is missed by 30 runs with a chance
/// of (2/3)^30 ≈ 5·10⁻⁶).
#[test]
fn a_detached_child_of_a_blocked_host_never_outlives_the_timeout() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let pidfile = s.root.path().join("detached.pid");
    let mut survivors = Vec::new();
    for _ in 0..30 {
        let _ = std::fs::remove_file(&pidfile);
        let (code, r) = invoke(
            &s,
            Backend::Bun,
            "faults_detaches_and_blocks",
            serde_json::json!({ "pidfile": path_arg(&pidfile) }),
            &["--timeout-ms", "300"],
        );
        assert_eq!(
            (code, r["error"]["code"].as_str()),
            (1, Some("timeout")),
            "{r}"
        );
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The CLI has exited: whatever it left behind is left for good. A kill already sent
        // lands within moments; a child still there after half a second survived.
        let deadline = Instant::now() + Duration::from_millis(500);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if alive(pid) {
            survivors.push(pid);
            // SAFETY: cleaning up after a failed run.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
    assert!(
        survivors.is_empty(),
        "{} of 30 detached children outlived the CLI: {survivors:?}",
        survivors.len()
    );
}

#[test]
fn a_file_that_throws_at_import_fails_only_itself() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts", "init-throws.ts"]);
    let (code, v) = run(&s, Backend::Bun, &["tools"]);
    assert_eq!(code, 0);
    assert_schema("tools", &v);
    assert!(v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "faults_count"));
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0]["message"]
        .as_str()
        .unwrap()
        .contains("init-throws.ts"));
    assert_eq!(problems[0]["code"], "plugin-failed");
}

#[test]
fn killing_berth_mid_call_leaves_an_unknown_receipt_that_is_never_replayed() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let started = s.root.path().join("started.txt");
    let args = serde_json::json!({ "started": path_arg(&started) }).to_string();
    let mut child = s
        .berth(&["invoke", "faults_waits", "--args", &args, "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Written, not only created: a kill between the two would leave it empty.
    let written = || std::fs::read_to_string(&started).is_ok_and(|t| !t.is_empty());
    while !written() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(written(), "the call never started");
    // SAFETY: plain signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let (code, v) = run(&s, Backend::Bun, &["receipts"]);
    assert_eq!(code, 0);
    assert_schema("receipts", &v);
    let r = &v["receipts"][0];
    assert_eq!(r["status"], "unknown", "{r}");
    assert_eq!(r["error"]["code"], "process-lost");
    // The status says so too, where the page shows it.
    let (_, status) = run(&s, Backend::Bun, &["status"]);
    assert_eq!(status["calls"][0]["receipt_id"], r["receipt_id"]);
    assert_eq!(status["calls"][0]["status"], "unknown");
    assert_eq!(
        std::fs::read_to_string(&started).unwrap(),
        "started\n",
        "the call was replayed"
    );
}

#[test]
fn a_memory_blow_up_ends_that_call_as_worker_lost_and_the_next_call_works() {
    let s = tools_sandbox(Backend::Bun, &["faults.ts"]);
    let mut cmd = s.berth(&["invoke", "faults_eats_memory", "--json"]);
    cmd.env("BERTH_HOST_MEMORY_MB", "300");
    let started = Instant::now();
    let (code, r) = parse_json_output(&cmd.output().unwrap());
    assert_eq!(code, 1);
    assert_eq!(r["error"]["code"], "worker-lost", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("budget"),
        "{r}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let counter = s.root.path().join("count.txt");
    let (code, r) = invoke(
        &s,
        Backend::Bun,
        "faults_count",
        serde_json::json!({ "file": path_arg(&counter) }),
        &[],
    );
    assert_eq!(code, 0, "{r}");
}
