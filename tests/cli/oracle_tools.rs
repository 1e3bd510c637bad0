//! The JSON Schema Berth gives each standalone tool equals the `parameters` real OpenCode
//! 1.18.4 sends the model for the same file (`tests/oracle/tools/schemas.json`): optional,
//! defaults, enums, integer and number bounds, arrays, nested objects, descriptions, nullable,
//! unions, literals, records, empty args, and hand-written JSON Schema args. A name several
//! sources register (a tool file and two plugins) goes to the same winner as in OpenCode
//! (`tests/oracle/tools/collisions.json`).

use serde_json::Value;

use crate::support::*;

fn berth_tools() -> Value {
    berth_tools_of("fixtures/tool-schemas")
}

/// Berth's catalog for the `.opencode` folder of `fixture`/project, everything approved (both
/// checkpoints: plugins register what is only known once they load).
fn berth_tools_of(fixture: &str) -> Value {
    let s = Sandbox::new();
    let src = repo_root().join(fixture).join("project/.opencode");
    for dir in ["tools", "plugins"] {
        let Ok(entries) = std::fs::read_dir(src.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            s.write(
                &format!("project/.opencode/{dir}/{name}"),
                &std::fs::read_to_string(e.path()).unwrap(),
            );
        }
    }
    let mut v = Value::Null;
    for _ in 0..2 {
        assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
        let (code, out) = s.run_json(&["tools"]);
        v = out;
        assert_eq!(code, 0, "{v}");
    }
    assert_schema("tools", &v);
    assert_eq!(v["problems"], serde_json::json!([]));
    v
}

/// Err lists every tool whose name set, description or parameters differ.
fn compare(berth: &Value, recorded: &Value) -> Result<(), Vec<String>> {
    let theirs = recorded["tools"].as_object().unwrap();
    let ours: serde_json::Map<String, Value> = berth["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
        .collect();
    let mut diffs = Vec::new();
    let (a, b): (Vec<_>, Vec<_>) = (ours.keys().collect(), theirs.keys().collect());
    if a != b {
        diffs.push(format!("tool names differ: berth {a:?}, opencode {b:?}"));
    }
    for (name, t) in theirs {
        let Some(o) = ours.get(name) else { continue };
        // serde_json compares objects regardless of key order, arrays in order.
        if o["parameters"] != t["parameters"] {
            diffs.push(format!(
                "{name}: parameters differ\n berth:    {}\n opencode: {}",
                o["parameters"], t["parameters"]
            ));
        }
        if o["description"] != t["description"] {
            diffs.push(format!("{name}: description differs"));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs)
    }
}

fn recorded() -> Value {
    recorded_in("schemas.json")
}

fn recorded_in(file: &str) -> Value {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/oracle/tools").join(file)).unwrap(),
    )
    .unwrap();
    assert_eq!(v["opencode_version"], "1.18.4");
    v
}

#[test]
fn tool_schemas_equal_what_opencode_sends_the_model() {
    let recorded = recorded();
    assert!(recorded["tools"].as_object().unwrap().len() >= 20);
    if let Err(d) = compare(&berth_tools(), &recorded) {
        panic!("{}", d.join("\n"));
    }
}

#[test]
fn a_changed_schema_or_a_missing_tool_fails_the_comparison() {
    let recorded = recorded();
    let berth = berth_tools();
    assert!(compare(&berth, &recorded).is_ok());
    let mut wrong = berth.clone();
    let t = wrong["tools"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|t| t["name"] == "numbers_int_bounded")
        .unwrap();
    t["parameters"]["properties"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .next()
        .unwrap()["maximum"] = Value::from(11);
    assert!(
        compare(&wrong, &recorded).is_err(),
        "a changed bound must fail"
    );
    let mut fewer = berth;
    fewer["tools"].as_array_mut().unwrap().pop();
    assert!(
        compare(&fewer, &recorded).is_err(),
        "a missing tool must fail"
    );
}

#[test]
fn a_name_several_sources_register_goes_to_the_tool_opencode_gives_the_model() {
    let recorded = recorded_in("collisions.json");
    let berth = berth_tools_of("fixtures/tool-collisions");
    if let Err(d) = compare(&berth, &recorded) {
        panic!("{}", d.join("\n"));
    }
    // Negative control: the earlier plugin's `shared`, or the tool file's `dup`, must fail.
    for (name, loser) in [("shared", "plugin-a"), ("dup", "tool-dup")] {
        let mut wrong = berth.clone();
        let tools = wrong["tools"].as_array_mut().unwrap();
        let t = tools.iter_mut().find(|t| t["name"] == name).unwrap();
        t["description"] = Value::from(format!("{name} from {loser}"));
        assert!(compare(&wrong, &recorded).is_err(), "{name} from {loser}");
    }
}

/// How OpenCode's description of a tool whose id is `task` differs from Berth's (D-039): Err
/// says how, when it is anything but OpenCode's agent list appended.
fn task_difference(berth: &str, opencode: &str) -> Result<Vec<String>, String> {
    let rest = opencode
        .strip_prefix(berth)
        .ok_or_else(|| format!("OpenCode's description does not start with Berth's:\n berth:    {berth:?}\n opencode: {opencode:?}"))?;
    let list = rest
        .strip_prefix("\nAvailable agent types and the tools they have access to:\n")
        .ok_or_else(|| format!("OpenCode appends something else than its agent list: {rest:?}"))?;
    let agents: Vec<String> = list
        .lines()
        .map(|l| {
            l.strip_prefix("- ")
                .and_then(|a| a.split(':').next())
                .map(str::to_string)
                .ok_or_else(|| format!("not an agent line: {l:?}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(agents)
}

#[test]
fn a_plugins_task_tool_is_described_as_opencode_does_without_its_agent_list() {
    let recorded = recorded_in("task.json");
    let s = Sandbox::new();
    s.copy_fixture(
        "task-tool/project/.opencode/plugins/task.ts",
        "project/.opencode/plugins/task.ts",
    );
    // `task` is one of OpenCode's built-ins: the override cap lets it through.
    assert_eq!(
        s.run_json(&["policy", "set", "cap.tool-override", "allow"])
            .0,
        0
    );
    approve_and_load(|a| s.run_json(a));
    let (code, v) = s.run_json(&["tools"]);
    assert_eq!(code, 0, "{v}");
    let ours = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "task")
        .unwrap_or_else(|| panic!("no task tool: {v}"));
    assert_eq!(ours["parameters"], recorded["tool"]["parameters"]);
    let theirs = recorded["tool"]["description"].as_str().unwrap();
    let agents = task_difference(ours["description"].as_str().unwrap(), theirs)
        .unwrap_or_else(|e| panic!("{e}"));
    // OpenCode's list: its own subagents, the config's, and the one the plugin's `config` hook
    // added — sorted, primary agents left out.
    assert_eq!(
        agents,
        ["docs-writer", "explore", "general", "plugin-reviewer"],
        "{theirs}"
    );
    // Negative controls: another description, or something else appended, fails.
    assert!(task_difference("Runs something else.", theirs).is_err());
    assert!(task_difference(
        ours["description"].as_str().unwrap(),
        &format!("{theirs}\ntrailing")
    )
    .is_err());
}
