//! Updates and rollbacks of npm plugins (#16) against a real npm and a registry on loopback
//! (`tests/support/registry.mjs`): checked only when asked, updated within the spec, an update
//! that can do more held, one that fails to load left unavailable and rolled back byte for
//! byte, every version that ran recorded.

use crate::support::registry::Registry;
use crate::support::*;

struct Setup {
    s: Sandbox,
    reg: Registry,
}

impl Setup {
    /// The person's global config asks for `spec`; the registry shows `visible`.
    fn new(spec: &str, visible: &[&str]) -> Setup {
        let s = Sandbox::new();
        let reg = Registry::start(visible);
        s.write(
            "home/.config/opencode/opencode.json",
            &serde_json::json!({ "plugin": [spec] }).to_string(),
        );
        Setup { s, reg }
    }

    fn run(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let mut cmd = self.s.berth(args);
        cmd.arg("--json")
            .env("npm_config_registry", self.reg.url())
            .env("npm_config_update_notifier", "false");
        parse_json_output(&cmd.output().unwrap())
    }

    fn id(&self) -> String {
        let (_, v) = self.run(&["sources"]);
        v["sources"][0]["id"].as_str().unwrap().to_string()
    }

    fn call(&self, tool: &str) -> String {
        let (code, v) = self.run(&["invoke", tool]);
        assert_eq!(code, 0, "{v}");
        v["output"].as_str().unwrap().to_string()
    }

    fn source(&self) -> serde_json::Value {
        self.run(&["status"]).1["sources"][0].clone()
    }
}

#[test]
fn an_npm_plugin_is_updated_held_when_it_grows_and_rolled_back_exactly() {
    let t = Setup::new("berth-update-probe@latest", &["berth-update-probe@1.0.0"]);
    let id = t.id();
    assert_eq!(t.run(&["approve", "--including-fetch", &id]).0, 0);
    assert_eq!(t.call("probe_version"), "berth-update-probe 1.0.0");

    // Nothing newer yet; and nothing asks the registry unless the person does.
    let (code, v) = t.run(&["updates", "--check"]);
    assert_eq!(code, 0, "{v}");
    assert_schema("updates", &v);
    assert_eq!(v["updates"][0]["current"], "1.0.0");
    assert!(v["updates"][0]["offer"]["available"].is_null(), "{v}");
    t.reg.publish("berth-update-probe@1.1.0");
    t.reg.reset_requests();
    for args in [
        &["status"][..],
        &["tools"],
        &["updates"],
        &["invoke", "probe_version"],
    ] {
        assert_eq!(t.run(args).0, 0);
    }
    assert_eq!(
        t.reg.requests(),
        serde_json::json!({}),
        "asked the registry without being asked to (the update policy is manual)"
    );
    let (_, v) = t.run(&["updates", "--check", &id]);
    let offer = &v["updates"][0]["offer"];
    assert_eq!(offer["available"]["version"], "1.1.0", "{v}");
    let packument = t.reg.packument("berth-update-probe");
    assert_eq!(
        offer["available"]["integrity"],
        packument["versions"]["1.1.0"]["dist"]["integrity"]
    );
    assert_eq!(offer["available"]["published"], packument["time"]["1.1.0"]);

    // Within the spec, nothing grows: it is taken when the person presses Update.
    let (code, v) = t.run(&["update", &id]);
    assert_eq!(code, 0, "{v}");
    assert_schema("update", &v);
    assert_eq!(
        v["update"],
        serde_json::json!({ "outcome": "updated", "from": "1.0.0", "to": "1.1.0" })
    );
    assert_eq!(t.call("probe_version"), "berth-update-probe 1.1.0");
    let good = t.source()["digest"].as_str().unwrap().to_string();

    // A version whose load fails: the old one was stopped first, so the source is unavailable;
    // a rollback to the exact bytes of 1.1.0 is offered and restores it.
    t.reg.publish("berth-update-probe@1.2.0");
    let (code, v) = t.run(&["update", &id]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (1, Some("plugin-failed")),
        "{v}"
    );
    assert!(
        v["error"]["recovery"]
            .as_str()
            .unwrap()
            .contains("roll back"),
        "{v}"
    );
    let src = t.source();
    let progress = &src["lifecycle"]["updates"]["progress"];
    assert_eq!(
        progress["stage"], "failed",
        "every process shows the failed update: {src}"
    );
    assert_eq!(progress["target"], "1.2.0");
    let to = src["lifecycle"]["updates"]["rollback_to"]
        .as_i64()
        .expect("a rollback is offered");
    let (code, v) = t.run(&["versions", &id]);
    assert_eq!(code, 0, "{v}");
    assert_schema("versions", &v);
    let before = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == to)
        .unwrap()
        .clone();
    assert_eq!(before["version"], "1.1.0");
    assert_eq!(before["digest"], good.as_str());
    assert_eq!(before["recoverable"], true, "{before}");
    let (code, v) = t.run(&["rollback", &id]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["update"],
        serde_json::json!({ "outcome": "rolled-back", "from": "1.2.0", "to": "1.1.0" })
    );
    let src = t.source();
    // Decided and not loaded in this (one-shot) process; the call below loads it.
    assert_eq!(src["state"], "approved", "{src}");
    assert!(src["lifecycle"]["updates"]["progress"].is_null(), "{src}");
    assert_eq!(
        src["digest"],
        good.as_str(),
        "the exact bytes of 1.1.0 run again"
    );
    assert_eq!(t.call("probe_version"), "berth-update-probe 1.1.0");
    assert!(
        src["lifecycle"]["current"]["why"]
            .as_str()
            .unwrap()
            .starts_with("rolled back"),
        "{src}"
    );

    // 2.0.0 adds a tool: it is not registered before the person allows it.
    t.reg.publish("berth-update-probe@2.0.0");
    let (code, v) = t.run(&["update", &id]);
    let held_before_import = code == 1 && v["error"]["code"] == "action-required";
    let held_after_import = code == 0 && v["update"]["outcome"] == "held";
    assert!(held_before_import || held_after_import, "{v}");
    let (_, tools) = t.run(&["tools"]);
    assert!(
        !tools["tools"].to_string().contains("probe_extra"),
        "a tool nobody allowed was registered: {tools}"
    );
    if held_before_import {
        let src = t.source();
        assert_eq!(
            src["lifecycle"]["updates"]["progress"]["stage"], "waiting-for-you",
            "{src}"
        );
        assert_eq!(
            t.call("probe_version"),
            "berth-update-probe 1.1.0",
            "the old version serves on"
        );
        let (code, v) = t.run(&["update", &id, "--approve-growth"]);
        assert_eq!(code, 0, "{v}");
    } else {
        assert_eq!(t.run(&["approve", &id]).0, 0);
    }
    assert_eq!(t.call("probe_version"), "berth-update-probe 2.0.0");
    assert_eq!(t.call("probe_extra"), "berth-update-probe 2.0.0 extra");
    let (_, v) = t.run(&["versions", &id]);
    let versions: Vec<&str> = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["version"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(versions, ["2.0.0", "1.1.0", "1.0.0"], "{v}");
    let record = &v["versions"][0]["record"];
    assert_eq!(
        record["packages"][0]["name"], "berth-update-probe",
        "{record}"
    );
    assert_eq!(
        record["packages"][0]["integrity"],
        t.reg.packument("berth-update-probe")["versions"]["2.0.0"]["dist"]["integrity"]
    );
    assert!(record["native_modules"].as_array().unwrap().is_empty());
    assert_eq!(record["platform"], std::env::consts::OS);
}

#[test]
fn a_spec_never_takes_a_version_outside_it() {
    let t = Setup::new(
        "berth-update-probe@^1.0.0",
        &["berth-update-probe@1.0.0", "berth-update-probe@2.0.0"],
    );
    let id = t.id();
    assert_eq!(t.run(&["approve", "--including-fetch", &id]).0, 0);
    assert_eq!(t.call("probe_version"), "berth-update-probe 1.0.0");
    let (_, v) = t.run(&["updates", "--check"]);
    assert_eq!(v["updates"][0]["offer"]["latest"], "2.0.0", "{v}");
    assert!(v["updates"][0]["offer"]["available"].is_null(), "{v}");
    let (code, v) = t.run(&["update", &id]);
    assert_eq!(code, 0);
    assert_eq!(v["update"]["outcome"], "up-to-date");
    // Nothing ran before, nothing to go back to.
    let (code, v) = t.run(&["rollback", &id]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (1, Some("invalid-arguments")),
        "{v}"
    );
}
