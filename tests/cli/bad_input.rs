//! Bad input never stops discovery: each case gives its diagnostic and loses nothing else.

use std::os::unix::ffi::OsStrExt;

use crate::support::*;

const GOOD: &str = "export default { id: 'good', server: async () => ({}) }\n";

fn diagnostics(v: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["code"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )
        })
        .collect();
    for s in v["sources"].as_array().unwrap() {
        out.extend(s["diagnostics"].as_array().unwrap().iter().map(|d| {
            format!(
                "{} {}",
                d["code"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )
        }));
    }
    out
}

fn entries(v: &serde_json::Value) -> Vec<String> {
    v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["entry"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn symlink_loops_and_broken_links_are_diagnostics() {
    let s = Sandbox::new();
    let plugins = s.project().join(".opencode/plugins");
    s.write("project/.opencode/plugins/good.ts", GOOD);
    std::os::unix::fs::symlink("loop.ts", plugins.join("loop.ts")).unwrap();
    std::os::unix::fs::symlink("nowhere.ts", plugins.join("broken.ts")).unwrap();
    // A plugin whose relative import goes through a folder link back to itself.
    std::os::unix::fs::symlink(".", plugins.join("self")).unwrap();
    s.write(
        "project/.opencode/plugins/cycle.ts",
        "import './self/cycle.ts'\nexport default { id: 'cycle', server: async () => ({}) }\n",
    );
    let (code, v) = s.run_json(&["sources"]);
    assert_eq!(code, 0);
    assert_schema("sources", &v);
    assert_eq!(entries(&v), ["cycle.ts", "good.ts"]);
    let d = diagnostics(&v);
    assert!(d.iter().any(|m| m.contains("loop.ts")), "{d:?}");
    assert!(d.iter().any(|m| m.contains("broken.ts")), "{d:?}");
}

#[test]
fn a_50_mb_file_is_hashed_not_parsed_and_the_rest_is_listed() {
    let s = Sandbox::new();
    s.write("project/.opencode/tools/ok.ts", "import { tool } from '@opencode-ai/plugin'\nexport default tool({ description: 'ok', args: {}, async execute() { return 'ok' } })\n");
    let huge = s.project().join(".opencode/tools/huge.ts");
    let mut text = String::from("export default {}\n");
    text.push_str(
        &"// padding padding padding padding padding padding padding padding\n"
            .repeat(50 * 1024 * 1024 / 67),
    );
    std::fs::write(&huge, text).unwrap();
    let started = std::time::Instant::now();
    let (code, v) = s.run_json(&["sources"]);
    assert_eq!(code, 0);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_schema("sources", &v);
    let huge_src = source(&v, "huge.ts");
    assert_eq!(huge_src["capabilities"]["analysis_incomplete"], true);
    assert!(diagnostics(&v)
        .iter()
        .any(|m| m.contains("larger than 4 MiB")));
    assert!(entries(&v).contains(&"ok.ts".to_string()));
}

#[test]
fn a_file_name_that_is_not_utf8_is_reported_and_skipped() {
    let s = Sandbox::new();
    s.write("project/.opencode/plugins/good.ts", GOOD);
    let bad = std::ffi::OsStr::from_bytes(b"bad-\xff.ts");
    std::fs::write(s.project().join(".opencode/plugins").join(bad), GOOD).unwrap();
    let (code, v) = s.run_json(&["sources"]);
    assert_eq!(code, 0);
    assert_schema("sources", &v);
    assert_eq!(entries(&v), ["good.ts"]);
    assert!(diagnostics(&v)
        .iter()
        .any(|m| m.contains("not valid UTF-8")));
}

#[test]
fn refused_specs_and_an_empty_plugin_list() {
    let s = Sandbox::new();
    s.write("project/.opencode/plugins/good.ts", GOOD);
    s.write(
        "project/opencode.json",
        r#"{ "plugin": ["--foo", "file:../../../etc/x", "ok-package@1.0.0"] }"#,
    );
    let (code, v) = s.run_json(&["sources"]);
    assert_eq!(code, 0);
    assert_schema("sources", &v);
    let d = diagnostics(&v);
    assert!(
        d.iter()
            .any(|m| m.contains("looks like a command-line option")),
        "{d:?}"
    );
    assert!(
        d.iter().any(|m| m.contains("points outside the folder")),
        "{d:?}"
    );
    let states: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["state"].as_str().unwrap())
        .collect();
    assert_eq!(states.iter().filter(|s| **s == "unsupported").count(), 2);
    assert!(
        entries(&v).contains(&"good.ts".to_string())
            && entries(&v).contains(&"ok-package@1.0.0".to_string())
    );

    let empty = Sandbox::new();
    empty.write("project/opencode.json", r#"{ "plugin": [] }"#);
    let (code, v) = empty.run_json(&["sources"]);
    assert_eq!(code, 0);
    assert_eq!(v["sources"], serde_json::json!([]));
    assert_eq!(v["diagnostics"], serde_json::json!([]));
}

#[test]
fn an_unreadable_pure_switch_stops_external_plugins_with_one_diagnostic() {
    let s = Sandbox::new();
    s.write("project/.opencode/plugins/good.ts", GOOD);
    s.write(
        "project/.opencode/tools/t.ts",
        "export default { description: 'x', args: {}, execute: async () => 'x' }\n",
    );
    let out = s
        .berth(&["sources", "--json"])
        .env("OPENCODE_PURE", "TRUE")
        .output()
        .unwrap();
    let (code, v) = parse_json_output(&out);
    assert_eq!(code, 0);
    assert_schema("sources", &v);
    assert_eq!(
        entries(&v),
        ["t.ts"],
        "tool files stay; plugins are withheld"
    );
    let pure: Vec<String> = diagnostics(&v)
        .into_iter()
        .filter(|m| m.contains("OPENCODE_PURE"))
        .collect();
    assert_eq!(pure.len(), 1, "{pure:?}");
    assert!(pure[0].starts_with("action-required"));
}
