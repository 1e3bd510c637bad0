//! `berth serve`: the token, the Host check, the port-in-use error.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use crate::support::*;

pub(crate) struct Serving {
    pub child: Child,
    pub url: String,
    pub addr: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start(s: &Sandbox, addr: &str) -> Result<Serving, serde_json::Value> {
    start_with(s, addr, &[])
}

pub(crate) fn start_with(
    s: &Sandbox,
    addr: &str,
    env: &[(&str, &std::path::Path)],
) -> Result<Serving, serde_json::Value> {
    let mut cmd = s.berth(&["serve", "--json", "--addr", addr]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first stdout document is printed once the server listens (or failed).
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        text.push_str(&line);
        if line == "}\n" {
            break;
        }
        line.clear();
    }
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    if v.get("error").is_some() {
        let _ = child.wait();
        return Err(v);
    }
    assert_schema("serve", &v);
    Ok(Serving {
        url: v["serve"]["url"].as_str().unwrap().into(),
        addr: v["serve"]["addr"].as_str().unwrap().into(),
        child,
    })
}

pub(crate) fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let (status, _, body) = get_with_head(addr, path, headers);
    (status, body)
}

/// GET `path`: the status, the header lines, the body.
fn get_with_head(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| *k == "Host") {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    stream.read_to_string(&mut resp).unwrap();
    let status = resp.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    (status, head.to_string(), body.to_string())
}

#[test]
fn the_api_requires_the_token_and_the_loopback_host() {
    let s = Sandbox::new();
    let srv = start(&s, "127.0.0.1:0").unwrap();
    let token = srv.url.split("token=").nth(1).unwrap().to_string();

    assert_eq!(get(&srv.addr, "/api/status", &[]).0, 401);
    assert_eq!(get(&srv.addr, "/api/status?token=wrong", &[]).0, 401);
    let bearer = format!("Bearer {token}");
    let (code, body) = get(&srv.addr, "/api/status", &[("Authorization", &bearer)]);
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_else(|_| {
        // chunked encoding: take the JSON object between the first `{` and the last `}`
        serde_json::from_str(&body[body.find('{').unwrap()..=body.rfind('}').unwrap()]).unwrap()
    });
    assert_schema("status", &v);
    assert_eq!(
        v["config_dirs"][0]["path"],
        s.global_config().display().to_string()
    );
    // A page fetched under another host name (DNS rebinding) is refused.
    let (code, _) = get(
        &srv.addr,
        &format!("/api/status?token={token}"),
        &[("Host", "evil.example:80")],
    );
    assert_eq!(code, 403);
    assert_eq!(get(&srv.addr, "/", &[]).0, 200);
}

/// The page is ES modules that import each other: a file of `ui/` the server did not serve (or
/// served as another type) would leave the page blank in a browser, not in the desktop window.
#[test]
fn every_file_of_the_page_is_served_at_its_path_with_its_content_type() {
    fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files_under(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let s = Sandbox::new();
    let srv = start(&s, "127.0.0.1:0").unwrap();
    let ui = repo_root().join("ui");
    let mut files = Vec::new();
    files_under(&ui, &mut files);
    assert!(files.iter().any(|f| f.ends_with("main.js")), "{files:?}");
    for file in files {
        let rel = file.strip_prefix(&ui).unwrap().to_str().unwrap();
        let path = format!("/{}", rel.replace('\\', "/"));
        let mime = match file.extension().and_then(|e| e.to_str()) {
            Some("html") => "text/html; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            other => panic!("{path}: no content type known for {other:?}"),
        };
        let (code, head, body) = get_with_head(&srv.addr, &path, &[]);
        assert_eq!(code, 200, "{path}");
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("content-type: {mime}")),
            "{path}: {head}"
        );
        assert_eq!(body, std::fs::read_to_string(&file).unwrap(), "{path}");
    }
}

#[test]
fn a_port_in_use_is_an_error_that_names_the_port() {
    let s = Sandbox::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = start(&s, &addr).err().expect("must fail");
    assert_schema("error", &err);
    assert_eq!(err["error"]["code"], "temporarily-unavailable");
    let port = addr.rsplit(':').next().unwrap();
    assert!(err["error"]["recovery"].as_str().unwrap().contains(port));
}

#[test]
fn a_non_loopback_address_is_refused() {
    let s = Sandbox::new();
    let err = start(&s, "0.0.0.0:0").err().expect("must fail");
    assert_schema("error", &err);
    assert_eq!(err["error"]["code"], "policy-limited");
}

impl Serving {
    pub(crate) fn token(&self) -> &str {
        self.url.split("token=").nth(1).unwrap()
    }

    /// `POST /api/<path>` with a JSON body and the token: (status, the answer's JSON).
    pub(crate) fn post(&self, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        let body = body.to_string();
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let req = format!(
            "POST /api/{path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            self.token(),
            body.len()
        );
        stream.write_all(req.as_bytes()).unwrap();
        let mut resp = String::new();
        stream.read_to_string(&mut resp).unwrap();
        let status = resp.split_whitespace().nth(1).unwrap().parse().unwrap();
        let json = resp
            .find('{')
            .and_then(|a| resp.rfind('}').map(|b| &resp[a..=b]))
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(serde_json::Value::Null);
        (status, json)
    }
}

pub(crate) fn status_of(srv: &Serving) -> serde_json::Value {
    let token = srv.url.split("token=").nth(1).unwrap();
    let (code, body) = get(&srv.addr, &format!("/api/status?token={token}"), &[]);
    assert_eq!(code, 200);
    serde_json::from_str(&body[body.find('{').unwrap()..=body.rfind('}').unwrap()]).unwrap()
}

/// Waits (bounded) until the served status satisfies `ok`.
pub(crate) fn wait_for(
    srv: &Serving,
    what: &str,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let v = status_of(srv);
        if ok(&v) {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}: {v}"
        );
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

#[test]
fn a_cli_approval_activates_in_the_running_server_and_a_denial_withdraws() {
    let s = Sandbox::new();
    s.write(
        "project/.opencode/tools/hello.ts",
        "import { tool } from '@opencode-ai/plugin'\nexport default tool({ description: 'hi', args: {}, async execute() { return 'hi' } })\n",
    );
    let srv = start(&s, "127.0.0.1:0").unwrap();
    let v = status_of(&srv);
    assert_eq!(v["sources"][0]["state"], "pending-approval");
    assert_eq!(v["tools"], serde_json::json!([]));
    let id = v["sources"][0]["id"].as_str().unwrap().to_string();

    let started = std::time::Instant::now();
    assert_eq!(s.run_json(&["approve", &id]).0, 0);
    let v = wait_for(&srv, "the tool to become active", |v| {
        v["tools"].as_array().is_some_and(|t| t.len() == 1)
    });
    eprintln!(
        "approval in another process → tool active in the server: {:?}",
        started.elapsed()
    );
    assert_schema("status", &v);
    assert_eq!(v["sources"][0]["state"], "active");
    assert_eq!(v["tools"][0]["name"], "hello");
    assert_eq!(v["hosts"][0]["instances"], serde_json::json!([id]));

    assert_eq!(s.run_json(&["deny", &id]).0, 0);
    let v = wait_for(&srv, "the tool to be withdrawn", |v| {
        v["tools"].as_array().is_some_and(|t| t.is_empty())
    });
    assert_eq!(v["sources"][0]["state"], "disabled");
}

#[test]
fn revoking_while_the_import_runs_registers_nothing_and_stops_its_host() {
    let s = Sandbox::new();
    s.copy_fixture(
        "plugins/waits-for-release.ts",
        "project/.opencode/plugins/waits.ts",
    );
    let release = s.root.path().join("release");
    let srv = start_with(
        &s,
        "127.0.0.1:0",
        &[("BERTH_TEST_RELEASE", release.as_path())],
    )
    .unwrap();

    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    // The factory is running (and waiting) inside the host.
    let started = std::path::PathBuf::from(format!("{}.started", release.display()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the import never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let id = status_of(&srv)["sources"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.run_json(&["deny", &id]).0, 0);
    std::fs::write(&release, "go").unwrap();

    let v = wait_for(&srv, "the revoked source to settle", |v| {
        v["sources"][0]["state"] == "disabled"
            && v["hosts"].as_array().is_some_and(|h| h.is_empty())
    });
    assert_eq!(
        v["tools"],
        serde_json::json!([]),
        "nothing of a revoked import is registered"
    );
}

/// An HTTP client of `berth serve` that goes away mid-call from a tool that never yields: the
/// call is given up, its host tree is gone within 750 ms (the grace, then the kill), and the
/// next call works.
#[test]
fn a_client_that_disconnects_mid_call_has_a_blocked_tool_stopped() {
    let s = Sandbox::new();
    s.copy_fixture("tools/faults.ts", "project/.opencode/tools/faults.ts");
    let srv = start(&s, "127.0.0.1:0").unwrap();
    assert_eq!(s.run_json(&["approve", "--all"]).0, 0);
    let v = wait_for(&srv, "the tools", |v| {
        v["tools"].as_array().is_some_and(|t| !t.is_empty()) && v["hosts"][0]["pid"].is_u64()
    });
    let pid = v["hosts"][0]["pid"].as_u64().unwrap();
    // CPU time the host has used, in clock ticks (utime + stime of /proc/<pid>/stat).
    let cpu = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let idle = cpu();
    let body = r#"{"tool":"faults_spins","args":{},"timeout_ms":30000}"#;
    let mut stream = TcpStream::connect(&srv.addr).unwrap();
    write!(
        stream,
        "POST /api/invoke HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        srv.addr,
        srv.token(),
        body.len()
    )
    .unwrap();
    // The tool runs once the idle host burns CPU: a fifth of a second of it (only the spin
    // does that; an idle host uses next to none).
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while cpu() < idle + hz / 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "the spinning tool never ran in its host"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(stream);
    let gone_at = std::time::Instant::now();
    while alive(pid as u32) {
        assert!(
            gone_at.elapsed() < std::time::Duration::from_millis(750),
            "the blocked host still runs {:?} after its client went away",
            gone_at.elapsed()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (status, v) = srv.post(
        "invoke",
        &serde_json::json!({ "tool": "faults_count", "args": { "file": s.root.path().join("n").display().to_string() } }),
    );
    assert_eq!(
        (status, v["status"].as_str()),
        (200, Some("completed")),
        "{v}"
    );
}
