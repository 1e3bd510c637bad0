//! The corpus: 20 real OpenCode plugins from npm (`fixtures/corpus/corpus.json`, pinned by
//! version, installed at test time), each loaded by Berth with `berth check` and compared with
//! what real OpenCode 1.18.4 did with it (`tests/oracle/corpus/`, recorded by
//! `scripts/oracle/record-corpus`): loads or not, tool names, descriptions and JSON Schemas,
//! hooks, install errors. A difference fails unless the ledger names it (see `LEDGERED`);
//! a negative control proves the comparison can fail; three packages are compared live
//! against OpenCode on every run. Prepared packages are shared across runs through
//! `BERTH_PACKAGE_CACHE` (`.tools/corpus-cache/berth-packages`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::support::*;

/// Packages whose result differs from OpenCode's on purpose, with the ledger row that says so.
const LEDGERED: &[(&str, &str)] = &[
    // OpenCode skips these names (built in there); Berth has no built-in and loads them.
    ("opencode-copilot-auth", "D-005"),
    ("opencode-openai-codex-auth", "D-005"),
];

fn corpus() -> Vec<String> {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("fixtures/corpus/corpus.json")).unwrap(),
    )
    .unwrap();
    v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["spec"].as_str().unwrap().to_string())
        .collect()
}

/// `name@version` → the package name.
fn name_of(spec: &str) -> &str {
    match spec[1..].find('@') {
        Some(i) => &spec[..i + 1],
        None => spec,
    }
}

fn recording_file(spec: &str) -> std::path::PathBuf {
    let file = name_of(spec).trim_start_matches('@').replace('/', "__");
    repo_root().join(format!("tests/oracle/corpus/{file}.json"))
}

fn recording(spec: &str) -> Value {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(recording_file(spec)).unwrap())
        .unwrap_or_else(|e| panic!("recording of {spec}: {e}"));
    assert_eq!(v["opencode_version"], "1.18.4");
    assert_eq!(v["spec"], spec);
    v
}

/// What Berth makes of `spec`: `berth check` in a throw-away domain.
fn berth_result(spec: &str) -> Value {
    let cache = repo_root().join(".tools/corpus-cache/berth-packages");
    std::fs::create_dir_all(&cache).unwrap();
    let s = Sandbox::new();
    let mut cmd = s.berth(&["check", spec, "--json"]);
    cmd.env("BERTH_PACKAGE_CACHE", &cache);
    let (_, v) = parse_json_output(&cmd.output().unwrap());
    assert_schema("check", &v);
    v["check"].clone()
}

/// Berth's side in the recording's terms.
struct Seen {
    loads: bool,
    tools: BTreeMap<String, (String, Value)>,
    hooks: BTreeSet<String>,
    problem_codes: Vec<String>,
}

fn seen_by_berth(check: &Value) -> Seen {
    let source = &check["sources"][0];
    Seen {
        loads: source["state"] == "active",
        tools: check["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    (
                        t["description"].as_str().unwrap_or("").to_string(),
                        t["parameters"].clone(),
                    ),
                )
            })
            .collect(),
        hooks: source["hooks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.as_str().map(str::to_string))
            .collect(),
        problem_codes: check["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["code"].as_str().map(str::to_string))
            .collect(),
    }
}

fn seen_by_opencode(rec: &Value) -> Seen {
    Seen {
        loads: rec["loads"] == true,
        tools: rec["tools"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, t)| {
                (
                    k.clone(),
                    (
                        t["description"].as_str().unwrap_or("").to_string(),
                        t["parameters"].clone(),
                    ),
                )
            })
            .collect(),
        // `tool` is how the tools above got there; Berth reports them as tools, not a hook.
        hooks: rec["hooks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.as_str())
            .filter(|h| *h != "tool")
            .map(str::to_string)
            .collect(),
        problem_codes: Vec::new(),
    }
}

/// Every difference between OpenCode's result and Berth's, in words.
fn differences(spec: &str, oc: &Seen, berth: &Seen) -> Vec<String> {
    let mut out = Vec::new();
    if oc.loads != berth.loads {
        out.push(format!(
            "{spec}: loads in OpenCode: {}, in Berth: {} (problems {:?})",
            oc.loads, berth.loads, berth.problem_codes
        ));
    }
    if !oc.loads {
        return out;
    }
    let (a, b): (BTreeSet<_>, BTreeSet<_>) =
        (oc.tools.keys().collect(), berth.tools.keys().collect());
    if a != b {
        out.push(format!("{spec}: tools differ: OpenCode {a:?}, Berth {b:?}"));
    }
    for (name, (desc, params)) in &oc.tools {
        let Some((bd, bp)) = berth.tools.get(name) else {
            continue;
        };
        if desc != bd {
            out.push(format!("{spec}: description of {name} differs"));
        }
        if params != bp {
            out.push(format!(
                "{spec}: JSON Schema of {name} differs:\n OpenCode {params}\n Berth    {bp}"
            ));
        }
    }
    if oc.hooks != berth.hooks {
        out.push(format!(
            "{spec}: hooks differ: OpenCode {:?}, Berth {:?}",
            oc.hooks, berth.hooks
        ));
    }
    out
}

fn ledger_ids() -> BTreeSet<String> {
    crate::ledger::ledger().into_iter().map(|d| d.id).collect()
}

fn check_package(spec: &str) {
    let rec = recording(spec);
    let berth = berth_result(spec);
    let (oc, b) = (seen_by_opencode(&rec), seen_by_berth(&berth));
    if let Some((_, id)) = LEDGERED.iter().find(|(n, _)| *n == name_of(spec)) {
        assert!(ledger_ids().contains(*id), "{id} is not in the ledger");
        // D-005: OpenCode skips the name; Berth loads it like any plugin.
        assert!(!oc.loads, "{spec}: OpenCode was recorded loading it");
        assert!(b.loads, "{spec}: Berth should load it (D-005): {berth}");
        return;
    }
    if rec["error"]
        .as_str()
        .is_some_and(|e| e.contains("Failed to install"))
    {
        assert!(
            !b.loads,
            "{spec}: OpenCode could not install it, Berth loaded it"
        );
        assert!(
            b.problem_codes.iter().any(|c| c == "dependency-failed"),
            "{spec}: {:?}",
            b.problem_codes
        );
        return;
    }
    let diffs = differences(spec, &oc, &b);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

macro_rules! corpus_tests {
    ($($name:ident => $spec:literal),* $(,)?) => {
        $(#[test] fn $name() { check_package($spec); })*

        #[test]
        fn every_corpus_package_has_a_test_and_a_recording() {
            let tested: BTreeSet<&str> = [$($spec),*].into_iter().collect();
            let listed: Vec<String> = corpus();
            assert_eq!(listed.len(), 20);
            assert_eq!(tested, listed.iter().map(String::as_str).collect());
            for spec in &listed {
                assert!(recording_file(spec).is_file(), "no recording for {spec}");
            }
        }
    };
}

corpus_tests! {
    corpus_oh_my_opencode_slim => "oh-my-opencode-slim@2.2.24",
    corpus_opencode_anthropic_auth => "opencode-anthropic-auth@0.0.13",
    corpus_opencode_beads => "opencode-beads@0.3.2",
    corpus_opencode_copilot_auth => "opencode-copilot-auth@0.0.9",
    corpus_opencode_gemini_auth => "opencode-gemini-auth@1.3.8",
    corpus_opencode_lmstudio => "opencode-lmstudio@0.3.0",
    corpus_opencode_openai_codex_auth => "opencode-openai-codex-auth@4.4.0",
    corpus_opencode_pty => "opencode-pty@0.1.3",
    corpus_opencode_skills => "opencode-skills@0.1.7",
    corpus_opencode_swarm => "opencode-swarm@5.1.0",
    corpus_opencode_wakatime => "opencode-wakatime@1.3.9",
    corpus_opencode_dcp => "@tarquinen/opencode-dcp@3.1.14",
    corpus_opencode_browser => "@different-ai/opencode-browser@4.6.1",
    corpus_heartbeat => "heartbeat-opencode-plugin@0.1.7",
    corpus_oh_my_aegis => "oh-my-aegis@1.1.3",
    corpus_opencode_sonarqube => "opencode-sonarqube@2.2.0",
    corpus_destructive_check => "@sureshsankaran/opencode-destructive-check@1.0.5",
    corpus_opencode_antigravity_auth => "opencode-antigravity-auth@1.6.0",
    corpus_opencode_prompt_recorder => "opencode-prompt-recorder@1.9.9",
    corpus_opencode_background => "@zenobius/opencode-background@0.1.0-alpha.2",
}

/// With the per-package tests (each fails on any unledgered difference), at least 15 of the
/// 20 load in both with identical tool names and schemas.
#[test]
fn at_least_15_corpus_packages_load_in_opencode_without_a_ledgered_difference() {
    let loading = corpus()
        .iter()
        .filter(|spec| recording(spec)["loads"] == true)
        .filter(|spec| !LEDGERED.iter().any(|(n, _)| *n == name_of(spec)))
        .count();
    assert!(loading >= 15, "only {loading} of 20");
}

#[test]
fn negative_control_a_changed_schema_or_a_missing_hook_is_a_difference() {
    let spec = "opencode-sonarqube@2.2.0";
    let rec = recording(spec);
    let oc = seen_by_opencode(&rec);
    let mut berth = seen_by_opencode(&rec);
    assert!(differences(spec, &oc, &berth).is_empty());
    let (_, (_, params)) = berth.tools.iter_mut().next().unwrap();
    params["properties"]["action"]["enum"]
        .as_array_mut()
        .unwrap()
        .pop();
    assert_eq!(differences(spec, &oc, &berth).len(), 1);
    let mut berth = seen_by_opencode(&rec);
    berth.hooks.remove("event");
    assert_eq!(differences(spec, &oc, &berth).len(), 1);
    let mut berth = seen_by_opencode(&rec);
    berth.loads = false;
    assert_eq!(differences(spec, &oc, &berth).len(), 1);
}

/// The 20 together in one project under the product's default policy: at most two decisions
/// per npm plugin (the fetch, then what the fetched bytes can do; one when prepared before),
/// never a third; every package that
/// loads alone loads here, and registers everything but what a default cap holds — the one
/// tool that takes a built-in's name (oh-my-opencode-slim's `webfetch`, D-032), listed on its
/// source as held.
#[test]
fn the_corpus_activates_under_the_default_policy_with_at_most_two_decisions_per_npm_plugin() {
    let cache = repo_root().join(".tools/corpus-cache/berth-packages");
    std::fs::create_dir_all(&cache).unwrap();
    let s = Sandbox::new();
    s.write(
        "project/opencode.json",
        &serde_json::json!({ "plugin": corpus() }).to_string(),
    );
    let run = |args: &[&str]| {
        let mut cmd = s.berth(args);
        cmd.arg("--json").env("BERTH_PACKAGE_CACHE", &cache);
        parse_json_output(&cmd.output().unwrap())
    };
    // Step 1: the fetch (install scripts off), then step 2: what the bytes can do — one step
    // when the package was prepared before (its bytes are known at once).
    let mut t = Value::Null;
    for _ in 0..2 {
        let (_, v) = run(&["sources"]);
        let mut waiting = 0;
        for src in v["sources"].as_array().unwrap() {
            if src["state"] == "pending-approval" {
                waiting += 1;
                let step = if src["capabilities"]["contents_unknown"] == true {
                    "1 of 2"
                } else {
                    "2 of 2"
                };
                assert!(
                    src["approval"]["step"]
                        .as_str()
                        .unwrap_or_default()
                        .starts_with(step),
                    "{src}"
                );
            }
        }
        if waiting == 0 {
            break;
        }
        assert_eq!(run(&["approve", "--all"]).0, 0);
        t = run(&["tools"]).1;
    }
    let problems: Vec<(String, String)> = t["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["code"].as_str().unwrap().into(),
                p["plugin"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    // Only the package that fails to install in OpenCode too.
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, "dependency-failed", "{problems:?}");
    let have: BTreeSet<String> = t["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap().to_string())
        .collect();
    let mut want: BTreeSet<String> = BTreeSet::new();
    for spec in corpus() {
        want.extend(seen_by_opencode(&recording(&spec)).tools.into_keys());
    }
    assert!(
        want.remove("webfetch"),
        "the corpus should hold a tool with a built-in's name"
    );
    assert_eq!(have, want);
    let (_, v) = run(&["sources"]);
    let slim = source_by_spec(&v, "oh-my-opencode-slim");
    assert_eq!(
        slim["limited"],
        serde_json::json!([{ "item": "tool:webfetch", "category": "tool-override", "cap": "review", "layer": "product" }]),
        "{slim}"
    );
    // Decided and not waiting for anything (this one-shot process loaded them and stopped).
    for src in v["sources"].as_array().unwrap() {
        assert_eq!(src["state"], "approved", "{src}");
    }
    // At most two decisions per npm plugin.
    let (_, a) = run(&["approvals"]);
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    for row in a["approvals"].as_array().unwrap() {
        *per.entry(row["source_id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(per.len(), 20, "{per:?}");
    assert!(per.values().all(|n| *n == 1 || *n == 2), "{per:?}");
}

/// Three small packages, side by side with real OpenCode in this run.
#[test]
fn three_corpus_packages_match_real_opencode_live() {
    for spec in [
        "opencode-prompt-recorder@1.9.9",
        "@sureshsankaran/opencode-destructive-check@1.0.5",
        "opencode-wakatime@1.3.9",
    ] {
        let live = live_recording("record-corpus", &["--live", spec]);
        let berth = berth_result(spec);
        let diffs = differences(spec, &seen_by_opencode(&live), &seen_by_berth(&berth));
        assert!(diffs.is_empty(), "{}", diffs.join("\n"));
        // And the live answer is still the recorded one.
        let rec = recording(spec);
        let recorded = differences(spec, &seen_by_opencode(&rec), &seen_by_opencode(&live));
        assert!(
            recorded.is_empty(),
            "the recording is stale: {}",
            recorded.join("\n")
        );
    }
}
