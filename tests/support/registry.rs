//! The test npm registry (`tests/support/registry.mjs`) as a value: started on a free loopback
//! port with chosen fixture versions visible, driven through its control API, killed on drop.
//! It owns only that child; it must not reach any other host or registry.

#![allow(dead_code)] // `berth-bench` uses part of it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The repository (this file is shared by the CLI's tests and `berth-bench`, both in
/// `crates/cli`).
fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

pub struct Registry {
    pub port: u16,
    /// The server exits when its stdin closes, so a test that leaks the process still ends it.
    child: Child,
    /// Held open for the child's lifetime: closing it is the server's signal to stop.
    _stdin: ChildStdin,
    /// Held so the child never writes into a closed pipe.
    _stdout: BufReader<ChildStdout>,
}

impl Registry {
    /// Serves `fixtures/registry` with `visible` (`name@version` each) published at start.
    pub fn start(visible: &[&str]) -> Registry {
        let mut cmd = Command::new("node");
        cmd.arg(repo_root().join("tests/support/registry.mjs"))
            .arg("--root")
            .arg(repo_root().join("fixtures/registry"));
        if !visible.is_empty() {
            cmd.arg("--visible").arg(visible.join(","));
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs the test registry");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v["port"].as_u64())
            .unwrap_or_else(|| {
                let status = child.wait();
                panic!("the test registry did not start ({status:?}): {line:?}")
            }) as u16;
        Registry {
            port,
            child,
            _stdin: stdin,
            _stdout: stdout,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The registry URL as npm wants it (`npm_config_registry`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Makes `spec` (`name@version`) visible from now on.
    pub fn publish(&self, spec: &str) {
        self.control("POST", "publish", &serde_json::json!({ "spec": spec }));
    }

    /// Makes `spec` visible with the publish time `time` (ISO 8601).
    pub fn publish_at(&self, spec: &str, time: &str) {
        self.control(
            "POST",
            "publish",
            &serde_json::json!({ "spec": spec, "time": time }),
        );
    }

    /// Hides `spec` again: out of the packument, its tarball 404.
    pub fn unpublish(&self, spec: &str) {
        self.control("POST", "unpublish", &serde_json::json!({ "spec": spec }));
    }

    /// `{ "<path>": count }` of every registry request served (control requests aside).
    pub fn requests(&self) -> serde_json::Value {
        self.control("GET", "requests", &serde_json::Value::Null)
    }

    /// `[{ method, path, accept }]` of the same requests, in the order they came.
    pub fn log(&self) -> serde_json::Value {
        self.control("GET", "log", &serde_json::Value::Null)
    }

    pub fn reset_requests(&self) {
        self.control("POST", "reset-requests", &serde_json::Value::Null);
    }

    /// `GET path` as a client would (counted like npm's requests): status and body bytes.
    pub fn get(&self, path: &str) -> (u16, Vec<u8>) {
        self.http("GET", path, None)
    }

    /// The packument of `name` as npm sees it now.
    pub fn packument(&self, name: &str) -> serde_json::Value {
        let (status, body) = self.get(&format!("/{}", name.replace('/', "%2f")));
        assert_eq!(status, 200, "{name}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }

    fn control(&self, method: &str, action: &str, body: &serde_json::Value) -> serde_json::Value {
        let body = (!body.is_null()).then(|| body.to_string());
        let path = format!("/-/berth/{action}");
        let (status, text) = self.http(method, &path, body.as_deref());
        assert_eq!(
            status,
            200,
            "{method} {path}: {}",
            String::from_utf8_lossy(&text)
        );
        serde_json::from_slice(&text).unwrap()
    }

    /// One HTTP/1.1 exchange on its own connection (`Connection: close`, so the body ends
    /// where the stream does).
    fn http(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let body = body.unwrap_or("");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP response");
        let head = String::from_utf8_lossy(&raw[..split]);
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        (status, raw[split + 4..].to_vec())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
