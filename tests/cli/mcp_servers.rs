//! MCP servers from OpenCode's config as sources, with the fixture server written here
//! (`fixtures/mcp/fixture-server.mjs`, real processes): discovered with what they would run or
//! reach, approved like every source, listed under OpenCode's keys with the server's schemas,
//! called, cancelled, crashed; reached over streamable HTTP; what Berth cannot or must not
//! connect said so.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{alive, assert_not_in_any_file, repo_root, McpFixture, Sandbox};

fn fixture() -> String {
    repo_root()
        .join("fixtures/mcp/fixture-server.mjs")
        .display()
        .to_string()
}

/// A sandbox whose project config lists `servers` as its `mcp`.
fn with_servers(servers: Value) -> Sandbox {
    let s = Sandbox::new();
    s.write(
        "project/opencode.json",
        &json!({ "$schema": "https://opencode.ai/config.json", "mcp": servers }).to_string(),
    );
    s
}

/// The fixture on stdio, logging what it sees to `log`.
fn stdio_entry(log: &Path) -> Value {
    json!({
        "type": "local",
        "command": ["node", fixture()],
        "environment": { "MCP_FIXTURE_LOG": log.display().to_string(), "FIXTURE_TOKEN": "canary-9f2c41" },
    })
}

fn source_named<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "mcp" && s["entry"] == name)
        .unwrap_or_else(|| panic!("no MCP source {name}: {v}"))
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits until `log` has a line starting with `prefix` (the event that proves the state).
fn wait_for_line(log: &Path, prefix: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while !log_lines(log).iter().any(|l| l.starts_with(prefix)) {
        assert!(
            Instant::now() < until,
            "no `{prefix}` in {:?}",
            log_lines(log)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The MCP servers' tools of a `berth tools` answer (Berth's built-ins are listed too).
fn mcp_tools(v: &Value) -> Vec<Value> {
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["provider"]["kind"] == "mcp")
        .cloned()
        .collect()
}

fn approve(s: &Sandbox, name: &str) -> String {
    let (_, v) = s.run_json(&["sources"]);
    let id = source_named(&v, name)["id"].as_str().unwrap().to_string();
    let (code, out) = s.run_json(&["approve", &id]);
    assert_eq!(code, 0, "{out}");
    id
}

#[test]
fn an_approved_stdio_server_is_listed_under_opencode_keys_and_called() {
    let s = Sandbox::new();
    let log = s.root.path().join("fixture.log");
    let s = {
        s.write(
            "project/opencode.json",
            &json!({ "mcp": { "fx.tools": stdio_entry(&log) } }).to_string(),
        );
        s
    };
    // Before approval: what it would run and which variables it gets, by name; nothing started.
    let (_, v) = s.run_json(&["sources"]);
    let src = source_named(&v, "fx.tools");
    assert_eq!(src["state"], "pending-approval", "{src}");
    let summary = src["capabilities"]["summary"].to_string();
    assert!(summary.contains("fixture-server.mjs"), "{summary}");
    assert!(summary.contains("FIXTURE_TOKEN") && summary.contains("MCP_FIXTURE_LOG"));
    assert!(!summary.contains("canary-9f2c41"));
    let (_, tools) = s.run_json(&["tools"]);
    assert_eq!(mcp_tools(&tools), Vec::<Value>::new());
    assert!(log_lines(&log).is_empty(), "started before approval");

    let id = approve(&s, "fx.tools");
    let (code, tools) = s.run_json(&["tools"]);
    assert_eq!(code, 0, "{tools}");
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    // OpenCode's keys: the server's and the tool's names sanitized, joined by `_`.
    let mut want: Vec<String> = ["crash", "dotted.name", "echo", "fails", "slow"]
        .iter()
        .map(|t| berth_discovery::opencode_tool_key("fx.tools", t))
        .collect();
    want.sort();
    assert_eq!(names, want);
    assert!(names.contains(&"fx_tools_dotted_name"));
    let echo = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx_tools_echo")
        .unwrap();
    assert_eq!(echo["provider"]["kind"], "mcp");
    assert_eq!(echo["provider"]["source_id"], id.as_str());
    assert_eq!(
        echo["parameters"],
        json!({"type": "object", "properties": {"text": {"type": "string", "description": "what to say back"}}, "required": ["text"]})
    );

    let (code, r) = s.run_json(&["invoke", "fx_tools_echo", "--args", r#"{"text":"ahoy"}"#]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"], "ahoy");
    assert_eq!(r["source_id"], id.as_str());
    let (_, r) = s.run_json(&["invoke", "fx_tools_dotted_name", "--args", r#"{"n":7}"#]);
    assert_eq!(r["output"], "dotted 7", "{r}");
    // A tool's own error is the call's failure, with its text.
    let (_, r) = s.run_json(&["invoke", "fx_tools_fails", "--args", "{}"]);
    assert_eq!(r["status"], "failed", "{r}");
    assert!(log_lines(&log).contains(&"call dotted.name".to_string()));
    // The variable's value went to the server only: not to the store, the logs or status.
    let (_, status) = s.run_json(&["status"]);
    assert!(!status.to_string().contains("canary-9f2c41"));
    assert_not_in_any_file(&s.data_dir(), "canary-9f2c41");

    // Denied: its tools are gone and nothing of it starts.
    let (code, _) = s.run_json(&["deny", &id]);
    assert_eq!(code, 0);
    let before = log_lines(&log).len();
    let (_, tools) = s.run_json(&["tools"]);
    assert_eq!(mcp_tools(&tools), Vec::<Value>::new());
    assert_eq!(log_lines(&log).len(), before, "a denied server was started");
}

/// `berth invoke` of `tool` in the background.
fn invoke_in_background(s: &Sandbox, tool: &str, args: &str) -> Child {
    s.berth(&["invoke", tool, "--args", args])
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn started_pids(log: &Path) -> Vec<u32> {
    log_lines(log)
        .iter()
        .filter_map(|l| l.strip_prefix("started ").and_then(|p| p.parse().ok()))
        .collect()
}

#[test]
fn cancel_reaches_the_server_and_the_receipt_ends_cancelled() {
    let s = Sandbox::new();
    let log = s.root.path().join("fixture.log");
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "fx": stdio_entry(&log) } }).to_string(),
    );
    approve(&s, "fx");
    let child = invoke_in_background(&s, "fx_slow", r#"{"ms":60000}"#);
    wait_for_line(&log, "call slow");
    let pid = *started_pids(&log).last().unwrap();
    let asked = Instant::now();
    // SAFETY: a plain signal to the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let took = asked.elapsed();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(r["error"]["code"], "cancelled", "{r}");
    // The server saw `notifications/cancelled` for the call, and did not finish it.
    let lines = log_lines(&log);
    assert!(
        lines.iter().any(|l| l.starts_with("cancelled ")),
        "{lines:?}"
    );
    assert!(!lines.contains(&"completed slow".to_string()), "{lines:?}");
    assert!(took < Duration::from_millis(3000), "cancel took {took:?}");
    assert!(!alive(pid), "the server outlived the cancel");

    // A deadline ends the same way, reported as the deadline.
    let (_, r) = s.run_json(&[
        "invoke",
        "fx_slow",
        "--args",
        r#"{"ms":60000}"#,
        "--timeout-ms",
        "300",
    ]);
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(r["error"]["code"], "timeout", "{r}");
    assert_eq!(
        log_lines(&log)
            .iter()
            .filter(|l| l.starts_with("cancelled "))
            .count(),
        2
    );
}

#[test]
fn a_crash_mid_call_ends_it_process_lost_and_is_never_replayed() {
    let s = Sandbox::new();
    let log = s.root.path().join("fixture.log");
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "fx": stdio_entry(&log) } }).to_string(),
    );
    approve(&s, "fx");
    let (code, r) = s.run_json(&["invoke", "fx_crash", "--args", "{}"]);
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["error"]["code"], "process-lost", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("`fx`"));
    let calls = |log: &Path| log_lines(log).iter().filter(|l| *l == "call crash").count();
    assert_eq!(calls(&log), 1, "{:?}", log_lines(&log));
    // The next call starts the server again and works; the crashed call was not sent again.
    let (_, r) = s.run_json(&["invoke", "fx_echo", "--args", r#"{"text":"after"}"#]);
    assert_eq!(r["output"], "after", "{r}");
    assert_eq!(calls(&log), 1);
}

#[test]
fn a_remote_server_over_streamable_http_is_listed_and_called() {
    let s = Sandbox::new();
    let log: PathBuf = s.root.path().join("http.log");
    let server = McpFixture::start(&["--http", "0"], Some(&log));
    let url = server.url.clone();
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "web": { "type": "remote", "url": url, "headers": { "X-Api-Key": "canary-77ab" } } } })
            .to_string(),
    );
    let (_, v) = s.run_json(&["sources"]);
    let summary = source_named(&v, "web")["capabilities"]["summary"].to_string();
    assert!(
        summary.contains("127.0.0.1") && summary.contains("X-Api-Key"),
        "{summary}"
    );
    assert!(!summary.contains("canary-77ab"));
    approve(&s, "web");
    let (_, tools) = s.run_json(&["tools"]);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"web_echo") && names.contains(&"web_dotted_name"),
        "{tools}"
    );
    let (_, r) = s.run_json(&["invoke", "web_echo", "--args", r#"{"text":"over http"}"#]);
    assert_eq!(r["output"], "over http", "{r}");
    assert_not_in_any_file(&s.data_dir(), "canary-77ab");
}

#[test]
fn an_sse_only_server_is_unsupported_and_says_which_transport() {
    let s = Sandbox::new();
    let log = s.root.path().join("sse.log");
    let server = McpFixture::start(&["--sse-only", "0"], Some(&log));
    let url = server.url.clone();
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "legacy": { "type": "remote", "url": url } } }).to_string(),
    );
    approve(&s, "legacy");
    let (_, tools) = s.run_json(&["tools"]);
    let problem = tools["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["code"] == "unsupported")
        .unwrap_or_else(|| panic!("no unsupported problem: {tools}"));
    assert!(
        problem["message"].as_str().unwrap().contains("HTTP+SSE"),
        "{problem}"
    );
}

#[test]
fn what_berth_must_not_or_cannot_connect_is_said_before_anything_runs() {
    let s = with_servers(json!({
        "off": { "type": "local", "command": ["node", "x.mjs"], "enabled": false },
        "fetched": { "type": "local", "command": ["npx", "-y", "@example/mcp-thing"] },
        "myself": { "type": "local", "command": ["/opt/tools/berth", "mcp"] },
        "odd": { "type": "websocket", "url": "ws://x" },
        "nocmd": { "type": "local" },
    }));
    let (_, v) = s.run_json(&["sources"]);
    assert_eq!(source_named(&v, "off")["state"], "disabled");
    let fetched = source_named(&v, "fetched");
    let d = fetched["diagnostics"].to_string();
    assert!(
        d.contains("@example/mcp-thing") && d.contains("newest") && d.contains("install scripts"),
        "{d}"
    );
    let me = source_named(&v, "myself");
    assert_eq!(me["state"], "unsupported");
    assert!(me["diagnostics"].to_string().contains("Berth itself"));
    for broken in ["odd", "nocmd"] {
        let b = source_named(&v, broken);
        assert_eq!(b["diagnostics"][0]["code"], "action-required", "{b}");
        assert!(!b["diagnostics"][0]["recovery"].as_str().unwrap().is_empty());
    }
    // Neither Berth itself nor a switched-off server can be approved.
    for name in ["myself", "off"] {
        let id = source_named(&v, name)["id"].as_str().unwrap().to_string();
        let (code, out) = s.run_json(&["approve", &id]);
        assert_eq!(code, 1, "{out}");
    }
}

/// OpenCode 1.18.4's record of the same servers (`scripts/oracle/record-mcp-names`).
fn names_recording() -> Value {
    let text = std::fs::read_to_string(repo_root().join("tests/oracle/mcp/names.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The recorded servers, configured in Berth as in the recording (`fixtures/mcp-names`).
fn recorded_servers(rec: &Value) -> Value {
    let servers = rec["servers"].as_object().unwrap();
    let entries = servers.iter().map(|(name, tools)| {
        let mut command = vec![json!("node"), json!(fixture())];
        for t in tools.as_array().unwrap() {
            command.extend([json!("--tool"), t.clone()]);
        }
        (name.clone(), json!({ "type": "local", "command": command }))
    });
    Value::Object(entries.collect())
}

/// How Berth's MCP tools differ from what OpenCode sent the model, beyond ledger row D-040
/// (OpenCode adds `additionalProperties: false` to a server's schema) and the collision (D-038:
/// OpenCode's winner is not fixed, so either candidate's description is OpenCode's).
fn differences_from_opencode(rec: &Value, tools: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    let offered = rec["offered"].as_array().unwrap();
    let mut theirs: Vec<&str> = offered
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut ours: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    theirs.sort();
    ours.sort();
    if theirs != ours {
        out.push(format!("names: OpenCode {theirs:?}, Berth {ours:?}"));
    }
    let collision = &rec["collision"];
    for want in offered {
        let name = want["name"].as_str().unwrap();
        let Some(got) = tools.iter().find(|t| t["name"] == name) else {
            continue;
        };
        let descriptions: Vec<&Value> = if name == collision["key"] {
            collision["candidates"]
                .as_object()
                .unwrap()
                .values()
                .collect()
        } else {
            vec![&want["description"]]
        };
        if !descriptions.contains(&&got["description"]) {
            out.push(format!(
                "{name}: description {} not {descriptions:?}",
                got["description"]
            ));
        }
        // D-040: the server's schema as it gave it; OpenCode closes it.
        let mut closed = got["parameters"].clone();
        closed["additionalProperties"] = json!(false);
        if closed != want["parameters"] {
            out.push(format!(
                "{name}: parameters {} not {}",
                got["parameters"], want["parameters"]
            ));
        }
    }
    out
}

#[test]
fn mcp_tools_get_opencodes_names_descriptions_and_schemas_and_the_collision_is_shown() {
    let rec = names_recording();
    assert_eq!(rec["opencode_version"], "1.18.4");
    let s = with_servers(recorded_servers(&rec));
    for name in rec["servers"].as_object().unwrap().keys() {
        approve(&s, name);
    }
    let (code, v) = s.run_json(&["tools"]);
    assert_eq!(code, 0, "{v}");
    let tools = mcp_tools(&v);
    assert_eq!(
        differences_from_opencode(&rec, &tools),
        Vec::<String>::new()
    );
    assert!(tools.iter().any(|t| t["name"] == "my_server_echo"));

    // OpenCode offered one tool under the colliding key, from either server (the recording
    // saw both win), and a call reached the one offered; Berth shows both as a conflict.
    let collision = &rec["collision"];
    assert_eq!(collision["winners"], json!(["foo", "foo_bar"]));
    for o in collision["outcomes"].as_array().unwrap() {
        assert_eq!(o["offered_under_key"], 1, "{o}");
        assert_eq!(o["offered_from"], o["call_reached"], "{o}");
    }
    let (_, srcs) = s.run_json(&["sources"]);
    let (foo, foo_bar) = (
        source_named(&srcs, "foo")["id"].clone(),
        source_named(&srcs, "foo_bar")["id"].clone(),
    );
    let (code, v) = s.run_json(&["conflicts"]);
    assert_eq!(code, 0, "{v}");
    let c = v["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == "foo_bar_baz")
        .unwrap_or_else(|| panic!("no conflict on foo_bar_baz: {v}"));
    let mut ids: Vec<&Value> = c["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    ids.sort_by_key(|v| v.to_string());
    let mut want = vec![&foo, &foo_bar];
    want.sort_by_key(|v| v.to_string());
    assert_eq!(ids, want, "{c}");
    assert!(c["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["kind"] == "mcp"));
    // OpenCode's pick between them is not fixed: Berth names none, and keeps one serving.
    assert!(c["opencode_winner"].is_null(), "{c}");
    assert!(c["serving"] == foo || c["serving"] == foo_bar, "{c}");
    assert_eq!(c["state"], "asks", "{c}");
}

#[test]
fn the_opencode_comparison_of_mcp_tools_fails_on_a_perturbed_recording() {
    let rec = names_recording();
    let s = with_servers(recorded_servers(&rec));
    for name in rec["servers"].as_object().unwrap().keys() {
        approve(&s, name);
    }
    let (_, v) = s.run_json(&["tools"]);
    let tools = mcp_tools(&v);
    let perturb = |f: &dyn Fn(&mut Value)| {
        let mut r = rec.clone();
        f(&mut r);
        differences_from_opencode(&r, &tools)
    };
    let at = |r: &mut Value, name: &str| -> usize {
        r["offered"]
            .as_array()
            .unwrap()
            .iter()
            .position(|t| t["name"] == name)
            .unwrap()
    };
    // A description, a schema, a name and the collision's candidates, each changed alone.
    let d = perturb(&|r| {
        let i = at(r, "fx_echo");
        r["offered"][i]["description"] = json!("Returns its text!");
    });
    assert!(
        d.len() == 1 && d[0].starts_with("fx_echo: description"),
        "{d:?}"
    );
    let d = perturb(&|r| {
        let i = at(r, "fx_dotted_name");
        r["offered"][i]["parameters"]["properties"]["n"]["minimum"] = json!(1);
    });
    assert!(
        d.len() == 1 && d[0].starts_with("fx_dotted_name: parameters"),
        "{d:?}"
    );
    let d = perturb(&|r| {
        let i = at(r, "my_server_echo");
        r["offered"][i]["name"] = json!("my.server_echo");
    });
    assert!(d.len() == 1 && d[0].starts_with("names:"), "{d:?}");
    let d = perturb(&|r| {
        r["collision"]["candidates"] = json!({ "foo": "something else", "foo_bar": "neither" });
    });
    assert!(
        d.len() == 1 && d[0].starts_with("foo_bar_baz: description"),
        "{d:?}"
    );
}

#[test]
fn plugins_tool_hooks_run_around_mcp_and_builtin_calls() {
    let s = Sandbox::new();
    let log = s.root.path().join("fixture.log");
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "fx": stdio_entry(&log) } }).to_string(),
    );
    s.copy_fixture(
        "plugins/rewrites-around-tools.ts",
        "project/.opencode/plugins/rewrites-around-tools.ts",
    );
    s.write("project/asked.txt", "asked\n");
    s.write("project/rewritten.txt", "rewritten\n");
    crate::support::approve_and_load(|a| s.run_json(a));
    let (_, v) = s.run_json(&["sources"]);
    let plugin = crate::support::id_of(&v, "rewrites-around-tools.ts");

    // An MCP tool: the server got the rewritten argument, the hook's text block is the output,
    // the receipt keeps the server's result and names the plugin.
    let (code, r) = s.run_json(&["invoke", "fx_echo", "--args", r#"{"text":"hi"}"#]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["output"], "hi+before+after", "{r}");
    assert_eq!(r["transformed_by"], json!([plugin]), "{r}");
    assert_eq!(
        r["raw"],
        json!({ "content": [{ "type": "text", "text": "hi+before" }] }),
        "{r}"
    );
    let asked = berth_discovery::sha256_hex(json!({"text": "hi"}).to_string().as_bytes());
    assert_ne!(
        r["args_digest"],
        asked.as_str(),
        "the receipt names what ran: {r}"
    );

    // A built-in: `read` ran on the rewritten path, the after hook's output is the answer.
    let asked = s.project().join("asked.txt").display().to_string();
    let args = json!({ "filePath": asked }).to_string();
    let (code, r) = s.run_json(&["invoke", "read", "--args", &args]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["status"], "completed", "{r}");
    let out = r["output"].as_str().unwrap();
    assert!(
        out.contains("1: rewritten") && out.ends_with("\n+after"),
        "{r}"
    );
    assert_eq!(r["transformed_by"], json!([plugin]), "{r}");
    assert!(
        r["raw"]["output"]
            .as_str()
            .unwrap()
            .contains("1: rewritten")
            && !r["raw"]["output"].as_str().unwrap().contains("+after"),
        "{r}"
    );
    assert!(r["raw"]["title"].is_string(), "{r}");
}

#[test]
fn mcp_names_match_real_opencode_live() {
    // The recorder against the real OpenCode now: the same tools, descriptions and schemas as
    // the recording, one tool under the colliding key that a call reaches, and Berth equal to it.
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("names.json");
    crate::support::run_oracle(
        "record-mcp-names",
        &[std::ffi::OsStr::new("--out"), file.as_os_str()],
    );
    let live: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let rec = names_recording();
    assert_eq!(live["opencode_version"], "1.18.4");
    // The colliding key's tool is either server's (OpenCode's pick is not fixed); the rest is
    // the recording's, exactly.
    let key = &rec["collision"]["key"];
    let settled = |r: &Value| -> Vec<Value> {
        r["offered"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| &t["name"] != key)
            .cloned()
            .collect()
    };
    assert_eq!(settled(&live), settled(&rec));
    let candidates: Vec<&Value> = rec["collision"]["candidates"]
        .as_object()
        .unwrap()
        .values()
        .collect();
    let under_key: Vec<&Value> = live["offered"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| &t["name"] == key)
        .collect();
    assert!(
        under_key.len() == 1 && candidates.contains(&&under_key[0]["description"]),
        "{under_key:?}"
    );
    assert_eq!(live["api"], rec["api"]);
    assert_eq!(live["hooks"], rec["hooks"]);
    for o in live["collision"]["outcomes"].as_array().unwrap() {
        assert_eq!(o["offered_under_key"], 1, "{o}");
        assert_eq!(o["offered_from"], o["call_reached"], "{o}");
    }
    let s = with_servers(recorded_servers(&live));
    for name in live["servers"].as_object().unwrap().keys() {
        approve(&s, name);
    }
    let (_, v) = s.run_json(&["tools"]);
    assert_eq!(
        differences_from_opencode(&live, &mcp_tools(&v)),
        Vec::<String>::new()
    );
}
