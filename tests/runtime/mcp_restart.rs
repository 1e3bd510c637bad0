//! A local MCP server's restart budget, in one Berth process (the budget is in memory): lost
//! three times within five minutes, its source is paused — said with a code and what to do,
//! its calls refused without starting it — until `resume_hosts` clears it.

use std::path::Path;

use berth_discovery::SourceState;
use berth_runtime::{Berth, Decision};
use serde_json::{json, Value};

#[path = "support.rs"]
mod support;

/// Berth on a project whose opencode.json has the fixture MCP server as `fx`, logging to `log`.
fn berth_with_fixture_server(dir: &Path, log: &Path) -> Berth {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let server = root.join("fixtures/mcp/fixture-server.mjs");
    let config = json!({ "mcp": { "fx": {
        "type": "local",
        "command": ["node", server.display().to_string(), "--tool", "echo", "--tool", "crash"],
        "environment": { "MCP_FIXTURE_LOG": log.display().to_string() },
    } } });
    std::fs::create_dir_all(dir.join("project")).unwrap();
    std::fs::write(dir.join("project/opencode.json"), config.to_string()).unwrap();
    support::open_project(dir, &[])
}

/// How many times the server process started (its log's `started` lines).
fn starts(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("started "))
        .count()
}

async fn call(berth: &Berth, tool: &str, args: Value) -> Result<berth_store::Receipt, String> {
    berth
        .invoke(tool, args, None, None, Default::default())
        .await
        .map_err(|e| format!("{}: {} ({})", e.code, e.message, e.recovery))
}

fn fx_source(berth: &Berth) -> Value {
    let status = berth.status();
    let view = status
        .sources
        .iter()
        .find(|s| s.source.entry == "fx")
        .expect("the fixture server is a source");
    serde_json::to_value(&view.source).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_server_lost_three_times_is_paused_until_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fixture.log");
    let berth = berth_with_fixture_server(dir.path(), &log);
    berth.decide(None, Decision::Allow, "cli", false).unwrap();
    let act = berth.activate().await;
    assert!(
        act.tools.iter().any(|t| t.name == "fx_crash"),
        "{:?}",
        act.problems
    );
    let r = call(&berth, "fx_echo", json!({ "text": "up" }))
        .await
        .unwrap();
    assert_eq!(r.output.as_deref(), Some("up"), "{r:?}");
    assert_eq!(starts(&log), 1);

    // Three losses: each call after the first starts the server again, then it crashes.
    for n in 1..=3 {
        let r = call(&berth, "fx_crash", json!({})).await.unwrap();
        assert_eq!(
            r.error.as_ref().map(|e| e.code.as_str()),
            Some("process-lost"),
            "crash {n}: {r:?}"
        );
        assert_eq!(starts(&log), n, "crash {n}");
    }

    // Spent: the source shows it paused, with the code and the way out.
    let src = fx_source(&berth);
    assert_eq!(src["state"], json!(SourceState::Paused), "{src}");
    let said = src.to_string();
    assert!(
        said.contains("temporarily-unavailable")
            && said.contains("lost 3 times within 5 minutes")
            && said.contains("berth resume"),
        "{src}"
    );
    // Its calls are refused (a receipt that says so, or the refusal itself) and nothing starts.
    let refused = call(&berth, "fx_echo", json!({ "text": "again" })).await;
    let why = match &refused {
        Err(e) => e.clone(),
        Ok(r) => {
            assert!(r.output.is_none(), "a paused server answered: {r:?}");
            let e = r.error.as_ref().expect("a refused call says why");
            format!("{}: {}", e.code, e.message)
        }
    };
    assert!(
        why.starts_with("temporarily-unavailable") && why.contains("paused"),
        "{why}"
    );
    assert_eq!(starts(&log), 3, "a paused server was started again");
    // Listing again does not start it either.
    berth.activate().await;
    assert_eq!(starts(&log), 3, "activation started a paused server");

    // Resumed: it starts again and answers.
    berth.resume_hosts().await;
    assert_ne!(fx_source(&berth)["state"], json!(SourceState::Paused));
    let r = call(&berth, "fx_echo", json!({ "text": "back" }))
        .await
        .unwrap();
    assert_eq!(r.output.as_deref(), Some("back"), "{r:?}");
    assert_eq!(starts(&log), 4);
    berth.shutdown_hosts().await;
}
