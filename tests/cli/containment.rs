//! A hostile but approved plugin sharing a host with an innocent one: it cannot act as its
//! neighbour, take over the neighbour's tools, read the neighbour's credentials in transit,
//! or outlive its own approval. Each test has both plugins in one host, and the innocent one
//! keeps answering throughout.

use std::path::Path;

use crate::serve::{start_with, status_of, wait_for};
use crate::support::*;

#[test]
fn a_plugin_cannot_send_toasts_or_log_lines_as_its_neighbour() {
    impersonation("a-impersonates.ts", "sent by the impersonator");
}

/// The same through `Object.prototype.toJSON`, which every `JSON.stringify` consults: the patch
/// is in place (it rewrites the plugin's own JSON), and the host's frames ignore it.
#[test]
fn a_plugin_cannot_rewrite_the_hosts_frames_through_a_prototype_to_json() {
    impersonation(
        "a-impersonates-tojson.ts",
        "sent by the impersonator (patch in place)",
    );
}

fn impersonation(fixture: &str, toast: &str) {
    let s = Sandbox::new();
    s.copy_fixture(
        &format!("hostile/{fixture}"),
        "project/.opencode/plugins/a-impersonates.ts",
    );
    s.write(
        "project/.opencode/plugins/b-innocent.ts",
        "export default { id: 'b', server: async () => ({}) }\n",
    );
    let (_, v) = s.run_json(&["sources"]);
    let (evil, victim) = (id_of(&v, "a-impersonates.ts"), id_of(&v, "b-innocent.ts"));
    let srv = start_with(
        &s,
        "127.0.0.1:0",
        &[("BERTH_TEST_VICTIM", Path::new(&victim))],
    )
    .unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    let v = wait_for(&srv, "the toast", |v| {
        v["notices"].as_array().is_some_and(|n| !n.is_empty())
    });
    assert_eq!(v["notices"][0]["message"], toast);
    assert_eq!(
        v["notices"][0]["plugin"], evil,
        "the toast was attributed to the neighbour"
    );
    // The log line is written by the server's log writer, on its own time (bounded wait).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let line = loop {
        let log = std::fs::read_to_string(s.data_dir().join("logs/berth.log")).unwrap_or_default();
        if let Some(l) = log
            .lines()
            .find(|l| l.contains("logged by the impersonator"))
        {
            break l.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no log line: {log}");
        std::thread::sleep(std::time::Duration::from_millis(25));
    };
    assert!(line.contains(&evil) && !line.contains(&victim), "{line}");
    // Both are active in one host (one trust domain), and the innocent one is intact (the
    // toast came while the plugins loaded; the pass ends after).
    wait_for(&srv, "the innocent plugin active", |st| {
        source(st, "b-innocent.ts")["state"] == "active"
    });
}

#[test]
fn a_plugin_cannot_take_over_its_neighbours_tools_through_the_hosts_registry() {
    hijack("a-hijacks.ts");
}

/// The same through `Object.entries`, which the host once listed a module's exports with.
#[test]
fn a_plugin_cannot_take_over_its_neighbours_tools_through_object_entries() {
    hijack("a-hijacks-entries.ts");
}

/// A plugin patching `Buffer.prototype.toString` cannot change the approved bytes the gate
/// hands the runtime for its neighbour's module (Bun and Node): the neighbour's helper runs as
/// approved and the rewritten code never does.
#[test]
fn a_plugin_cannot_rewrite_the_bytes_the_gate_hands_the_runtime() {
    for node in [false, true] {
        let s = Sandbox::new();
        let marker = s.root.path().join("MARKER");
        s.copy_fixture(
            "hostile/a-rewrites-bytes.ts",
            "project/.opencode/tools/a-rewrites-bytes.ts",
        );
        s.copy_fixture(
            "hostile/b-victim-with-helper.ts",
            "project/.opencode/tools/b-victim-with-helper.ts",
        );
        s.copy_fixture(
            "hostile/lib/victim-helper.ts",
            "project/.opencode/lib/victim-helper.ts",
        );
        let run = |args: &[&str]| {
            let mut cmd = s.berth(args);
            cmd.arg("--json").env("BERTH_TEST_MARKER", &marker);
            if node {
                cmd.env("BERTH_BUN", "/nonexistent/bun");
            }
            parse_json_output(&cmd.output().unwrap())
        };
        approve_and_load(run);
        let (code, r) = run(&["invoke", "b-victim-with-helper", "--args", "{}"]);
        assert_eq!(
            (code, r["output"].as_str()),
            (0, Some("victim helped")),
            "node={node}: {r}"
        );
        // The hostile file did load (its own positive control passed) in the same host.
        let (_, t) = run(&["tools"]);
        assert!(t.to_string().contains("a-rewrites-bytes"), "{t}");
        assert!(!marker.exists(), "node={node}: rewritten bytes ran");
    }
}

/// A plugin's getter in the result it leaves cannot hide, from the receipt, that it changed
/// its neighbour's result (by putting a `toJSON` on `Array.prototype` while the frame is
/// serialised).
#[test]
fn a_plugin_cannot_hide_that_it_changed_its_neighbours_result() {
    let s = Sandbox::new();
    s.copy_fixture(
        "hostile/a-hides-its-hand.ts",
        "project/.opencode/plugins/a-hides-its-hand.ts",
    );
    s.copy_fixture("hostile/b-victim.ts", "project/.opencode/tools/b-victim.ts");
    approve_and_load(|a| s.run_json(a));
    let (_, v) = s.run_json(&["sources"]);
    let evil = id_of(&v, "a-hides-its-hand.ts");
    let (code, r) = s.run_json(&["invoke", "b-victim", "--args", r#"{"secret":"hunter2"}"#]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        r["output"], "rewritten by a",
        "the hook did not run: the test proves nothing"
    );
    assert_eq!(r["transformed_by"], serde_json::json!([evil]), "{r}");
}

fn hijack(fixture: &str) {
    let s = Sandbox::new();
    let spy = s.root.path().join("spied-arguments");
    s.copy_fixture(
        &format!("hostile/{fixture}"),
        "project/.opencode/tools/a-hijacks.ts",
    );
    s.copy_fixture("hostile/b-victim.ts", "project/.opencode/tools/b-victim.ts");
    let run = |args: &[&str]| {
        let mut cmd = s.berth(args);
        cmd.arg("--json").env("BERTH_TEST_SPY", &spy);
        parse_json_output(&cmd.output().unwrap())
    };
    assert_eq!(run(&["approve", "--all"]).0, 0);
    let (code, r) = run(&["invoke", "b-victim", "--args", r#"{"secret":"hunter2"}"#]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        r["output"], "victim got 7 characters",
        "the neighbour's tool was hijacked: {r}"
    );
    assert_eq!(r["transformed_by"], serde_json::json!([]));
    let spied = std::fs::read_to_string(&spy).unwrap_or_default();
    assert!(
        spied.contains("patch-active"),
        "the patch was not in place: the test proves nothing"
    );
    assert!(
        !spied.contains("hunter2"),
        "the hostile tool saw the neighbour's arguments"
    );
}

#[test]
fn a_login_runs_where_only_its_own_plugin_can_see_the_credentials() {
    let s = Sandbox::new();
    let spy = s.root.path().join("eavesdropped");
    s.copy_fixture(
        "hostile/a-eavesdrops.ts",
        "project/.opencode/plugins/a-eavesdrops.ts",
    );
    s.copy_fixture(
        "hostile/b-logs-in.ts",
        "project/.opencode/plugins/b-logs-in.ts",
    );
    let run = |args: &[&str], stdin: &str| {
        let mut cmd = s.berth(args);
        cmd.arg("--json").env("BERTH_TEST_SPY", &spy);
        parse_json_output(&output_with_stdin(&mut cmd, stdin))
    };
    approve_and_load(|a| run(a, ""));
    let canary = "CANARY-code-5d0c";
    let (code, v) = run(
        &["auth", "login", "neighbour-provider", "--method", "0"],
        &format!("{canary}\n"),
    );
    assert_eq!(code, 0, "{v}");
    let seen = std::fs::read_to_string(&spy).unwrap_or_default();
    assert!(
        seen.contains("listening"),
        "the eavesdropper's wrappers were not in place: the test proves nothing"
    );
    assert!(
        !seen.contains(canary),
        "the hostile plugin saw the pasted code or the tokens"
    );
}

#[test]
fn a_plugin_held_for_review_then_denied_stops_and_its_toasts_go() {
    let s = Sandbox::new();
    // The ticks go into the sandbox's root, which Berth watches (the nearest existing folder
    // of config folders that do not exist): a file written there every 10 ms must not hold
    // back the rescan that brings the denial below.
    let ticks = s.root.path().join("ticks");
    // In the person's global folder, first a version that registers nothing (the same timer,
    // the same APIs), approved and active; then the fixture, which registers a tool: a later
    // load that contributes more than the active version is held (pending-activation).
    let fixture =
        std::fs::read_to_string(repo_root().join("fixtures/hostile/held-keeps-trying.ts")).unwrap();
    let first = fixture.replace(
        "return { tool: { unshown: tool({ description: \"never shown\", args: {}, async execute() { return \"x\" } }) } }",
        "return { tool: {} }",
    );
    assert_ne!(first, fixture);
    let file = s.write("home/.config/opencode/plugins/held.ts", &first);
    s.write(
        "project/.opencode/plugins/innocent.ts",
        "export default { id: 'innocent', server: async () => ({}) }\n",
    );
    let srv = start_with(&s, "127.0.0.1:0", &[("BERTH_TEST_TICKS", ticks.as_path())]).unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    wait_for(&srv, "the first version to run", |v| {
        source(v, "held.ts")["state"] == "active" && source(v, "innocent.ts")["state"] == "active"
    });
    std::fs::write(&file, &fixture).unwrap();
    let v = wait_for(&srv, "the plugin to be held", |v| {
        source(v, "held.ts")["state"] == "pending-activation"
            && source(v, "innocent.ts")["state"] == "active"
    });
    let held = id_of(&v, "held.ts");
    // Its new code ran once (the import that revealed the tool), and runs no more.
    let settle = |what: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let before = std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0);
            std::thread::sleep(std::time::Duration::from_millis(200));
            let after = std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0);
            if before == after {
                return after;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: its timer still runs"
            );
        }
    };
    let written = settle("held");
    let v = status_of(&srv);
    for host in v["hosts"].as_array().unwrap() {
        assert!(
            !host["instances"].to_string().contains(&held),
            "the held plugin is still in a host: {host}"
        );
    }
    assert!(
        !v["notices"].to_string().contains(&held),
        "its toasts are still served: {}",
        v["notices"]
    );
    // Denied: still nothing of it runs or shows.
    assert_eq!(s.run_json(&["deny", &held]).0, 0);
    wait_for(&srv, "the denial", |v| {
        source(v, "held.ts")["state"] == "disabled" && source(v, "innocent.ts")["state"] == "active"
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0),
        written
    );
    let v = status_of(&srv);
    assert!(!v["notices"].to_string().contains(&held));
    assert_eq!(source(&v, "innocent.ts")["state"], "active");
    // Held, it is stopped before its timer's first tick or soon after, so the file alone
    // cannot tell a stopped timer from one that never reaches it. Approved by name (with the
    // tool its load revealed), it runs: the same timer does tick into the same file and
    // its toasts are served; denied then, its timer stops.
    assert_eq!(s.run_json(&["approve", &held]).0, 0);
    let ticked = |v: &serde_json::Value| {
        source(v, "held.ts")["state"] == "active"
            && std::fs::metadata(&ticks).map_or(0, |m| m.len()) > written
            && v["notices"].to_string().contains(&held)
    };
    wait_for(&srv, "its timer to tick and its toasts to show", ticked);
    assert_eq!(s.run_json(&["deny", &held]).0, 0);
    // Its neighbour shared its host: it shows `updating` until it runs again in a fresh one.
    let v = wait_for(&srv, "the denial of the running plugin", |v| {
        source(v, "held.ts")["state"] == "disabled" && source(v, "innocent.ts")["state"] == "active"
    });
    let running = settle("denied while running");
    assert!(running > written, "{running} ticks, {written} before");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(std::fs::metadata(&ticks).map_or(0, |m| m.len()), running);
    assert_eq!(source(&v, "innocent.ts")["state"], "active");
    // Its toasts go, and none sent as its host stopped comes back.
    wait_for(&srv, "its toasts to go", |v| {
        !v["notices"].to_string().contains(&held)
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!status_of(&srv)["notices"].to_string().contains(&held));
}

#[test]
fn a_plugin_that_opens_prompts_without_end_cannot_lock_its_neighbour_out() {
    let s = Sandbox::new();
    s.copy_fixture(
        "hostile/asks-for-everything.ts",
        "project/.opencode/tools/asks.ts",
    );
    s.copy_fixture(
        "hostile/b-reads-config.ts",
        "project/.opencode/plugins/b-reads-config.ts",
    );
    let srv = start_with(&s, "127.0.0.1:0", &[]).unwrap();
    // One approval: both load and register their tools.
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    wait_for(&srv, "both tools", |v| {
        v["tools"].as_array().is_some_and(|t| t.len() == 2)
    });
    let (status, v) = srv.post("invoke", &serde_json::json!({ "tool": "asks", "args": {} }));
    assert_eq!((status, v["output"].as_str()), (200, Some("asked")), "{v}");
    // Its prompts wait for a person; exactly its own share of calls into Berth is open (it
    // asks for more than that), once the count stops moving.
    let cap = berth_runtime::host::UPCALL_LIMIT;
    let open = settled_count(&srv, "its prompts", |v| {
        v["prompts"].as_array().map_or(0, Vec::len)
    });
    assert_eq!(open, cap, "{open} prompts of one plugin are open");
    let (status, v) = srv.post(
        "invoke",
        &serde_json::json!({ "tool": "reads_config", "args": {} }),
    );
    assert_eq!(
        (status, v["output"].as_str()),
        (200, Some("read the config")),
        "the neighbour was locked out: {v}"
    );
}

/// The count `of` the served status once it is above zero and has stayed the same for ten
/// reads in a row (half a second), bounded.
fn settled_count(
    srv: &crate::serve::Serving,
    what: &str,
    of: impl Fn(&serde_json::Value) -> usize,
) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (mut last, mut same) = (0, 0);
    loop {
        let n = of(&status_of(srv));
        same = if n == last { same + 1 } else { 0 };
        last = n;
        if n > 0 && same >= 10 {
            return n;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the count never settled (last {n})"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// RSS of a process, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096.0 / 1048576.0
}

#[test]
fn everything_a_plugin_sends_is_bounded() {
    let s = Sandbox::new();
    let done = s.root.path().join("flood-done");
    s.copy_fixture(
        "hostile/floods-berth.ts",
        "project/.opencode/plugins/floods.ts",
    );
    s.write(
        "project/.opencode/tools/innocent.ts",
        "import { tool } from '@opencode-ai/plugin'\nexport default tool({ description: 'answers', args: {}, async execute() { return 'still here' } })\n",
    );
    let srv = start_with(&s, "127.0.0.1:0", &[("BERTH_TEST_DONE", done.as_path())]).unwrap();
    let pid = srv.child.id();
    let before = rss_mib(pid);
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !done.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the flood never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let after = rss_mib(pid);
    let status = status_of(&srv);
    let size = status.to_string().len();
    eprintln!("berth serve RSS before the flood {before:.1} MiB, after {after:.1} MiB; /api/status {size} bytes");
    assert!(size < 256 * 1024, "/api/status is {size} bytes");
    assert!(
        after - before < 200.0,
        "Berth grew from {before:.1} to {after:.1} MiB"
    );
    // The flood's toasts are served (so the bound below is checked on something), their
    // 7 MiB titles cut.
    let notices = status["notices"].as_array().unwrap();
    assert!(
        notices
            .iter()
            .any(|n| n["title"].as_str().is_some_and(|t| t.starts_with("TTTT"))),
        "no toast of the flood is served: {notices:?}"
    );
    assert!(notices
        .iter()
        .all(|n| n["title"].as_str().is_none_or(|t| t.chars().count() <= 201)));
    // Berth's own first lines are still in its log, and the log is bounded.
    let logs = s.data_dir().join("logs");
    let total: u64 = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let all: String = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(
        all.contains("snapshot changed") && all.contains("dropped"),
        "Berth's own lines were rotated away"
    );
    assert!(total < 20 * 1024 * 1024, "{total} bytes of logs");
    let (status, v) = srv.post(
        "invoke",
        &serde_json::json!({ "tool": "innocent", "args": {} }),
    );
    assert_eq!(
        (status, v["output"].as_str()),
        (200, Some("still here")),
        "{v}"
    );
}

#[test]
fn arguments_a_hook_changed_are_checked_again_and_the_receipt_names_what_ran() {
    let s = Sandbox::new();
    let ran = s.root.path().join("ran-with");
    s.copy_fixture(
        "hostile/a-rewrites-args.ts",
        "project/.opencode/plugins/a-rewrites-args.ts",
    );
    s.copy_fixture(
        "hostile/b-counts-to-ten.ts",
        "project/.opencode/tools/b-counts-to-ten.ts",
    );
    let run = |mode: &str, args: &[&str]| {
        let mut cmd = s.berth(args);
        cmd.arg("--json")
            .env("BERTH_TEST_REWRITE", mode)
            .env("BERTH_TEST_RAN", &ran);
        parse_json_output(&cmd.output().unwrap())
    };
    approve_and_load(|a| run("", a));
    let hook = id_of(&s.run_json(&["sources"]).1, "a-rewrites-args.ts");
    let (code, r) = run(
        "bad",
        &["invoke", "b-counts-to-ten", "--args", r#"{"n":3}"#],
    );
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["error"]["code"], "invalid-arguments", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains(&hook),
        "the refusal names the hook: {r}"
    );
    assert!(
        !ran.exists(),
        "the tool ran on arguments its schema refuses"
    );
    // A valid change runs, and the receipt says so.
    let (code, r) = run(
        "good",
        &["invoke", "b-counts-to-ten", "--args", r#"{"n":3}"#],
    );
    assert_eq!((code, r["output"].as_str()), (0, Some("counted 7")), "{r}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap().trim(), r#"{"n":7}"#);
    assert_eq!(r["transformed_by"], serde_json::json!([hook]));
    let asked = serde_json::json!({ "n": 3 }).to_string();
    let got = serde_json::json!({ "n": 7 }).to_string();
    let digest = |t: &str| berth_discovery::sha256_hex(t.as_bytes());
    assert_eq!(
        r["args_digest"],
        digest(&got),
        "the receipt's digest is of what ran"
    );
    assert_ne!(r["args_digest"], digest(&asked));
}

#[test]
fn berth_isolate_gives_a_source_a_host_of_its_own_and_takes_it_back() {
    let s = Sandbox::new();
    s.write(
        "project/.opencode/plugins/p.ts",
        "export default { id: 'p', server: async () => ({}) }\n",
    );
    let id = id_of(&s.run_json(&["sources"]).1, "p.ts");
    let (code, v) = s.run_json(&["isolate", &id]);
    assert_eq!(code, 0, "{v}");
    assert_schema("isolate", &v);
    assert_eq!(v, serde_json::json!({ "own_host": true, "sources": [id] }));
    let (_, v) = s.run_json(&["sources"]);
    assert_schema("sources", &v);
    assert_eq!(source(&v, "p.ts")["own_host"], true);
    let (_, v) = s.run_json(&["isolate", "--off", &id]);
    assert_eq!(v["own_host"], false);
    assert_eq!(
        source(&s.run_json(&["sources"]).1, "p.ts")["own_host"],
        false
    );
    let (code, v) = s.run_json(&["isolate", "plugin-nope-00000000"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (1, Some("invalid-arguments"))
    );
}
