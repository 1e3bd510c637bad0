//! Reloads and source events (#16, seed 003 §4, §9, §12): a changed source's old host is
//! stopped — its calls finished or cancelled, its process tree gone — before the new version is
//! imported, with new calls waiting meanwhile; what each source event leaves on the page.

use std::time::{Duration, Instant};

use crate::serve::{start, status_of, wait_for, Serving};
use crate::support::*;

/// A plugin that writes what its code does to `log`: its import, a heartbeat every 2 ms from a
/// timer (code that keeps running as long as its module lives), and its slow tool's start and
/// end — each line with its version.
fn probe_plugin(version: &str, log: &std::path::Path) -> String {
    format!(
        r#"import {{ appendFileSync }} from 'node:fs'
const log = {log:?}
const note = (what) => appendFileSync(log, what + ' {version} ' + process.pid + '\n')
note('import')
setInterval(() => note('alive'), 2)
export default {{
  id: 'probe',
  server: async () => ({{
    tool: {{
      slow: {{
        description: 'waits, then answers with its version',
        args: {{}},
        async execute(_args, ctx) {{
          note('call-start')
          await new Promise((ok) => setTimeout(ok, 800))
          note('call-end')
          return 'probe {version}'
        }},
      }},
    }},
  }}),
}}
"#
    )
}

/// The first line of version `older` that came after `newer` was imported: proof that old and
/// new code ran side by side. `None` when they never overlapped.
fn overlap(log: &str, older: &str, newer: &str) -> Option<String> {
    let mut newer_seen = false;
    for line in log.lines() {
        let mut words = line.split_whitespace();
        let (what, version) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        if version == newer && what == "import" {
            newer_seen = true;
        } else if newer_seen && version == older {
            return Some(line.to_string());
        }
    }
    None
}

#[test]
fn the_overlap_probe_finds_old_code_running_after_the_new_import() {
    // The negative control: the probe below fails on a log where the versions overlap.
    let ran_together = "import v1 10\nalive v1 10\nimport v2 11\nalive v1 10\nalive v2 11\n";
    assert_eq!(
        overlap(ran_together, "v1", "v2").as_deref(),
        Some("alive v1 10")
    );
    let one_after_the_other = "import v1 10\nalive v1 10\ncall-end v1 10\nimport v2 11\n";
    assert_eq!(overlap(one_after_the_other, "v1", "v2"), None);
}

fn invoke(srv: &Serving, tool: &str) -> (u16, serde_json::Value) {
    srv.post("invoke", &serde_json::json!({ "tool": tool, "args": {} }))
}

#[test]
fn a_plugin_edited_while_its_slow_call_runs_never_meets_its_old_code() {
    let s = Sandbox::new();
    let log = s.root.path().join("probe.log");
    // Global sources: a change that does not grow runs without a new question (D-024).
    let plugins = s.global_config().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let probe = plugins.join("probe.js");
    std::fs::write(&probe, probe_plugin("v1", &log)).unwrap();
    std::fs::write(
        plugins.join("neighbour.js"),
        "export default { id: 'neighbour', server: async () => ({ tool: { ping: { description: 'pong', args: {}, async execute() { return 'pong' } } } }) }\n",
    )
    .unwrap();
    let srv = start(&s, "127.0.0.1:0").unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    wait_for(&srv, "both plugins active", |v| {
        v["tools"].as_array().is_some_and(|t| t.len() == 2)
            && v["hosts"].as_array().is_some_and(|h| h.len() == 1)
    });
    let old_pid = status_of(&srv)["hosts"][0]["pid"].as_u64().unwrap();

    std::thread::scope(|scope| {
        let slow = scope.spawn(|| invoke(&srv, "slow"));
        // The slow call is running in v1 when the file changes.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("call-start v1")
        {
            assert!(Instant::now() < deadline, "the slow call never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::fs::write(&probe, probe_plugin("v2", &log)).unwrap();
        // The page says what is happening while the old host finishes.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen_updating = false;
        while !seen_updating && Instant::now() < deadline {
            let v = status_of(&srv);
            seen_updating = v["sources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|src| src["state"] == "updating")
                && v["counts"]["updating"].as_u64() > Some(0);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            seen_updating,
            "no source was shown `updating` during the reload"
        );
        // A call made now, to the neighbour in the same host, waits and succeeds.
        let (code, pong) = invoke(&srv, "ping");
        assert_eq!(code, 200, "{pong}");
        assert_eq!(pong["output"], "pong", "{pong}");
        let (code, first) = slow.join().unwrap();
        assert_eq!(code, 200, "{first}");
        assert_eq!(
            first["output"], "probe v1",
            "the old version finished its call: {first}"
        );
    });
    let (code, second) = invoke(&srv, "slow");
    assert_eq!(
        (code, second["output"].as_str()),
        (200, Some("probe v2")),
        "{second}"
    );
    let v = status_of(&srv);
    let new_pid = v["hosts"][0]["pid"].as_u64().unwrap();
    assert_ne!(new_pid, old_pid, "the new version runs in a fresh host");
    assert!(
        !std::path::Path::new(&format!("/proc/{old_pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{old_pid}/stat"))
                .is_ok_and(|s| s.contains(") Z")),
        "the old host is gone"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("call-end v1") && text.contains("import v2"),
        "{text}"
    );
    assert_eq!(
        overlap(&text, "v1", "v2"),
        None,
        "old and new module code ran at the same time"
    );
}
