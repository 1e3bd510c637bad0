//! The effective policy through the real binary: an organisation's file over the product's
//! defaults over the person's settings — a lower layer may tighten, never loosen, and a
//! refusal names the layer that set the value — the organisation's caps on contributions and
//! on `permission.ask` answers, its source allow-list, and budgets that apply.

use serde_json::{json, Value};

use crate::support::*;

struct Org {
    s: Sandbox,
    file: std::path::PathBuf,
}

impl Org {
    fn new(plugins: &[&str], managed: Value) -> Org {
        let s = plugin_sandbox(plugins);
        let file = s.write("etc/berth/managed.json", &managed.to_string());
        Org { s, file }
    }

    fn run(&self, args: &[&str]) -> (i32, Value) {
        self.run_env(&[], args)
    }

    fn run_env(&self, env: &[(&str, &str)], args: &[&str]) -> (i32, Value) {
        let mut cmd = self.s.berth(args);
        cmd.arg("--json").env("BERTH_MANAGED_POLICY", &self.file);
        for (k, v) in env {
            cmd.env(k, v);
        }
        parse_json_output(&cmd.output().unwrap())
    }

    fn entry(&self, key: &str) -> Value {
        let (code, v) = self.run(&["policy"]);
        assert_eq!(code, 0, "{v}");
        assert_schema("policy", &v);
        v["policy"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == key)
            .cloned()
            .unwrap_or(Value::Null)
    }
}

#[test]
fn an_organisation_cap_wins_over_a_user_setting_that_tries_to_loosen_it() {
    let o = Org::new(
        &["v1-hooks-a.ts"],
        json!({ "cap.model-request": "review", "budget.tool": 20000, "tools.protected": ["hooks_a_echo"] }),
    );
    let e = o.entry("cap.model-request");
    assert_eq!(
        (&e["value"], &e["layer"], &e["changeable"]),
        (
            &json!("review"),
            &json!("organisation"),
            &json!("stricter-only")
        ),
        "{e}"
    );
    // Loosening is refused, naming the organisation's file; tightening is the person's right.
    let (code, v) = o.run(&["policy", "set", "cap.model-request", "allow"]);
    assert_eq!(code, 1, "{v}");
    assert_schema("error", &v);
    assert_eq!(v["error"]["code"], "policy-limited");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(o.file.to_str().unwrap()),
        "{v}"
    );
    assert_eq!(o.run(&["policy", "set", "cap.model-request", "deny"]).0, 0);
    let e = o.entry("cap.model-request");
    assert_eq!((&e["value"], &e["layer"]), (&json!("deny"), &json!("user")));
    assert_eq!(
        o.run(&["policy", "set", "cap.model-request", "--unset"]).0,
        0
    );
    assert_eq!(o.entry("cap.model-request")["layer"], "organisation");
    // Budgets: within the organisation's, never unlimited.
    assert_eq!(
        o.run(&["policy", "set", "budget.tool", "60000"]).1["error"]["code"],
        "policy-limited"
    );
    assert_eq!(
        o.run(&["policy", "set", "budget.tool", "0"]).1["error"]["code"],
        "invalid-arguments"
    );
    assert_eq!(o.run(&["policy", "set", "budget.tool", "5000"]).0, 0);
    // What only the organisation sets.
    assert_eq!(
        o.run(&["policy", "set", "tools.protected", "[]"]).1["error"]["code"],
        "policy-limited"
    );
    // The plugin: one approval; its protected tool is refused, its model hook held, the rest runs.
    assert_eq!(o.run(&["approve", "--all"]).0, 0);
    let (_, t) = o.run(&["tools"]);
    assert_eq!(t["tools"], json!([]), "a protected tool registered: {t}");
    let (_, src) = o.run(&["sources"]);
    let a = source(&src, "v1-hooks-a.ts");
    assert_eq!(a["state"], "approved");
    let limited: Vec<(String, String, String)> = a["limited"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["item"].as_str().unwrap().into(),
                l["cap"].as_str().unwrap().into(),
                l["layer"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        limited,
        vec![
            (
                "tool:hooks_a_echo".into(),
                "deny".into(),
                "organisation".into()
            ),
            (
                "hook:chat.params".into(),
                "review".into(),
                "organisation".into()
            )
        ]
    );
    let (_, h) = o.run(&[
        "hook",
        "tool.execute.before",
        "--input",
        "{}",
        "--output",
        r#"{"args":{}}"#,
    ]);
    assert_eq!(
        h["output"]["args"]["seen"],
        json!(["a"]),
        "the uncapped hook must run: {h}"
    );
    // The status shows the same, with the organisation's file.
    let (_, st) = o.run(&["status"]);
    assert_schema("status", &st);
    assert_eq!(st["policy"]["organisation_present"], true);
}

#[test]
fn a_broken_organisation_file_holds_every_capped_contribution() {
    let o = Org::new(&["v1-hooks-a.ts"], json!(null));
    std::fs::write(&o.file, "{ not json").unwrap();
    let (_, v) = o.run(&["policy"]);
    assert!(
        v["policy"]["problems"][0]
            .as_str()
            .unwrap()
            .contains("held for review"),
        "{v}"
    );
    assert_eq!(o.entry("cap.config")["value"], "review");
    assert_eq!(o.entry("cap.config")["layer"], "organisation");
}

#[test]
fn only_sources_on_the_organisations_list_may_be_approved() {
    let o = Org::new(
        &["v1-hooks-a.ts", "legacy-hooks-b.ts"],
        json!({ "sources.allow": ["plugin-legacy-hooks-b-*"] }),
    );
    let (_, src) = o.run(&["sources"]);
    assert_eq!(source(&src, "v1-hooks-a.ts")["state"], "policy-limited");
    assert!(source(&src, "v1-hooks-a.ts")["diagnostics"]
        .to_string()
        .contains("sources.allow"));
    assert_eq!(
        source(&src, "legacy-hooks-b.ts")["state"],
        "pending-approval"
    );
    // By name: refused, naming the source.
    let a = id_of(&src, "v1-hooks-a.ts");
    let (code, v) = o.run(&["approve", &a]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (1, Some("policy-limited")),
        "{v}"
    );
    assert_eq!(v["error"]["plugin"], a.as_str());
    // `--all` approves what may be approved, and only that.
    let (code, v) = o.run(&["approve", "--all"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["approved"], json!([id_of(&src, "legacy-hooks-b.ts")]));
    let (_, src) = o.run(&["sources"]);
    assert_eq!(source(&src, "legacy-hooks-b.ts")["state"], "approved");
    assert_eq!(source(&src, "v1-hooks-a.ts")["state"], "policy-limited");
}

#[test]
fn a_permission_answer_past_the_organisations_cap_is_policy_limited_with_both_answers() {
    let o = Org::new(
        &["permission-gate.ts"],
        json!({ "permission.edit": "deny" }),
    );
    let target = o.s.root.path().join("written.txt");
    let args = json!({ "path": target }).to_string();
    approve_and_load(|a| o.run(a));
    // The person cannot raise it past the organisation's.
    let (code, v) = o.run(&["permissions", "cap", "edit", "allow"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (1, Some("policy-limited")),
        "{v}"
    );
    let (_, r) = o.run_env(
        &[("BERTH_TEST_PERMISSION_ANSWER", "allow")],
        &["invoke", "guarded_write", "--args", &args],
    );
    assert_eq!(r["error"]["code"], "policy-limited", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("organisation"),
        "{r}"
    );
    assert!(
        !target.exists(),
        "the tool acted past the organisation's cap"
    );
    let (_, p) = o.run(&["permissions"]);
    let d = &p["decisions"][0];
    assert_eq!(
        (
            d["plugin_answer"].as_str(),
            d["cap"].as_str(),
            d["final_answer"].as_str(),
            d["policy_limited"].as_bool()
        ),
        (Some("allow"), Some("deny"), Some("deny"), Some(true)),
        "{d}"
    );
}

#[test]
fn the_budgets_in_force_are_the_ones_calls_get() {
    let o = Org::new(&["hook-matrix.ts", "hook-faults.ts"], json!({}));
    assert_eq!(o.run(&["policy", "set", "cap.shell-env", "allow"]).0, 0);
    approve_and_load(|a| o.run(a));
    // A hook that never ends: `timeout`, quickly, under a 300 ms budget.hook, and under a
    // 400 ms budget.chain when each hook may take a minute.
    let slow_chain_times_out = || {
        let started = std::time::Instant::now();
        let (code, v) = o.run_env(
            &[("BERTH_TEST_SLOW_HOOK", "chat.params")],
            &[
                "hook",
                "chat.params",
                "--input",
                "{}",
                "--output",
                r#"{"options":{}}"#,
            ],
        );
        assert_eq!(
            (code, v["error"]["code"].as_str()),
            (1, Some("timeout")),
            "{v}"
        );
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    };
    assert_eq!(o.run(&["policy", "set", "budget.hook", "300"]).0, 0);
    slow_chain_times_out();
    assert_eq!(o.run(&["policy", "set", "budget.hook", "60000"]).0, 0);
    assert_eq!(o.run(&["policy", "set", "budget.chain", "400"]).0, 0);
    slow_chain_times_out();
}

/// A running Berth follows its policy at once: an edit of the organisation's file, and a grant
/// made in another process, each publish a new snapshot by themselves (no call needed).
#[test]
fn a_running_berth_follows_an_edited_organisation_file_and_a_grant_at_once() {
    let o = Org::new(&["v1-hooks-a.ts"], json!({ "cap.model-request": "review" }));
    let srv = crate::serve::start_with(
        &o.s,
        "127.0.0.1:0",
        &[("BERTH_MANAGED_POLICY", o.file.as_path())],
    )
    .unwrap();
    assert_eq!(o.run(&["approve", "--all"]).0, 0);
    let v = crate::serve::wait_for(&srv, "the held hook", |v| {
        source(v, "v1-hooks-a.ts")["limited"]
            .as_array()
            .is_some_and(|l| l.len() == 1)
    });
    let id = id_of(&v, "v1-hooks-a.ts");
    // Another process lets it through; the server publishes it.
    assert_eq!(o.run(&["policy", "allow", &id, "hook:chat.params"]).0, 0);
    crate::serve::wait_for(&srv, "the grant", |v| {
        source(v, "v1-hooks-a.ts")["limited"] == json!([])
    });
    // The organisation's file changes under the running server.
    std::fs::write(
        &o.file,
        json!({ "cap.model-request": "review", "cap.ui": "deny" }).to_string(),
    )
    .unwrap();
    crate::serve::wait_for(&srv, "the edited organisation file", |v| {
        v["policy"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["key"] == "cap.ui" && e["value"] == "deny" && e["layer"] == "organisation")
    });
}
