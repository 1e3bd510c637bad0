//! Signing in to remote MCP servers (OpenCode's `oauth`, on by default), against the fixture
//! server's `--oauth` mode (a real authorization server: metadata discovery, registration,
//! PKCE S256 codes, refresh tokens, revocation) and a real browser stand-in (`$BROWSER`, a
//! script that follows the provider's redirect as a person clicking "Allow" would): a server
//! that asks is shown as asking, `berth mcp-login` signs in, the token is used, refreshed and
//! kept only in the OS keyring; a forged redirect, a revoked token and a changed URL each end
//! in "sign in again", never in a token sent where it was not issued.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{assert_not_in_any_file, McpFixture, Sandbox};

struct Server {
    _fixture: McpFixture,
    url: String,
    log: PathBuf,
}

/// The fixture with `--oauth` and `extra` flags, logging to `log`.
fn oauth_server(log: &Path, extra: &[&str]) -> Server {
    let args: Vec<&str> = ["--http", "0", "--oauth"]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let fixture = McpFixture::start(&args, Some(log));
    Server {
        url: fixture.url.clone(),
        _fixture: fixture,
        log: log.to_path_buf(),
    }
}

impl Server {
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn count(&self, prefix: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }

    /// Every token it issued (access and refresh).
    fn tokens(&self) -> Vec<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("issued "))
            .flat_map(|l| l.split(' ').map(String::from).collect::<Vec<_>>())
            .collect()
    }

    fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_string()
    }
}

/// A `$BROWSER` that follows the provider's page to the redirect back to Berth (the fixture's
/// authorize page consents at once), after `rewrite` (a sed expression) is applied to the URL
/// of that redirect: what an attacker's forged redirect would look like.
fn browser(s: &Sandbox, rewrite: Option<&str>) -> PathBuf {
    let script = format!(
        r#"#!/bin/sh
echo "$1" >> "{seen}"
exec node -e '
const rewrite = process.argv[2];
(async () => {{
  const r = await fetch(process.argv[1], {{ redirect: "manual" }});
  let back = r.headers.get("location");
  if (rewrite) back = require("node:child_process").execFileSync("sed", ["-e", rewrite], {{ input: back }}).toString().trim();
  await (await fetch(back)).text();
}})();
' "$1" "{rewrite}"
"#,
        seen = s.root.path().join("browser.log").display(),
        rewrite = rewrite.unwrap_or("")
    );
    let path = s.write("browser.sh", &script);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn with_remote(s: &Sandbox, url: &str, oauth: Option<Value>) {
    let mut entry = json!({ "type": "remote", "url": url });
    if let Some(o) = oauth {
        entry["oauth"] = o;
    }
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "web": entry } }).to_string(),
    );
}

fn web(v: &Value) -> Value {
    v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "mcp" && s["entry"] == "web")
        .cloned()
        .unwrap_or_else(|| panic!("no MCP source web: {v}"))
}

fn approve_web(s: &Sandbox) -> String {
    let (_, v) = s.run_json(&["sources"]);
    let id = web(&v)["id"].as_str().unwrap().to_string();
    let (code, out) = s.run_json(&["approve", &id]);
    assert_eq!(code, 0, "{out}");
    id
}

fn login(s: &Sandbox, browser: &Path) -> (i32, Value) {
    let out = s
        .berth(&["mcp-login", "web", "--json"])
        .env("BROWSER", browser)
        .output()
        .unwrap();
    crate::support::parse_json_output(&out)
}

/// The problem `berth tools` shows for `web`, if any.
fn web_problem(s: &Sandbox) -> Option<Value> {
    let (_, tools) = s.run_json(&["tools"]);
    tools["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["capability"] == "mcp:web")
        .cloned()
}

fn asks_to_sign_in(s: &Sandbox) -> bool {
    web_problem(s).is_some_and(|p| {
        p["code"] == "action-required"
            && p["message"]
                .as_str()
                .unwrap()
                .contains("asks you to sign in")
            && p["recovery"]
                .as_str()
                .unwrap()
                .contains("berth mcp-login web")
    })
}

fn signed_in(s: &Sandbox) -> bool {
    let (_, v) = s.run_json(&["status"]);
    web(&v)["sign_in"]["signed_in"] == true
}

#[test]
fn a_server_that_asks_is_signed_in_to_and_its_token_stays_in_the_keyring() {
    let s = Sandbox::new();
    let server = oauth_server(&s.root.path().join("oauth.log"), &[]);
    with_remote(&s, &server.url, None);
    let (_, v) = s.run_json(&["sources"]);
    let summary = web(&v)["capabilities"]["summary"].to_string();
    assert!(summary.contains("sign in to 127.0.0.1"), "{summary}");
    let b = browser(&s, None);
    // Not approved: Berth does not even start a sign-in.
    let (code, out) = login(&s, &b);
    assert_ne!(code, 0, "{out}");
    assert_eq!(out["error"]["code"], "action-required", "{out}");
    assert_eq!(server.count("registered"), 0);

    approve_web(&s);
    assert!(asks_to_sign_in(&s), "{:?}", web_problem(&s));
    assert!(!signed_in(&s));

    let (code, out) = login(&s, &b);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["signed_in"]["stored_in"], "os-keyring", "{out}");
    assert_eq!(server.count("registered Berth"), 1, "{:?}", server.lines());
    assert_eq!(server.count("token authorization_code"), 1);
    assert!(signed_in(&s));
    assert_eq!(web_problem(&s), None);

    let (code, r) = s.run_json(&["invoke", "web_echo", "--args", r#"{"text":"signed"}"#]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["output"], "signed", "{r}");
    assert!(server.count("bearer ok") >= 1);
    let tokens = server.tokens();
    assert_eq!(tokens.len(), 2, "{:?}", server.lines());
    for t in &tokens {
        // Not in Berth's data dir (store, logs, receipts), the home folder or the project.
        assert_not_in_any_file(&s.data_dir(), t);
        assert_not_in_any_file(&s.home(), t);
        assert_not_in_any_file(&s.project(), t);
    }

    // Signing out forgets it: the server asks again.
    let (code, out) = s.run_json(&["mcp-logout", "web"]);
    assert_eq!(code, 0, "{out}");
    assert!(!signed_in(&s));
    assert!(asks_to_sign_in(&s));
}

#[test]
fn an_expired_token_is_refreshed_and_a_revoked_one_asks_again() {
    let s = Sandbox::new();
    let server = oauth_server(&s.root.path().join("oauth.log"), &["--token-ttl", "2"]);
    with_remote(&s, &server.url, None);
    approve_web(&s);
    let (code, out) = login(&s, &browser(&s, None));
    assert_eq!(code, 0, "{out}");
    std::thread::sleep(Duration::from_millis(2500));
    let (code, r) = s.run_json(&["invoke", "web_echo", "--args", r#"{"text":"later"}"#]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["output"], "later");
    assert_eq!(
        server.count("token refresh_token"),
        1,
        "{:?}",
        server.lines()
    );

    // The person revoked Berth at the provider: the refresh is refused too, and Berth says
    // to sign in again instead of failing some other way (the control: the same check that
    // held above fails now).
    let revoked = Command::new("node")
        .arg("-e")
        .arg(format!(
            "fetch('{}/admin/revoke', {{ method: 'POST' }}).then(r => process.exit(r.status === 204 ? 0 : 1))",
            server.base()
        ))
        .status()
        .unwrap();
    assert!(revoked.success());
    assert!(asks_to_sign_in(&s), "{:?}", web_problem(&s));
    let (code, _) = s.run_json(&["invoke", "web_echo", "--args", r#"{"text":"no"}"#]);
    assert_ne!(code, 0);
    let _ = s.run_json(&["mcp-logout", "web"]);
}

#[test]
fn a_forged_redirect_is_refused_and_nothing_is_stored() {
    let s = Sandbox::new();
    let server = oauth_server(&s.root.path().join("oauth.log"), &[]);
    with_remote(&s, &server.url, None);
    approve_web(&s);
    let (code, out) = login(&s, &browser(&s, Some("s/state=[^&]*/state=forged/")));
    assert_ne!(code, 0, "{out}");
    assert_eq!(out["error"]["code"], "action-required", "{out}");
    // The code was never exchanged, and the server still asks.
    assert_eq!(server.count("token "), 0, "{:?}", server.lines());
    assert!(!signed_in(&s));
    assert!(asks_to_sign_in(&s));
    // The control: the same browser without the forgery signs in.
    let (code, out) = login(&s, &browser(&s, None));
    assert_eq!(code, 0, "{out}");
    let _ = s.run_json(&["mcp-logout", "web"]);
}

#[test]
fn a_token_is_never_sent_to_a_changed_url() {
    let s = Sandbox::new();
    let first = oauth_server(&s.root.path().join("first.log"), &[]);
    with_remote(&s, &first.url, None);
    approve_web(&s);
    let (code, out) = login(&s, &browser(&s, None));
    assert_eq!(code, 0, "{out}");
    let (code, r) = s.run_json(&["invoke", "web_echo", "--args", r#"{"text":"a"}"#]);
    assert_eq!(code, 0, "{r}");
    // The entry now names another endpoint of the same server (same provider, so the SDK's
    // issuer check would not notice): the token is not offered to it.
    let ok_before = first.count("bearer ok");
    with_remote(&s, &format!("{}/elsewhere", first.base()), None);
    approve_web(&s);
    assert!(asks_to_sign_in(&s), "{:?}", web_problem(&s));
    assert_eq!(first.count("bearer ok"), ok_before, "{:?}", first.lines());
    assert_eq!(first.count("unauthorized bearer"), 0, "{:?}", first.lines());
    // Another server altogether: a new decision, and the first one's token is not offered.
    let second = oauth_server(&s.root.path().join("second.log"), &[]);
    with_remote(&s, &second.url, None);
    approve_web(&s);
    assert!(asks_to_sign_in(&s), "{:?}", web_problem(&s));
    assert!(second.count("unauthorized") >= 1, "{:?}", second.lines());
    assert_eq!(
        second.count("unauthorized bearer"),
        0,
        "{:?}",
        second.lines()
    );
    assert_eq!(second.count("bearer ok"), 0);
    for t in first.tokens() {
        assert!(
            !second.lines().iter().any(|l| l.contains(&t)),
            "{:?}",
            second.lines()
        );
    }
    with_remote(&s, &first.url, None);
    let _ = s.run_json(&["mcp-logout", "web"]);
}

#[test]
fn with_oauth_off_a_server_that_asks_says_to_give_a_token() {
    let s = Sandbox::new();
    let server = oauth_server(&s.root.path().join("oauth.log"), &[]);
    with_remote(&s, &server.url, Some(json!(false)));
    let (_, v) = s.run_json(&["sources"]);
    assert!(
        !web(&v)["capabilities"]["summary"]
            .to_string()
            .contains("sign in"),
        "{v}"
    );
    approve_web(&s);
    let p = web_problem(&s).expect("a problem");
    assert_eq!(p["code"], "action-required", "{p}");
    assert!(
        p["message"].as_str().unwrap().contains("\"oauth\": false"),
        "{p}"
    );
    let (code, out) = login(&s, &browser(&s, None));
    assert_ne!(code, 0, "{out}");
    assert_eq!(server.count("registered"), 0);
}

#[test]
fn a_client_registered_with_the_provider_signs_in_on_opencodes_redirect_address() {
    let s = Sandbox::new();
    let server = oauth_server(
        &s.root.path().join("oauth.log"),
        &["--client-id", "berth-registered"],
    );
    with_remote(
        &s,
        &server.url,
        Some(json!({ "clientId": "berth-registered" })),
    );
    approve_web(&s);
    assert!(asks_to_sign_in(&s), "{:?}", web_problem(&s));
    let (code, out) = login(&s, &browser(&s, None));
    assert_eq!(code, 0, "{out}");
    // No registration: the configured client, sent back to OpenCode's fixed address.
    assert_eq!(server.count("registered"), 0, "{:?}", server.lines());
    assert_eq!(server.count("authorized berth-registered"), 1);
    let opened = std::fs::read_to_string(s.root.path().join("browser.log")).unwrap();
    assert!(
        opened.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A19876%2Fmcp%2Foauth%2Fcallback"),
        "{opened}"
    );
    let (code, r) = s.run_json(&["invoke", "web_echo", "--args", r#"{"text":"registered"}"#]);
    assert_eq!(code, 0, "{r}");
    let _ = s.run_json(&["mcp-logout", "web"]);
}

#[test]
fn a_provider_naming_a_sign_in_page_that_is_not_a_web_page_gets_nothing_opened() {
    // A hostile server's metadata names a local file (or another program's scheme) as its
    // sign-in page: Berth refuses before anything is opened.
    let s = Sandbox::new();
    let server = oauth_server(
        &s.root.path().join("oauth.log"),
        &["--authorize-at", "file:///etc/passwd"],
    );
    with_remote(&s, &server.url, None);
    approve_web(&s);
    let (code, out) = login(&s, &browser(&s, None));
    assert_ne!(code, 0, "{out}");
    assert_eq!(out["error"]["code"], "invalid-response", "{out}");
    assert!(
        !s.root.path().join("browser.log").exists(),
        "a browser was started"
    );
    assert!(!signed_in(&s));
}
