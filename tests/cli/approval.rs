//! The approval plane through the CLI: decisions, their keys, and the re-ask rules.

use crate::support::*;

const PLUGIN: &str = "project/.opencode/plugins/p.ts";

fn plugin_text(extra: &str) -> String {
    format!("export default {{ id: 'p', server: async () => {{ {extra}; return {{}} }} }}\n")
}

#[test]
fn approving_records_the_digests_and_survives_a_restart() {
    let s = Sandbox::new();
    s.write(PLUGIN, &plugin_text("const greeting = 'hello'"));
    let (_, v) = s.run_json(&["sources"]);
    let p = source(&v, "p.ts");
    assert_eq!(p["state"], "pending-approval");
    assert_eq!(p["approval"]["decision"], serde_json::Value::Null);
    let id = p["id"].as_str().unwrap().to_string();

    let (code, v) = s.run_json(&["approve", &id]);
    assert_eq!(code, 0, "{v}");
    assert_schema("approve", &v);
    assert_eq!(v["approved"], serde_json::json!([id]));

    // A new process reads the decision back.
    let (_, v) = s.run_json(&["sources"]);
    assert_schema("sources", &v);
    let p = source(&v, "p.ts");
    assert_eq!(p["approval"]["decision"], "allow");
    assert_ne!(p["state"], "pending-approval");
    let (_, rows) = s.run_json(&["approvals"]);
    assert_schema("approvals", &rows);
    let row = &rows["approvals"][0];
    assert_eq!(row["source_id"], id);
    assert_eq!(row["capability_digest"], p["capability_digest"]);
    assert_eq!(row["digest"], p["digest"]);
}

const GLOBAL_PLUGIN: &str = "home/.config/opencode/plugins/g.ts";

#[test]
fn in_a_global_folder_a_changed_string_does_not_ask_again_but_a_new_process_api_does() {
    let s = Sandbox::new();
    s.write(GLOBAL_PLUGIN, &plugin_text("const greeting = 'hello'"));
    let (code, _) = s.run_json(&["approve", "--all"]);
    assert_eq!(code, 0);

    s.write(GLOBAL_PLUGIN, &plugin_text("const greeting = 'bonjour'"));
    let (_, v) = s.run_json(&["sources"]);
    let p = source(&v, "g.ts");
    assert_eq!(p["approval"]["grew"], serde_json::json!([]));
    assert_ne!(
        p["state"], "pending-approval",
        "a literal change must not ask again"
    );

    s.write(GLOBAL_PLUGIN, &plugin_text("Bun.spawn(['true'])"));
    let (_, v) = s.run_json(&["sources"]);
    let p = source(&v, "g.ts");
    assert_eq!(p["state"], "pending-approval");
    let grew: Vec<String> = p["approval"]["grew"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap().to_string())
        .collect();
    assert!(
        grew.iter()
            .any(|g| g.contains("starts programs") && g.contains("Bun.spawn")),
        "{grew:?}"
    );
}

#[test]
fn a_project_source_is_asked_again_on_any_change_naming_the_file() {
    let s = Sandbox::new();
    let file = s.write(PLUGIN, &plugin_text("const greeting = 'hello'"));
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    // Someone else's update (a `git pull`): even a changed string is asked again.
    s.write(PLUGIN, &plugin_text("const greeting = 'bonjour'"));
    let (_, v) = s.run_json(&["sources"]);
    let p = source(&v, "p.ts");
    assert_eq!(p["state"], "pending-approval");
    let grew = p["approval"]["grew"].to_string();
    let real = std::fs::canonicalize(&file).unwrap();
    assert!(
        grew.contains("asked again on any change") && grew.contains(&real.display().to_string()),
        "{grew}"
    );
}

#[test]
fn deny_disables_and_another_backend_is_another_key() {
    let s = Sandbox::new();
    s.write(PLUGIN, &plugin_text(""));
    let (_, v) = s.run_json(&["sources"]);
    let id = id_of(&v, "p.ts");
    let (code, v) = s.run_json(&["deny", &id]);
    assert_eq!(code, 0);
    assert_schema("deny", &v);
    let (_, v) = s.run_json(&["sources"]);
    assert_eq!(source(&v, "p.ts")["state"], "disabled");
    let backend = source(&v, "p.ts")["approval"]["backend"]
        .as_str()
        .unwrap()
        .to_string();

    // The same source on the other backend has no decision yet.
    let other = if backend == "bun" { "node" } else { "bun" };
    let mut cmd = s.berth(&["sources", "--json"]);
    if other == "node" {
        cmd.env("BERTH_BUN", s.root.path().join("no-bun-here"));
    } else {
        cmd.env("BERTH_NODE", s.root.path().join("no-node-here"));
    }
    let (_, v) = parse_json_output(&cmd.output().unwrap());
    let p = source(&v, "p.ts");
    if p["approval"]["backend"] == other {
        assert_eq!(p["state"], "pending-approval");
        assert_eq!(p["approval"]["decision"], serde_json::Value::Null);
    } else {
        panic!("could not select the {other} backend: {}", p["approval"]);
    }
}

#[test]
fn an_unknown_id_fails_before_anything_is_recorded() {
    let s = Sandbox::new();
    s.write(PLUGIN, &plugin_text(""));
    let (_, v) = s.run_json(&["sources"]);
    let id = id_of(&v, "p.ts");
    let (code, v) = s.run_json(&["approve", &id, "plugin-nope-00000000"]);
    assert_eq!(code, 1);
    assert_schema("error", &v);
    assert_eq!(v["error"]["code"], "invalid-arguments");
    let (_, rows) = s.run_json(&["approvals"]);
    assert_eq!(rows["approvals"], serde_json::json!([]));
}

#[test]
fn a_global_source_is_asked_once_and_a_project_may_override() {
    let s = Sandbox::new();
    s.write("home/.config/opencode/plugins/g.ts", &plugin_text(""));
    let other = s.root.path().join("other-project");
    std::fs::create_dir_all(&other).unwrap();
    git_init(&other);
    let in_other = |args: &[&str]| {
        let mut cmd = std::process::Command::new(berth_bin());
        cmd.args(args)
            .arg("--json")
            .arg("--data-dir")
            .arg(s.data_dir())
            .arg("--project")
            .arg(&other);
        s.apply_env(&mut cmd);
        parse_json_output(&cmd.output().unwrap())
    };
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    // The same global plugin in another project: already decided.
    let (_, v) = in_other(&["sources"]);
    assert_eq!(source(&v, "g.ts")["approval"]["decision"], "allow");
    let id = id_of(&v, "g.ts");

    // The other project turns it off for itself only.
    let (code, _) = in_other(&["deny", &id, "--this-project"]);
    assert_eq!(code, 0);
    let (_, v) = in_other(&["sources"]);
    assert_eq!(source(&v, "g.ts")["state"], "disabled");
    let (_, v) = s.run_json(&["sources"]);
    assert_eq!(
        source(&v, "g.ts")["approval"]["decision"],
        "allow",
        "the first project keeps its decision"
    );
    let (_, rows) = s.run_json(&["approvals"]);
    assert_schema("approvals", &rows);
    assert_eq!(rows["approvals"][0]["project"], other.display().to_string());
    assert_eq!(rows["approvals"][1]["project"], serde_json::Value::Null);
}
