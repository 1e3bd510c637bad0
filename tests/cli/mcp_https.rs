//! A remote MCP server over https (streamable HTTP on TLS): trusted through the system's
//! certificate store (here a test CA named by `SSL_CERT_FILE`, as OpenSSL reads it), listed and
//! called; an untrusted certificate is refused with a code and a recovery, nothing sent.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::support::*;

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
    let server = McpFixture::start(
        &[
            OsStr::new("--http"),
            OsStr::new("0"),
            OsStr::new("--tls"),
            cert.as_os_str(),
            key.as_os_str(),
            OsStr::new("--tool"),
            OsStr::new("echo"),
        ],
        None,
    );
    let url = server.url.clone();
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
