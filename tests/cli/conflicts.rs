//! Contested tool names through the real binary and real hosts (seed 003 §5.3): every
//! candidate is shown, a plugin never takes over a name that served before by itself, the
//! person's choice survives a restart (each command is a new process) and holds only for the
//! candidates it was made for, and what cannot be chosen is refused with a code.

use serde_json::Value;

use crate::support::*;

/// A tool file `.opencode/tools/<name>.ts` answering `answer`.
fn tool_file(s: &Sandbox, name: &str, answer: &str) {
    s.write(
        &format!("project/.opencode/tools/{name}.ts"),
        &format!(
            "export default {{ description: \"{name} from the tool file\", args: {{}}, async execute() {{ return \"{answer}\" }} }}\n"
        ),
    );
}

/// A plugin `.opencode/plugins/<file>.ts` registering `tools`, each answering `answer`.
fn plugin(s: &Sandbox, file: &str, tools: &[&str], answer: &str) {
    let map: Vec<String> = tools
        .iter()
        .map(|t| {
            format!("{t}: {{ description: \"{t} from {file}\", args: {{}}, async execute() {{ return \"{answer}\" }} }}")
        })
        .collect();
    s.write(
        &format!("project/.opencode/plugins/{file}.ts"),
        &format!(
            "export default async () => ({{ tool: {{ {} }} }})\n",
            map.join(", ")
        ),
    );
}

/// The same as `plugin`, written as an OpenCode V2 plugin (`ctx.tool.transform`, D-044).
fn v2_plugin(s: &Sandbox, file: &str, tools: &[&str], answer: &str) {
    let adds: Vec<String> = tools
        .iter()
        .map(|t| {
            format!("tools.add({{ name: \"{t}\", description: \"{t} from {file}\", input: {{ type: \"object\", properties: {{}} }}, options: {{ codemode: false }}, execute: async () => ({{ content: \"{answer}\" }}) }})")
        })
        .collect();
    s.write(
        &format!("project/.opencode/plugins/{file}.ts"),
        &format!(
            "import {{ Plugin }} from \"@opencode/plugin\"\nexport default Plugin.define({{ id: \"example.{file}\", async setup(ctx) {{ await ctx.tool.transform((tools) => {{ {} }}) }} }})\n",
            adds.join("; ")
        ),
    );
}

fn conflicts(s: &Sandbox) -> Value {
    let (code, v) = s.run_json(&["conflicts"]);
    assert_eq!(code, 0, "{v}");
    assert_schema("conflicts", &v);
    v
}

fn conflict<'a>(v: &'a Value, tool: &str) -> &'a Value {
    v["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == tool)
        .unwrap_or_else(|| panic!("no conflict on `{tool}`: {v}"))
}

fn call(s: &Sandbox, tool: &str) -> String {
    let (code, r) = s.run_json(&["invoke", tool]);
    assert_eq!(code, 0, "{r}");
    r["output"].as_str().unwrap().to_string()
}

fn id_ending(s: &Sandbox, suffix: &str) -> String {
    let (_, v) = s.run_json(&["sources"]);
    id_of(&v, suffix)
}

#[test]
fn a_tool_file_and_a_plugin_on_one_name_are_shown_and_the_choice_survives_a_restart() {
    let s = Sandbox::new();
    tool_file(&s, "lookup", "from the file");
    plugin(&s, "p", &["lookup"], "from the plugin");
    approve_and_load(|a| s.run_json(a));
    let (file_id, plugin_id) = (
        id_ending(&s, "tools/lookup.ts"),
        id_ending(&s, "plugins/p.ts"),
    );
    let v = conflicts(&s);
    let c = conflict(&v, "lookup");
    assert_eq!(c["state"], "asks", "{c}");
    assert_eq!(c["candidates"].as_array().unwrap().len(), 2, "{c}");
    // Both new at once: Berth keeps OpenCode's pick (a plugin's tool over a tool file) and asks.
    assert_eq!(c["opencode_winner"], plugin_id.as_str());
    assert_eq!(c["serving"], plugin_id.as_str());
    assert_eq!(call(&s, "lookup"), "from the plugin");
    // `berth tools` marks it contested and lists the conflict.
    let (_, t) = s.run_json(&["tools"]);
    assert_schema("tools", &t);
    assert_eq!(t["conflicts"][0]["tool"], "lookup", "{t}");

    let (code, chosen) = s.run_json(&["choose", "lookup", &file_id]);
    assert_eq!(code, 0, "{chosen}");
    assert_schema("choose", &chosen);
    assert_eq!(chosen["conflict"]["state"], "chosen");
    assert_eq!(chosen["conflict"]["serving"], file_id.as_str());
    // Each command is a new process: the choice is the store's.
    assert_eq!(call(&s, "lookup"), "from the file");
    let v = conflicts(&s);
    assert_eq!(conflict(&v, "lookup")["state"], "chosen");
    let (_, status) = s.run_json(&["status"]);
    assert_schema("status", &status);

    // A candidate changes (approved again: the source's approval is not the conflict's): the
    // choice no longer holds, it asks and says why, and what served stays.
    plugin(&s, "p", &["lookup"], "from the plugin, v2");
    approve_and_load(|a| s.run_json(a));
    let v = conflicts(&s);
    let c = conflict(&v, "lookup");
    assert_eq!(c["state"], "asks", "{c}");
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("changed since you chose"),
        "{c}"
    );
    assert_eq!(
        c["serving"],
        file_id.as_str(),
        "no silent switch to the changed plugin"
    );
    assert_eq!(call(&s, "lookup"), "from the file");
    // Choosing again binds to the new set.
    assert_eq!(s.run_json(&["choose", "lookup", &plugin_id]).0, 0);
    assert_eq!(call(&s, "lookup"), "from the plugin, v2");
}

#[test]
fn the_name_that_served_before_stays_when_a_newcomer_claims_it() {
    let s = Sandbox::new();
    tool_file(&s, "report", "the incumbent");
    approve_and_load(|a| s.run_json(a));
    assert_eq!(call(&s, "report"), "the incumbent");
    // A plugin arrives with the same name; OpenCode would let it win silently.
    plugin(&s, "late", &["report"], "the newcomer");
    approve_and_load(|a| s.run_json(a));
    let v = conflicts(&s);
    let c = conflict(&v, "report");
    assert_eq!(c["state"], "asks");
    assert_eq!(
        c["opencode_winner"],
        id_ending(&s, "plugins/late.ts").as_str()
    );
    assert_eq!(
        c["serving"],
        id_ending(&s, "tools/report.ts").as_str(),
        "{c}"
    );
    assert_eq!(call(&s, "report"), "the incumbent");

    // Negative control: with no incumbent (a fresh data dir, both at once) the newcomer is
    // OpenCode's pick and serves — so the assertion above is about the incumbent.
    let fresh = Sandbox::new();
    tool_file(&fresh, "report", "the incumbent");
    plugin(&fresh, "late", &["report"], "the newcomer");
    approve_and_load(|a| fresh.run_json(a));
    assert_eq!(call(&fresh, "report"), "the newcomer");
}

#[test]
fn two_plugins_on_one_name_and_choices_that_cannot_be_made() {
    let s = Sandbox::new();
    plugin(&s, "a", &["shared", "only_a"], "a");
    plugin(&s, "b", &["shared"], "b");
    approve_and_load(|a| s.run_json(a));
    let a = id_ending(&s, "plugins/a.ts");
    let v = conflicts(&s);
    assert_eq!(
        v["conflicts"].as_array().unwrap().len(),
        1,
        "only `shared`: {v}"
    );
    assert_eq!(call(&s, "shared"), "b", "OpenCode's pick: the later plugin");
    assert_eq!(s.run_json(&["choose", "shared", &a]).0, 0);
    assert_eq!(call(&s, "shared"), "a");

    // Not contested, not a candidate: refused with a code, nothing recorded.
    let (code, e) = s.run_json(&["choose", "only_a", &a]);
    assert_ne!(code, 0);
    assert_eq!(e["error"]["code"], "invalid-arguments", "{e}");
    let (code, e) = s.run_json(&["choose", "shared", "tool:nowhere"]);
    assert_ne!(code, 0);
    assert_eq!(e["error"]["code"], "invalid-arguments", "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains(&a), "{e}");
    assert_eq!(
        call(&s, "shared"),
        "a",
        "the refused choices changed nothing"
    );
}

#[test]
fn a_protected_name_cannot_be_taken_and_the_refusal_is_shown() {
    let s = Sandbox::new();
    // OpenCode routes every malformed call to `invalid`: Berth's own list protects it; the
    // organisation's list protects `deploy`.
    let managed = s.write("managed.json", r#"{"tools.protected": ["deploy"]}"#);
    plugin(&s, "grab", &["invalid", "deploy", "fine"], "grabbed");
    let run = |a: &[&str]| {
        let out = s
            .berth(a)
            .arg("--json")
            .env("BERTH_MANAGED_POLICY", &managed)
            .output()
            .unwrap();
        parse_json_output(&out)
    };
    approve_and_load(run);
    let (_, t) = run(&["tools"]);
    let names: Vec<&str> = t["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["fine"], "the unprotected name registers: {t}");
    let (_, v) = run(&["sources"]);
    let src = source(&v, "plugins/grab.ts");
    let limited: Vec<(String, String, String)> = src["limited"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["item"].as_str().unwrap().to_string(),
                l["cap"].as_str().unwrap().to_string(),
                l["layer"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        limited,
        vec![
            ("tool:invalid".into(), "deny".into(), "product".into()),
            ("tool:deploy".into(), "deny".into(), "organisation".into()),
        ],
        "{src}"
    );
    let (code, e) = run(&["invoke", "invalid"]);
    assert_ne!(code, 0, "{e}");
    // Not renamed either: no tool of the plugin carries the name under another spelling.
    assert!(!t.to_string().contains("invalid"), "{t}");
}

#[test]
fn a_plugin_never_takes_over_a_builtin_by_itself() {
    let s = Sandbox::new();
    s.write("project/notes.txt", "first line\nsecond line\n");
    // Berth's built-ins serve before any source is approved, receipted, limited to the project.
    let notes = s.project().join("notes.txt");
    let args = serde_json::json!({ "filePath": notes }).to_string();
    let (code, r) = s.run_json(&["invoke", "read", "--args", &args]);
    assert_eq!(code, 0, "{r}");
    assert!(
        r["output"].as_str().unwrap().contains("1: first line"),
        "{r}"
    );
    assert_eq!(r["source_id"], "builtin");
    let outside = serde_json::json!({ "filePath": s.home() }).to_string();
    let (code, e) = s.run_json(&["invoke", "read", "--args", &outside]);
    assert_ne!(code, 0);
    assert_eq!(e["error"]["code"], "policy-limited", "{e}");

    // A plugin registers `read`: the built-in keeps serving and the conflict asks.
    plugin(&s, "reader", &["read"], "the plugin's read");
    approve_and_load(|a| s.run_json(a));
    let plugin_id = id_ending(&s, "plugins/reader.ts");
    let (_, t) = s.run_json(&["tools"]);
    assert_schema("tools", &t);
    let builtins: Vec<&str> = t["builtins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(builtins, vec!["read", "glob", "grep"]);
    let v = conflicts(&s);
    let c = conflict(&v, "read");
    assert_eq!(c["state"], "asks");
    assert_eq!(c["serving"], "builtin", "{c}");
    assert_eq!(
        c["opencode_winner"],
        plugin_id.as_str(),
        "OpenCode lets the plugin win"
    );
    let (_, r) = s.run_json(&["invoke", "read", "--args", &args]);
    assert!(r["output"].as_str().unwrap().contains("first line"), "{r}");
    // Not held for review either: the plugin's `read` is a candidate, not a policy hold.
    let (_, src) = s.run_json(&["sources"]);
    assert_eq!(
        source(&src, "plugins/reader.ts")["limited"],
        serde_json::json!([])
    );
    // The person chooses the plugin.
    assert_eq!(s.run_json(&["choose", "read", &plugin_id]).0, 0);
    assert_eq!(call(&s, "read"), "the plugin's read");
    assert_eq!(s.run_json(&["choose", "read", "builtin"]).0, 0);
    let (_, r) = s.run_json(&["invoke", "read", "--args", &args]);
    assert!(r["output"].as_str().unwrap().contains("first line"), "{r}");
}

/// The cap governs a plugin of either generation the same way.
#[test]
fn with_the_override_cap_at_allow_a_plugin_takes_a_builtins_name_as_in_opencode() {
    override_cap(plugin);
    override_cap(v2_plugin);
}

fn override_cap(plugin: fn(&Sandbox, &str, &[&str], &str)) {
    let s = Sandbox::new();
    assert_eq!(
        s.run_json(&["policy", "set", "cap.tool-override", "allow"])
            .0,
        0
    );
    plugin(&s, "reader", &["grep"], "the plugin's grep");
    approve_and_load(|a| s.run_json(a));
    assert_eq!(call(&s, "grep"), "the plugin's grep");
    // Negative control: at `deny` the plugin's grep is refused and the built-in serves.
    assert_eq!(
        s.run_json(&["policy", "set", "cap.tool-override", "deny"])
            .0,
        0
    );
    let (_, t) = s.run_json(&["tools"]);
    assert!(
        !t["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "grep"),
        "{t}"
    );
    let (_, src) = s.run_json(&["sources"]);
    assert_eq!(
        source(&src, "plugins/reader.ts")["limited"][0]["item"],
        "tool:grep"
    );
}

#[test]
fn a_tool_file_named_like_a_builtin_is_a_conflict_too() {
    let s = Sandbox::new();
    tool_file(&s, "glob", "the file's glob");
    approve_and_load(|a| s.run_json(a));
    let file_id = id_ending(&s, "tools/glob.ts");
    let v = conflicts(&s);
    let c = conflict(&v, "glob");
    assert_eq!(c["serving"], "builtin", "{c}");
    assert_eq!(c["opencode_winner"], file_id.as_str());
    let kinds: Vec<&str> = c["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["builtin", "standalone-tool"]);
    // The built-in answers (a glob over the project), not the file.
    let (code, r) = s.run_json(&["invoke", "glob", "--args", r#"{"pattern":"*.ts"}"#]);
    assert_eq!(code, 0, "{r}");
    assert_ne!(r["output"], "the file's glob");
    assert_eq!(s.run_json(&["choose", "glob", &file_id]).0, 0);
    assert_eq!(call(&s, "glob"), "the file's glob");
}

#[test]
fn a_plugin_tool_and_an_mcp_tool_on_one_name_are_a_conflict() {
    let s = Sandbox::new();
    let fixture = repo_root().join("fixtures/mcp/fixture-server.mjs");
    s.write(
        "project/opencode.json",
        &serde_json::json!({ "mcp": { "fx": { "type": "local", "command": ["node", fixture, "--tool", "echo"] } } })
            .to_string(),
    );
    // The plugin registers the MCP tool's OpenCode key.
    plugin(&s, "shadow", &["fx_echo"], "the plugin's fx_echo");
    approve_and_load(|a| s.run_json(a));
    let (plugin_id, mcp_id) = {
        let (_, v) = s.run_json(&["sources"]);
        let of = |kind: &str| {
            v["sources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["kind"] == kind)
                .unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        };
        (of("file-plugin"), of("mcp"))
    };
    let v = conflicts(&s);
    let c = conflict(&v, "fx_echo");
    assert_eq!(c["state"], "asks", "{c}");
    // OpenCode assigns MCP tools last: the server's tool is its pick, and serves until chosen.
    assert_eq!(c["opencode_winner"], mcp_id.as_str(), "{c}");
    assert_eq!(c["serving"], mcp_id.as_str());
    let (code, r) = s.run_json(&[
        "invoke",
        "fx_echo",
        "--args",
        r#"{"text":"from the server"}"#,
    ]);
    assert_eq!(
        (code, r["output"].as_str()),
        (0, Some("from the server")),
        "{r}"
    );
    assert_eq!(s.run_json(&["choose", "fx_echo", &plugin_id]).0, 0);
    assert_eq!(call(&s, "fx_echo"), "the plugin's fx_echo");
}

#[test]
fn a_candidate_that_fails_to_load_after_a_restart_stays_listed_and_its_choice_asks_again() {
    let s = Sandbox::new();
    tool_file(&s, "x", "the file");
    s.write(
        "project/.opencode/plugins/flaky.ts",
        "export default async () => {\n  if (process.env.BERTH_TEST_BREAK) throw new Error('broken today')\n  return { tool: { x: { description: 'x from the plugin', args: {}, async execute() { return 'the plugin' } } } }\n}\n",
    );
    approve_and_load(|a| s.run_json(a));
    let plugin_id = id_ending(&s, "plugins/flaky.ts");
    assert_eq!(s.run_json(&["choose", "x", &plugin_id]).0, 0);
    assert_eq!(call(&s, "x"), "the plugin");
    // A new process where the plugin cannot load (same bytes, still approved).
    let broken = |args: &[&str]| {
        let out = s
            .berth(args)
            .arg("--json")
            .env("BERTH_TEST_BREAK", "1")
            .output()
            .unwrap();
        parse_json_output(&out)
    };
    let (_, v) = broken(&["conflicts"]);
    let c = conflict(&v, "x");
    let plugin = c["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == plugin_id.as_str())
        .unwrap_or_else(|| panic!("the plugin's claim vanished with its worker: {c}"));
    assert_eq!(plugin["available"], false);
    assert_eq!(c["state"], "asks", "{c}");
    assert!(
        c["reason"].as_str().unwrap().contains("cannot serve now"),
        "{c}"
    );
    let (code, r) = broken(&["invoke", "x"]);
    assert_eq!((code, r["output"].as_str()), (0, Some("the file")), "{r}");
}
