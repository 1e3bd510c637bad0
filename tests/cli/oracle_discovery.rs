//! Discovery against real OpenCode 1.18.4: for every config graph in `fixtures/discovery/`,
//! the plugins Berth lists (and their order and options) and the custom tool names equal what
//! OpenCode recorded in `tests/oracle/discovery/` — up to the rows of `docs/deviations.md` —
//! and one case runs live against the real binary in every run. Negative controls prove the
//! comparison can fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::*;

/// OpenCode's environment variables whose values are paths relative to the case folder.
const PATH_VARS: &[&str] = &[
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_TUI_CONFIG",
    "OPENCODE_TEST_HOME",
    "OPENCODE_TEST_MANAGED_CONFIG_DIR",
];

struct Materialized {
    root: tempfile::TempDir,
    instance: PathBuf,
    env: Vec<(String, String)>,
}

fn case_dir(name: &str) -> PathBuf {
    repo_root().join("fixtures/discovery").join(name)
}

fn cases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo_root().join("fixtures/discovery"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(from).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// The case as the recorder ran it: a temp copy, the project git-initialised, OpenCode's env.
fn materialize(name: &str) -> Materialized {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().to_path_buf();
    copy_tree(&case_dir(name), &base);
    let case: Value = std::fs::read_to_string(case_dir(name).join("case.json"))
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    std::fs::create_dir_all(base.join("home")).unwrap();
    std::fs::create_dir_all(base.join("project")).unwrap();
    if case["git"].as_bool() != Some(false) {
        git_init(&base.join(case["git_root"].as_str().unwrap_or("project")));
    }
    let instance = base.join(case["directory"].as_str().unwrap_or("project"));
    let home = base.join("home");
    let mut env = vec![
        ("HOME".to_string(), home.display().to_string()),
        (
            "XDG_CONFIG_HOME".to_string(),
            home.join(".config").display().to_string(),
        ),
        (
            "XDG_DATA_HOME".to_string(),
            home.join(".local/share").display().to_string(),
        ),
        (
            "XDG_CACHE_HOME".to_string(),
            home.join(".cache").display().to_string(),
        ),
        (
            "OPENCODE_TEST_MANAGED_CONFIG_DIR".to_string(),
            base.join(".no-managed-config").display().to_string(),
        ),
    ];
    if let Ok(text) = std::fs::read_to_string(case_dir(name).join("env.json")) {
        let extra: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
        for (k, v) in extra {
            let v = v.as_str().unwrap().to_string();
            let v = if PATH_VARS.contains(&k.as_str()) {
                base.join(v).display().to_string()
            } else {
                v
            };
            env.retain(|(key, _)| key != &k);
            env.push((k, v));
        }
    }
    Materialized {
        root,
        instance,
        env,
    }
}

fn berth_sources(m: &Materialized) -> Value {
    let mut cmd = Command::new(berth_bin());
    cmd.args(["sources", "--json", "--data-dir"])
        .arg(m.root.path().join(".berth-data"))
        .arg("--project")
        .arg(&m.instance)
        .current_dir(&m.instance)
        .env_clear();
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in &m.env {
        cmd.env(k, v);
    }
    let (code, v) = parse_json_output(&cmd.output().unwrap());
    assert_eq!(code, 0, "{v}");
    v
}

/// One plugin entry as OpenCode lists it: the spec, and options when a tuple carried some.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    spec: String,
    options: Value,
}

fn opencode_entries(rec: &Value, case_root: &Path) -> Vec<Entry> {
    let sub = |s: &str| s.replace("<case>", &case_root.display().to_string());
    rec["plugin"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| match e {
                    Value::String(s) => Entry {
                        spec: sub(s),
                        options: Value::Null,
                    },
                    Value::Array(p) => Entry {
                        spec: sub(p[0].as_str().unwrap()),
                        options: p.get(1).cloned().unwrap_or(Value::Null),
                    },
                    other => panic!("unexpected plugin entry {other}"),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn berth_entries(sources: &Value) -> Vec<Entry> {
    let mut plugins: Vec<&Value> = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "file-plugin" || s["kind"] == "npm-plugin")
        .collect();
    plugins.sort_by_key(|s| s["order"].as_u64());
    plugins
        .iter()
        .map(|s| {
            // D-003: Berth keeps options OpenCode drops; compare with OpenCode's view.
            let kept_by_d003 = s["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["message"].as_str().unwrap().contains("D-003"));
            Entry {
                spec: s["spec"].as_str().unwrap().to_string(),
                options: if kept_by_d003 {
                    Value::Null
                } else {
                    s["options"].clone()
                },
            }
        })
        .collect()
}

/// D-002: files of one config folder's `plugin/` + `plugins/` come in an order OpenCode leaves
/// to the filesystem; such runs are compared as sets, everything else in order.
fn normalize(entries: &[Entry]) -> Vec<(String, Vec<String>)> {
    let group = |spec: &str| -> String {
        let Some(path) = spec.strip_prefix("file://") else {
            return spec.to_string();
        };
        let p = Path::new(path);
        match p
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str())
        {
            Some("plugin" | "plugins") => {
                format!("folder:{}", p.parent().unwrap().parent().unwrap().display())
            }
            _ => spec.to_string(),
        }
    };
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for e in entries {
        let g = group(&e.spec);
        let item = format!("{} {}", e.spec, e.options);
        match out.last_mut() {
            Some((last, items)) if *last == g => items.push(item),
            _ => out.push((g, vec![item])),
        }
    }
    for (_, items) in &mut out {
        items.sort();
    }
    out
}

fn tool_names_berth(sources: &Value) -> Vec<String> {
    let mut v: Vec<String> = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "standalone-tool")
        .flat_map(|s| {
            s["capabilities"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
        })
        .collect();
    v.sort();
    v
}

fn tool_names_opencode(rec: &Value) -> Option<Vec<String>> {
    // Fixture plugins register `plug_*` tools; those appear once plugins load, not statically.
    let mut v: Vec<String> = rec["serve"]["custom_tool_ids"]
        .as_array()?
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .filter(|t| !t.starts_with("plug_"))
        .collect();
    v.sort();
    Some(v)
}

/// Compares Berth with one OpenCode answer; Err says how they differ.
fn compare(name: &str, rec: &Value, m: &Materialized, berth: &Value) -> Result<(), String> {
    let root = m.root.path();
    if rec["exit_code"].as_i64() != Some(0) {
        // D-006 / D-010: OpenCode refuses the whole configuration; Berth reports the file.
        let diags = berth["diagnostics"].as_array().unwrap();
        return if diags
            .iter()
            .any(|d| d["code"] == "action-required" || d["code"] == "unsupported")
        {
            Ok(())
        } else {
            Err(format!(
                "{name}: OpenCode refused this configuration but Berth reported nothing"
            ))
        };
    }
    let pure = m.env.iter().any(|(k, v)| k == "OPENCODE_PURE" && v != "0");
    let ours = berth_entries(berth);
    if pure {
        // Pure mode: OpenCode lists the plugins but loads none; Berth activates none.
        if !ours.is_empty() || !rec["loaded"].as_array().unwrap().is_empty() {
            return Err(format!(
                "{name}: in pure mode nothing may load: berth {ours:?}"
            ));
        }
    } else {
        let theirs = opencode_entries(rec, root);
        if normalize(&ours) != normalize(&theirs) {
            return Err(format!(
                "{name}: plugin lists differ\n berth:    {:#?}\n opencode: {:#?}",
                normalize(&ours),
                normalize(&theirs)
            ));
        }
    }
    if let Some(theirs) = tool_names_opencode(rec) {
        let ours = tool_names_berth(berth);
        if ours != theirs {
            return Err(format!(
                "{name}: custom tool names differ: berth {ours:?}, opencode {theirs:?}"
            ));
        }
    }
    Ok(())
}

fn recording(name: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(
            repo_root()
                .join("tests/oracle/discovery")
                .join(format!("{name}.json")),
        )
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn every_recorded_config_graph_matches_opencode_up_to_the_ledger() {
    let all = cases();
    assert!(all.len() >= 8, "at least eight config graphs: {all:?}");
    let mut failures = Vec::new();
    for name in &all {
        let rec = recording(name);
        assert_eq!(rec["opencode_version"], "1.18.4");
        let m = materialize(name);
        let berth = berth_sources(&m);
        assert_schema("sources", &berth);
        if let Err(e) = compare(name, &rec, &m, &berth) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_permuted_plugin_order_or_an_extra_tool_fails_the_comparison() {
    let name = "nested-opencode";
    let rec = recording(name);
    let m = materialize(name);
    let mut berth = berth_sources(&m);
    assert!(compare(name, &rec, &m, &berth).is_ok());
    // Swap the load order of the first two plugins.
    let sources = berth["sources"].as_array_mut().unwrap();
    let plugin_idx: Vec<usize> = sources
        .iter()
        .enumerate()
        .filter(|(_, s)| s["kind"] != "standalone-tool" && s["kind"] != "mcp")
        .map(|(i, _)| i)
        .collect();
    let (a, b) = (plugin_idx[0], plugin_idx[1]);
    let (oa, ob) = (sources[a]["order"].clone(), sources[b]["order"].clone());
    sources[a]["order"] = ob;
    sources[b]["order"] = oa;
    assert!(
        compare(name, &rec, &m, &berth).is_err(),
        "a permuted order must fail"
    );

    let name = "plugins-and-tools";
    let rec = recording(name);
    let m = materialize(name);
    let mut berth = berth_sources(&m);
    assert!(compare(name, &rec, &m, &berth).is_ok());
    let tool = berth["sources"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["kind"] == "standalone-tool")
        .unwrap();
    tool["capabilities"]["tools"]
        .as_array_mut()
        .unwrap()
        .push(Value::from("made_up"));
    assert!(
        compare(name, &rec, &m, &berth).is_err(),
        "an extra tool must fail"
    );
}

#[test]
fn one_case_matches_real_opencode_live() {
    let name = "tuples-options";
    let live = live_recording("live-discovery", &[name]);
    let m = materialize(name);
    let berth = berth_sources(&m);
    compare(name, &live, &m, &berth).unwrap();
}
