//! The plugin's world through the CLI: `ctx.ask` decided by the `permission.ask` chain under
//! the person's cap (headless: `action-required`), and `auth` logins whose credentials go to
//! the OS keyring and nowhere else. (Prompts answered by a person and the event fan-out need
//! a long-lived process: tests/runtime/world.rs.)

use serde_json::Value;

use crate::support::*;

fn run_env(s: &Sandbox, env: &[(&str, &str)], args: &[&str]) -> (i32, Value) {
    let mut cmd = s.berth(args);
    cmd.arg("--json").env("BERTH_LOG", "trace");
    for (k, v) in env {
        cmd.env(k, v);
    }
    parse_json_output(&cmd.output().unwrap())
}

fn newest_decision(s: &Sandbox) -> Value {
    let (code, v) = run_env(s, &[], &["permissions"]);
    assert_eq!(code, 0, "{v}");
    assert_schema("permissions", &v);
    v["decisions"][0].clone()
}

#[test]
fn a_tool_asking_permission_is_decided_by_the_chain_under_the_persons_cap() {
    let s = plugin_sandbox(&["permission-gate.ts"]);
    let target = s.root.path().join("written.txt");
    let target_s = target.display().to_string();
    let args = serde_json::json!({ "path": target_s }).to_string();
    approve_and_load(|a| run_env(&s, &[], a));
    let invoke = |answer: &str| {
        run_env(
            &s,
            &[("BERTH_TEST_PERMISSION_ANSWER", answer)],
            &["invoke", "guarded_write", "--args", &args],
        )
    };

    // No plugin answers: `ask`; headless, the call ends with action-required naming it.
    let (code, r) = invoke("");
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["error"]["code"], "action-required", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("edit"));
    assert!(!target.exists(), "the tool acted without permission");
    let d = newest_decision(&s);
    assert_eq!(
        (
            d["plugin_answer"].as_str(),
            d["final_answer"].as_str(),
            d["decided_by"].as_str()
        ),
        (Some("ask"), Some("ask"), Some("no-prompt")),
        "{d}"
    );
    assert_eq!(d["patterns"][0], target_s.as_str());

    // The plugin allows, the default cap is `ask`: limited, and recorded as such.
    let (_, r) = invoke("allow");
    assert_eq!(r["error"]["code"], "action-required", "{r}");
    let d = newest_decision(&s);
    assert_eq!(d["plugin_answer"], "allow");
    assert_eq!(d["cap"], "ask");
    assert_eq!(d["policy_limited"], true);
    assert!(d["answered_by"]
        .as_str()
        .unwrap()
        .starts_with("plugin-permission-gate"));
    assert!(!target.exists());

    // The person raises the cap: the plugin's allow now applies.
    assert_eq!(
        run_env(&s, &[], &["permissions", "cap", "edit", "allow"]).0,
        0
    );
    let (code, r) = invoke("allow");
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["status"], "completed");
    assert!(target.exists());
    std::fs::remove_file(&target).unwrap();
    let d = newest_decision(&s);
    assert_eq!(
        (d["final_answer"].as_str(), d["decided_by"].as_str()),
        (Some("allow"), Some("plugin"))
    );

    // A plugin's deny tightens, and is the plugin's (not a policy limit).
    let (_, r) = invoke("deny");
    assert_eq!(r["error"]["code"], "cancelled", "{r}");
    let d = newest_decision(&s);
    assert_eq!(
        (d["decided_by"].as_str(), d["policy_limited"].as_bool()),
        (Some("plugin"), Some(false))
    );

    // A cap of `deny` beats the plugin's allow: policy-limited, both answers recorded.
    assert_eq!(
        run_env(&s, &[], &["permissions", "cap", "edit", "deny"]).0,
        0
    );
    let (_, r) = invoke("allow");
    assert_eq!(r["error"]["code"], "policy-limited", "{r}");
    let d = newest_decision(&s);
    assert_eq!(
        (
            d["plugin_answer"].as_str(),
            d["final_answer"].as_str(),
            d["policy_limited"].as_bool()
        ),
        (Some("allow"), Some("deny"), Some(true))
    );
    assert!(!target.exists());

    // The person's standing answer resolves an unanswered ask without a prompt.
    assert_eq!(
        run_env(&s, &[], &["permissions", "cap", "edit", "ask"]).0,
        0
    );
    let (code, v) = run_env(&s, &[], &["permissions", "allow", "edit", &target_s]);
    assert_eq!(code, 0, "{v}");
    assert_schema("permissions", &v);
    let (code, r) = invoke("");
    assert_eq!(code, 0, "{r}");
    assert_eq!(newest_decision(&s)["decided_by"], "rule");
    // ... and a standing refusal wins over a plugin's allow.
    assert_eq!(
        run_env(&s, &[], &["permissions", "cap", "edit", "allow"]).0,
        0
    );
    assert_eq!(run_env(&s, &[], &["permissions", "deny", "edit", "*"]).0, 0);
    let (_, r) = invoke("allow");
    assert_eq!(r["error"]["code"], "cancelled", "{r}");
    assert_eq!(newest_decision(&s)["decided_by"], "rule");
}

/// The credential stored for `provider` in the OS keyring, read the way Berth files it.
fn keyring_value(provider: &str) -> Option<String> {
    let domain = berth_runtime::approval::execution_domain();
    keyring::Entry::new("berth", &format!("{domain}/auth/{provider}"))
        .unwrap()
        .get_password()
        .ok()
}

fn login(s: &Sandbox, method: &str, stdin: &str) -> (i32, Value) {
    let mut cmd = s.berth(&[
        "auth",
        "login",
        "canary-provider",
        "--method",
        method,
        "--json",
    ]);
    cmd.env("BERTH_LOG", "trace");
    parse_json_output(&output_with_stdin(&mut cmd, stdin))
}

#[test]
fn auth_logins_file_credentials_in_the_os_keyring_and_nowhere_else() {
    let s = plugin_sandbox(&["auth-canary.ts"]);
    approve_and_load(|a| run_env(&s, &[], a));
    let (code, v) = run_env(&s, &[], &["auth"]);
    assert_eq!(code, 0, "{v}");
    assert_schema("auth", &v);
    let p = &v["providers"][0];
    assert_eq!(p["provider"], "canary-provider");
    assert_eq!(p["methods"].as_array().unwrap().len(), 3);
    assert_eq!(p["methods"][1]["prompts"][0]["key"], "token");

    // Each login kind, each with its own canary; stdin only (never argv).
    let cases = [
        ("0", "CANARY-key-3b1e\n", "CANARY-key-3b1e"),
        ("1", "CANARY-prompt-77c2\n", "CANARY-prompt-77c2"),
        ("2", "CANARY-code-e91a\n", "CANARY-code-e91a"),
    ];
    for (method, stdin, canary) in cases {
        let (code, v) = login(&s, method, stdin);
        assert_eq!(code, 0, "method {method}: {v}");
        assert_schema("auth", &v);
        assert_eq!(v["login"]["stored_in"], "os-keyring");
        assert!(
            !v.to_string().contains(canary),
            "the answer carries the credential"
        );
        let stored = keyring_value("canary-provider").expect("the credential is in the keyring");
        let stored: Value = serde_json::from_str(&stored).unwrap();
        let expected_field = if method == "2" { "access" } else { "key" };
        assert_eq!(stored[expected_field], canary, "{method}");
        assert_eq!(stored["type"], if method == "2" { "oauth" } else { "api" });
        let (_, status) = run_env(&s, &[], &["status"]);
        assert!(
            !status.to_string().contains(canary),
            "diagnostics hold the credential"
        );
        assert!(assert_not_in_any_file(&s.data_dir(), canary) >= 2);
    }
    let (_, v) = run_env(&s, &[], &["auth"]);
    assert_eq!(v["providers"][0]["stored"], true);

    // A failed login stores nothing and says so.
    let (_, v) = run_env(&s, &[], &["auth", "logout", "canary-provider"]);
    assert_eq!(v["logout"]["removed"], true);
    let (code, v) = login(&s, "1", "\n");
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["code"], "action-required");
    assert!(keyring_value("canary-provider").is_none());
    let (code, v) = run_env(&s, &[], &["auth", "login", "no-such-provider"]);
    assert_eq!(
        (code, v["error"]["code"].as_str()),
        (1, Some("unsupported"))
    );
}
