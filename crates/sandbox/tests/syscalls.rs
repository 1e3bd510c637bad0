//! The seccomp filter in each tier, by real system calls: a Python ctypes probe (when
//! /usr/bin/python3 exists) makes each call inside and outside the sandbox and reports its
//! errno; `keyctl`, `unshare -U` and a nested `bwrap` must fail inside.

mod common;

use std::ffi::OsString;
use std::path::Path;

use common::{boundary, marker, run, tiers, Output};
use serde_json::Value;

/// Calls each `name:nr:args…` given and prints `{name: errno or 0}` as JSON.
const SYSCALL_PROBE: &str = r#"
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for item in sys.argv[1:]:
    name, nr, *args = item.split(":")
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(int(nr)), *[ctypes.c_long(int(a)) for a in args])
    out[name] = 0 if r >= 0 else ctypes.get_errno()
print(json.dumps(out))
"#;

fn calls() -> Vec<String> {
    let list: &[(&str, libc::c_long, &[i64])] = &[
        ("io_uring_setup", libc::SYS_io_uring_setup, &[1, 0]),
        ("keyctl", libc::SYS_keyctl, &[0, -3, 0]), // KEYCTL_GET_KEYRING_ID, session
        ("add_key", libc::SYS_add_key, &[0, 0, 0, 0, 0]),
        ("ptrace", libc::SYS_ptrace, &[2, 0, 0, 0]), // PTRACE_PEEKDATA on pid 0
        ("bpf", libc::SYS_bpf, &[0, 0, 0]),
        (
            "perf_event_open",
            libc::SYS_perf_event_open,
            &[0, 0, -1, -1, 0],
        ),
        ("userfaultfd", libc::SYS_userfaultfd, &[0]),
        ("mount", libc::SYS_mount, &[0, 0, 0, 0, 0]),
        ("unshare", libc::SYS_unshare, &[libc::CLONE_NEWUSER as i64]),
        (
            "clone-newuser",
            libc::SYS_clone,
            &[(libc::CLONE_NEWUSER | libc::SIGCHLD) as i64, 0, 0, 0, 0],
        ),
        (
            "socket-inet",
            libc::SYS_socket,
            &[libc::AF_INET as i64, libc::SOCK_STREAM as i64, 0],
        ),
        (
            "socket-netlink",
            libc::SYS_socket,
            &[libc::AF_NETLINK as i64, libc::SOCK_RAW as i64, 0],
        ),
        (
            "socket-unix",
            libc::SYS_socket,
            &[libc::AF_UNIX as i64, libc::SOCK_STREAM as i64, 0],
        ),
        ("clone3", libc::SYS_clone3, &[0, 0]),
    ];
    list.iter()
        .map(|(name, nr, args)| {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            format!("{name}:{nr}:{}", args.join(":"))
        })
        .collect()
}

fn errnos(out: &Output) -> Value {
    assert_eq!(out.code, Some(0), "{out:?}");
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[tokio::test]
async fn denied_calls_get_eperm_inside_and_not_outside() {
    let python = Path::new("/usr/bin/python3");
    if !python.is_file() {
        eprintln!("skipping the ctypes probe: no /usr/bin/python3");
        return;
    }
    let mut args: Vec<OsString> = vec!["-c".into(), SYSCALL_PROBE.into()];
    args.extend(calls().into_iter().map(OsString::from));
    let plain = std::process::Command::new(python)
        .args(&args)
        .output()
        .expect("python3");
    let outside: Value = serde_json::from_slice(&plain.stdout).expect("outside JSON");
    for name in ["io_uring_setup", "ptrace", "perf_event_open", "clone3"] {
        assert_ne!(
            outside[name],
            libc::EPERM,
            "{name} is EPERM even outside: {outside}"
        );
    }
    for tier in tiers() {
        let b = boundary(tier, &marker("syscalls"));
        let inside = errnos(&run(python, &args, &b).await);
        eprintln!("{tier:?}: {inside}");
        let denied = [
            "io_uring_setup",
            "keyctl",
            "add_key",
            "ptrace",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "mount",
            "unshare",
            "clone-newuser",
            "socket-inet",
            "socket-netlink",
        ];
        for name in denied {
            assert_eq!(inside[name], libc::EPERM, "{tier:?}: {name} in {inside}");
        }
        assert_eq!(
            inside["socket-unix"], 0,
            "{tier:?}: AF_UNIX must work: {inside}"
        );
        assert_eq!(inside["clone3"], libc::ENOSYS, "{tier:?}: {inside}");
    }
}

#[tokio::test]
async fn keyrings_namespaces_and_nested_bwrap_are_refused() {
    let tools: [(&str, &[&str]); 3] = [
        ("/usr/bin/keyctl", &["show", "@s"]),
        ("/usr/bin/unshare", &["-U", "/usr/bin/true"]),
        ("/usr/bin/bwrap", &["--ro-bind", "/", "/", "/usr/bin/true"]),
    ];
    for tier in tiers() {
        for (tool, tool_args) in tools {
            if !Path::new(tool).is_file() {
                eprintln!("skipping {tool}: not installed");
                continue;
            }
            let outside = std::process::Command::new(tool).args(tool_args).output();
            if !outside.map(|o| o.status.success()).unwrap_or(false) {
                eprintln!(
                    "skipping {tool}: it fails outside too, so failing inside proves nothing"
                );
                continue;
            }
            let args: Vec<OsString> = tool_args.iter().map(OsString::from).collect();
            let out = run(Path::new(tool), &args, &boundary(tier, &marker("tools"))).await;
            eprintln!("{tier:?}: {tool}: {:?} {}", out.code, out.stderr.trim());
            assert_ne!(out.code, Some(0), "{tier:?}: {tool} worked inside: {out:?}");
            let refused = [
                "Operation not permitted",
                "No permissions to create new namespace",
            ]
            .iter()
            .any(|m| out.stderr.contains(m));
            assert!(
                refused,
                "{tier:?}: {tool} failed for another reason: {out:?}"
            );
        }
    }
}
