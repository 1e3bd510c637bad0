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
    update_held_until_allowed(&|a| t.run(a), &id, "probe_extra", |before_import| {
        if before_import {
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
        }
    });
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

/// `berth update <id>` to a version that registers `grown` more: held — before its import (the
/// update waits for the person) or after it (the source asks again) — with `grown` not
/// registered; `while_held(before_import)` looks at that state; then the person allows it.
pub(crate) fn update_held_until_allowed(
    run: &dyn Fn(&[&str]) -> (i32, serde_json::Value),
    id: &str,
    grown: &str,
    while_held: impl FnOnce(bool),
) {
    let (code, v) = run(&["update", id]);
    let held_before_import = code == 1 && v["error"]["code"] == "action-required";
    let held_after_import = code == 0 && v["update"]["outcome"] == "held";
    assert!(held_before_import || held_after_import, "{v}");
    let (_, tools) = run(&["tools"]);
    assert!(
        !tools["tools"].to_string().contains(grown),
        "a tool nobody allowed was registered: {tools}"
    );
    while_held(held_before_import);
    let (code, v) = if held_before_import {
        run(&["update", id, "--approve-growth"])
    } else {
        run(&["approve", id])
    };
    assert_eq!(code, 0, "{v}");
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

/// What the probe's tool answers through the running server.
fn served(srv: &crate::serve::Serving) -> String {
    let (code, r) = srv.post(
        "invoke",
        &serde_json::json!({ "tool": "probe_version", "args": {} }),
    );
    assert_eq!(code, 200, "{r}");
    r["output"].as_str().unwrap_or_default().to_string()
}

/// The status once the running server has checked for updates `n` more times (one a second).
fn later_checks(srv: &crate::serve::Serving, n: i64) -> serde_json::Value {
    let at =
        |v: &serde_json::Value| v["sources"][0]["lifecycle"]["updates"]["checked_at_ms"].as_i64();
    let checked = at(&crate::serve::status_of(srv)).unwrap_or(0);
    crate::serve::wait_for(srv, &format!("{n} more checks"), |v| {
        at(v) > Some(checked + (n - 1) * 1000 + 500)
    })
}

#[test]
fn the_update_policy_lets_a_running_berth_check_and_take_versions_on_its_own() {
    use crate::serve::{start_with, status_of, wait_for};
    let t = Setup::new("berth-update-probe@latest", &["berth-update-probe@1.0.0"]);
    let id = t.id();
    assert_eq!(t.run(&["approve", "--including-fetch", &id]).0, 0);
    assert_eq!(t.call("probe_version"), "berth-update-probe 1.0.0");
    let set = |key: &str, value: &str| {
        let (code, v) = t.run(&["policy", "set", &format!("{key}.{id}"), value]);
        assert_eq!(code, 0, "{v}");
    };
    set("updates", "notify");
    let url = t.reg.url();
    let srv = start_with(
        &t.s,
        "127.0.0.1:0",
        &[
            ("npm_config_registry", std::path::Path::new(&url)),
            ("npm_config_update_notifier", std::path::Path::new("false")),
            ("BERTH_UPDATE_CHECK_EVERY_S", std::path::Path::new("1")),
        ],
    )
    .unwrap();
    let updates = |v: &serde_json::Value| v["sources"][0]["lifecycle"]["updates"].clone();
    let current = |v: &serde_json::Value| {
        v["sources"][0]["lifecycle"]["current"]["version"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    // notify: Berth checks and says so, and takes nothing.
    t.reg.publish("berth-update-probe@1.1.0");
    let v = wait_for(&srv, "the check to see 1.1.0", |v| {
        updates(v)["offer"]["available"]["version"] == "1.1.0"
    });
    assert_eq!(current(&v), "1.0.0");
    // auto with a minimum age of one hour: a version published a moment ago is not taken.
    set("update-age", "1");
    set("updates", "auto");
    let v = later_checks(&srv, 2);
    assert_eq!(
        current(&v),
        "1.0.0",
        "took a version younger than the minimum age"
    );
    // Published a day ago: old enough, within the spec, nothing grows — taken.
    t.reg
        .publish_at("berth-update-probe@1.1.0", "2026-01-01T00:00:00.000Z");
    let v = wait_for(&srv, "the automatic update", |v| current(v) == "1.1.0");
    assert_eq!(
        v["sources"][0]["lifecycle"]["current"]["why"],
        "updated from 1.0.0 to 1.1.0 (your update policy is auto)"
    );
    assert_eq!(served(&srv), "berth-update-probe 1.1.0");
    // A version that fails to load is taken once; after the rollback it is never taken again.
    t.reg
        .publish_at("berth-update-probe@1.2.0", "2026-01-02T00:00:00.000Z");
    let v = wait_for(&srv, "the automatic update to fail", |v| {
        updates(v)["failed_versions"] == serde_json::json!(["1.2.0"])
    });
    assert_eq!(
        v["sources"][0]["state"], "load-failed",
        "{}",
        v["sources"][0]
    );
    let (code, r) = srv.post("rollback", &serde_json::json!({ "source": id }));
    assert_eq!(code, 200, "{r}");
    let v = later_checks(&srv, 3);
    assert_eq!(updates(&v)["offer"]["available"]["version"], "1.2.0");
    // Decisions by the policy: 1.1.0, then 1.2.0 — and none after the rollback.
    let auto = |v: &serde_json::Value| {
        v["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["decided_by"] == "auto-update")
            .count()
    };
    let (_, approvals) = t.run(&["approvals"]);
    assert_eq!(auto(&approvals), 2, "{approvals}");
    let v = status_of(&srv);
    assert_eq!(
        v["sources"][0]["state"], "active",
        "the broken version was taken again"
    );
    assert_eq!(served(&srv), "berth-update-probe 1.1.0");
}

#[test]
fn a_version_whose_bytes_are_gone_is_not_recoverable_and_nothing_rebuilds_it() {
    let t = Setup::new("berth-update-probe@latest", &["berth-update-probe@1.0.0"]);
    let id = t.id();
    assert_eq!(t.run(&["approve", "--including-fetch", &id]).0, 0);
    assert_eq!(t.call("probe_version"), "berth-update-probe 1.0.0");
    t.reg.publish("berth-update-probe@1.1.0");
    assert_eq!(t.run(&["update", &id]).0, 0);
    assert_eq!(t.call("probe_version"), "berth-update-probe 1.1.0");
    // The folder 1.0.0 ran from is removed behind Berth's back.
    let (_, v) = t.run(&["versions", &id]);
    let old = v["versions"][1]["record"]["retained"]["install"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_dir_all(&old).unwrap();
    let (_, v) = t.run(&["versions", &id]);
    assert_eq!(v["versions"][1]["recoverable"], false);
    assert!(
        v["versions"][1]["kept"]
            .as_str()
            .unwrap()
            .starts_with("previous version not recoverable"),
        "{v}"
    );
    let src = t.source();
    assert!(
        src["lifecycle"]["updates"]["rollback_to"].is_null(),
        "{src}"
    );
    let (code, e) = t.run(&["rollback", &id]);
    assert_eq!(
        (code, e["error"]["code"].as_str()),
        (1, Some("action-required")),
        "{e}"
    );
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("previous version not recoverable"));
    assert_eq!(
        t.call("probe_version"),
        "berth-update-probe 1.1.0",
        "what ran before the refusal still runs"
    );
    assert!(
        !std::path::Path::new(&old).exists(),
        "nothing was rebuilt in its place"
    );
}
