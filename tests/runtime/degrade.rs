//! Degrade without flooding (seed 003 §8.3): a plugin's hook that fails again and again is
//! paused on its own after `STREAK` failures in a row — the chain runs on without it, the
//! plugin's other hooks and the other plugins keep working, the source stays active and says
//! what is paused and why — until the person resumes it. OpenCode keeps calling such a hook and
//! fails every operation (ledger D-043).

use berth_runtime::catalog::streaks::STREAK;
use berth_runtime::{Berth, Decision};
use serde_json::json;

#[path = "support.rs"]
mod support;

/// hook-matrix transforms, then hook-faults (loaded after it) injects.
const HOOK_PLUGINS: &[(&str, &str)] = &[
    ("plugins/hook-matrix.ts", ".opencode/plugins/hook-matrix.ts"),
    ("plugins/hook-faults.ts", ".opencode/plugins/hook-faults.ts"),
];

fn berth_with_hooks(dir: &std::path::Path) -> Berth {
    let berth = support::open_project(dir, HOOK_PLUGINS);
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    berth
}

/// Everything logged in this test process (the hosts log through Berth's tracing too).
#[derive(Clone, Default)]
struct Log(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn lines_with(&self, text: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(text))
            .count()
    }
}

async fn chat_params(berth: &Berth) -> Result<serde_json::Value, berth_runtime::BerthError> {
    berth
        .run_hook(
            "chat.params",
            json!({}),
            json!({ "temperature": 0.2 }),
            None,
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_failing_again_and_again_is_paused_alone_and_the_rest_serves() {
    // hook-faults throws in its chat.params hook and nowhere else.
    std::env::set_var("BERTH_TEST_THROW_HOOK", "chat.params");
    let log = Log::default();
    let sink = log.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .init();
    let dir = tempfile::tempdir().unwrap();
    let berth = berth_with_hooks(dir.path());
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    let faults = berth
        .status()
        .sources
        .iter()
        .find(|s| s.source.id.starts_with("plugin-hook-faults"))
        .map(|s| s.source.id.clone())
        .expect("hook-faults is a source");

    // The flood: the first STREAK fail as OpenCode fails them, naming the plugin; then the
    // chain runs without that hook, and hook-matrix's transform still applies.
    let mut failed = 0;
    for i in 0..200 {
        match chat_params(&berth).await {
            Err(e) => {
                assert!(
                    i < STREAK as usize,
                    "call {i} failed after the pause: {e:?}"
                );
                assert_eq!(e.code, "plugin-failed");
                assert_eq!(e.plugin.as_deref(), Some(faults.as_str()));
                failed += 1;
            }
            Ok(out) => {
                assert!(i >= STREAK as usize, "call {i} passed before the pause");
                assert_eq!(out["temperature"], "reassigned", "hook-matrix ran: {out}");
            }
        }
    }
    assert_eq!(failed, STREAK as usize);
    // The log stays bounded: the error once (identical ones are counted), the pause once.
    let errors = log.lines_with("fault injected in chat.params");
    assert!(
        (1..=2).contains(&errors),
        "{errors} lines of the same error"
    );
    assert_eq!(log.lines_with("paused on its own"), 1);

    // The plugin's other hooks run (and would still fail the operation if they threw).
    berth
        .run_hook("chat.headers", json!({}), json!({ "headers": {} }), None)
        .await
        .expect("its other hooks run");

    // The source stays active and says what is paused, why, and how to go on.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let view = loop {
        let status = berth.status();
        let view = status
            .sources
            .iter()
            .find(|s| s.source.id == faults)
            .cloned()
            .unwrap();
        if !view.paused_parts.is_empty() || std::time::Instant::now() > until {
            break view;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(view.source.state, berth_discovery::SourceState::Active);
    assert_eq!(view.paused_parts.len(), 1, "{:?}", view.paused_parts);
    let part = &view.paused_parts[0];
    assert_eq!(part.capability, "hook chat.params");
    assert_eq!(part.code, "plugin-failed");
    assert!(
        part.reason.contains("fault injected in chat.params"),
        "{}",
        part.reason
    );
    assert!(
        part.reason.contains(&format!("{STREAK} times in a row")),
        "{}",
        part.reason
    );

    // Resumed by the person: the hook runs again (and fails again, as it still throws).
    berth.resume_hosts().await;
    let again = chat_params(&berth).await.expect_err("it runs again");
    assert_eq!(again.code, "plugin-failed");
    std::env::remove_var("BERTH_TEST_THROW_HOOK");
    berth.shutdown_hosts().await;
}

/// hook-faults as a file that loads after hook-matrix: the thrower sits behind the plugin it
/// names.
const THROWER_LAST: &[(&str, &str)] = &[
    ("plugins/hook-matrix.ts", ".opencode/plugins/hook-matrix.ts"),
    ("plugins/hook-faults.ts", ".opencode/plugins/zz-thrower.ts"),
];

/// The attacker's try: a plugin whose hook throws an error naming the plugin before it in the
/// chain (say, to have a guard hook of that plugin paused). The blame follows the host's own
/// word for who threw, never the error's text: the thrower is paused, the other runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_cannot_put_its_failures_and_its_pause_on_another_plugin() {
    let dir = tempfile::tempdir().unwrap();
    // The ids first (nothing approved, nothing started), so hook-faults can name hook-matrix's.
    let (matrix, faults) = {
        let ids: Vec<String> = support::open_project(dir.path(), THROWER_LAST)
            .status()
            .sources
            .iter()
            .map(|s| s.source.id.clone())
            .collect();
        let id_of = |prefix: &str| ids.iter().find(|i| i.starts_with(prefix)).cloned();
        (id_of("plugin-hook-matrix"), id_of("plugin-zz-thrower"))
    };
    let (matrix, faults) = (matrix.unwrap(), faults.unwrap());
    std::env::set_var("BERTH_TEST_THROW_HOOK", "chat.params");
    std::env::set_var(
        "BERTH_TEST_THROW_MESSAGE",
        format!("{matrix} failed, blame {matrix}"),
    );
    let berth = support::open_project(dir.path(), THROWER_LAST);
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    for i in 0..(STREAK as usize + 3) {
        match chat_params(&berth).await {
            Err(e) => assert_eq!(
                e.plugin.as_deref(),
                Some(faults.as_str()),
                "call {i}: {e:?}"
            ),
            Ok(out) => assert_eq!(out["temperature"], "reassigned", "hook-matrix still runs"),
        }
    }
    let paused = |id: &str| {
        berth
            .status()
            .sources
            .iter()
            .find(|s| s.source.id == id)
            .map(|s| s.paused_parts.len())
            .unwrap()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while paused(&faults) == 0 && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(paused(&faults), 1, "the thrower is paused");
    assert_eq!(paused(&matrix), 0, "the plugin it named is not");
    std::env::remove_var("BERTH_TEST_THROW_HOOK");
    std::env::remove_var("BERTH_TEST_THROW_MESSAGE");
    berth.shutdown_hosts().await;
}

/// A tool that times out again and again against Berth's budget is paused alone; a retry of
/// an earlier call with its key still gets that call's receipt (idempotency first), a new call
/// is refused, and the tool's siblings answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_timing_out_again_and_again_is_paused_alone_and_a_keyed_retry_keeps_its_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let berth = support::open_project(
        dir.path(),
        &[("tools/faults.ts", ".opencode/tools/faults.ts")],
    );
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    berth
        .set_policy("budget.tool", Some(json!(200)), "test")
        .unwrap();
    let waits = |key: String| {
        let berth = &berth;
        async move {
            berth
                .invoke(
                    "faults_waits",
                    json!({}),
                    Some(&key),
                    None,
                    Default::default(),
                )
                .await
        }
    };
    let mut first = None;
    for i in 0..STREAK {
        let r = waits(format!("w-{i}")).await.expect("a receipt");
        assert_eq!(
            r.error.as_ref().map(|e| e.code.as_str()),
            Some("timeout"),
            "{r:?}"
        );
        first.get_or_insert(r);
    }
    let first = first.unwrap();
    let again = waits("w-0".into()).await.expect("the earlier receipt");
    assert_eq!(again.receipt_id, first.receipt_id);
    let refused = waits("w-new".into()).await.expect_err("paused");
    assert_eq!(refused.code, "temporarily-unavailable", "{refused:?}");
    let count = dir.path().join("count.txt");
    let r = berth
        .invoke(
            "faults_count",
            json!({ "file": count }),
            None,
            None,
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.output.as_deref(), Some("counted"), "its siblings answer");
    berth.shutdown_hosts().await;
}

/// hook-faults beside a tool of the same host: the tool hooks run inside the tool's own call.
const HOOKS_AND_TOOL: &[(&str, &str)] = &[
    ("plugins/hook-faults.ts", ".opencode/plugins/hook-faults.ts"),
    ("tools/faults.ts", ".opencode/tools/faults.ts"),
];

async fn count(
    berth: &Berth,
    dir: &std::path::Path,
) -> Result<berth_runtime::Receipt, berth_runtime::BerthError> {
    berth
        .invoke(
            "faults_count",
            json!({ "file": dir.join("count.txt") }),
            None,
            None,
            Default::default(),
        )
        .await
}

fn paused_parts(berth: &Berth, prefix: &str) -> Vec<String> {
    berth
        .status()
        .sources
        .iter()
        .filter(|s| s.source.id.starts_with(prefix))
        .flat_map(|s| s.paused_parts.iter().map(|p| p.capability.clone()))
        .collect()
}

/// A `tool.execute.before` that throws refuses that call — OpenCode's way for a guard to stop
/// a tool — so its refusals never pause it: a guard is not switched off by doing its job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_refusing_calls_again_and_again_is_never_paused() {
    std::env::set_var("BERTH_TEST_THROW_HOOK", "tool.execute.before");
    let dir = tempfile::tempdir().unwrap();
    let berth = support::open_project(dir.path(), HOOKS_AND_TOOL);
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    for i in 0..(3 * STREAK) {
        let r = count(&berth, dir.path()).await.expect("a receipt");
        let e = r.error.as_ref().expect("refused by the guard");
        assert_eq!(e.code, "plugin-failed", "call {i}: {r:?}");
        assert!(
            e.message.contains("fault injected in tool.execute.before"),
            "{e:?}"
        );
    }
    assert!(!dir.path().join("count.txt").exists(), "the tool never ran");
    assert_eq!(
        paused_parts(&berth, "plugin-hook-faults"),
        Vec::<String>::new()
    );
    assert_eq!(paused_parts(&berth, "tool-faults"), Vec::<String>::new());
    std::env::remove_var("BERTH_TEST_THROW_HOOK");
    berth.shutdown_hosts().await;
}

/// A `tool.execute.before` the tool's own host runs, timing out again and again against the
/// policy's hook budget, is paused alone: after `STREAK` failed calls the tool runs without
/// it, and the tool itself is not blamed (its streak stays clean).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_hook_failing_inside_the_tools_own_call_is_paused_and_the_tool_runs_on() {
    std::env::set_var("BERTH_TEST_SLOW_HOOK", "tool.execute.before");
    let dir = tempfile::tempdir().unwrap();
    let berth = support::open_project(dir.path(), HOOKS_AND_TOOL);
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    berth
        .set_policy("budget.hook", Some(json!(150)), "test")
        .unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    for i in 0..(STREAK + 3) {
        let r = count(&berth, dir.path()).await.expect("a receipt");
        if i < STREAK {
            let e = r.error.as_ref().expect("the hook timed out");
            assert_eq!(e.code, "timeout", "call {i}: {r:?}");
            assert!(
                e.message.contains("150 ms budget"),
                "the policy's budget: {e:?}"
            );
        } else {
            assert_eq!(r.output.as_deref(), Some("counted"), "call {i}: {r:?}");
        }
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while paused_parts(&berth, "plugin-hook-faults").is_empty() && std::time::Instant::now() < until
    {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        paused_parts(&berth, "plugin-hook-faults"),
        vec!["hook tool.execute.before".to_string()]
    );
    assert_eq!(paused_parts(&berth, "tool-faults"), Vec::<String>::new());
    // Resumed: the hook runs around the call again.
    berth.resume_hosts().await;
    let r = count(&berth, dir.path()).await.expect("a receipt");
    assert_eq!(
        r.error.as_ref().map(|e| e.code.as_str()),
        Some("timeout"),
        "{r:?}"
    );
    std::env::remove_var("BERTH_TEST_SLOW_HOOK");
    berth.shutdown_hosts().await;
}
