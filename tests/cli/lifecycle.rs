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

fn tool_names(v: &serde_json::Value) -> Vec<String> {
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// A global plugin listed in the person's opencode.json (a path outside any plugins folder).
fn listed_plugin(s: &Sandbox) -> std::path::PathBuf {
    let file = s.write(
        "home/plugins-elsewhere/listed.js",
        "export default { id: 'listed', server: async () => ({ tool: { listed_ping: { description: 'pong', args: {}, async execute() { return 'pong' } } } }) }\n",
    );
    s.write(
        "home/.config/opencode/opencode.json",
        &serde_json::json!({ "plugin": [format!("file://{}", file.display())] }).to_string(),
    );
    file
}

#[test]
fn a_source_that_cannot_be_read_for_a_moment_serves_on_and_comes_back_without_a_question() {
    let s = Sandbox::new();
    let file = listed_plugin(&s);
    let srv = start(&s, "127.0.0.1:0").unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    let v = wait_for(&srv, "the plugin to run", |v| {
        tool_names(v) == ["listed_ping"]
    });
    let digest = v["sources"][0]["digest"].as_str().unwrap().to_string();
    // Its file is gone for a moment (a checkout, a mount); it is still listed in the config.
    let away = file.with_extension("away");
    std::fs::rename(&file, &away).unwrap();
    let v = wait_for(&srv, "the read error to show", |v| {
        v["sources"][0]["diagnostics"]
            .to_string()
            .contains("keeps serving")
    });
    let src = &v["sources"][0];
    assert_eq!(src["state"], "active", "{src}");
    assert_eq!(
        tool_names(&v),
        ["listed_ping"],
        "withdrawn for a read error"
    );
    let (code, r) = invoke(&srv, "listed_ping");
    assert_eq!((code, r["output"].as_str()), (200, Some("pong")), "{r}");
    // Back with the same bytes: no new question, the diagnostic goes.
    std::fs::rename(&away, &file).unwrap();
    let v = wait_for(&srv, "the file to be read again", |v| {
        v["sources"][0]["digest"] == digest.as_str()
            && !v["sources"][0]["diagnostics"]
                .to_string()
                .contains("keeps serving")
    });
    assert_eq!(v["sources"][0]["state"], "active");
    assert_eq!(v["sources"][0]["approval"]["decision"], "allow");
}

#[test]
fn a_deleted_source_is_withdrawn_at_once_and_its_reappearance_asks_nothing() {
    let s = Sandbox::new();
    let file = listed_plugin(&s);
    let config = s.global_config().join("opencode.json");
    let listed = std::fs::read_to_string(&config).unwrap();
    let srv = start(&s, "127.0.0.1:0").unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    let v = wait_for(&srv, "the plugin to run", |v| {
        tool_names(v) == ["listed_ping"]
    });
    let id = v["sources"][0]["id"].as_str().unwrap().to_string();
    // Deleted on purpose: taken out of the config.
    std::fs::write(&config, "{}").unwrap();
    // Its tools go first, its host's instance right after (the snapshot between shows both).
    let v = wait_for(&srv, "the withdrawal", |v| {
        v["tools"].as_array().is_some_and(|t| t.is_empty()) && !v["hosts"].to_string().contains(&id)
    });
    assert!(v["sources"].as_array().unwrap().is_empty(), "{v}");
    assert!(
        v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| !h["instances"].to_string().contains(&id)),
        "its code still runs: {}",
        v["hosts"]
    );
    let (code, r) = invoke(&srv, "listed_ping");
    assert_ne!(code, 200, "a deleted source's tool answered: {r}");
    // The same bytes listed again: the decision stands, nothing is asked.
    assert!(file.is_file());
    std::fs::write(&config, &listed).unwrap();
    let v = wait_for(&srv, "the plugin to run again", |v| {
        tool_names(v) == ["listed_ping"]
    });
    assert_eq!(v["sources"][0]["id"], id.as_str());
    assert_eq!(v["sources"][0]["state"], "active");
    assert_eq!(v["counts"]["pending_approval"], 0);
}

#[test]
fn a_global_source_is_decided_once_for_every_project_and_each_project_runs_its_own_instance() {
    let s = Sandbox::new();
    s.write(
        "home/.config/opencode/plugins/where.js",
        "export default { id: 'where', server: async ({ directory }) => ({ tool: { where_am_i: { description: 'the project', args: {}, async execute() { return directory } } } }) }\n",
    );
    let other = s.root.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    git_init(&other);
    let in_other = |args: &[&str]| {
        let mut c = std::process::Command::new(berth_bin());
        c.args(args)
            .arg("--data-dir")
            .arg(s.data_dir())
            .arg("--project")
            .arg(&other);
        s.apply_env(&mut c);
        c.current_dir(&other).arg("--json");
        parse_json_output(&c.output().unwrap())
    };
    let (_, v) = s.run_json(&["approve", "--all"]);
    let id = v["approved"][0].as_str().unwrap().to_string();
    // Asked once: the other project finds it decided.
    let (_, v) = in_other(&["sources"]);
    assert_eq!(v["sources"][0]["id"], id.as_str());
    assert_eq!(v["sources"][0]["state"], "approved", "{v}");
    // Each project gets its own instance, made for its own folder (as OpenCode does).
    let (code, here) = s.run_json(&["invoke", "where_am_i"]);
    assert_eq!(code, 0, "{here}");
    let (code, there) = in_other(&["invoke", "where_am_i"]);
    assert_eq!(code, 0, "{there}");
    assert_eq!(here["output"], s.project().display().to_string());
    assert_eq!(there["output"], other.display().to_string());
    // One project may decide otherwise for itself; the other keeps the decision.
    assert_eq!(in_other(&["deny", "--this-project", &id]).0, 0);
    assert_eq!(in_other(&["sources"]).1["sources"][0]["state"], "disabled");
    assert_eq!(
        s.run_json(&["sources"]).1["sources"][0]["state"],
        "approved"
    );
}

#[test]
fn a_local_plugin_whose_edit_fails_to_load_rolls_back_to_its_kept_bytes() {
    let s = Sandbox::new();
    let plugins = s.global_config().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let file = plugins.join("edited.js");
    let version = |v: &str| {
        format!("export default {{ id: 'edited', server: async () => ({{ tool: {{ edited_version: {{ description: 'v', args: {{}}, async execute() {{ return '{v}' }} }} }} }}) }}\n")
    };
    std::fs::write(&file, version("v1")).unwrap();
    let srv = start(&s, "127.0.0.1:0").unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    let v = wait_for(&srv, "v1 to run", |v| tool_names(v) == ["edited_version"]);
    let id = v["sources"][0]["id"].as_str().unwrap().to_string();
    let v1 = v["sources"][0]["digest"].as_str().unwrap().to_string();
    assert_eq!(invoke(&srv, "edited_version").1["output"], "v1");
    // The edit breaks it: the old host was stopped first, so nothing of it runs now.
    std::fs::write(&file, "throw new Error('broken on purpose')\n").unwrap();
    let v = wait_for(&srv, "the failed load", |v| {
        v["sources"][0]["state"] == "load-failed"
    });
    assert!(
        v["sources"][0]["lifecycle"]["rollback_to"].is_i64(),
        "a rollback is offered: {}",
        v["sources"][0]["lifecycle"]
    );
    let (code, r) = srv.post("rollback", &serde_json::json!({ "source": id }));
    assert_eq!(
        code,
        200,
        "{r} {}",
        status_of(&srv)["sources"][0]["diagnostics"]
    );
    assert_eq!(r["update"]["outcome"], "rolled-back", "{r}");
    let v = wait_for(&srv, "the kept version to run", |v| {
        v["sources"][0]["state"] == "active" && v["sources"][0]["lifecycle"]["pinned"] == true
    });
    let src = &v["sources"][0];
    assert_eq!(src["lifecycle"]["current"]["digest"], v1.as_str(), "{src}");
    assert!(
        src["diagnostics"].to_string().contains("rolled back"),
        "{src}"
    );
    assert_eq!(
        invoke(&srv, "edited_version").1["output"],
        "v1",
        "the kept bytes run"
    );
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("broken on purpose"),
        "the person's file was left as it is"
    );
    // The person edits it again: the pin goes and the file on disk runs.
    std::fs::write(&file, version("v3")).unwrap();
    wait_for(&srv, "v3 to run", |v| {
        v["sources"][0]["lifecycle"]["pinned"] == false && v["sources"][0]["state"] == "active"
    });
    assert_eq!(invoke(&srv, "edited_version").1["output"], "v3");
}

/// An attacker with the person's rights replaces Berth's kept copy of a rolled-back plugin's
/// bytes: at the next load the host's gate hashes what it read, finds other bytes than the
/// approved ones and runs none of them.
#[test]
fn a_swapped_kept_copy_is_refused_by_the_gate_and_never_runs() {
    let s = Sandbox::new();
    let plugins = s.global_config().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let file = plugins.join("kept.js");
    std::fs::write(&file, "export default { id: 'kept', server: async () => ({ tool: { kept_ping: { description: 'v', args: {}, async execute() { return 'v1' } } } }) }\n").unwrap();
    let srv = start(&s, "127.0.0.1:0").unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    let v = wait_for(&srv, "v1 to run", |v| tool_names(v) == ["kept_ping"]);
    let id = v["sources"][0]["id"].as_str().unwrap().to_string();
    std::fs::write(&file, "throw new Error('broken on purpose')\n").unwrap();
    wait_for(&srv, "the failed load", |v| {
        v["sources"][0]["state"] == "load-failed"
    });
    assert_eq!(
        srv.post("rollback", &serde_json::json!({ "source": id })).0,
        200
    );
    wait_for(&srv, "the kept version to run", |v| {
        v["sources"][0]["lifecycle"]["pinned"] == true && v["sources"][0]["state"] == "active"
    });
    drop(srv);
    // The copy the pin reads from, by the digest of the file's approved bytes.
    let (_, versions) = s.run_json(&["versions", &id]);
    let kept = &versions["versions"][0]["record"]["retained"]["files"];
    let digest = kept[file.canonicalize().unwrap().display().to_string()]
        .as_str()
        .unwrap_or_else(|| panic!("{kept}"))
        .to_string();
    let copy = s
        .data_dir()
        .join("versions/blobs")
        .join(digest.trim_start_matches("sha256:"));
    let marker = s.root.path().join("SWAPPED-RAN");
    std::fs::write(
        &copy,
        format!("import {{ writeFileSync }} from 'node:fs'\nwriteFileSync({:?}, 'ran')\nexport default {{ id: 'kept', server: async () => ({{}}) }}\n", marker.display().to_string()),
    )
    .unwrap();
    let srv = start(&s, "127.0.0.1:0").unwrap();
    let v = wait_for(&srv, "the refused load", |v| {
        v["sources"][0]["state"] == "load-failed"
    });
    assert!(
        v["sources"][0]["diagnostics"]
            .to_string()
            .contains("changed since it was approved"),
        "{}",
        v["sources"][0]["diagnostics"]
    );
    assert!(tool_names(&v).is_empty(), "{v}");
    assert!(!marker.exists(), "the swapped bytes ran");
}
