//! The first and second argument Berth passes a plugin factory (`PluginInput`: `project`,
//! `directory`, `worktree`, `experimental_workspace`, `serverUrl`, `$`, `client`; and the options)
//! equal what real OpenCode 1.18.4 passes (`tests/oracle/plugin-input.json`), field by field, for
//! every variant of `fixtures/plugin-input/project/`: a git project (id = root commit), a
//! subfolder of one, one with an `origin` remote (id = sha1 of the normalised remote), one with
//! OpenCode's id cache in `.git/opencode`, and a folder without git (`global`, worktree `/`).
//! Deliberate differences: `serverUrl` is Berth's own loopback service (D-018: only its protocol,
//! host and object shape are compared), and Berth writes no `.git/opencode` (D-021).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::*;

const PLUGINS: &[&str] = &["records-input", "records-input-options"];

fn recorded() -> Value {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/oracle/plugin-input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(v["opencode_version"], "1.18.4");
    v
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

fn git(s: &Sandbox, dir: &Path, args: &[&str], env: &[(String, String)]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("HOME", s.home())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Makes `<root>/<variant>` as the recorder did (same files, same commit) and returns the
/// instance directory Berth is run on.
fn materialize(s: &Sandbox, rec: &Value, name: &str) -> PathBuf {
    let dir = s.root.path().join(name);
    let _ = std::fs::remove_dir_all(&dir); // the sandbox's own git-initialised `project`
    copy_dir(&repo_root().join("fixtures/plugin-input/project"), &dir);
    let variant = &rec["variants"][name];
    let commit = &variant["commit"];
    if !commit.is_null() {
        let fc = &rec["fixture_commit"];
        let env: Vec<(String, String)> = fc["env"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        let mut args: Vec<&str> = fc["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        args.push(commit["message"].as_str().unwrap());
        git(s, &dir, &["init", "-q"], &[]);
        git(s, &dir, &args, &env);
        assert_eq!(
            git(s, &dir, &["rev-list", "--max-parents=0", "HEAD"], &[]),
            commit["root_commit"].as_str().unwrap(),
            "{name}: the fixture commit must hash as in the recording"
        );
        if let Some(remote) = variant["remote"].as_str() {
            git(s, &dir, &["remote", "add", "origin", remote], &[]);
        }
        if let Some(id) = variant["cached"].as_str() {
            std::fs::write(dir.join(".git/opencode"), format!("{id}\n")).unwrap();
        }
    }
    if name == "subdir" {
        std::fs::create_dir_all(dir.join("sub")).unwrap();
    }
    let directory = variant["directory"].as_str().unwrap();
    s.root
        .path()
        .join(directory.strip_prefix("<case>/").unwrap())
}

/// `berth ARGS --json` on `project` with the sandbox's environment, its own data dir, and the
/// plugins' log file.
fn berth_in(s: &Sandbox, project: &Path, data: &Path, log: &Path, args: &[&str]) -> (i32, Value) {
    let mut c = Command::new(berth_bin());
    c.args(args)
        .arg("--json")
        .arg("--data-dir")
        .arg(data)
        .arg("--project")
        .arg(project);
    s.apply_env(&mut c);
    c.current_dir(project).env("BERTH_ORACLE_INPUT_LOG", log);
    parse_json_output(&c.output().unwrap())
}

/// The machine's temp paths of this sandbox as the recorder's placeholders.
fn placeholders(s: &Sandbox, line: &str) -> String {
    let root = s.root.path().to_string_lossy().into_owned();
    let canonical = s
        .root
        .path()
        .canonicalize()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    line.replace(&canonical, "<case>").replace(&root, "<case>")
}

/// What Berth passed each plugin in each variant: `{variant: {directory, git_cache_file, inputs}}`.
fn berth_inputs(s: &Sandbox, rec: &Value, names: &[&str]) -> Value {
    let dirs: Vec<(String, PathBuf)> = names
        .iter()
        .map(|n| (n.to_string(), materialize(s, rec, n)))
        .collect();
    let results: Vec<(String, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = dirs
            .iter()
            .map(|(name, dir)| {
                scope.spawn(move || {
                    let data = s.root.path().join(format!("data-{name}"));
                    let log = s.root.path().join(format!("input-{name}.jsonl"));
                    approve_and_load(|a| berth_in(s, dir, &data, &log, a));
                    // One clean activation: each factory runs once, in a fresh process.
                    let _ = std::fs::remove_file(&log);
                    let (code, v) = berth_in(s, dir, &data, &log, &["tools"]);
                    assert_eq!(code, 0, "{name}: {v}");
                    assert_eq!(v["problems"], serde_json::json!([]), "{name}: {v}");
                    let lines: Vec<Value> = std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .lines()
                        .map(|l| serde_json::from_str(&placeholders(s, l)).unwrap())
                        .collect();
                    let mut inputs = serde_json::Map::new();
                    for l in lines {
                        let id = l["plugin"].as_str().unwrap().to_string();
                        assert!(
                            inputs.insert(id.clone(), l).is_none(),
                            "{name}: {id} ran twice"
                        );
                    }
                    let worktree = s.root.path().join(name);
                    let cache = std::fs::read_to_string(worktree.join(".git/opencode")).ok();
                    let entry = serde_json::json!({
                        "directory": placeholders(s, &dir.to_string_lossy()),
                        "git_cache_file": cache,
                        "inputs": inputs,
                    });
                    (name.clone(), entry)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    Value::Object(results.into_iter().collect())
}

/// The fields of one input compared as they are. `serverUrl` is Berth's own loopback service
/// (D-018): its port, path and href are the service's, so only its protocol, host and the shape
/// of the value (a `URL`, read through a getter, the same object on each read) are compared.
const SERVER_URL_FIELDS: &[&str] = &[
    "accessor",
    "enumerable",
    "is_url",
    "same_object_each_read",
    "protocol",
    "hostname",
];

/// Err lists every difference between Berth's inputs and the recording, for the variants Berth ran.
fn compare(berth: &Value, rec: &Value) -> Result<(), Vec<String>> {
    let mut diffs = Vec::new();
    for (name, ours) in berth.as_object().unwrap() {
        let theirs = &rec["variants"][name];
        if theirs.is_null() {
            diffs.push(format!("{name}: not in the recording"));
            continue;
        }
        if ours["directory"] != theirs["directory"] {
            diffs.push(format!(
                "{name}: instance directory {} vs {}",
                ours["directory"], theirs["directory"]
            ));
        }
        // D-021: OpenCode caches the id in <git-common-dir>/opencode; Berth writes nothing there.
        let planted = match theirs["cached"].as_str() {
            Some(id) => Value::from(format!("{id}\n")),
            None => Value::Null,
        };
        if ours["git_cache_file"] != planted {
            diffs.push(format!(
                "{name}: Berth changed .git/opencode: {}",
                ours["git_cache_file"]
            ));
        }
        let (a, b) = (&ours["inputs"], &theirs["inputs"]);
        let (ka, kb): (Vec<_>, Vec<_>) = (
            a.as_object().unwrap().keys().collect(),
            b.as_object().unwrap().keys().collect(),
        );
        if ka != kb {
            diffs.push(format!(
                "{name}: plugins that ran: berth {ka:?}, opencode {kb:?}"
            ));
        }
        for plugin in PLUGINS {
            let (o, t) = (&a[*plugin], &b[*plugin]);
            if o.is_null() || t.is_null() {
                continue;
            }
            let mut fields: Vec<&String> = t.as_object().unwrap().keys().collect();
            for k in o.as_object().unwrap().keys() {
                if !fields.contains(&k) {
                    fields.push(k);
                }
            }
            for field in fields {
                let (x, y) = if field == "serverUrl" {
                    let pick = |v: &Value| -> Value {
                        SERVER_URL_FIELDS
                            .iter()
                            .map(|f| (f.to_string(), v[*f].clone()))
                            .collect::<serde_json::Map<_, _>>()
                            .into()
                    };
                    (pick(&o[field]), pick(&t[field]))
                } else {
                    (o[field].clone(), t[field].clone())
                };
                // serde_json compares objects regardless of key order (orders are recorded
                // separately as `keys_in_order` and `project_keys`), arrays in order.
                if x != y {
                    diffs.push(format!(
                        "{name}/{plugin}: {field} differs\n berth:    {x}\n opencode: {y}"
                    ));
                }
            }
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs)
    }
}

fn all_variants(rec: &Value) -> Vec<String> {
    rec["variants"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[test]
fn plugin_input_equals_what_opencode_passes_in_every_variant() {
    let rec = recorded();
    let names = all_variants(&rec);
    assert_eq!(names.len(), 5);
    let s = Sandbox::new();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let berth = berth_inputs(&s, &rec, &names);
    if let Err(d) = compare(&berth, &rec) {
        panic!("{}", d.join("\n"));
    }
}

#[test]
fn a_changed_input_field_fails_the_comparison() {
    let rec = recorded();
    let s = Sandbox::new();
    let berth = berth_inputs(&s, &rec, &["project"]);
    assert!(compare(&berth, &rec).is_ok());
    let changes: &[(&str, &str, Value)] = &[
        ("records-input", "/project/id", Value::from("global")),
        ("records-input", "/worktree", Value::from("<case>")),
        ("records-input-options", "/options/a", Value::from(2)),
        ("records-input", "/keys_in_order/0", Value::from("project")),
        ("records-input", "/client/type", Value::from("function")),
        (
            "records-input",
            "/serverUrl/hostname",
            Value::from("localhost"),
        ),
    ];
    for (plugin, pointer, value) in changes {
        let mut wrong = berth.clone();
        *wrong["project"]["inputs"][*plugin]
            .pointer_mut(pointer)
            .unwrap() = value.clone();
        let err = compare(&wrong, &rec).expect_err(&format!("{plugin}{pointer} changed must fail"));
        assert_eq!(err.len(), 1, "{err:?}");
    }
    let mut cache_written = berth.clone();
    cache_written["project"]["git_cache_file"] = Value::from("x");
    assert!(
        compare(&cache_written, &rec).is_err(),
        "a written .git/opencode must fail"
    );
    let mut missing = berth;
    missing["project"]["inputs"]
        .as_object_mut()
        .unwrap()
        .remove("records-input-options");
    assert!(
        compare(&missing, &rec).is_err(),
        "a plugin that did not run must fail"
    );
}

#[test]
fn plugin_input_matches_real_opencode_live() {
    let live = live_recording("record-plugin-input", &["--live"]);
    let rec = recorded();
    assert_eq!(
        live["variants"], rec["variants"],
        "the committed recording is out of date: run scripts/oracle/record-plugin-input"
    );
    let s = Sandbox::new();
    let names = all_variants(&live);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let berth = berth_inputs(&s, &live, &names);
    if let Err(d) = compare(&berth, &live) {
        panic!("{}", d.join("\n"));
    }
}
