//! The runtimes start and run normally inside each tier, a fetch to a bad address fails
//! cleanly, and the probe's answers hang together. Prints which tiers ran.

mod common;

use std::ffi::OsString;

use berth_sandbox::{probe, probe_now, wrap, Boundary, Tier};
use common::{boundary, marker, run, run_plan, runtimes, tiers};
use serde_json::json;

#[tokio::test]
async fn node_and_bun_run_normally_inside_each_tier() {
    for tier in tiers() {
        for rt in runtimes() {
            let b = boundary(tier, &marker("basics"));
            let code = "console.log(JSON.stringify([1 + 1, typeof fetch, process.cwd()]))";
            let args: Vec<OsString> = vec!["-e".into(), code.into()];
            let out = run(&rt.path, &args, &b).await;
            eprintln!("{} under {tier:?}: {}", rt.name, out.stdout.trim());
            assert_eq!(out.code, Some(0), "{} under {tier:?}: {out:?}", rt.name);
            assert_eq!(out.stdout.trim(), "[2,\"function\",\"/\"]", "{}", rt.name);
        }
    }
}

#[tokio::test]
async fn fds_the_parent_leaks_do_not_reach_the_child() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().expect("tempdir");
    let canary = dir.path().join("berth-leak-canary");
    let file = std::fs::File::create(&canary).expect("create");
    // SAFETY: dup of an open fd; the copy is not close-on-exec, like a leaked fd.
    let leaked = unsafe { libc::dup(file.as_raw_fd()) };
    assert!(leaked > 2);
    for tier in tiers() {
        for rt in runtimes() {
            let b = boundary(tier, &marker("fds"));
            let plan = json!({"steps": [{"name": "fds", "op": "fds"}]});
            let out = run_plan(&rt, &b, &plan).await;
            let (ok, fds) = out.ok("fds");
            assert!(
                ok && !fds.contains("berth-leak-canary"),
                "{} {tier:?}: {fds}",
                rt.name
            );
            assert!(
                !fds.contains("berth-seccomp"),
                "{} {tier:?}: {fds}",
                rt.name
            );
        }
    }
    // SAFETY: closes the fd dup'd above.
    unsafe { libc::close(leaked) };
}

#[tokio::test]
async fn a_fetch_to_a_bad_address_fails_cleanly() {
    for tier in tiers() {
        for network in [false, true] {
            for rt in runtimes() {
                let mut b = boundary(tier, &marker("fetch"));
                b.network = network;
                let closed = closed_port();
                let plan = json!({"steps": [
                    {"name": "closed-port", "op": "fetch", "url": format!("http://127.0.0.1:{closed}/")},
                    {"name": "no-such-host", "op": "fetch", "url": "http://berth-test.invalid/"},
                ]});
                let out = run_plan(&rt, &b, &plan).await;
                for step in ["closed-port", "no-such-host"] {
                    let (ok, detail) = out.ok(step);
                    eprintln!(
                        "{} under {tier:?}, network {network}: {step}: {detail}",
                        rt.name
                    );
                    assert!(!ok, "{} under {tier:?}: {out:?}", rt.name);
                }
            }
        }
    }
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[tokio::test]
async fn one_wrapped_command_starts_twice_and_its_temp_folder_is_private() {
    use std::os::unix::fs::PermissionsExt;
    for tier in tiers() {
        let rt = &runtimes()[0];
        let mut b = Boundary::new(tier); // empty environment: bwrap needs none of its own
        b.read = vec![common::fixtures()];
        let plan = json!({"steps": [{"name": "tmp", "op": "tmp"}]});
        let w = wrap(&rt.path, &common::plan_args(&plan), &b).expect("wrap");
        if let Some(tmp) = w.private_tmp() {
            let mode = tmp.metadata().expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{tier:?}");
        }
        for round in 0..2 {
            let mut cmd = tokio::process::Command::new(w.program());
            cmd.args(w.args()).stdin(std::process::Stdio::null());
            w.apply(&mut cmd);
            let out = cmd.process_group(0).output().await.expect("spawn");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{tier:?} round {round}: {out:?}");
            assert!(
                stdout.contains("\"ok\":true"),
                "{tier:?} round {round}: {stdout}"
            );
        }
    }
}

#[test]
fn the_probe_is_consistent_and_names_the_limits() {
    let p = probe();
    eprintln!("probe: {p:?}");
    let fresh = probe_now();
    assert_eq!(fresh.landlock_abi, p.landlock_abi);
    assert_eq!(fresh.bwrap.is_ok(), p.bwrap.is_ok());
    assert_eq!(
        p.best().is_some(),
        p.supports(Tier::Bwrap) || p.supports(Tier::Landlock)
    );
    if p.supports(Tier::Bwrap) {
        assert_eq!(p.best(), Some(Tier::Bwrap));
    }
    if p.supports(Tier::Landlock) {
        let gaps = p.cannot_stop(Tier::Landlock).join("\n");
        assert!(gaps.contains("pathname UNIX sockets"), "{gaps}");
        assert!(gaps.contains("process group"), "{gaps}");
    }
    let bwrap_gaps = p.cannot_stop(Tier::Bwrap).join("\n");
    assert!(
        !bwrap_gaps.contains("pathname UNIX sockets"),
        "{bwrap_gaps}"
    );
}

#[test]
fn wrap_refuses_a_missing_or_relative_program() {
    for tier in tiers() {
        let b = Boundary::new(tier);
        let missing = wrap("/no/such/berth/runtime".as_ref(), &[], &b).map(|_| ());
        let err = missing.expect_err("a missing program is an error");
        assert!(err.to_string().contains("/no/such/berth/runtime"), "{err}");
        assert!(wrap("node".as_ref(), &[], &b).is_err());
    }
}
