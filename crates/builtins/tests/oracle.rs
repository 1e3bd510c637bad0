//! Berth's built-ins against real OpenCode 1.18.4: every case of
//! tests/oracle/builtins/outputs.json (recorded by scripts/oracle/record-builtins) is called on a
//! copy of the same fixture tree and must give the same title, output and metadata, or the same
//! error text. Two things are compared as sets rather than sequences: the order of glob's paths
//! and of grep's file groups, which in OpenCode is ripgrep's multi-threaded walk order (it
//! changed between runs on one machine); Berth sorts by path. The cases where Berth deliberately
//! differs (paths outside the project) are listed in `DEVIATIONS` with the code Berth must give.
//! The negative controls prove that the comparison fails on a difference.

mod common;

use berth_builtins::{call, BuiltinError, Output};
use common::{repo, Tree};
use serde_json::Value;

/// Cases where Berth refuses what OpenCode does (or refuses differently): case → Berth's code.
const DEVIATIONS: &[(&str, &str, &str)] = &[
    (
        "read-through-symlink-out",
        "policy-limited",
        "OpenCode checks the path as written; Berth resolves the symlink first",
    ),
    ("glob-through-symlink-out", "policy-limited", "same"),
    (
        "grep-through-symlink-out",
        "policy-limited",
        "same (OpenCode even prints the outside path)",
    ),
    (
        "read-outside-absolute",
        "policy-limited",
        "OpenCode asks external_directory (denied in the recording); Berth never reaches outside",
    ),
    ("read-dotdot", "policy-limited", "same"),
    ("glob-outside", "policy-limited", "same"),
    ("grep-outside", "policy-limited", "same"),
    (
        "list-root",
        "invalid-arguments",
        "1.18.4 has no list tool (OpenCode's invalid tool answers); Berth: unknown tool",
    ),
];

fn recording() -> Value {
    let text = std::fs::read_to_string(repo().join("tests/oracle/builtins/outputs.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// What a call gave, in the recording's terms.
#[derive(Debug, PartialEq)]
enum Outcome {
    Completed {
        title: String,
        output: String,
        metadata: Value,
    },
    Error(String),
}

fn expected(case: &Value) -> Outcome {
    let r = &case["result"];
    match r["status"].as_str() {
        Some("completed") => Outcome::Completed {
            title: r["title"].as_str().unwrap().to_string(),
            output: r["output"].as_str().unwrap().to_string(),
            metadata: r["metadata"].clone(),
        },
        _ => Outcome::Error(r["error"].as_str().unwrap().to_string()),
    }
}

fn actual(tree: &Tree, result: &Result<Output, BuiltinError>) -> Outcome {
    match result {
        Ok(o) => Outcome::Completed {
            title: tree.unplace(&o.title),
            output: tree.unplace(&o.output),
            metadata: serde_json::from_str(&tree.unplace(&o.metadata.to_string())).unwrap(),
        },
        Err(e) => Outcome::Error(tree.unplace(&e.to_string())),
    }
}

/// Order-free forms: glob's path lines sorted; grep's file groups sorted (lines inside a group
/// keep their order: ripgrep searches one file front to back).
fn canonical(tool: &str, output: &str) -> String {
    match tool {
        "glob" => {
            let (paths, note) = match output.split_once("\n\n") {
                Some((p, n)) => (p, Some(n)),
                None => (output, None),
            };
            let mut lines: Vec<&str> = paths.lines().collect();
            lines.sort();
            let mut out = lines.join("\n");
            if let Some(n) = note {
                out = format!("{out}\n\n{n}");
            }
            out
        }
        "grep" => {
            let Some((head, rest)) = output.split_once('\n') else {
                return output.to_string();
            };
            let (body, note) = match rest.rsplit_once("\n\n\n(Results truncated") {
                Some((b, n)) => (b, Some(n)),
                None => (rest, None),
            };
            // Groups start at a line `<path>:` (every hit line starts with two spaces).
            let mut groups: Vec<String> = Vec::new();
            for line in body.split('\n') {
                if !line.is_empty() && !line.starts_with("  ") && line.ends_with(':') {
                    groups.push(String::new());
                }
                if let Some(g) = groups.last_mut() {
                    g.push_str(line);
                    g.push('\n');
                }
            }
            let mut groups: Vec<String> = groups
                .into_iter()
                .map(|g| g.trim_end_matches('\n').to_string())
                .collect();
            groups.sort();
            let mut out = format!("{head}\n{}", groups.join("\n"));
            if let Some(n) = note {
                out.push_str(&format!("\n\n\n(Results truncated{n}"));
            }
            out
        }
        _ => output.to_string(),
    }
}

/// The differences between what OpenCode gave and what Berth gave, readably; empty when equal.
fn compare(id: &str, tool: &str, want: &Outcome, got: &Outcome) -> Vec<String> {
    let mut diffs = Vec::new();
    match (want, got) {
        (
            Outcome::Completed {
                title: wt,
                output: wo,
                metadata: wm,
            },
            Outcome::Completed {
                title: gt,
                output: go,
                metadata: gm,
            },
        ) => {
            if wt != gt {
                diffs.push(format!("{id}: title: OpenCode {wt:?}, Berth {gt:?}"));
            }
            let (wo, go) = (canonical(tool, wo), canonical(tool, go));
            if wo != go {
                diffs.push(format!("{id}: output differs:\n{}", line_diff(&wo, &go)));
            }
            if wm != gm {
                diffs.push(format!("{id}: metadata: OpenCode {wm}\n  Berth {gm}"));
            }
        }
        (w, g) if w != g => diffs.push(format!("{id}: OpenCode {w:?}\n  Berth {g:?}")),
        _ => {}
    }
    diffs
}

/// The first differing lines with their numbers (and the counts when one side is longer).
fn line_diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.split('\n').collect(), got.split('\n').collect());
    let mut out = Vec::new();
    for i in 0..w.len().max(g.len()) {
        let (a, b) = (w.get(i), g.get(i));
        if a != b {
            out.push(format!(
                "  line {}:\n    OpenCode {:?}\n    Berth    {:?}",
                i + 1,
                a,
                b
            ));
            if out.len() == 5 {
                out.push("  …".into());
                break;
            }
        }
    }
    out.push(format!(
        "  ({} lines from OpenCode, {} from Berth)",
        w.len(),
        g.len()
    ));
    out.join("\n")
}

async fn run_case(tree: &Tree, case: &Value) -> Result<Output, BuiltinError> {
    let args: Value = serde_json::from_str(&tree.place(&case["args"].to_string())).unwrap();
    call(case["tool"].as_str().unwrap(), args, &tree.ctx()).await
}

#[tokio::test]
async fn every_recorded_call_gives_opencodes_output() {
    let tree = Tree::new();
    let rec = recording();
    let cases = rec["cases"].as_object().unwrap();
    assert!(cases.len() >= 40, "only {} cases recorded", cases.len());
    let mut diffs = Vec::new();
    for (id, case) in cases {
        let tool = case["tool"].as_str().unwrap();
        let result = run_case(&tree, case).await;
        if let Some((_, code, _)) = DEVIATIONS.iter().find(|(d, _, _)| d == id) {
            match &result {
                Err(e) if e.code() == *code => {}
                other => diffs.push(format!(
                    "{id}: a listed deviation; Berth must answer `{code}`, gave {other:?}"
                )),
            }
            continue;
        }
        diffs.extend(compare(id, tool, &expected(case), &actual(&tree, &result)));
    }
    assert!(
        diffs.is_empty(),
        "{} difference(s) from OpenCode 1.18.4:\n{}",
        diffs.len(),
        diffs.join("\n\n")
    );
}

#[test]
fn the_definitions_are_the_recorded_ones() {
    let text =
        std::fs::read_to_string(repo().join("tests/oracle/builtins/definitions.json")).unwrap();
    let rec: Value = serde_json::from_str(&text).unwrap();
    let recorded = rec["tools"].as_object().unwrap();
    let ours = berth_builtins::definitions();
    let mut ids: Vec<&str> = ours.iter().map(|b| b.id.as_str()).collect();
    ids.sort();
    let want: Vec<&str> = recorded.keys().map(String::as_str).collect();
    assert_eq!(ids, want, "ids");
    for b in ours {
        assert_eq!(
            b.description,
            recorded[&b.id]["description"].as_str().unwrap(),
            "{}: description",
            b.id
        );
        assert_eq!(
            b.parameters, recorded[&b.id]["parameters"],
            "{}: parameters",
            b.id
        );
    }
    assert_eq!(
        rec["absent"],
        serde_json::json!(["list"]),
        "the recording says which wanted tools 1.18.4 lacks"
    );
}

#[tokio::test]
async fn negative_control_an_altered_expectation_is_reported() {
    let tree = Tree::new();
    let rec = recording();
    let case = &rec["cases"]["read-file"];
    let got = actual(&tree, &run_case(&tree, case).await);
    assert!(
        compare("read-file", "read", &expected(case), &got).is_empty(),
        "the control's base case must pass"
    );
    let Outcome::Completed {
        title,
        output,
        metadata,
    } = expected(case)
    else {
        panic!("read-file completed")
    };
    let altered = Outcome::Completed {
        title,
        output: output.replace("4:   const", "4:  const"),
        metadata,
    };
    let diffs = compare("read-file", "read", &altered, &got);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(
        diffs[0].contains("line 7:"),
        "the diff names the line: {}",
        diffs[0]
    );
}

#[tokio::test]
async fn negative_control_a_different_argument_is_reported() {
    let tree = Tree::new();
    let rec = recording();
    for (id, tweak) in [
        ("read-offset-limit", ("limit", 19)),
        ("grep-truncated", ("pattern", 0)),
    ] {
        let case = &rec["cases"][id];
        let mut args = case["args"].clone();
        match tweak {
            ("pattern", _) => args["pattern"] = Value::from("^row 1\\d*$"),
            (k, v) => args[k] = Value::from(v),
        }
        let mut changed = case.clone();
        changed["args"] = args;
        let got = actual(&tree, &run_case(&tree, &changed).await);
        let tool = case["tool"].as_str().unwrap();
        assert!(
            !compare(id, tool, &expected(case), &got).is_empty(),
            "{id}: a changed argument went unnoticed"
        );
    }
}

#[test]
fn negative_control_grep_groups_are_order_free_but_their_lines_are_not() {
    let a = "Found 3 matches\n/p/a:\n  Line 1: x\n\n  Line 2: x\n\n\n/p/b:\n  Line 1: x\n";
    let b = "Found 3 matches\n/p/b:\n  Line 1: x\n\n\n/p/a:\n  Line 1: x\n\n  Line 2: x\n";
    assert_eq!(canonical("grep", a), canonical("grep", b));
    let swapped = "Found 3 matches\n/p/a:\n  Line 2: x\n\n  Line 1: x\n\n\n/p/b:\n  Line 1: x\n";
    assert_ne!(canonical("grep", a), canonical("grep", swapped));
}
