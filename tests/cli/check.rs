//! `berth check` for plugin authors: a throw-away domain, every checkpoint approved on the
//! author's behalf, contributions and problems reported, exit 1 on a problem.

use crate::support::*;

fn check(target: &std::path::Path) -> (i32, serde_json::Value) {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(berth_bin())
        .args(["check", "--json"])
        .arg(target)
        .env("HOME", home.path())
        .output()
        .unwrap();
    parse_json_output(&out)
}

#[test]
fn a_good_plugin_passes_with_its_tools_and_hooks() {
    let (code, v) = check(&repo_root().join("fixtures/plugins/v1-hooks-a.ts"));
    assert_eq!(code, 0, "{v}");
    assert_schema("check", &v);
    assert_eq!(v["check"]["passed"], true);
    assert_eq!(v["check"]["tools"][0]["name"], "hooks_a_echo");
    assert_eq!(v["check"]["sources"][0]["state"], "active");
    assert_eq!(
        v["check"]["sources"][0]["hooks"],
        serde_json::json!(["chat.params", "tool.execute.before"])
    );
}

#[test]
fn a_tool_file_is_checked_as_a_tool() {
    let (code, v) =
        check(&repo_root().join("fixtures/tool-schemas/project/.opencode/tools/numbers.ts"));
    assert_eq!(code, 0, "{v}");
    assert_schema("check", &v);
    assert!(v["check"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "numbers_int_bounded"));
}

#[test]
fn a_broken_plugin_fails_with_the_problem_named() {
    let (code, v) = check(&repo_root().join("fixtures/plugins/throws-in-factory.ts"));
    assert_eq!(code, 1);
    assert_schema("check", &v);
    assert_eq!(v["check"]["passed"], false);
    assert!(v["check"]["problems"][0]["message"]
        .as_str()
        .unwrap()
        .contains("factory failed on purpose"));
    assert_eq!(v["check"]["sources"][0]["state"], "load-failed");
}

#[test]
fn a_missing_path_is_a_usage_problem() {
    let (code, v) = check(std::path::Path::new("./no/such/plugin.ts"));
    assert_eq!(code, 1);
    assert_schema("error", &v);
    assert_eq!(v["error"]["code"], "invalid-arguments");
}
