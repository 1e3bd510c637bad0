//! Restricted mode through the real binary: a plugin whose tools try to write outside the
//! project and into its protected parts, read a secret file and a secret variable, open TCP and
//! UNIX sockets and leave an escaped grandchild behind — each stopped by the OS (the effect did
//! not happen) and reported `policy-limited`, on Bun and Node hosts, under bubblewrap + seccomp
//! and under Landlock + seccomp. In compatible mode the same calls succeed (the negative
//! control). With no boundary available, exactly the restricted source is disabled.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::serve::{start_with, status_of, wait_for, Serving};
use crate::support::*;

const SECRET: &str = "canary-restricted-7f3a";

struct Machine {
    s: Sandbox,
    env: Vec<(&'static str, PathBuf)>,
}

impl Machine {
    /// The effects plugin in a project with a `src/` folder, on `backend`, with `tier` forced.
    fn new(node: bool, tier: &str) -> Machine {
        let s = Sandbox::new();
        s.copy_fixture(
            "restricted/effects.ts",
            "project/.opencode/plugins/effects.ts",
        );
        std::fs::create_dir_all(s.project().join("src")).unwrap();
        std::fs::create_dir_all(s.project().join(".git/hooks")).unwrap();
        std::fs::create_dir_all(s.root.path().join("outside")).unwrap();
        s.write("home/.ssh/id_rsa", SECRET);
        let mut env = vec![
            ("BERTH_SANDBOX_TIER", PathBuf::from(tier)),
            ("MY_SECRET_TOKEN", PathBuf::from(SECRET)),
            ("PLAIN_VAR", PathBuf::from("visible")),
        ];
        if node {
            env.push(("BERTH_BUN", s.root.path().join("no-bun")));
        }
        Machine { s, env }
    }

    fn cli(&self, args: &[&str]) -> (i32, Value) {
        let mut cmd = self.s.berth(args);
        cmd.arg("--json");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        parse_json_output(&cmd.output().unwrap())
    }

    fn serve(&self) -> Serving {
        let env: Vec<(&str, &Path)> = self.env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        start_with(&self.s, "127.0.0.1:0", &env).unwrap()
    }

    /// A compatible tool file beside the effects plugin, which alone is set to restricted;
    /// the plugin's id.
    fn restrict_effects_beside_a_plain_tool(&self) -> String {
        self.s.write(
            "project/.opencode/tools/plain.ts",
            "import { tool } from '@opencode-ai/plugin'\nexport default tool({ description: 'plain', args: {}, async execute() { return 'plain' } })\n",
        );
        let (_, v) = self.cli(&["sources"]);
        let id = id_of(&v, "effects.ts");
        let (code, r) = self.cli(&["policy", "set", &format!("mode.{id}"), "restricted"]);
        assert_eq!(code, 0, "{r}");
        id
    }

    fn outside(&self, name: &str) -> PathBuf {
        self.s.root.path().join("outside").join(name)
    }
}

/// One call: (the receipt's status, its error code or "", its output).
fn call(srv: &Serving, tool: &str, args: Value) -> (String, String, String) {
    let (_, r) = srv.post("invoke", &json!({ "tool": tool, "args": args }));
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    };
    (
        text(&r["status"]),
        r["error"]["code"].as_str().unwrap_or_default().to_string(),
        text(&r["output"]),
    )
}

fn restricted_effects_are_stopped(node: bool, tier: &str) {
    let m = Machine::new(node, tier);
    for (k, v) in [
        ("mode", "restricted"),
        ("restricted.project", "read-write"),
        ("restricted.env", r#"["PLAIN_VAR", "MY_SECRET_TOKEN"]"#),
    ] {
        let (code, v) = m.cli(&["policy", "set", k, v]);
        assert_eq!(code, 0, "{v}");
    }
    let srv = m.serve();
    assert_eq!(m.cli(&["approve", "--all"]).0, 0);
    let v = wait_for(&srv, "the restricted plugin's tools", |v| {
        v["tools"].as_array().is_some_and(|t| t.len() == 7)
    });
    let src = source(&v, "effects.ts");
    assert_eq!(src["state"], "active", "{src}");
    assert_eq!(src["run_mode"]["mode"], "restricted");
    assert_eq!(v["boundary"]["tier"], tier, "{}", v["boundary"]);
    let host = &v["hosts"].as_array().unwrap()[0];
    assert_eq!(host["boundary"], tier, "{host}");
    let stopped = |what: &str, (status, code, out): (String, String, String)| {
        assert_eq!(
            (status.as_str(), code.as_str()),
            ("failed", "policy-limited"),
            "{what} on {tier}/{}: {out}",
            if node { "node" } else { "bun" }
        );
    };

    // Files: outside the project, into its protected parts, into Berth's data dir.
    let outside = m.outside("x.txt");
    stopped(
        "a write outside",
        call(&srv, "write_file", json!({ "path": outside, "text": "x" })),
    );
    assert!(!outside.exists(), "the write outside happened");
    for rel in [
        ".git/hooks/pre-commit",
        ".opencode/planted.ts",
        "opencode.json",
    ] {
        let p = m.s.project().join(rel);
        stopped(
            rel,
            call(&srv, "write_file", json!({ "path": p, "text": "x" })),
        );
        assert!(!p.exists(), "{rel} was written");
    }
    let db = m.s.data_dir().join("planted");
    stopped(
        "a write into the data dir",
        call(&srv, "write_file", json!({ "path": db, "text": "x" })),
    );
    assert!(!db.exists());
    // The project itself is writable (read-write was chosen).
    let ok = m.s.project().join("src/ok.txt");
    assert_eq!(
        call(&srv, "write_file", json!({ "path": ok, "text": "fine" })).0,
        "completed"
    );
    assert_eq!(std::fs::read_to_string(&ok).unwrap(), "fine");
    // A key in the home folder.
    let (status, code, out) = call(
        &srv,
        "read_file",
        json!({ "path": m.s.home().join(".ssh/id_rsa") }),
    );
    assert!(!out.contains(SECRET), "the key was read");
    stopped("reading ~/.ssh", (status, code, out));
    // The same through paths the boundary must resolve as the kernel does: symlinks the
    // repository brought into the writable project, one to the key, one into `.git/hooks`
    // (a hook that does not exist yet: writing through the link would create it).
    let via_key = m.s.project().join("src/key");
    std::os::unix::fs::symlink(m.s.home().join(".ssh/id_rsa"), &via_key).unwrap();
    let (status, code, out) = call(&srv, "read_file", json!({ "path": via_key }));
    assert!(
        !out.contains(SECRET),
        "the key was read through a symlink in the project"
    );
    stopped("reading ~/.ssh through a symlink", (status, code, out));
    let hook = m.s.project().join(".git/hooks/post-checkout");
    let via_hook = m.s.project().join("src/hook");
    std::os::unix::fs::symlink(&hook, &via_hook).unwrap();
    stopped(
        "writing .git/hooks through a symlink",
        call(
            &srv,
            "write_file",
            json!({ "path": via_hook, "text": "#!/bin/sh\n" }),
        ),
    );
    assert!(!hook.exists(), "a hook was planted through a symlink");
    // The network: a TCP listener the test runs accepts nothing.
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    stopped(
        "a TCP connection",
        call(&srv, "tcp", json!({ "port": port })),
    );
    tcp.set_nonblocking(true).unwrap();
    assert_eq!(
        tcp.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "a TCP connection was accepted"
    );
    // A pathname UNIX socket outside the boundary: stopped under bubblewrap; Landlock ABI 7
    // cannot (ABI 9 can) and the page says so.
    let sock_path = m.s.root.path().join("outside/listen.sock");
    let unix = UnixListener::bind(&sock_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let unix_call = call(&srv, "unix", json!({ "path": sock_path }));
    let accepted = unix.accept().is_ok();
    if tier == "bwrap" {
        stopped("a UNIX socket", unix_call);
        assert!(!accepted, "a UNIX connection was accepted");
    } else {
        assert!(
            v["boundary"]["cannot_stop"]
                .to_string()
                .contains("pathname UNIX sockets"),
            "the page must say what Landlock ABI 7 cannot stop: {}",
            v["boundary"]
        );
    }
    // The environment: a listed plain name passes, a secret-looking one never does.
    assert_eq!(
        call(&srv, "env", json!({ "name": "PLAIN_VAR" })).2,
        "visible"
    );
    assert_eq!(
        call(&srv, "env", json!({ "name": "MY_SECRET_TOKEN" })).2,
        "(unset)"
    );
    // A detached grandchild that writes later is still inside the boundary.
    let escaped = m.outside("escaped.txt");
    assert_eq!(
        call(&srv, "escape", json!({ "path": escaped })).0,
        "completed"
    );
    std::thread::sleep(std::time::Duration::from_millis(900));
    assert!(!escaped.exists(), "the escaped grandchild wrote outside");
    // What Berth serves the plugin still works inside the boundary (on the channel, D-034).
    let (status, _, out) = call(&srv, "server_url", json!({}));
    assert_eq!(status, "completed", "{out}");
    assert!(out.starts_with("200 "), "{out}");
    assert!(out.contains(m.s.project().to_str().unwrap()), "{out}");
}

#[test]
fn restricted_bun_under_bubblewrap() {
    restricted_effects_are_stopped(false, "bwrap");
}

#[test]
fn restricted_node_under_bubblewrap() {
    restricted_effects_are_stopped(true, "bwrap");
}

#[test]
fn restricted_bun_under_landlock() {
    restricted_effects_are_stopped(false, "landlock");
}

#[test]
fn restricted_node_under_landlock() {
    restricted_effects_are_stopped(true, "landlock");
}

/// The negative control: in compatible mode the same calls do what they say.
#[test]
fn in_compatible_mode_the_same_calls_succeed() {
    let m = Machine::new(false, "bwrap");
    let srv = m.serve();
    assert_eq!(m.cli(&["approve", "--all"]).0, 0);
    wait_for(&srv, "the plugin's tools", |v| {
        v["tools"].as_array().is_some_and(|t| t.len() == 7)
    });
    let outside = m.outside("x.txt");
    assert_eq!(
        call(&srv, "write_file", json!({ "path": outside, "text": "x" })).0,
        "completed"
    );
    assert!(outside.exists());
    assert_eq!(
        call(
            &srv,
            "read_file",
            json!({ "path": m.s.home().join(".ssh/id_rsa") })
        )
        .2,
        SECRET
    );
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    assert_eq!(call(&srv, "tcp", json!({ "port": port })).0, "completed");
    tcp.set_nonblocking(true).unwrap();
    assert!(
        tcp.accept().is_ok(),
        "compatible mode: the connection must arrive"
    );
    assert_eq!(
        call(&srv, "env", json!({ "name": "MY_SECRET_TOKEN" })).2,
        SECRET
    );
    let escaped = m.outside("escaped.txt");
    assert_eq!(
        call(&srv, "escape", json!({ "path": escaped })).0,
        "completed"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while !escaped.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(escaped.exists(), "compatible mode: the grandchild writes");
    let v = status_of(&srv);
    assert_eq!(source(&v, "effects.ts")["run_mode"]["mode"], "compatible");
    assert_eq!(v["hosts"][0]["boundary"], Value::Null);
}

/// With no boundary available, exactly the restricted source is disabled; the others run.
#[test]
fn with_no_boundary_only_the_restricted_source_is_policy_limited() {
    let m = Machine::new(false, "none");
    let id = m.restrict_effects_beside_a_plain_tool();
    assert_eq!(m.cli(&["approve", "--all"]).0, 0);
    let (_, t) = m.cli(&["tools"]);
    assert_eq!(t["tools"].as_array().unwrap().len(), 1, "{t}");
    assert_eq!(t["tools"][0]["name"], "plain");
    assert_eq!(t["problems"][0]["code"], "policy-limited", "{t}");
    assert_eq!(t["problems"][0]["plugin"], id.as_str());
    let (_, v) = m.cli(&["status"]);
    assert_schema("status", &v);
    assert_eq!(source(&v, "effects.ts")["state"], "policy-limited");
    assert_eq!(source(&v, "plain.ts")["state"], "approved");
    assert_eq!(v["boundary"]["tier"], Value::Null);
    assert!(v["boundary"]["unavailable"]
        .as_str()
        .unwrap()
        .contains("BERTH_SANDBOX_TIER=none"));
}

/// However Berth ends — here `kill -9`, which runs no cleanup — its hosts end with it: the
/// shared one, a restricted one under Landlock (no wrapper that could die with it) and one
/// under bubblewrap.
#[test]
fn hosts_die_with_berth_even_after_kill_9() {
    for tier in ["landlock", "bwrap"] {
        let m = Machine::new(false, tier);
        m.restrict_effects_beside_a_plain_tool();
        let mut srv = m.serve();
        assert_eq!(m.cli(&["approve", "--all"]).0, 0);
        let v = wait_for(&srv, "both hosts", |v| {
            v["tools"].as_array().is_some_and(|t| t.len() == 8)
                && v["hosts"].as_array().is_some_and(|h| h.len() == 2)
        });
        let pids: Vec<u32> = v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["pid"].as_u64().unwrap() as u32)
            .collect();
        assert!(pids.iter().all(|p| alive(*p)));
        srv.child.kill().unwrap();
        srv.child.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while pids.iter().any(|p| alive(*p)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let left: Vec<&u32> = pids.iter().filter(|p| alive(**p)).collect();
        assert!(left.is_empty(), "{tier}: hosts {left:?} outlived Berth");
    }
}

/// A running Berth activating again (here: after a policy change) keeps a restricted host that
/// nothing changed for. Berth keeps a copy of each version it loads; the boundary used to list
/// that copy once it existed, so the second activation saw "its boundary changed" and
/// restarted the host (the source read `updating`) for nothing.
#[test]
fn a_second_activation_keeps_the_restricted_host_nothing_changed_for() {
    let m = Machine::new(false, "landlock");
    m.restrict_effects_beside_a_plain_tool();
    let srv = m.serve();
    assert_eq!(m.cli(&["approve", "--all"]).0, 0);
    let pids = |v: &Value| -> Vec<u64> {
        let mut p: Vec<u64> = v["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["pid"].as_u64())
            .collect();
        p.sort();
        p
    };
    let v = wait_for(&srv, "both hosts", |v| {
        v["tools"].as_array().is_some_and(|t| t.len() == 8)
            && v["hosts"].as_array().is_some_and(|h| h.len() == 2)
    });
    let before = pids(&v);
    assert_eq!(m.cli(&["policy", "set", "budget.hook", "5000"]).0, 0);
    wait_for(&srv, "the policy change", |v| {
        v["policy"]["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["key"] == "budget.hook" && e["value"] == 5000)
    });
    // Time for the activation the change starts to retire a host, were it to.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let v = wait_for(&srv, "both hosts again", |v| {
        v["hosts"].as_array().is_some_and(|h| h.len() == 2)
    });
    assert_eq!(pids(&v), before, "the hosts were restarted: {}", v["hosts"]);
    assert_eq!(source(&v, "effects.ts")["state"], "active");
}

/// A restricted local plugin rolled back after a broken edit reads its kept bytes from Berth's
/// copy inside its boundary (the copy is part of what it may read), under both tiers.
#[test]
fn a_restricted_plugin_rolled_back_runs_its_kept_bytes_inside_the_boundary() {
    for tier in ["bwrap", "landlock"] {
        let s = Sandbox::new();
        let env = [("BERTH_SANDBOX_TIER", PathBuf::from(tier))];
        let cli = |args: &[&str]| {
            let mut cmd = s.berth(args);
            cmd.arg("--json");
            for (k, v) in &env {
                cmd.env(k, v);
            }
            parse_json_output(&cmd.output().unwrap())
        };
        let file = s.write(
            "home/.config/opencode/plugins/kept.js",
            "export default { id: 'kept', server: async () => ({ tool: { kept_version: { description: 'v', args: {}, async execute() { return 'v1' } } } }) }\n",
        );
        assert_eq!(cli(&["policy", "set", "mode", "restricted"]).0, 0);
        let env_ref: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        let srv = start_with(&s, "127.0.0.1:0", &env_ref).unwrap();
        assert_eq!(cli(&["approve", "--all"]).0, 0);
        let v = wait_for(&srv, "v1 to run restricted", |v| {
            v["sources"][0]["state"] == "active" && v["hosts"][0]["boundary"] == tier
        });
        let id = v["sources"][0]["id"].as_str().unwrap().to_string();
        assert_eq!(call(&srv, "kept_version", json!({})).2, "v1");
        std::fs::write(&file, "throw new Error('broken on purpose')\n").unwrap();
        wait_for(&srv, "the failed load", |v| {
            v["sources"][0]["state"] == "load-failed"
        });
        let (code, r) = srv.post("rollback", &json!({ "source": id }));
        assert_eq!(
            code,
            200,
            "{tier}: {r} {}",
            status_of(&srv)["sources"][0]["diagnostics"]
        );
        let v = wait_for(&srv, "the kept version to run", |v| {
            v["sources"][0]["lifecycle"]["pinned"] == true && v["sources"][0]["state"] == "active"
        });
        assert_eq!(v["hosts"][0]["boundary"], tier, "{}", v["hosts"]);
        assert_eq!(call(&srv, "kept_version", json!({})).2, "v1", "{tier}");
    }
}
