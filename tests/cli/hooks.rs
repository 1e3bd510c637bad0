//! Every stable hook of spec §1.3, one test each, through `berth hook`: the read-back its row
//! states (in-place only, or reassignable), a throw that stops the chain naming the plugin
//! (only logged for `config`), and a hook over its time budget failing with `timeout`.
//! Two plugins chain on every hook: `hook-matrix` transforms, then `hook-faults` injects.

use serde_json::{json, Value};

use crate::support::*;

/// The spec's "in-place only" outputs: reassigning these keys is ignored by OpenCode.
fn in_place_only(hook: &str) -> &'static [&'static str] {
    match hook {
        "chat.message" => &["message", "parts"],
        "command.execute.before" => &["parts"],
        "tool.execute.before" => &["args"],
        "experimental.chat.messages.transform" => &["messages"],
        "experimental.chat.system.transform" => &["system"],
        _ => &[],
    }
}

/// A realistic initial output for each hook (shapes from spec §1.3).
fn initial_output(hook: &str) -> Value {
    match hook {
        "chat.message" => {
            json!({ "message": { "id": "msg_1", "role": "user" }, "parts": [{ "type": "text", "text": "hi" }] })
        }
        "chat.params" => {
            json!({ "temperature": 0.2, "topP": 1, "topK": 0, "maxOutputTokens": 100, "options": {} })
        }
        "chat.headers" => json!({ "headers": { "x-a": "1" } }),
        "permission.ask" => json!({ "status": "ask" }),
        "command.execute.before" => json!({ "parts": [{ "type": "text", "text": "/cmd" }] }),
        "tool.execute.before" => json!({ "args": { "path": "a.txt" } }),
        "tool.execute.after" => json!({ "title": "t", "output": "o", "metadata": {} }),
        "shell.env" => json!({ "env": { "A": "1" } }),
        "tool.definition" => json!({ "description": "d", "parameters": { "type": "object" } }),
        "experimental.chat.messages.transform" => {
            json!({ "messages": [{ "info": {}, "parts": [] }] })
        }
        "experimental.chat.system.transform" => json!({ "system": ["You are helpful."] }),
        "experimental.provider.small_model" => json!({ "model": { "id": "m" } }),
        "experimental.session.compacting" => json!({ "context": ["c"], "prompt": "p" }),
        "experimental.compaction.autocontinue" => json!({ "enabled": true }),
        "experimental.text.complete" => json!({ "text": "hello" }),
        other => panic!("no initial output for {other}"),
    }
}

/// What hook-matrix's transform leaves, given the hook's read-back.
fn expected(hook: &str, initial: &Value) -> Value {
    let keep = in_place_only(hook);
    let mut out = serde_json::Map::new();
    for (k, v) in initial.as_object().unwrap() {
        let reassigned = keep.is_empty() || !keep.contains(&k.as_str());
        let value = match v {
            Value::Array(a) if !reassigned => {
                let mut a = a.clone();
                a.push(json!("inplace"));
                Value::Array(a)
            }
            Value::Object(o) if !reassigned => {
                let mut o = o.clone();
                o.insert("inplace".into(), json!(true));
                Value::Object(o)
            }
            Value::Array(_) => json!(["reassigned"]),
            Value::Object(_) => json!({ "reassigned": true }),
            _ => json!("reassigned"),
        };
        out.insert(k.clone(), value);
    }
    Value::Object(out)
}

fn sandbox() -> Sandbox {
    let s = plugin_sandbox(&["hook-matrix.ts", "hook-faults.ts"]);
    // The chains as OpenCode runs them: no cap holds a hook here (`shell.env` is `review` by
    // default, D-032; the caps have their own tests in plugins.rs).
    assert_eq!(
        run(&s, &[], &["policy", "set", "cap.shell-env", "allow"]).0,
        0
    );
    approve_and_load(|a| run(&s, &[], a));
    s
}

fn run(s: &Sandbox, env: &[(&str, &str)], args: &[&str]) -> (i32, Value) {
    let mut cmd = s.berth(args);
    cmd.arg("--json");
    for (k, v) in env {
        cmd.env(k, v);
    }
    parse_json_output(&cmd.output().unwrap())
}

fn check_hook(hook: &str) {
    let s = sandbox();
    let initial = initial_output(hook);
    let output = initial.to_string();
    let hook_run = |env: &[(&str, &str)]| {
        run(
            &s,
            env,
            &["hook", hook, "--input", "{}", "--output", &output],
        )
    };

    // Read-back as the spec's row says.
    let (code, v) = hook_run(&[]);
    assert_eq!(code, 0, "{hook}: {v}");
    assert_eq!(v["output"], expected(hook, &initial), "{hook}: read-back");

    // A throw stops the chain and fails the operation, naming the plugin and the hook.
    let (code, v) = hook_run(&[("BERTH_TEST_THROW_HOOK", hook)]);
    assert_eq!(code, 1, "{hook}: {v}");
    assert_eq!(v["error"]["code"], "plugin-failed", "{hook}: {v}");
    assert!(
        v["error"]["plugin"]
            .as_str()
            .unwrap_or_default()
            .starts_with("plugin-hook-faults"),
        "{hook}: {v}"
    );
    assert!(v["error"]["message"].as_str().unwrap().contains(hook));

    // Over its budget (the policy's `budget.hook`): `timeout`, naming the plugin and the hook,
    // well before the call's deadline.
    let budget = if hook == "tool.execute.after" {
        "budget.tool-after"
    } else {
        "budget.hook"
    };
    assert_eq!(run(&s, &[], &["policy", "set", budget, "300"]).0, 0);
    let started = std::time::Instant::now();
    let (code, v) = hook_run(&[("BERTH_TEST_SLOW_HOOK", hook)]);
    assert_eq!(run(&s, &[], &["policy", "set", budget, "--unset"]).0, 0);
    assert_eq!(code, 1, "{hook}: {v}");
    assert_eq!(v["error"]["code"], "timeout", "{hook}: {v}");
    assert!(v["error"]["plugin"]
        .as_str()
        .unwrap_or_default()
        .starts_with("plugin-hook-faults"));
    assert!(v["error"]["message"].as_str().unwrap().contains(hook));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

macro_rules! hook_tests {
    ($($name:ident => $hook:literal),* $(,)?) => {
        $(#[test] fn $name() { check_hook($hook); })*
    };
}

hook_tests! {
    chat_message_keeps_message_and_parts_in_place_only => "chat.message",
    chat_params_reads_the_whole_output_back => "chat.params",
    chat_headers_reads_headers_back => "chat.headers",
    permission_ask_reads_status_back => "permission.ask",
    command_execute_before_keeps_parts_in_place_only => "command.execute.before",
    tool_execute_before_keeps_args_in_place_only => "tool.execute.before",
    tool_execute_after_reads_the_result_back => "tool.execute.after",
    shell_env_reads_env_back => "shell.env",
    tool_definition_reads_back => "tool.definition",
    messages_transform_keeps_messages_in_place_only => "experimental.chat.messages.transform",
    system_transform_keeps_system_in_place_only => "experimental.chat.system.transform",
    small_model_reads_back => "experimental.provider.small_model",
    session_compacting_reads_back => "experimental.session.compacting",
    compaction_autocontinue_reads_back => "experimental.compaction.autocontinue",
    text_complete_reads_text_back => "experimental.text.complete",
}

#[test]
fn config_hooks_change_the_config_and_a_throw_or_a_hang_is_only_logged() {
    let s = sandbox();
    let hook =
        |env: &[(&str, &str)]| run(&s, env, &["hook", "config", "--output", r#"{"plugin":[]}"#]);
    let (code, v) = hook(&[]);
    assert_eq!(
        (code, &v["output"]["matrix"]),
        (0, &json!("config-seen")),
        "{v}"
    );
    let (code, v) = hook(&[("BERTH_TEST_THROW_HOOK", "config")]);
    assert_eq!(
        (code, &v["output"]["matrix"]),
        (0, &json!("config-seen")),
        "{v}"
    );
    assert_eq!(run(&s, &[], &["policy", "set", "budget.hook", "300"]).0, 0);
    let (code, v) = hook(&[("BERTH_TEST_SLOW_HOOK", "config")]);
    assert_eq!(
        (code, &v["output"]["matrix"]),
        (0, &json!("config-seen")),
        "{v}"
    );
}

#[test]
fn dispose_hooks_run_when_berth_stops_its_hosts() {
    let s = sandbox();
    let marker = s.root.path().join("DISPOSED");
    let marker_s = marker.display().to_string();
    let (code, _) = run(&s, &[("BERTH_TEST_DISPOSE_MARKER", &marker_s)], &["tools"]);
    assert_eq!(code, 0);
    assert!(marker.exists(), "dispose ran before the host stopped");
}

#[test]
fn tool_hooks_run_around_every_invocation_and_the_raw_result_is_kept() {
    // hook-matrix's tool.execute.after reassigns the result's fields; the receipt keeps both.
    let s = plugin_sandbox(&["hook-matrix.ts", "permission-gate.ts"]);
    approve_and_load(|a| run(&s, &[], a));
    assert_eq!(run(&s, &[], &["permissions", "cap", "edit", "allow"]).0, 0);
    let target = s.root.path().join("via-hooks.txt");
    let args = json!({ "path": target }).to_string();
    let (code, r) = run(
        &s,
        &[("BERTH_TEST_PERMISSION_ANSWER", "allow")],
        &["invoke", "guarded_write", "--args", &args],
    );
    assert_eq!(code, 0, "{r}");
    assert_schema("receipt", &r);
    assert_eq!(
        r["output"], "reassigned",
        "the after-hooks' result is the result"
    );
    assert_eq!(r["raw"]["output"], format!("wrote {}", target.display()));
    assert!(r["transformed_by"][0]
        .as_str()
        .unwrap()
        .starts_with("plugin-hook-matrix"));
    // tool.execute.before's replaced args were ignored: the tool wrote the path it was given.
    assert!(target.exists());
}
