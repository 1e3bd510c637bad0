//! `berth-bench --only updates`: the figures of #16, against a registry on loopback
//! (`tests/support/registry.mjs`, fixture versions) and the real npm and hosts.
//! - `update_downtime_p50/p99`: an npm plugin whose versions are prepared, sharing its Bun host
//!   with three other plugins, switched between two exact versions 20 times (updates and
//!   rollbacks, each through stop-old/import-new) while a caller calls its tool back to back:
//!   the time from the last answer of the old version to the first of the new, and how many
//!   calls failed (none may: they wait).
//! - `prepare_*`: another source's warm round trip — through its host, and through the full
//!   `invoke` (receipts and all) — while npm prepares an update with 60 dependencies, five
//!   times, against the same figure without a preparation just before and after each; and the
//!   floor: the same install by npm alone at the same background priority.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_runtime::catalog::BenchHost;
use berth_runtime::{Berth, Decision};

use super::{pct, Figures};

#[path = "../../../../../tests/support/registry.rs"]
mod registry;
use registry::Registry;

/// The test registry with `visible` published. It stands in for a registry elsewhere on the
/// network: its CPU is not this machine's to share with the hosts, so it runs at the lowest
/// priority.
fn start_registry(visible: &[&str]) -> Registry {
    let reg = Registry::start(visible);
    let _ = Command::new("renice")
        .args(["-n", "19", "-p", &reg.pid().to_string()])
        .stdout(Stdio::null())
        .status();
    reg
}

fn berth_on(root: &Path, plugins: &[&str], locals: usize) -> Berth {
    let home = root.join("home");
    let project = root.join("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let global = home.join(".config/opencode");
    std::fs::create_dir_all(global.join("plugins")).unwrap();
    std::fs::write(
        global.join("opencode.json"),
        serde_json::json!({ "plugin": plugins }).to_string(),
    )
    .unwrap();
    for i in 0..locals {
        std::fs::write(
            global.join(format!("plugins/neighbour{i}.js")),
            format!("export default {{ id: 'n{i}', server: async () => ({{ tool: {{ n{i}_ping: {{ description: 'pong', args: {{}}, async execute() {{ return 'pong {i}' }} }} }} }}) }}\n"),
        )
        .unwrap();
    }
    let env = berth_discovery::OpencodeEnv {
        home,
        cwd: project.clone(),
        managed_config_dir: root.join("managed"),
        ..berth_discovery::OpencodeEnv::default()
    };
    super::open_prepared(root.join("data"), env, project)
}

fn npm_id(berth: &Berth, name: &str) -> String {
    berth
        .status()
        .sources
        .iter()
        .find(|s| s.npm.as_ref().is_some_and(|n| n.name == name))
        .map(|s| s.id.clone())
        .unwrap()
}

/// When the caller got an answer, and which version gave it (None: the call failed).
type Answer = (Instant, Option<String>);

pub(super) fn run(f: &mut Figures, tmp: &Path, rt: &tokio::runtime::Runtime) {
    let reg = start_registry(&["berth-update-probe@1.0.0", "berth-update-heavy@1.0.0"]);
    // SAFETY: set before any thread of this section runs npm.
    unsafe {
        std::env::set_var("npm_config_registry", reg.url());
        std::env::set_var("npm_config_update_notifier", "false");
    }
    downtime(f, tmp, rt, &reg);
    preparation(f, tmp, rt, &reg);
}

fn downtime(f: &mut Figures, tmp: &Path, rt: &tokio::runtime::Runtime, reg: &Registry) {
    let berth = berth_on(
        &tmp.join("update-downtime"),
        &["berth-update-probe@latest"],
        3,
    );
    let id = npm_id(&berth, "berth-update-probe");
    berth
        .approve_including_fetch(Some(std::slice::from_ref(&id)), "bench", false)
        .unwrap();
    berth.decide(None, Decision::Allow, "bench", false).unwrap();
    rt.block_on(async {
        berth.activate().await;
        assert_eq!(
            berth
                .invoke(
                    "probe_version",
                    serde_json::json!({}),
                    None,
                    None,
                    Default::default()
                )
                .await
                .unwrap()
                .output
                .as_deref(),
            Some("berth-update-probe 1.0.0")
        );
        reg.publish("berth-update-probe@1.1.0");
        // The first update prepares 1.1.0 (not timed: from here on both versions are prepared).
        berth.update(&id, false).await.unwrap();
    });
    let versions = berth.versions(&id).unwrap();
    let id_of = |v: &str| {
        versions
            .iter()
            .find(|x| x.version.as_deref() == Some(v))
            .unwrap()
            .id
    };
    let (v1, v2) = (id_of("1.0.0"), id_of("1.1.0"));
    // (when, which version answered or None for a failure), by the caller, back to back.
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut windows = Vec::new();
    rt.block_on(async {
        let caller = {
            let (berth, answers, stop) = (berth.clone(), answers.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = berth
                        .invoke(
                            "probe_version",
                            serde_json::json!({}),
                            None,
                            None,
                            Default::default(),
                        )
                        .await;
                    let out = r.ok().and_then(|r| r.output);
                    answers.lock().unwrap().push((Instant::now(), out));
                }
            })
        };
        for round in 0..20 {
            let (to, want) = if round % 2 == 0 {
                (v1, "1.0.0")
            } else {
                (v2, "1.1.0")
            };
            let started = Instant::now();
            berth.rollback(&id, Some(to)).await.unwrap();
            // The caller's next answer of the new version ends the window.
            let want = format!("berth-update-probe {want}");
            loop {
                let done = answers
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|(t, o)| *t > started && o.as_deref() == Some(want.as_str()));
                if done {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            windows.push((started, want));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = caller.await;
    });
    let answers = answers.lock().unwrap();
    let failed = answers.iter().filter(|(_, o)| o.is_none()).count();
    let mut downtime: Vec<f64> = windows
        .iter()
        .map(|(started, want)| {
            let first_new = answers
                .iter()
                .find(|(t, o)| t > started && o.as_deref() == Some(want.as_str()))
                .unwrap()
                .0;
            let last_old = answers
                .iter()
                .filter(|(t, o)| *t < first_new && o.as_deref().is_some_and(|o| o != want))
                .map(|(t, _)| *t)
                .next_back()
                .unwrap_or(*started);
            first_new.duration_since(last_old).as_secs_f64() * 1e3
        })
        .collect();
    f.print(
        "update_downtime_p50",
        pct(&mut downtime, 0.5),
        "ms",
        Some((500.0, true)),
    );
    f.print("update_downtime_p99", pct(&mut downtime, 0.99), "ms", None);
    f.print("update_calls_answered", answers.len() as f64, "calls", None);
    f.print(
        "update_calls_failed",
        failed as f64,
        "calls",
        Some((0.0, true)),
    );
    rt.block_on(berth.shutdown_hosts());
}

fn preparation(f: &mut Figures, tmp: &Path, rt: &tokio::runtime::Runtime, reg: &Registry) {
    let berth = berth_on(
        &tmp.join("update-prepare"),
        &["berth-update-heavy@latest"],
        1,
    );
    let id = npm_id(&berth, "berth-update-heavy");
    berth
        .approve_including_fetch(Some(std::slice::from_ref(&id)), "bench", false)
        .unwrap();
    berth.decide(None, Decision::Allow, "bench", false).unwrap();
    // Its own host: the reload after the preparation does not touch the measured source's.
    berth.set_own_host(std::slice::from_ref(&id), true).unwrap();
    rt.block_on(berth.activate());
    // The measured source's round trip through its host (the protocol's path, as the hosts
    // section measures it), and through the full `invoke` (receipts in SQLite) alongside.
    let host = rt
        .block_on(berth.host_for_bench(berth_runtime::runtimes::RuntimeKind::Bun, BenchHost::Live));
    let neighbour = berth
        .status()
        .sources
        .iter()
        .find(|s| s.entry.ends_with("neighbour0.js"))
        .unwrap()
        .id
        .clone();
    let round_trips = |berth: &Berth, until: &dyn Fn(usize) -> bool| -> (Vec<f64>, Vec<f64>) {
        rt.block_on(async {
            let (mut hosted, mut full) = (Vec::new(), Vec::new());
            while !until(hosted.len()) {
                let body = serde_json::json!({ "tool": "n0_ping", "args": {}, "context": {} });
                let t = Instant::now();
                let r = host
                    .call(
                        &neighbour,
                        berth_protocol::CallKind::Invoke,
                        body,
                        Default::default(),
                    )
                    .await;
                assert!(r.is_ok(), "{r:?}");
                hosted.push(t.elapsed().as_secs_f64() * 1e6);
                let t = Instant::now();
                let r = berth
                    .invoke(
                        "n0_ping",
                        serde_json::json!({}),
                        None,
                        None,
                        Default::default(),
                    )
                    .await
                    .unwrap();
                assert_eq!(r.output.as_deref(), Some("pong 0"));
                full.push(t.elapsed().as_secs_f64() * 1e3);
            }
            (hosted, full)
        })
    };
    round_trips(&berth, &|n| n >= 2000); // warm-up (V8 optimizes the hot path)
    reg.publish("berth-update-heavy@2.0.0");
    let packages_dir = tmp.join("update-prepare/data/packages/.versions");
    let (mut base, mut during_all) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    let mut round_ratios = Vec::new();
    let mut took_all = Vec::new();
    let mut v1 = None;
    // Five preparations, each between two blocks without one: the figures pool them.
    for round in 0..5 {
        if let Some(v1) = v1 {
            // Back to 1.0.0, and 2.0.0's prepared folder removed: the next update prepares it
            // again (npm's own cache holds the tarballs; the extraction and linking are redone).
            rt.block_on(berth.rollback(&id, Some(v1))).unwrap();
            for e in std::fs::read_dir(&packages_dir).unwrap().flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with("berth-update-heavy@2.0.0")
                {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let before = round_trips(&berth, &|n| n >= 800);
        let preparing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let updater = {
            let (berth, id, preparing) = (berth.clone(), id.clone(), preparing.clone());
            rt.spawn(async move {
                // Sampling stops when the preparation does (the reload after it runs in the
                // plugin's own host, not the measured one's).
                let watch = {
                    let (berth, id, preparing) = (berth.clone(), id.clone(), preparing.clone());
                    tokio::spawn(async move {
                        let mut seen = false;
                        loop {
                            let stage = berth
                                .status()
                                .sources
                                .iter()
                                .find(|s| s.id == id)
                                .and_then(|s| {
                                    s.lifecycle.updates.as_ref()?.progress.as_ref().map(|p| {
                                        serde_json::to_value(p).unwrap()["stage"]
                                            .as_str()
                                            .unwrap_or("")
                                            .to_string()
                                    })
                                });
                            match stage.as_deref() {
                                Some("preparing") => seen = true,
                                _ if seen => break,
                                _ => {}
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        preparing.store(false, std::sync::atomic::Ordering::Relaxed);
                    })
                };
                let t = Instant::now();
                // 2.0.0 loads its dependencies by computed names: the person allows that growth.
                let r = berth.update(&id, true).await;
                let took = t.elapsed();
                preparing.store(false, std::sync::atomic::Ordering::Relaxed);
                watch.abort();
                (r, took)
            })
        };
        let during = {
            let preparing = preparing.clone();
            round_trips(&berth, &move |_| {
                !preparing.load(std::sync::atomic::Ordering::Relaxed)
            })
        };
        let (outcome, took) = rt.block_on(updater).unwrap();
        assert!(
            matches!(outcome, Ok(berth_runtime::updates::Outcome::Updated { .. })),
            "{outcome:?}"
        );
        took_all.push(took.as_secs_f64() * 1e3);
        let after = round_trips(&berth, &|n| n >= 800);
        if v1.is_none() {
            v1 = berth
                .versions(&id)
                .unwrap()
                .iter()
                .find(|v| v.version.as_deref() == Some("1.0.0"))
                .map(|v| v.id);
        }
        let mut b: Vec<f64> = before.0.iter().chain(after.0.iter()).copied().collect();
        let mut d = during.0.clone();
        round_ratios.push(pct(&mut d, 0.99) / pct(&mut b, 0.99));
        eprintln!(
            "prepare round {round}: {:.0} ms, {} round trips during it",
            took.as_secs_f64() * 1e3,
            during.0.len()
        );
        base.0.extend(before.0.iter().chain(after.0.iter()));
        base.1.extend(before.1.iter().chain(after.1.iter()));
        during_all.0.extend(during.0);
        during_all.1.extend(during.1);
    }
    // The floor: the same install by npm alone, at the same background priority, with no
    // Berth code in it (what this machine does to the round trip whoever runs npm).
    let mut floor_ratios = Vec::new();
    let mut floor_during = Vec::new();
    for round in 0..5 {
        let dir = tmp.join(format!("update-prepare/floor-{round}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("package.json"),
            "{\"name\":\"floor\",\"private\":true}",
        )
        .unwrap();
        let before = round_trips(&berth, &|n| n >= 800);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let npm = {
            let done = done.clone();
            std::thread::spawn(move || {
                // The same background priority as Berth's own npm runs (deps.rs).
                let mut cmd = Command::new("nice");
                cmd.args(["-n", "10", "ionice", "-c2", "-n7", "npm"])
                    .args([
                        "install",
                        "--ignore-scripts",
                        "--no-audit",
                        "--no-fund",
                        "--no-update-notifier",
                        "--save-exact",
                        "--",
                        "berth-update-heavy@2.0.0",
                    ])
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                assert!(cmd.status().unwrap().success());
                done.store(true, std::sync::atomic::Ordering::Relaxed);
            })
        };
        let during = {
            let done = done.clone();
            round_trips(&berth, &move |_| {
                done.load(std::sync::atomic::Ordering::Relaxed)
            })
        };
        npm.join().unwrap();
        let after = round_trips(&berth, &|n| n >= 800);
        let mut b: Vec<f64> = before.0.iter().chain(after.0.iter()).copied().collect();
        let mut d = during.0.clone();
        floor_ratios.push(pct(&mut d, 0.99) / pct(&mut b, 0.99));
        floor_during.extend(during.0);
    }
    f.print(
        "prepare_floor_npm_alone_host_round_trip_p99_ratio_round_median",
        pct(&mut floor_ratios.clone(), 0.5),
        "x",
        None,
    );
    let packages = berth.versions(&id).unwrap()[0].packages;
    f.print(
        "prepare_packages",
        packages as f64,
        "packages",
        Some((50.0, false)),
    );
    f.print("prepare_took_p50", pct(&mut took_all, 0.5), "ms", None);
    let mut report =
        |what: &str, unit: &str, mut base: Vec<f64>, mut during: Vec<f64>, target: bool| {
            let (b50, b99) = (pct(&mut base, 0.5), pct(&mut base, 0.99));
            let (d50, d99) = (pct(&mut during, 0.5), pct(&mut during, 0.99));
            f.print(&format!("prepare_{what}_baseline_p50"), b50, unit, None);
            f.print(&format!("prepare_{what}_during_p50"), d50, unit, None);
            f.print(
                &format!("prepare_{what}_p50_ratio"),
                d50 / b50,
                "x",
                target.then_some((1.10, true)),
            );
            f.print(&format!("prepare_{what}_baseline_p99"), b99, unit, None);
            f.print(&format!("prepare_{what}_during_p99"), d99, unit, None);
            f.print(
                &format!("prepare_{what}_p99_ratio"),
                d99 / b99,
                "x",
                target.then_some((1.10, true)),
            );
        };
    report("host_round_trip", "us", base.0, during_all.0, true);
    report("invoke", "ms", base.1, during_all.1, false);
    let (berth_median, floor_median) = (pct(&mut round_ratios, 0.5), pct(&mut floor_ratios, 0.5));
    f.print(
        "prepare_host_round_trip_p99_ratio_round_median",
        berth_median,
        "x",
        None,
    );
    // What Berth's preparation adds to the tail beyond npm's own effect on this machine.
    f.print(
        "prepare_host_round_trip_p99_vs_npm_alone",
        berth_median / floor_median,
        "x",
        None,
    );
    rt.block_on(berth.shutdown_hosts());
}
