//! `berth status` and `berth sources` on real config trees.

use crate::support::*;

fn dir_paths(v: &serde_json::Value) -> Vec<String> {
    v["config_dirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn status_on_an_empty_project_lists_the_folders_derived_from_home() {
    let s = Sandbox::new();
    let (code, v) = s.run_json(&["status"]);
    assert_eq!(code, 0);
    assert_schema("status", &v);
    assert_eq!(v["sources"].as_array().unwrap().len(), 0);
    // The list is derived from this test's own HOME: the global folder is first.
    assert_eq!(dir_paths(&v), vec![s.global_config().display().to_string()]);
    assert_eq!(v["project"]["worktree"], s.project().display().to_string());
}

#[test]
fn status_follows_xdg_config_home_and_project_opencode_folders() {
    let s = Sandbox::new();
    let xdg = s.root.path().join("xdg");
    std::fs::create_dir_all(s.project().join(".opencode")).unwrap();
    std::fs::create_dir_all(s.home().join(".opencode")).unwrap();
    let out = s
        .berth(&["status", "--json"])
        .env("XDG_CONFIG_HOME", &xdg)
        .output()
        .unwrap();
    let (code, v) = parse_json_output(&out);
    assert_eq!(code, 0);
    assert_schema("status", &v);
    assert_eq!(
        dir_paths(&v),
        vec![
            xdg.join("opencode").display().to_string(),
            s.project().join(".opencode").display().to_string(),
            s.home().join(".opencode").display().to_string(),
        ]
    );
}

#[test]
fn sources_lists_plugins_and_tools_in_opencode_order_without_running_them() {
    let s = Sandbox::new();
    let marker = s.root.path().join("MARKER");
    s.write(
        "home/.config/opencode/plugins/marker.ts",
        &format!(
            "{}export default {{ id: 'marker', server: async () => ({{}}) }}\n",
            writes_marker(Some(&marker))
        ),
    );
    s.write(
        "project/.opencode/tools/hello.ts",
        "import { tool } from '@opencode-ai/plugin'\nexport default tool({ description: 'hi', args: {}, execute: async () => 'hi' })\nexport const loud = tool({ description: 'HI', args: {}, execute: async () => 'HI' })\n",
    );
    s.write("project/opencode.jsonc", "{\n  // comments and trailing commas are fine\n  \"plugin\": [\"opencode-wakatime@1.3.9\",],\n}\n");
    let (code, v) = s.run_json(&["sources"]);
    assert_eq!(code, 0);
    assert_schema("sources", &v);
    let sources = v["sources"].as_array().unwrap();
    let kinds: Vec<&str> = sources
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["standalone-tool", "npm-plugin", "file-plugin"]);
    assert_eq!(
        sources[0]["capabilities"]["tools"],
        serde_json::json!(["hello", "hello_loud"])
    );
    assert!(sources.iter().all(|s| s["state"] == "pending-approval"));
    assert!(sources[2]["capabilities"]["filesystem"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x == "node:fs"));
    assert!(!marker.exists(), "discovery must not run plugin code");

    // Ids are stable across runs.
    let (_, again) = s.run_json(&["sources"]);
    let ids = |v: &serde_json::Value| {
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&v), ids(&again));
}

#[test]
fn a_broken_config_file_is_a_diagnostic_and_everything_else_is_listed() {
    let s = Sandbox::new();
    s.write("project/opencode.json", "{ \"plugin\": [\"a\" ");
    s.write(
        "home/.config/opencode/plugins/ok.ts",
        "export default { id: 'ok', server: async () => ({}) }\n",
    );
    let (code, v) = s.run_json(&["status"]);
    assert_eq!(code, 0);
    assert_schema("status", &v);
    assert_eq!(v["sources"].as_array().unwrap().len(), 1);
    let diags = v["diagnostics"].as_array().unwrap();
    assert!(
        diags.iter().any(|d| d["code"] == "action-required"
            && d["path"].as_str().unwrap().ends_with("opencode.json")),
        "{diags:?}"
    );
}
