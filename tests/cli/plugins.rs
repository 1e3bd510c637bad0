//! Server plugins through the real binary and a real Bun host: OpenCode's module shapes, the
//! second approval checkpoint, hook order and read-back, plugin tools.

use crate::support::*;

fn run(s: &Sandbox, args: &[&str]) -> (i32, serde_json::Value) {
    let mut cmd = s.berth(args);
    cmd.arg("--json")
        .env("BERTH_TEST_MARKER", s.root.path().join("MARKER"));
    parse_json_output(&cmd.output().unwrap())
}

fn states(s: &Sandbox) -> Vec<(String, String)> {
    let (_, v) = run(s, &["sources"]);
    v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["entry"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                x["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn one_approval_loads_a_plugin_and_registers_what_it_contributes() {
    let s = plugin_sandbox(&["v1-hooks-a.ts"]);
    assert_eq!(
        states(&s),
        vec![("v1-hooks-a.ts".into(), "pending-approval".into())]
    );
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    // Decided, not loaded by this process yet: it says so.
    assert_eq!(
        states(&s),
        vec![("v1-hooks-a.ts".into(), "approved".into())]
    );
    let (code, v) = run(&s, &["tools"]);
    assert_eq!(code, 0, "{v}");
    assert_schema("tools", &v);
    assert_eq!(v["tools"][0]["name"], "hooks_a_echo", "{v}");
    assert_eq!(v["problems"], serde_json::json!([]), "no second question");
    let (code, r) = run(
        &s,
        &["invoke", "hooks_a_echo", "--args", r#"{"text":"yo"}"#],
    );
    assert_eq!((code, r["output"].as_str()), (0, Some("yo")), "{r}");
    let (_, h) = run_hook(|a| run(&s, a), "chat.params", "{}", r#"{"options":{}}"#);
    assert_eq!(h["output"]["options"]["trail"], serde_json::json!(["a"]));
    // What it really registered is recorded beside the static preview.
    let (_, status) = run(&s, &["status"]);
    assert_schema("status", &status);
}

#[test]
fn a_review_cap_holds_only_that_contribution_and_the_person_can_let_it_through() {
    let s = plugin_sandbox(&["v1-hooks-a.ts"]);
    let (code, v) = run(&s, &["policy", "set", "cap.model-request", "review"]);
    assert_eq!(code, 0, "{v}");
    assert_schema("policy", &v);
    assert_eq!(v["set"]["layer"], "user");
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    let (_, v) = run(&s, &["tools"]);
    // The tool registers; the model-request hook is held, and only it.
    assert_eq!(v["tools"][0]["name"], "hooks_a_echo", "{v}");
    let (_, h) = run_hook(|a| run(&s, a), "chat.params", "{}", r#"{"options":{}}"#);
    assert_eq!(
        h["output"]["options"],
        serde_json::json!({}),
        "a held hook ran: {h}"
    );
    let (_, h) = run_hook(
        |a| run(&s, a),
        "tool.execute.before",
        "{}",
        r#"{"args":{}}"#,
    );
    assert_eq!(
        h["output"]["args"]["seen"],
        serde_json::json!(["a"]),
        "an uncapped hook did not run: {h}"
    );
    let (_, src) = run(&s, &["sources"]);
    assert_schema("sources", &src);
    let a = source(&src, "v1-hooks-a.ts");
    assert_eq!(a["state"], "approved", "{a}");
    assert_eq!(
        a["limited"],
        serde_json::json!([{ "item": "hook:chat.params", "category": "model-request", "cap": "review", "layer": "user" }]),
        "{a}"
    );
    // Negative control of the hold: the person lets it through, and it runs.
    let id = a["id"].as_str().unwrap().to_string();
    let (code, g) = run(&s, &["policy", "allow", &id, "hook:chat.params"]);
    assert_eq!(code, 0, "{g}");
    assert_schema("policy", &g);
    let (_, h) = run_hook(|a| run(&s, a), "chat.params", "{}", r#"{"options":{}}"#);
    assert_eq!(
        h["output"]["options"]["trail"],
        serde_json::json!(["a"]),
        "{h}"
    );
    let (_, src) = run(&s, &["sources"]);
    assert_eq!(
        source(&src, "v1-hooks-a.ts")["limited"],
        serde_json::json!([])
    );
}

#[test]
fn a_later_load_that_contributes_more_waits_until_confirmed() {
    // A plugin in the person's own global folder: a change that does not grow what its code
    // can do reloads without asking (D-024) — unless it then registers more than before.
    let s = Sandbox::new();
    let file = s.copy_fixture(
        "plugins/v1-hooks-a.ts",
        "home/.config/opencode/plugins/a.ts",
    );
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    let (_, v) = run(&s, &["tools"]);
    assert_eq!(v["tools"].as_array().unwrap().len(), 1, "{v}");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "\"tool.execute.before\":",
            "\"command.execute.before\": async () => {},\n    \"tool.execute.before\":",
        ),
    )
    .unwrap();
    let (_, v) = run(&s, &["tools"]);
    assert_eq!(
        v["tools"],
        serde_json::json!([]),
        "the new version registered before it was confirmed: {v}"
    );
    assert!(
        v["problems"][0]["message"]
            .as_str()
            .unwrap()
            .contains("registers hooks: command.execute.before"),
        "{v}"
    );
    let (_, src) = run(&s, &["sources"]);
    assert_eq!(src["sources"][0]["state"], "pending-activation", "{src}");
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    let (_, v) = run(&s, &["tools"]);
    assert_eq!(v["tools"][0]["name"], "hooks_a_echo", "{v}");
    assert_eq!(v["problems"], serde_json::json!([]));
}

#[test]
fn hooks_run_in_plugin_order_with_opencodes_read_back() {
    let s = plugin_sandbox(&["v1-hooks-a.ts", "legacy-hooks-b.ts"]);
    approve_and_load(|a| run(&s, a));
    // legacy-hooks-b.ts sorts before v1-hooks-a.ts (ledger D-002); inside b, Alpha runs
    // before Zeta (alphabetical export order, as OpenCode).
    let (code, v) = run_hook(
        |a| run(&s, a),
        "chat.params",
        r#"{"sessionID":"s"}"#,
        r#"{"options":{}}"#,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["output"]["options"]["trail"],
        serde_json::json!(["b-alpha", "b-zeta", "a"])
    );
    // Zeta reassigns `output.args`; OpenCode runs the tool with the original object, so the
    // read-back ignores the reassignment (and what later plugins did to the new object).
    let (_, v) = run_hook(
        |a| run(&s, a),
        "tool.execute.before",
        r#"{"tool":"bash"}"#,
        r#"{"args":{"command":"ls"}}"#,
    );
    assert_eq!(v["output"]["args"], serde_json::json!({ "command": "ls" }));
    // Negative control: without the reassigning plugin, in-place mutation is kept.
    let s2 = plugin_sandbox(&["v1-hooks-a.ts"]);
    approve_and_load(|a| run(&s2, a));
    let (_, v) = run_hook(
        |a| run(&s2, a),
        "tool.execute.before",
        r#"{"tool":"bash"}"#,
        r#"{"args":{"command":"ls"}}"#,
    );
    assert_eq!(
        v["output"]["args"],
        serde_json::json!({ "command": "ls", "seen": ["a"] })
    );
}

#[test]
fn a_bad_module_fails_alone_and_a_non_function_export_runs_no_factory() {
    let s = plugin_sandbox(&[
        "legacy-non-function-export.ts",
        "throws-in-factory.ts",
        "path-plugin-without-id.ts",
        "v1-hooks-a.ts",
    ]);
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    let (code, v) = run(&s, &["tools"]);
    assert_eq!(code, 0);
    let problems: Vec<String> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p["code"].as_str().unwrap(),
                p["message"].as_str().unwrap()
            )
        })
        .collect();
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("Plugin export is not a function"), "{problems:?}");
    assert!(has("factory failed on purpose"), "{problems:?}");
    assert!(has("must export id"), "{problems:?}");
    let (_, t) = run(&s, &["tools"]);
    assert_eq!(
        t["tools"][0]["name"], "hooks_a_echo",
        "the good plugin still loaded: {t}"
    );
    assert!(
        !s.root.path().join("MARKER").exists(),
        "a factory of a rejected module ran"
    );
}

#[test]
fn secrets_from_chat_headers_and_shell_env_reach_the_caller_but_no_file_berth_writes() {
    let canary = "CANARY-91c2-headers-and-env";
    let s = plugin_sandbox(&["secret-headers.ts"]);
    let run_c = |args: &[&str]| {
        let mut cmd = s.berth(args);
        cmd.arg("--json")
            .env("BERTH_TEST_CANARY", canary)
            .env("BERTH_LOG", "trace");
        parse_json_output(&cmd.output().unwrap())
    };
    // `shell.env` is held for review by default (D-032): this person lets it through.
    assert_eq!(run_c(&["policy", "set", "cap.shell-env", "allow"]).0, 0);
    approve_and_load(run_c);
    let (code, v) = run_hook(
        run_c,
        "chat.headers",
        r#"{"sessionID":"s"}"#,
        r#"{"headers":{}}"#,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["output"]["headers"]["authorization"],
        format!("Bearer {canary}"),
        "the caller gets the value"
    );
    let (_, v) = run_hook(run_c, "shell.env", r#"{"cwd":"/"}"#, r#"{"env":{}}"#);
    assert_eq!(v["output"]["env"]["API_KEY"], canary);
    let (_, status) = run_c(&["status"]);
    assert!(
        !status.to_string().contains(canary),
        "the status (diagnostics) holds the secret"
    );
    // Logs at trace level, the database and its WAL: the value is in none of them.
    let searched = assert_not_in_any_file(&s.data_dir(), canary);
    // The log and the database (a one-shot process folds its WAL back on exit; the live-WAL
    // case is tests/runtime/secrets.rs).
    assert!(searched >= 2, "{searched} files searched");
}

#[test]
fn no_byte_of_a_plugin_runs_before_approval_and_an_expansion_asks_again() {
    let s = plugin_sandbox(&["writes-marker-on-import.ts"]);
    let marker = s.root.path().join("MARKER");
    for step in [&["sources"][..], &["status"], &["tools"]] {
        assert_eq!(run(&s, step).0, 0);
        assert!(
            !marker.exists(),
            "imported before approval (after `{}`)",
            step[0]
        );
    }
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    assert!(!marker.exists(), "approval alone must not import");
    assert_eq!(run(&s, &["tools"]).0, 0);
    assert!(marker.exists(), "activation imports the approved plugin");

    // The new version also starts processes: back to pending-approval, and it does not run.
    std::fs::remove_file(&marker).unwrap();
    let text =
        std::fs::read_to_string(repo_root().join("fixtures/plugins/writes-marker-on-import.ts"))
            .unwrap();
    s.write(
        "project/.opencode/plugins/writes-marker-on-import.ts",
        &format!("{text}\nexport const spawnLater = () => Bun.spawn(['true'])\n"),
    );
    assert_eq!(
        states(&s),
        vec![(
            "writes-marker-on-import.ts".to_string(),
            "pending-approval".to_string()
        )]
    );
    assert_eq!(run(&s, &["tools"]).0, 0);
    assert!(
        !marker.exists(),
        "the expanded version ran before it was approved again"
    );
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    run(&s, &["tools"]);
    assert!(marker.exists());
}

#[test]
fn dollar_is_bun_shell_on_bun_and_an_honest_per_call_error_on_node() {
    for (node, expect_ok) in [(false, true), (true, false)] {
        let s = plugin_sandbox(&["uses-shell.ts"]);
        let run_b = |args: &[&str]| {
            let mut cmd = s.berth(args);
            cmd.arg("--json");
            if node {
                cmd.env("BERTH_BUN", s.root.path().join("no-bun"));
            }
            parse_json_output(&cmd.output().unwrap())
        };
        approve_and_load(run_b);
        let (code, r) = run_b(&["invoke", "shell_echo"]);
        if expect_ok {
            assert_eq!(code, 0, "{r}");
            assert_eq!(r["output"], "from-the-shell");
        } else {
            assert_eq!(code, 1);
            assert_eq!(r["error"]["code"], "unsupported", "{r}");
            assert!(
                r["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("not available when"),
                "{r}"
            );
        }
    }
}
