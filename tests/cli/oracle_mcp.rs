//! Real OpenCode 1.18.4 as the client of `berth mcp` (scripts/oracle/opencode-through-berth):
//! its opencode.json lists `berth mcp` as a local MCP server, it runs `--pure`, and the mock
//! model calls the plugin's tool through Berth. The transcript carries the plugin's output and
//! Berth's receipt id; the tool ran in Berth's host, and OpenCode registered nothing of the
//! plugin itself (it still imports the file once: docs/compatibility.md).

use serde_json::Value;

use crate::support::{berth_bin, run_oracle};

/// What must hold of one run; `Err` lists what did not.
fn check(run: &Value) -> Result<(), Vec<String>> {
    let mut bad = Vec::new();
    if run["mcp"]["berth"]["status"] != "connected" {
        bad.push(format!("OpenCode's MCP status for berth: {}", run["mcp"]));
    }
    // The model was offered the tool under OpenCode's MCP name, and not the plugin's own tool.
    for offered in run["offered"].as_array().into_iter().flatten() {
        let names: Vec<&str> = offered
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !names.contains(&"berth_greet") {
            bad.push(format!("berth_greet was not offered: {names:?}"));
        }
        if names.contains(&"greet") {
            bad.push("OpenCode registered the plugin's tool itself".into());
        }
    }
    let receipts = run["receipts"].as_array().cloned().unwrap_or_default();
    let Some(receipt) = receipts.iter().find(|r| r["tool"] == "greet") else {
        bad.push(format!("no receipt of greet in Berth: {receipts:?}"));
        return Err(bad);
    };
    let id = receipt["receipt_id"].as_str().unwrap_or_default();
    let parts: Vec<&Value> = run["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["parts"].as_array().into_iter().flatten())
        .filter(|p| p["type"] == "tool")
        .collect();
    match parts.as_slice() {
        [p] => {
            let out = p["state"]["output"].as_str().unwrap_or_default();
            if p["tool"] != "berth_greet" || p["state"]["status"] != "completed" {
                bad.push(format!("the tool part: {p}"));
            }
            if !out.starts_with("Hello, Ada! (greeted by a plugin Berth runs)") {
                bad.push(format!(
                    "the plugin's output is not in the transcript: {out}"
                ));
            }
            if id.is_empty() || !out.contains(id) {
                bad.push(format!(
                    "Berth's receipt {id} is not in the transcript: {out}"
                ));
            }
        }
        _ => bad.push(format!("expected one tool part, got {parts:?}")),
    }
    // The plugin's code ran in Berth's host exactly once; OpenCode 1.18.4 imports the file once
    // more even under `--pure` (its V2 config-plugin ignores it; docs/compatibility.md): if that
    // count changes, the page that says so must change too.
    let imports: Vec<&Value> = run["imports"].as_array().into_iter().flatten().collect();
    let by_berth = imports
        .iter()
        .filter(|i| {
            i["argv"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| a.as_str().is_some_and(|a| a.ends_with("berth-host.mjs")))
        })
        .count();
    if by_berth != 1 || imports.len() - by_berth != 1 {
        bad.push(format!(
            "imports: {by_berth} by Berth's host (expected 1), {} elsewhere (OpenCode 1.18.4 under --pure: 1): {}",
            imports.len() - by_berth,
            run["imports"]
        ));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad)
    }
}

#[test]
fn opencode_calls_a_plugin_tool_through_berth_mcp_live() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run.json");
    run_oracle(
        "opencode-through-berth",
        &[
            "--berth".as_ref(),
            berth_bin().as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
    );
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(run["opencode_version"], "1.18.4");
    if let Err(bad) = check(&run) {
        panic!("{}", bad.join("\n"));
    }
    // Negative control: the same run with the receipt taken out of the transcript, or with
    // OpenCode registering the plugin's tool itself, fails the check.
    let mut no_receipt = run.clone();
    for m in no_receipt["messages"].as_array_mut().unwrap() {
        for p in m["parts"].as_array_mut().unwrap() {
            if p["type"] == "tool" {
                p["state"]["output"] = "Hello, Ada! (greeted by a plugin Berth runs)".into();
            }
        }
    }
    assert!(check(&no_receipt).is_err());
    let mut twice = run.clone();
    twice["offered"][0]
        .as_array_mut()
        .unwrap()
        .push("greet".into());
    assert!(check(&twice).is_err());
}
