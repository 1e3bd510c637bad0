//! Hook chains against real OpenCode 1.18.4 (`tests/oracle/hooks/chains.json`, recorded with a
//! mock model over three plugins): replaying each recorded hook call through Berth gives the
//! same per-plugin order, the same value before and after every step, and the same final value
//! OpenCode used — including the read-back rules (`output.args` and `output.parts` replaced by
//! a plugin are ignored). A permuted plugin order makes the comparison fail.

use serde_json::Value;

use crate::support::*;

const HOOKS: &[&str] = &[
    "chat.message",
    "chat.params",
    "chat.headers",
    "tool.execute.before",
    "tool.execute.after",
];

fn recorded() -> Value {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/oracle/hooks/chains.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(v["opencode_version"], "1.18.4");
    v
}

/// The fixture project with its three plugins listed in `order`, approved and activated.
fn hooks_sandbox(order: &[&str]) -> Sandbox {
    let s = Sandbox::new();
    let src = repo_root().join("fixtures/hooks/project/.opencode");
    for sub in ["lib", "tools"] {
        for e in std::fs::read_dir(src.join(sub)).unwrap().flatten() {
            s.write(
                &format!(
                    "project/.opencode/{sub}/{}",
                    e.file_name().to_string_lossy()
                ),
                &std::fs::read_to_string(e.path()).unwrap(),
            );
        }
    }
    // The fixture's own config (model, provider), with the plugin list in the order asked for.
    let mut config: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("fixtures/hooks/project/opencode.json")).unwrap(),
    )
    .unwrap();
    config["plugin"] = order
        .iter()
        .map(|p| Value::from(format!("./.opencode/lib/hook-{p}.ts")))
        .collect();
    s.write("project/opencode.json", &config.to_string());
    approve_and_load(|a| s.run_json(a));
    s
}

/// The `config` hook calls Berth makes when it activates the plugins.
fn berth_config_calls(s: &Sandbox) -> Vec<Value> {
    let log = s.root.path().join("config-hooks.jsonl");
    let _ = std::fs::remove_file(&log);
    let mut cmd = s.berth(&["tools", "--json"]);
    cmd.env("BERTH_ORACLE_HOOK_LOG", &log);
    assert!(cmd.output().unwrap().status.success());
    std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["hook"] == "config")
        .collect()
}

/// Runs one hook in Berth; returns the final output and the steps the plugins logged.
fn berth_chain(s: &Sandbox, hook: &str, input: &Value, output: &Value) -> (Value, Vec<Value>) {
    let log = s.root.path().join("hooks.jsonl");
    let _ = std::fs::remove_file(&log);
    let mut cmd = s.berth(&[
        "hook",
        hook,
        "--input",
        &input.to_string(),
        "--output",
        &output.to_string(),
        "--json",
    ]);
    cmd.env("BERTH_ORACLE_HOOK_LOG", &log);
    let (code, v) = parse_json_output(&cmd.output().unwrap());
    assert_eq!(code, 0, "{v}");
    // Only this hook's steps (activation also runs the `config` hooks, which log too).
    let steps = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(&same_placeholders(l)).unwrap())
        .filter(|v| v["hook"] == hook)
        .collect();
    (
        serde_json::from_str(&same_placeholders(&v["output"].to_string())).unwrap(),
        steps,
    )
}

/// Plugins derive new part ids from the id they were given (`<id>p1`); the recorder wrote the
/// real ones as `<part:1p1>`. Same value, other placeholder spelling.
fn same_placeholders(json: &str) -> String {
    (1..=3).fold(json.to_string(), |acc, i| {
        acc.replace(&format!("<part:1>p{i}"), &format!("<part:1p{i}>"))
    })
}

/// The final value OpenCode really used for one recorded chain.
fn opencode_final(rec: &Value, hook: &str, last_step: &Value) -> Value {
    match hook {
        // In-place only: the tool ran with the original object as p1 left it.
        "tool.execute.before" => serde_json::json!({ "args": rec["tool_result"]["input"] }),
        _ => last_step["output_after"].clone(),
    }
}

/// Compares Berth with one recording; Err lists every difference.
fn compare(rec: &Value, s: &Sandbox) -> Result<(), Vec<String>> {
    let calls = rec["calls"].as_array().unwrap();
    let mut diffs = Vec::new();
    let mut compared = 0;
    for hook in HOOKS {
        // The first chain of this hook in the recording (p1, p2, p3 in a row).
        let Some(first) = calls.iter().position(|c| c["hook"] == *hook) else {
            diffs.push(format!("{hook}: not in the recording"));
            continue;
        };
        let chain: Vec<&Value> = calls[first..]
            .iter()
            .take_while(|c| c["hook"] == *hook)
            .take(3)
            .collect();
        let (ours, steps) = berth_chain(s, hook, &chain[0]["input"], &chain[0]["output_before"]);
        compared += 1;
        let plugins = |v: &[&Value]| {
            v.iter()
                .map(|c| c["plugin"].as_str().unwrap_or("?").to_string())
                .collect::<Vec<_>>()
        };
        let steps_ref: Vec<&Value> = steps.iter().collect();
        if plugins(&steps_ref) != plugins(&chain) {
            diffs.push(format!(
                "{hook}: plugin order berth {:?}, opencode {:?}",
                plugins(&steps_ref),
                plugins(&chain)
            ));
            continue;
        }
        for (b, o) in steps.iter().zip(&chain) {
            for key in ["output_before", "output_after"] {
                if b[key] != o[key] {
                    diffs.push(format!(
                        "{hook} {} {key}:\n berth    {}\n opencode {}",
                        o["plugin"], b[key], o[key]
                    ));
                }
            }
        }
        let mut theirs = opencode_final(rec, hook, chain.last().unwrap());
        let mut ours = ours;
        if *hook == "chat.message" {
            // Parts reassigned by a plugin are ignored: the stored message holds the original
            // array as p1 left it (ids aside).
            let texts = |v: &Value| {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["text"].clone())
                    .collect::<Vec<_>>()
            };
            let stored = texts(&rec["observed"]["chat.message"]["stored_user_parts"]);
            if texts(&ours["parts"]) != stored {
                diffs.push(format!(
                    "chat.message: final parts berth {:?}, opencode stored {:?}",
                    texts(&ours["parts"]),
                    stored
                ));
            }
            ours["parts"] = Value::Null;
            theirs["parts"] = Value::Null;
            theirs = chain[0]["output_after"].clone();
            theirs["parts"] = Value::Null;
        }
        if ours != theirs {
            diffs.push(format!(
                "{hook}: final value\n berth    {ours}\n opencode {theirs}"
            ));
        }
    }
    assert_eq!(compared, HOOKS.len());
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs)
    }
}

#[test]
fn hook_chains_match_real_opencode_step_by_step() {
    let rec = recorded();
    let s = hooks_sandbox(&["p1", "p2", "p3"]);
    if let Err(d) = compare(&rec, &s) {
        panic!("{}", d.join("\n"));
    }
}

#[test]
fn config_hooks_run_once_in_plugin_order_over_the_merged_config_as_in_opencode() {
    let rec = recorded();
    let s = hooks_sandbox(&["p1", "p2", "p3"]);
    let ours = berth_config_calls(&s);
    let theirs: Vec<&Value> = rec["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["hook"] == "config")
        .collect();
    assert_eq!(ours.len(), theirs.len(), "{ours:?}");
    for (b, o) in ours.iter().zip(&theirs) {
        assert_eq!(b, *o, "config call of {}", o["plugin"]);
    }
}

#[test]
fn a_different_plugin_order_fails_the_hook_comparison() {
    let rec = recorded();
    let s = hooks_sandbox(&["p2", "p1", "p3"]);
    assert!(compare(&rec, &s).is_err());
}

/// Real OpenCode, in this run: the hook chains it produces now are Berth's chains too.
#[test]
fn hook_chains_match_real_opencode_live() {
    let tmp = tempfile::tempdir().unwrap();
    let out_file = tmp.path().join("chains.json");
    run_oracle("record-hooks", &["--out".as_ref(), out_file.as_os_str()]);
    let live: Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(live["opencode_version"], "1.18.4");
    let s = hooks_sandbox(&["p1", "p2", "p3"]);
    if let Err(d) = compare(&live, &s) {
        panic!("{}", d.join("\n"));
    }
}
