//! A remote MCP server over https (streamable HTTP on TLS): trusted through the system's
//! certificate store (here a test CA named by `SSL_CERT_FILE`, as OpenSSL reads it), listed and
//! called; an untrusted certificate is refused with a code and a recovery, nothing sent.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::support::*;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A self-signed certificate for 127.0.0.1 (OpenSSL's CLI): (cert, key).
fn certificate(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

#[test]
fn a_remote_server_over_https_is_trusted_through_the_certificate_store_and_called() {
    let s = Sandbox::new();
    let (cert, key) = certificate(s.root.path());
    let mut child = Command::new("node")
        .arg(repo_root().join("fixtures/mcp/fixture-server.mjs"))
        .args(["--http", "0", "--tls"])
        .arg(&cert)
        .arg(&key)
        .args(["--tool", "echo"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Killed(child);
    let url = serde_json::from_str::<Value>(&line).unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    s.write(
        "project/opencode.json",
        &json!({ "mcp": { "tls": { "type": "remote", "url": url, "oauth": false } } }).to_string(),
    );
    let run = |args: &[&str], trusted: bool| {
        let mut c = s.berth(args);
        c.arg("--json");
        if trusted {
            c.env("SSL_CERT_FILE", &cert);
        }
        parse_json_output(&c.output().unwrap())
    };
    assert_eq!(run(&["approve", "--all"], true).0, 0);
    // Negative control first: a certificate nobody trusts is refused; nothing is listed.
    let (_, t) = run(&["tools"], false);
    assert!(t["tools"].as_array().unwrap().is_empty(), "{t}");
    let problem = &t["problems"][0];
    assert_eq!(problem["code"], "temporarily-unavailable", "{t}");
    // Trusted: listed under OpenCode's key and called.
    let (code, t) = run(&["tools"], true);
    assert_eq!(code, 0, "{t}");
    assert_eq!(t["tools"][0]["name"], "tls_echo", "{t}");
    let (code, r) = run(
        &["invoke", "tls_echo", "--args", r#"{"text":"over tls"}"#],
        true,
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["output"], "over tls");
}
