//! The fuzz targets, each with its seeds: real inputs of the kind it reads (the protocol's own
//! messages, the fixtures' configs and plugin sources, the page's own requests), mutated.
//!
//! Owns: which inputs each target feeds and what it calls. Must not: judge a result beyond
//! "no panic, no hang" (the parsers' answers are checked by the test suite).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_discovery::{facts, spec, OpencodeEnv, Scanner};

use crate::mutate::mutate;
use crate::{Case, Target};

type Make = fn() -> Target;

/// Every target, by the name `--only` takes, in the order they run.
pub fn all() -> Vec<(&'static str, Make)> {
    vec![
        ("frame", frame as Make),
        ("spec", spec_target),
        ("facts", facts_target),
        ("config", config),
        ("serve", serve),
    ]
}

/// The harness's own negative controls (run only when named): a "parser" that panics on an
/// input the mutators reach quickly, and one that hangs — the run must report each and fail.
pub fn controls() -> Vec<(&'static str, Make)> {
    vec![
        ("canary-panic", canary_panic as Make),
        ("canary-hang", canary_hang),
    ]
}

fn canary_panic() -> Target {
    let seeds = vec![b"{\"a\": 1}".to_vec()];
    Box::new(move |case| {
        let bytes = input(case, &seeds);
        assert!(
            !bytes.windows(2).any(|w| w == b"{{"),
            "the canary parser met nested braces"
        );
    })
}

fn canary_hang() -> Target {
    Box::new(|case| {
        case.note(b"any");
        std::thread::sleep(Duration::from_secs(3600));
    })
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace holds this crate")
        .to_path_buf()
}

/// Every file under `dir` (recursively) whose name ends with one of `exts`.
fn files(dir: &Path, exts: &[&str]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if exts.iter().any(|x| p.to_string_lossy().ends_with(x)) {
                if let Ok(b) = std::fs::read(&p) {
                    out.push(b);
                }
            }
        }
    }
    out
}

/// A case's input: a mutation of one seed, now and then random bytes.
fn input(case: &mut Case<'_>, seeds: &[Vec<u8>]) -> Vec<u8> {
    let bytes = if case.rng.chance(16) {
        case.rng.bytes(512)
    } else {
        let seed = case.rng.pick(seeds).clone();
        mutate(case.rng, &seed, seeds)
    };
    case.note(&bytes);
    bytes
}

/// The host protocol: a stream of length-prefixed frames (the length checked before the buffer
/// is allocated), and each frame's message.
fn frame() -> Target {
    let messages: Vec<Vec<u8>> = [
        r#"{"t":"hello","v":1,"secret":"s","generation":1,"pid":7,"runtime":"node","runtime_version":"v20"}"#,
        r#"{"t":"ack","v":1,"id":3}"#,
        r#"{"t":"res","v":1,"id":3,"ok":true,"value":{"tools":[{"name":"x","args":{}}]}}"#,
        r#"{"t":"res","v":1,"id":4,"ok":false,"error":{"code":"plugin-failed","message":"m"}}"#,
        r#"{"t":"note","v":1,"instance":"i","level":"info","message":"m"}"#,
        r#"{"t":"up","v":1,"up":1,"instance":"i","method":"permission.ask","body":{"a":[1,2]}}"#,
        r#"{"t":"meta","v":1,"id":3,"title":"t","metadata":{"k":"v"}}"#,
    ]
    .iter()
    .map(|m| m.as_bytes().to_vec())
    .collect();
    let streams: Vec<Vec<u8>> = messages
        .iter()
        .map(|m| {
            let mut f = (m.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(m);
            f
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    Box::new(move |case| {
        let msg = input(case, &messages);
        let _ = berth_protocol::decode(&msg);
        let stream = input(case, &streams);
        rt.block_on(async {
            let mut r: &[u8] = &stream;
            while let Ok(frame) = berth_protocol::read_frame(&mut r).await {
                let _ = berth_protocol::decode(&frame);
            }
        });
    })
}

/// Plugin specs as config files write them: npm names and ranges, aliases, git and tarball
/// URLs, paths and file URLs.
fn spec_target() -> Target {
    let seeds: Vec<Vec<u8>> = [
        "opencode-wakatime@1.3.9",
        "@scope/pkg@^2.1.0",
        "pkg@latest",
        "pkg",
        "npm:other@1",
        "./plugins/a.ts",
        "../b.js",
        "/abs/c.mjs",
        "file:///x/y%20z.ts",
        "C:\\p\\q.ts",
        "github:owner/repo#v1",
        "git+https://example.invalid/r.git",
        "https://example.invalid/t.tgz",
        "pkg@>=1.2.3 <2",
        "pkg@1.x || 2.x",
        "@s/p@npm:@t/q@3",
        "workspace:*",
        "link:../x",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let base = PathBuf::from("/project/.opencode");
    Box::new(move |case| {
        let raw = String::from_utf8_lossy(&input(case, &seeds)).into_owned();
        let _ = spec::parse(&raw, &base);
        let _ = spec::classify(&raw, &base);
        let name = String::from_utf8_lossy(&input(case, &seeds)).into_owned();
        let _ = spec::dependency_refusal(&name, &raw, &base);
    })
}

/// The static facts reader over mutated real plugin and tool sources.
fn facts_target() -> Target {
    let mut seeds = files(&root().join("fixtures/plugins"), &[".ts", ".js", ".mjs"]);
    seeds.extend(files(&root().join("fixtures/tools"), &[".ts", ".js"]));
    seeds.extend(files(&root().join("host"), &[".mjs"]));
    let names = ["plugin.ts", "tool.js", "x.mjs", "y.cjs", "z.tsx", "w.jsx"];
    Box::new(move |case| {
        let text = String::from_utf8_lossy(&input(case, &seeds)).into_owned();
        let name = *case.rng.pick(&names);
        let _ = facts::analyze(Path::new(name), &text);
    })
}

/// The JSONC config reader and the whole graph: mutated configs (the discovery fixtures) as a
/// home's global config and a project's, with a plugin and a tool file beside them, scanned.
fn config() -> Target {
    let seeds = files(
        &root().join("fixtures/discovery"),
        &["opencode.json", "opencode.jsonc", "config.json"],
    );
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    for d in [
        home.join(".config/opencode/plugins"),
        project.join(".opencode/tools"),
        project.join(".git"),
    ] {
        std::fs::create_dir_all(d).expect("fixture folders");
    }
    std::fs::write(
        project.join(".opencode/tools/t.ts"),
        "export default { description: 'd', args: {}, async execute() { return 'x' } }\n",
    )
    .unwrap();
    std::fs::write(
        home.join(".config/opencode/plugins/p.ts"),
        "export default async () => ({})\n",
    )
    .unwrap();
    let env = OpencodeEnv {
        home: home.clone(),
        cwd: project.clone(),
        managed_config_dir: dir.path().join("managed"),
        ..OpencodeEnv::default()
    };
    let mut scanner = Scanner::default();
    Box::new(move |case| {
        let _keep = &dir;
        let global = input(case, &seeds);
        let local = input(case, &seeds);
        std::fs::write(home.join(".config/opencode/opencode.jsonc"), &global).unwrap();
        std::fs::write(project.join("opencode.jsonc"), &local).unwrap();
        let _ = scanner.scan(&env, &project);
    })
}

/// The page server: mutated raw HTTP requests (the page's own, with the token) on loopback;
/// afterwards it must still answer a well-formed status request.
fn serve() -> Target {
    let dir = tempfile::tempdir().expect("a temp dir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let env = OpencodeEnv {
        home: dir.path().join("home"),
        cwd: project.clone(),
        managed_config_dir: dir.path().join("managed"),
        ..OpencodeEnv::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let berth = berth_runtime::Berth::open(berth_runtime::BerthOptions {
        data_dir: dir.path().join("data"),
        project,
        env,
        log_file: None,
    })
    .expect("Berth opens");
    let server = rt
        .block_on(berth_serve::Server::bind(
            berth,
            "127.0.0.1:0".parse().unwrap(),
        ))
        .expect("the server binds");
    let (addr, token) = (server.local_addr(), server.token().to_string());
    rt.spawn(server.run(std::future::pending()));
    let host = format!("127.0.0.1:{}", addr.port());
    let request = |method: &str, path: &str, body: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    let seeds: Vec<Vec<u8>> = vec![
        request("GET", "/api/status", ""),
        request("GET", &format!("/?token={token}"), ""),
        request("GET", "/main.js", ""),
        request(
            "POST",
            "/api/approve",
            r#"{"ids":["tool-x"],"digests":{"tool-x":"sha256:00"}}"#,
        ),
        request("POST", "/api/deny", r#"{"ids":[]}"#),
        request(
            "POST",
            "/api/policy",
            r#"{"key":"budget.hook","value":5000}"#,
        ),
        request(
            "POST",
            "/api/invoke",
            r#"{"tool":"read","args":{"filePath":"x"},"call":"c1"}"#,
        ),
        request("POST", "/api/cancel", r#"{"call":"c1"}"#),
        request("POST", "/api/prompt", r#"{"id":"p","reply":"once"}"#),
        request(
            "POST",
            "/api/choose",
            r#"{"tool":"t","candidate":"builtin"}"#,
        ),
        request("POST", "/api/open-folder", r#"{"folder":"nowhere"}"#),
    ];
    let status = request("GET", "/api/status", "");
    let send = move |bytes: &[u8]| -> Option<Vec<u8>> {
        let mut s = std::net::TcpStream::connect(addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(bytes).ok()?;
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut answer = Vec::new();
        let _ = s.take(1 << 20).read_to_end(&mut answer);
        Some(answer)
    };
    let mut n = 0u64;
    Box::new(move |case| {
        let _keep = (&dir, &rt);
        let bytes = input(case, &seeds);
        let _ = send(&bytes);
        n += 1;
        if n.is_multiple_of(50) {
            // A server that stopped answering fails; one slowed past a read timeout by a busy
            // machine (CI shares two cores) is asked again, three times in all.
            let mut answer = Vec::new();
            for _ in 0..3 {
                answer = send(&status).unwrap_or_default();
                if answer.starts_with(b"HTTP/1.1 200") {
                    break;
                }
            }
            assert!(
                answer.starts_with(b"HTTP/1.1 200"),
                "the server stopped answering: {:?}",
                String::from_utf8_lossy(&answer[..answer.len().min(200)])
            );
        }
    })
}
