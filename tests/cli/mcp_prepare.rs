//! An MCP server started with `npx -y pkg` prepared by Berth instead (`berth prepare`), against
//! a real npm and the test registry on loopback: before approval the launcher is named plainly;
//! prepared, the exact version with its integrity is installed once in Berth's data dir with
//! install scripts off, and the server runs from there with Node — not through npx.

use serde_json::{json, Value};

use crate::support::registry::Registry;
use crate::support::*;

struct Setup {
    s: Sandbox,
    reg: Registry,
}

impl Setup {
    fn run(&self, args: &[&str]) -> (i32, Value) {
        let mut cmd = self.s.berth(args);
        cmd.arg("--json")
            .env("npm_config_registry", self.reg.url())
            .env("npm_config_update_notifier", "false");
        parse_json_output(&cmd.output().unwrap())
    }
}

/// `npx -y berth-mcp-fetched` in the project's config, the registry serving its 1.0.0, and the
/// source's id.
fn fetched_1_0_0() -> (Setup, String) {
    let s = Sandbox::new();
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "fetched": { "type": "local", "command": ["npx", "-y", "berth-mcp-fetched"] } } })
            .to_string(),
    );
    let t = Setup {
        s,
        reg: Registry::start(&["berth-mcp-fetched@1.0.0"]),
    };
    let (_, v) = t.run(&["sources"]);
    let id = v["sources"][0]["id"].as_str().unwrap().to_string();
    (t, id)
}

#[test]
fn a_fetch_and_run_server_is_prepared_once_and_runs_from_berths_data_dir() {
    let s = Sandbox::new();
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "fetched": { "type": "local", "command": ["npx", "-y", "berth-mcp-fetched", "--flag"] } } })
            .to_string(),
    );
    let t = Setup {
        s,
        reg: Registry::start(&["berth-mcp-fetched@1.0.0"]),
    };
    let (_, v) = t.run(&["sources"]);
    let src = &v["sources"][0];
    let id = src["id"].as_str().unwrap().to_string();
    let launcher = src["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| {
            d["message"]
                .as_str()
                .unwrap()
                .contains("downloads and runs whatever is newest")
        })
        .unwrap_or_else(|| panic!("the launcher is not named: {src}"));
    assert!(
        launcher["recovery"]
            .as_str()
            .unwrap()
            .contains("berth prepare"),
        "{launcher}"
    );

    let (code, p) = t.run(&["prepare", &id]);
    assert_eq!(code, 0, "{p}");
    let p = &p["prepared"];
    assert_eq!(p["package"], "berth-mcp-fetched");
    assert_eq!(p["version"], "1.0.0");
    assert!(
        p["integrity"].as_str().unwrap().starts_with("sha512-"),
        "{p}"
    );
    let program: Vec<String> = serde_json::from_value(p["program"].clone()).unwrap();
    assert!(
        program[1].starts_with(t.s.data_dir().to_str().unwrap()),
        "{program:?}"
    );
    assert_eq!(
        program.last().unwrap(),
        "--flag",
        "the entry's own arguments follow"
    );
    // The install script never ran.
    let package_dir = std::path::Path::new(&program[1])
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(!package_dir.join("postinstall-ran").exists());

    // The source says so, and the launcher's warning is gone.
    let (_, st) = t.run(&["status"]);
    assert_schema("status", &st);
    let src = &st["sources"][0];
    assert_eq!(src["lifecycle"]["prepared"]["version"], "1.0.0", "{src}");
    assert!(!src["diagnostics"]
        .to_string()
        .contains("downloads and runs whatever is newest"));
    // Approved, it runs what was prepared.
    assert_eq!(t.run(&["approve", &id]).0, 0);
    let (code, tools) = t.run(&["tools"]);
    assert_eq!(code, 0, "{tools}");
    assert_eq!(tools["tools"][0]["name"], "fetched_where", "{tools}");
    let (code, r) = t.run(&["invoke", "fetched_where"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["output"], format!("{} 1.0.0", program[1]));

    // Negative control: another entry (a changed command) is not the one prepared; it runs as
    // written — here `npx` against the test registry would be what starts, so it is only
    // checked that the preparation no longer applies.
    t.s.write(
        "project/opencode.json",
        &json!({ "mcp": { "fetched": { "type": "local", "command": ["npx", "-y", "berth-mcp-fetched", "--other"] } } })
            .to_string(),
    );
    let (_, v) = t.run(&["sources"]);
    assert_eq!(
        v["sources"][0]["state"], "pending-approval",
        "a changed entry asks again"
    );
}

#[test]
fn what_cannot_be_prepared_says_why() {
    let s = Sandbox::new();
    s.write(
        "project/opencode.json",
        &json!({ "mcp": {
            "py": { "type": "local", "command": ["uvx", "some-server"] },
            "plain": { "type": "local", "command": ["node", "server.mjs"] }
        } })
        .to_string(),
    );
    let t = Setup {
        s,
        reg: Registry::start(&[]),
    };
    let (_, v) = t.run(&["sources"]);
    let id = |name: &str| {
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["entry"] == name)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (code, e) = t.run(&["prepare", &id("py")]);
    assert_ne!(code, 0);
    assert_eq!(e["error"]["code"], "unsupported", "{e}");
    let (code, e) = t.run(&["prepare", &id("plain")]);
    assert_ne!(code, 0);
    assert_eq!(e["error"]["code"], "invalid-arguments", "{e}");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not a fetch-and-run launcher"));
}

/// An attack on what runs: the prepared package's program is rewritten after Berth prepared it
/// (another process of the person, a tool that writes where it should not). The next start
/// checks the install against the file list it had when prepared: the changed bytes never run.
#[test]
fn a_prepared_package_changed_afterwards_is_refused_and_none_of_it_runs() {
    let (t, id) = fetched_1_0_0();
    let (code, p) = t.run(&["prepare", &id]);
    assert_eq!(code, 0, "{p}");
    let program = p["prepared"]["program"][1].as_str().unwrap().to_string();
    assert_eq!(t.run(&["approve", &id]).0, 0);
    // Negative control: as prepared, it runs.
    let (code, r) = t.run(&["invoke", "fetched_where"]);
    assert_eq!(code, 0, "{r}");
    // Swap the program's bytes for a version that leaves a mark when it runs.
    let marker = t.s.root.path().join("tampered-ran");
    let original = std::fs::read_to_string(&program).unwrap();
    std::fs::write(
        &program,
        format!(
            "import {{ writeFileSync }} from 'node:fs'\nwriteFileSync({:?}, 'ran')\n{original}",
            marker.display().to_string()
        ),
    )
    .unwrap();
    let (_, tools) = t.run(&["tools"]);
    assert!(
        tools["tools"].as_array().unwrap().is_empty(),
        "a changed package was connected: {tools}"
    );
    let problem = &tools["problems"][0];
    assert_eq!(problem["code"], "action-required", "{tools}");
    assert!(
        problem["message"]
            .as_str()
            .unwrap()
            .contains("changed since Berth prepared it"),
        "{problem}"
    );
    let (code, _) = t.run(&["invoke", "fetched_where"]);
    assert_ne!(code, 0);
    assert!(!marker.exists(), "the changed bytes ran");
}

/// A prepared server updates and rolls back like an npm plugin: each prepared install that ran
/// is an execution version; `berth update` prepares the newest version the launcher's spec
/// allows (the one that runs keeps its folder), `berth rollback` runs the exact earlier install
/// again — and refuses one whose files changed since it ran.
#[test]
fn a_prepared_server_updates_and_rolls_back_to_the_exact_install_that_ran() {
    let (t, id) = fetched_1_0_0();
    // Not prepared yet: nothing to update from.
    let (code, e) = t.run(&["update", &id]);
    assert_ne!(code, 0);
    assert_eq!(e["error"]["code"], "action-required", "{e}");
    assert!(
        e["error"]["recovery"].as_str().unwrap().contains("prepare"),
        "{e}"
    );
    let (code, p) = t.run(&["prepare", &id]);
    assert_eq!(code, 0, "{p}");
    let first_program = p["prepared"]["program"][1].as_str().unwrap().to_string();
    assert_eq!(t.run(&["approve", &id]).0, 0);
    let where_ = |t: &Setup| {
        let (code, r) = t.run(&["invoke", "fetched_where"]);
        assert_eq!(code, 0, "{r}");
        r["output"].as_str().unwrap().to_string()
    };
    assert_eq!(where_(&t), format!("{first_program} 1.0.0"));
    let (_, vs) = t.run(&["versions", &id]);
    let versions = vs["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{vs}");
    assert_eq!(versions[0]["version"], "1.0.0");
    assert_eq!(versions[0]["recoverable"], true, "{vs}");

    // Nothing newer: up to date, nothing restarted.
    let (code, u) = t.run(&["update", &id]);
    assert_eq!(code, 0, "{u}");
    assert_eq!(u["update"]["outcome"], "up-to-date", "{u}");

    t.reg.publish("berth-mcp-fetched@1.1.0");
    let (code, u) = t.run(&["update", &id]);
    assert_eq!(code, 0, "{u}");
    assert_eq!(
        u["update"],
        json!({ "outcome": "updated", "from": "1.0.0", "to": "1.1.0" })
    );
    let out = where_(&t);
    assert!(out.ends_with(" 1.1.0"), "{out}");
    assert_ne!(out, format!("{first_program} 1.1.0"), "a folder of its own");
    let (_, st) = t.run(&["status"]);
    assert_schema("status", &st);
    let life = &st["sources"][0]["lifecycle"];
    assert_eq!(life["prepared"]["version"], "1.1.0", "{life}");
    assert_eq!(life["current"]["version"], "1.1.0", "{life}");
    assert_eq!(
        life["current"]["why"],
        "updated from 1.0.0 to 1.1.0 (you asked for it)"
    );
    let earlier = life["history"][0]["id"].clone();
    assert_eq!(life["history"][0]["version"], "1.0.0", "{life}");
    assert_eq!(life["rollback_to"], earlier, "{life}");

    let (code, r) = t.run(&["rollback", &id]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        r["update"],
        json!({ "outcome": "rolled-back", "from": "1.1.0", "to": "1.0.0" })
    );
    assert_eq!(
        where_(&t),
        format!("{first_program} 1.0.0"),
        "the same install as before"
    );

    // Negative control: the 1.1.0 install is changed on disk; rolling forward to it is refused
    // and the version that runs stays.
    let (_, vs) = t.run(&["versions", &id]);
    let newer = vs["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["version"] == "1.1.0")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let newer_program = out.trim_end_matches(" 1.1.0").to_string();
    std::fs::write(&newer_program, "process.exit(7)\n").unwrap();
    let (code, e) = t.run(&["rollback", &id, "--to", &newer.to_string()]);
    assert_ne!(code, 0, "{e}");
    assert_eq!(e["error"]["code"], "action-required", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not recoverable"),
        "{e}"
    );
    assert_eq!(where_(&t), format!("{first_program} 1.0.0"));
}
