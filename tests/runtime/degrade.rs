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

fn berth_with_hooks(dir: &std::path::Path) -> Berth {
    let berth = support::open_project(
        dir,
        &[
            ("plugins/hook-matrix.ts", ".opencode/plugins/hook-matrix.ts"),
            ("plugins/hook-faults.ts", ".opencode/plugins/hook-faults.ts"),
        ],
    );
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
