//! The plugin's `client`: every method of the published v1 SDK client (`@opencode-ai/sdk`
//! 1.18.4, read from its type definitions at test time, not from Berth's own table) either
//! works or answers a stable `unsupported` error naming the method, the OpenCode version, the
//! plugin and an alternative — never a throw, a hang or a fake success.

use std::collections::BTreeMap;

use crate::support::*;

/// Per class of the typings: its methods, and its sub-groups as (property, class).
type Classes = BTreeMap<String, (Vec<String>, Vec<(String, String)>)>;

/// Method paths of `OpencodeClient`, from `dist/gen/sdk.gen.d.ts`.
fn sdk_methods() -> Vec<String> {
    let dts = std::fs::read_to_string(
        repo_root().join(".tools/host-deps/node_modules/@opencode-ai/sdk/dist/gen/sdk.gen.d.ts"),
    )
    .expect("run scripts/setup: the SDK typings come with the host dependencies");
    let mut classes: Classes = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in dts.lines() {
        if let Some(rest) = line
            .strip_prefix("declare class ")
            .or_else(|| line.strip_prefix("export declare class "))
        {
            current = rest.split_whitespace().next().map(str::to_string);
            classes.entry(current.clone().unwrap()).or_default();
            continue;
        }
        if line.starts_with('}') {
            current = None;
            continue;
        }
        let Some(class) = &current else { continue };
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() != 4 {
            continue;
        }
        if let Some((name, _)) = trimmed.split_once("<ThrowOnError") {
            classes.get_mut(class).unwrap().0.push(name.to_string());
        } else if let Some((name, ty)) = trimmed.strip_suffix(';').and_then(|t| t.split_once(": "))
        {
            if ty.chars().next().is_some_and(char::is_uppercase) && !name.contains('(') {
                classes
                    .get_mut(class)
                    .unwrap()
                    .1
                    .push((name.to_string(), ty.to_string()));
            }
        }
    }
    fn walk(classes: &Classes, class: &str, prefix: &str, out: &mut Vec<String>) {
        let Some((methods, groups)) = classes.get(class) else {
            return;
        };
        for m in methods {
            out.push(format!("{prefix}{m}"));
        }
        for (name, ty) in groups {
            walk(classes, ty, &format!("{prefix}{name}."), out);
        }
    }
    let mut out = Vec::new();
    walk(&classes, "OpencodeClient", "", &mut out);
    out
}

#[test]
fn every_sdk_client_method_works_or_answers_a_stable_unsupported_error() {
    let methods = sdk_methods();
    assert!(
        methods.len() >= 70,
        "the inventory looks incomplete: {methods:?}"
    );
    assert!(
        methods.contains(&"session.prompt".to_string())
            && methods.contains(&"provider.oauth.authorize".to_string())
    );

    let canary = "CANARY-5d0c-client-auth-set";
    let s = Sandbox::new();
    s.copy_fixture(
        "plugins/client-inventory.ts",
        "project/.opencode/plugins/client-inventory.ts",
    );
    let out = s.root.path().join("client.json");
    let list = serde_json::to_string(&methods).unwrap();
    let run = |args: &[&str]| {
        let mut cmd = s.berth(args);
        cmd.arg("--json")
            .env("BERTH_TEST_CANARY", canary)
            .env("BERTH_TEST_CLIENT_METHODS", &list)
            .env("BERTH_TEST_CLIENT_OUT", &out);
        parse_json_output(&cmd.output().unwrap())
    };
    assert_eq!(run(&["approve", "--all"]).0, 0);
    let started = std::time::Instant::now();
    assert_eq!(run(&["tools"]).0, 0);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "a client call hung"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("the factory ran to the end"))
            .unwrap();

    assert_eq!(
        results["app.log"]["data"], true,
        "app.log is served (Berth's log)"
    );
    let log = std::fs::read_to_string(s.data_dir().join("logs/berth.log")).unwrap();
    assert!(
        log.contains("hello from client-inventory"),
        "app.log reached Berth's log"
    );
    // Served: mapped to a Berth owner.
    let data = |m: &str| results[m]["data"].clone();
    assert_eq!(data("tui.showToast"), true, "a toast in the app");
    assert!(data("config.get").is_object(), "the effective config");
    let project = s.project().display().to_string();
    assert_eq!(data("path.get")["directory"], project.as_str());
    assert_eq!(data("project.current")["worktree"], project.as_str());
    assert!(data("tool.ids").is_array());
    assert_eq!(data("auth.set"), true, "stored in the OS keyring");
    let domain = berth_runtime::approval::execution_domain();
    let stored = keyring::Entry::new("berth", &format!("{domain}/auth/fixture-provider"))
        .unwrap()
        .get_password()
        .expect("auth.set filed the credential in the keyring");
    assert!(stored.contains(canary));
    assert_not_in_any_file(&s.data_dir(), canary);
    // Reads of a server with no sessions: empty where OpenCode allows empty, else not found.
    assert_eq!(data("session.list"), serde_json::json!([]));
    assert_eq!(data("session.status"), serde_json::json!({}));
    for m in [
        "session.get",
        "session.messages",
        "session.todo",
        "session.children",
    ] {
        assert!(results[m]["data"].is_null(), "{m}: {}", results[m]);
        assert_eq!(results[m]["error"]["name"], "NotFoundError", "{m}");
    }
    // serverUrl: the same answers over loopback HTTP, only for this host.
    let url = &results["serverUrl"];
    assert!(url["href"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
    assert_eq!(url["config"]["status"], 200);
    assert_eq!(url["config"]["body"], data("config.get"));
    assert_eq!(url["unsupported"]["status"], 501);
    assert_eq!(
        url["unsupported"]["body"]["data"]["opencodeVersion"],
        "1.18.4"
    );
    assert_eq!(
        url["withoutToken"], 401,
        "a request without the host's token"
    );

    for m in methods
        .iter()
        .filter(|m| !SERVED.contains(&m.as_str()))
        .chain(std::iter::once(&"nope.nothing".to_string()))
    {
        let r = &results[m.as_str()];
        assert!(r.get("threw").is_none(), "{m} threw: {r}");
        assert!(r["data"].is_null(), "{m} pretended to succeed: {r}");
        let e = &r["error"];
        assert_eq!(e["code"], "unsupported", "{m}: {r}");
        assert_eq!(e["method"], m.as_str());
        assert_eq!(e["opencodeVersion"], "1.18.4");
        assert!(
            e["plugin"]
                .as_str()
                .unwrap()
                .starts_with("plugin-client-inventory"),
            "{m}: {r}"
        );
        assert!(!e["alternative"].as_str().unwrap().is_empty());
    }
    // One diagnostic per unsupported method, not a storm.
    let warned = log
        .matches("a plugin called a client method Berth does not support")
        .count();
    assert!(warned <= methods.len() + 1, "{warned} warnings");
}

/// The methods Berth serves (every other SDK method answers `unsupported`).
const SERVED: &[&str] = &[
    "app.log",
    "tui.showToast",
    "config.get",
    "path.get",
    "project.current",
    "tool.ids",
    "auth.set",
    "session.list",
    "session.status",
    "session.get",
    "session.messages",
    "session.todo",
    "session.children",
];
