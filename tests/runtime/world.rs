//! The plugin's world in a long-lived Berth (as the app and `berth serve` run it): a tool's
//! `ctx.ask` waits for the person without blocking anything else, and Berth's own events reach
//! the plugins' `event` hooks in OpenCode's shapes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use berth_runtime::world::PromptReply;
use berth_runtime::{Berth, Decision};

#[path = "support.rs"]
mod support;
use serde_json::{json, Value};

fn berth_with_plugin(dir: &Path, fixture: &str) -> Berth {
    support::open_project(
        dir,
        &[(
            &format!("plugins/{fixture}"),
            &format!(".opencode/plugins/{fixture}"),
        )],
    )
}

/// Checkpoint one, the load, checkpoint two.
async fn approve_and_activate(berth: &Berth) {
    for _ in 0..2 {
        berth.decide(None, Decision::Allow, "test", false).unwrap();
        berth.activate().await;
    }
    assert!(
        berth
            .status()
            .tools
            .iter()
            .any(|t| t.name == "guarded_write"),
        "{:?}",
        berth.activate().await.problems
    );
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn events(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn invoke_in_background(
    berth: &Berth,
    target: &PathBuf,
) -> tokio::task::JoinHandle<berth_store::Receipt> {
    let (b, args) = (berth.clone(), json!({ "path": target }));
    tokio::spawn(async move {
        b.invoke("guarded_write", args, None, None, Default::default())
            .await
            .unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_prompt_waits_for_the_person_and_events_arrive_in_opencode_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let events_out = dir.path().join("events.jsonl");
    // The plugin's event hook writes here (the host inherits this process's environment).
    std::env::set_var("BERTH_TEST_EVENTS_OUT", &events_out);
    std::env::remove_var("BERTH_TEST_PERMISSION_ANSWER");
    let berth = berth_with_plugin(dir.path(), "permission-gate.ts");
    berth.enable_prompts();
    approve_and_activate(&berth).await;
    let target = dir.path().join("written.txt");

    // The call waits on the prompt; everything else keeps answering meanwhile.
    let call = invoke_in_background(&berth, &target);
    let prompt = wait_for("the prompt", || berth.status().prompts.first().cloned()).await;
    assert_eq!(prompt.permission, "edit");
    assert_eq!(prompt.patterns, vec![target.display().to_string()]);
    assert_eq!(prompt.tool, "guarded_write");
    assert!(prompt.plugin.starts_with("plugin-permission-gate"));
    assert!(!target.exists(), "the tool acted before the answer");
    // Another call into the same host while the first waits.
    let other = berth
        .run_hook(
            "permission.ask",
            json!({}),
            json!({ "status": "ask" }),
            None,
        )
        .await;
    assert!(
        other.is_ok(),
        "a waiting prompt blocked another call: {other:?}"
    );
    berth.answer_prompt(&prompt.id, PromptReply::Once).unwrap();
    let receipt = call.await.unwrap();
    assert_eq!(
        receipt.status,
        berth_store::ReceiptStatus::Completed,
        "{receipt:?}"
    );
    assert!(target.exists());
    assert!(
        berth.status().prompts.is_empty(),
        "the answered prompt is gone"
    );

    // Reject: the call ends, nothing is written.
    std::fs::remove_file(&target).unwrap();
    let call = invoke_in_background(&berth, &target);
    let prompt = wait_for("the second prompt", || {
        berth.status().prompts.first().cloned()
    })
    .await;
    berth
        .answer_prompt(&prompt.id, PromptReply::Reject)
        .unwrap();
    let receipt = call.await.unwrap();
    assert_eq!(
        receipt.error.as_ref().map(|e| e.code.as_str()),
        Some("cancelled")
    );
    assert!(!target.exists());
    assert!(
        berth.answer_prompt(&prompt.id, PromptReply::Once).is_err(),
        "answered twice"
    );

    // Always: a standing answer, so the next call is not asked again.
    let call = invoke_in_background(&berth, &target);
    let prompt = wait_for("the third prompt", || {
        berth.status().prompts.first().cloned()
    })
    .await;
    berth
        .answer_prompt(&prompt.id, PromptReply::Always)
        .unwrap();
    assert_eq!(
        call.await.unwrap().status,
        berth_store::ReceiptStatus::Completed
    );
    std::fs::remove_file(&target).unwrap();
    let receipt = invoke_in_background(&berth, &target).await.unwrap();
    assert_eq!(receipt.status, berth_store::ReceiptStatus::Completed);
    let decided_by: Vec<String> = berth
        .with_store(|s| s.permission_decisions(10))
        .unwrap()
        .into_iter()
        .map(|d| d.decided_by)
        .collect();
    assert_eq!(decided_by, ["rule", "person", "person", "person"]);

    // Events, in OpenCode's runtime shapes ({id, type, properties}).
    let watch = berth_runtime::watch::watch(berth.clone()).unwrap();
    let new_tool = dir.path().join("project/.opencode/plugins/added-later.ts");
    std::fs::write(&new_tool, "export default {}\n").unwrap();
    let seen = wait_for("the events", || {
        let ev = events(&events_out);
        let has = |t: &str| ev.iter().any(|e| e["type"] == t);
        (has("permission.asked") && has("permission.replied") && has("file.watcher.updated"))
            .then_some(ev)
    })
    .await;
    drop(watch);
    for e in &seen {
        assert!(
            e["id"].as_str().is_some_and(|id| id.starts_with("evt_")),
            "{e}"
        );
        assert!(e["properties"].is_object(), "{e}");
    }
    let asked = seen
        .iter()
        .find(|e| e["type"] == "permission.asked")
        .unwrap();
    assert_eq!(asked["properties"]["permission"], "edit");
    assert!(asked["properties"]["tool"]["callID"]
        .as_str()
        .unwrap()
        .starts_with("rcpt_"));
    let replies: Vec<&str> = seen
        .iter()
        .filter(|e| e["type"] == "permission.replied")
        .map(|e| e["properties"]["reply"].as_str().unwrap())
        .collect();
    assert_eq!(replies, ["once", "reject", "always"]);
    let states: Vec<&str> = seen
        .iter()
        .filter(|e| e["type"] == "message.part.updated")
        .map(|e| e["properties"]["part"]["state"]["status"].as_str().unwrap())
        .collect();
    assert!(
        states.windows(2).any(|w| w == ["running", "completed"]),
        "tool part events: {states:?}"
    );
    let part = &seen
        .iter()
        .find(|e| e["type"] == "message.part.updated")
        .unwrap()["properties"]["part"];
    assert_eq!(
        (part["type"].as_str(), part["tool"].as_str()),
        (Some("tool"), Some("guarded_write"))
    );
    let file_events: Vec<&Value> = seen
        .iter()
        .filter(|e| e["type"] == "file.watcher.updated")
        .collect();
    assert!(
        file_events
            .iter()
            .all(|e| e["properties"]["file"] == new_tool.display().to_string()),
        "only the watched folders' files: {file_events:?}"
    );
    let file_event = file_events[0];
    assert!(["add", "change"].contains(&file_event["properties"]["event"].as_str().unwrap()));
    berth.shutdown_hosts().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_prompt_ends_with_the_calls_deadline_and_is_withdrawn() {
    let dir = tempfile::tempdir().unwrap();
    std::env::remove_var("BERTH_TEST_PERMISSION_ANSWER");
    let berth = berth_with_plugin(dir.path(), "permission-gate.ts");
    berth.enable_prompts();
    approve_and_activate(&berth).await;
    let target = dir.path().join("never.txt");
    let started = Instant::now();
    let receipt = berth
        .invoke(
            "guarded_write",
            json!({ "path": target }),
            None,
            Some(Duration::from_millis(800)),
            Default::default(),
        )
        .await
        .unwrap();
    let code = receipt.error.as_ref().map(|e| e.code.as_str());
    assert!(
        matches!(code, Some("action-required") | Some("timeout")),
        "{receipt:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(!target.exists());
    wait_for("the prompt to be withdrawn", || {
        berth.status().prompts.is_empty().then_some(())
    })
    .await;
    berth.shutdown_hosts().await;
}

/// A long-running Berth (app, `berth serve`) activates an approved npm plugin by itself:
/// preparation, then the load, with no command from the person beyond the approvals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_active_prepares_and_loads_approved_npm_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let vendor = project.join("vendor/postinstall-marker");
    std::fs::create_dir_all(&vendor).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    for f in ["package.json", "index.js"] {
        std::fs::copy(
            root.join("fixtures/packages/postinstall-marker").join(f),
            vendor.join(f),
        )
        .unwrap();
    }
    std::fs::write(
        project.join("opencode.json"),
        r#"{ "plugin": ["file:./vendor/postinstall-marker"] }"#,
    )
    .unwrap();
    let berth = support::open_project(dir.path(), &[]);
    let _active = berth.keep_active();
    let active = |b: &Berth| {
        b.status()
            .sources
            .iter()
            .all(|s| s.state == berth_discovery::SourceState::Active)
    };
    // Each checkpoint approved as it comes: the download, then the code and what it registers.
    wait_for("the plugin to be active", || {
        let _ = berth.decide(None, Decision::Allow, "test", false);
        active(&berth).then_some(())
    })
    .await;
    let out = berth
        .run_hook("chat.params", json!({}), json!({ "options": {} }), None)
        .await
        .unwrap();
    assert_eq!(out["options"]["fromPackage"], true);
    berth.shutdown_hosts().await;
}

/// "Always" is the answer for the plugin that asked, not for its neighbour: the neighbour's
/// identical ask still waits for the person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_answer_given_to_one_plugin_answers_only_that_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let asks = |id: &str| {
        format!(
            "import {{ tool }} from '@opencode-ai/plugin'\nexport default tool({{ description: '{id} asks', args: {{}}, async execute(_a, ctx) {{ await ctx.ask({{ permission: 'edit', patterns: ['shared.txt'], always: ['shared.txt'], metadata: {{}} }}); return '{id} may edit' }} }})\n"
        )
    };
    let tools = dir.path().join("project/.opencode/tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(tools.join("first.ts"), asks("first")).unwrap();
    std::fs::write(tools.join("second.ts"), asks("second")).unwrap();
    let berth = support::open_project(dir.path(), &[]);
    berth.enable_prompts();
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    berth.activate().await;
    let answer_next = |reply: PromptReply| {
        let berth = berth.clone();
        async move {
            let id = wait_for("a prompt", || {
                berth.status().prompts.first().map(|p| p.id.clone())
            })
            .await;
            berth.answer_prompt(&id, reply).unwrap();
        }
    };
    let (first, ()) = tokio::join!(
        berth.invoke("first", json!({}), None, None, Default::default()),
        answer_next(PromptReply::Always)
    );
    assert_eq!(first.unwrap().output.as_deref(), Some("first may edit"));
    // The first plugin is answered for good now; the second one is asked, and refused.
    let again = tokio::time::timeout(
        Duration::from_secs(10),
        berth.invoke("first", json!({}), None, None, Default::default()),
    )
    .await
    .expect("the standing answer did not answer the first plugin's next ask: it waits for a person")
    .unwrap();
    assert_eq!(again.output.as_deref(), Some("first may edit"), "{again:?}");
    let (second, ()) = tokio::join!(
        berth.invoke("second", json!({}), None, None, Default::default()),
        answer_next(PromptReply::Reject)
    );
    let second = second.unwrap();
    assert_ne!(
        second.status,
        berth_store::ReceiptStatus::Completed,
        "{second:?}"
    );
    let rules = berth.with_store(|s| s.permission_rules()).unwrap();
    let first_id = &berth
        .status()
        .sources
        .iter()
        .find(|s| s.entry.ends_with("first.ts"))
        .unwrap()
        .id
        .clone();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(&rules[0].source_id, first_id);
    berth.shutdown_hosts().await;
}
