//! `berth-bench`: measures Berth's performance targets (DESIGN.md) and prints one
//! `name value unit` line per figure. `--check` exits 1 when a target is missed; `--only
//! hosts,chain` runs those sections alone (an unknown name exits 2, listing the known ones).
//! Build it with `--release` for figures worth quoting (`scripts/bench` does).
//!
//! The host round trip is sampled in blocks alternating with its two baselines on the same
//! runtime: the bare JSON-line echo of the target, and the protocol's floor (frames over a Unix
//! socket, an ack on receipt, the answer from a promise, no Berth code). On a shared VM where
//! a process pair's placement on the cores swings results by 4×, `taskset -c 1` gives stable
//! one-core figures (docs/performance.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_discovery::{OpencodeEnv, Scanner};
use berth_protocol::CallKind;
use berth_runtime::catalog::BenchHost;
use berth_runtime::host::CallOptions;
use berth_runtime::runtimes::RuntimeKind;
use berth_runtime::{Berth, BerthOptions, Decision};

#[path = "bench/builtins.rs"]
mod builtins;
#[path = "bench/mcp.rs"]
mod mcp;
#[path = "bench/updates.rs"]
mod updates;

struct Figures {
    check: bool,
    /// The sections asked for (`--only`), or all.
    only: Option<Vec<String>>,
    missed: Vec<String>,
}

/// The sections `--only` can name, in the order they run.
const SECTIONS: &[&str] = &[
    "scan",
    "watch",
    "hosts",
    "restricted",
    "memory",
    "chain",
    "receipts",
    "status",
    "updates",
    "mcp",
    "builtins",
];

impl Figures {
    fn wants(&self, section: &str) -> bool {
        assert!(SECTIONS.contains(&section), "{section} is not in SECTIONS");
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|s| s == section))
    }

    fn print(&mut self, name: &str, value: f64, unit: &str, target: Option<(f64, bool)>) {
        println!("{name} {value:.3} {unit}");
        if let Some((limit, lower_is_better)) = target {
            let ok = if lower_is_better {
                value <= limit
            } else {
                value >= limit
            };
            if !ok {
                self.missed.push(format!(
                    "{name} {value:.3} {unit} (target {} {limit})",
                    if lower_is_better { "≤" } else { "≥" }
                ));
            }
        }
    }
}

fn pct(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn scratch(root: &Path, tools: usize) -> (OpencodeEnv, PathBuf) {
    let home = root.join("home");
    let project = root.join("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let dir = project.join(".opencode/tools");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    for i in 0..tools {
        std::fs::write(
            dir.join(format!("t{i:04}.ts")),
            format!("import {{ tool }} from '@opencode-ai/plugin'\nexport default tool({{ description: 'echo {i}', args: {{ text: tool.schema.string() }}, async execute(a) {{ return a.text }} }})\n"),
        )
        .unwrap();
    }
    let env = OpencodeEnv {
        home,
        cwd: project.clone(),
        managed_config_dir: root.join("managed"),
        ..OpencodeEnv::default()
    };
    (env, project)
}

/// The set-up's local copy of the host dependencies (linked instead of downloaded).
fn host_deps_seed() -> Option<PathBuf> {
    std::env::current_exe()
        .unwrap()
        .ancestors()
        .map(|a| a.join(".tools/host-deps"))
        .find(|p| p.is_dir())
}

/// Berth on `project`, its host dependencies linked into `data` first (not timed).
fn open_prepared(data: PathBuf, env: OpencodeEnv, project: PathBuf) -> Berth {
    berth_runtime::deps::prepare_host_deps(&data, host_deps_seed().as_deref()).unwrap();
    Berth::open(BerthOptions {
        data_dir: data,
        project,
        env,
        log_file: None,
    })
    .unwrap()
}

/// Writes `n` plugin files `<prefix>NN.ts` into the project, each from `source(i)`.
fn write_plugins(project: &Path, prefix: &str, n: usize, source: impl Fn(usize) -> String) {
    let plugins = project.join(".opencode/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for i in 0..n {
        std::fs::write(plugins.join(format!("{prefix}{i:02}.ts")), source(i)).unwrap();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let check = args.iter().any(|a| a == "--check");
    // `--only hosts,chain`: those sections alone (SECTIONS); a name it does not know is a
    // usage error, not a run that measures nothing.
    let only: Option<Vec<String>> = args.iter().position(|a| a == "--only").map(|i| {
        let names: Vec<String> = args
            .get(i + 1)
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        let unknown: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !SECTIONS.contains(n))
            .collect();
        if names.is_empty() || !unknown.is_empty() {
            let what = if unknown.is_empty() {
                "needs a comma-separated list of sections".to_string()
            } else {
                format!("does not know {}", unknown.join(", "))
            };
            eprintln!(
                "berth-bench: --only {what}; the sections are {}",
                SECTIONS.join(", ")
            );
            std::process::exit(2);
        }
        names
    });
    let mut f = Figures {
        check,
        only,
        missed: vec![],
    };
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // --- scan of 1,000 tool files --------------------------------------------------------
    if f.wants("scan") {
        let (env, project) = scratch(&tmp.path().join("scan"), 1000);
        let mut cold = Vec::new();
        let mut warm = Vec::new();
        for _ in 0..5 {
            let mut scanner = Scanner::new();
            let t = Instant::now();
            let d = scanner.scan(&env, &project);
            cold.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(d.sources.len(), 1000);
            let t = Instant::now();
            scanner.scan(&env, &project);
            warm.push(t.elapsed().as_secs_f64() * 1e3);
        }
        f.print(
            "scan_1000_tools_cold_p50",
            pct(&mut cold, 0.5),
            "ms",
            Some((200.0, true)),
        );
        f.print(
            "scan_1000_tools_warm_p50",
            pct(&mut warm, 0.5),
            "ms",
            Some((50.0, true)),
        );
    }
    // --- file change → snapshot event --------------------------------------------------------
    if f.wants("watch") {
        let (env, project) = scratch(&tmp.path().join("watch"), 0);
        let berth = Berth::open(BerthOptions {
            data_dir: tmp.path().join("watch-data"),
            project: project.clone(),
            env,
            log_file: None,
        })
        .unwrap();
        let mut lat = Vec::new();
        {
            let _w = berth_runtime::watch::watch(berth.clone()).unwrap();
            let mut rx = berth.subscribe();
            for i in 0..10 {
                let file = project.join(format!(".opencode/tools/w{i}.ts"));
                let t = Instant::now();
                std::fs::write(&file, "export default {}\n").unwrap();
                rt.block_on(async {
                    loop {
                        let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                            .await
                            .expect("event")
                            .unwrap();
                        if ev
                            .snapshot
                            .sources
                            .iter()
                            .any(|s| s.entry.ends_with(&format!("w{i}.ts")))
                        {
                            break;
                        }
                    }
                });
                lat.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        f.print(
            "file_change_to_event_p50",
            pct(&mut lat, 0.5),
            "ms",
            Some((300.0, true)),
        );
    }
    // --- hosts: approval → callable, round trips, full invoke ------------------------------
    if f.wants("hosts") {
        for backend in [RuntimeKind::Bun, RuntimeKind::Node] {
            let name = format!("{backend:?}").to_lowercase();
            let (env, project) = scratch(&tmp.path().join(format!("host-{name}")), 1);
            if backend == RuntimeKind::Node {
                // SAFETY: single-threaded at this point of the benchmark.
                unsafe { std::env::set_var("BERTH_BUN", "/nonexistent") };
            }
            let berth = Berth::open(BerthOptions {
                data_dir: tmp.path().join(format!("host-data-{name}")),
                project,
                env,
                log_file: None,
            })
            .unwrap();
            let target_cold = if backend == RuntimeKind::Bun {
                150.0
            } else {
                300.0
            };
            // Preparing the host's dependencies is a one-time install step per data dir (linked
            // from the set-up copy); it is measured on its own, not as part of the cold start.
            if backend == RuntimeKind::Bun {
                let seed = host_deps_seed();
                let t = Instant::now();
                berth_runtime::deps::prepare_host_deps(
                    &tmp.path().join("deps-probe"),
                    seed.as_deref(),
                )
                .unwrap();
                f.print(
                    "host_deps_prepare_from_local_copy",
                    t.elapsed().as_secs_f64() * 1e3,
                    "ms",
                    None,
                );
            }
            let seed = host_deps_seed();
            berth_runtime::deps::prepare_host_deps(
                &tmp.path().join(format!("host-data-{name}")),
                seed.as_deref(),
            )
            .unwrap();
            let t = Instant::now();
            berth.decide(None, Decision::Allow, "cli", false).unwrap();
            let r = rt
                .block_on(berth.invoke(
                    "t0000",
                    serde_json::json!({ "text": "hi" }),
                    None,
                    None,
                    Default::default(),
                ))
                .unwrap();
            assert_eq!(r.output.as_deref(), Some("hi"), "{r:?}");
            f.print(
                &format!("approval_to_tool_callable_cold_{name}"),
                t.elapsed().as_secs_f64() * 1e3,
                "ms",
                Some((target_cold, true)),
            );

            let host = rt.block_on(async { berth.host_for_bench(backend, BenchHost::Live).await });
            let instance = berth.status().sources[0].id.clone();
            // The host and the bare echo are sampled in alternating blocks, so drift on a shared
            // machine hits both alike. The calls run as a task on the runtime, as the app's and
            // `berth serve`'s calls do.
            let runtime = berth_runtime::runtimes::probe(backend).path.unwrap();
            let mut echo = Echo::spawn(&runtime);
            let mut floor =
                FramedEcho::spawn(&runtime, &tmp.path().join(format!("floor-{name}.sock")));
            let (mut rtt, mut bare, mut floored) = (Vec::new(), Vec::new(), Vec::new());
            for block in 0..18 {
                let keep = block >= 8; // warm-up blocks (V8 optimizes a hot path after thousands of calls)
                let host = host.clone();
                let instance = instance.clone();
                let samples = rt.block_on(async move {
                tokio::spawn(async move {
                    let mut samples = Vec::new();
                    for _ in 0..250 {
                        let body = serde_json::json!({ "tool": "t0000", "args": { "text": "x" }, "context": {} });
                        let t = Instant::now();
                        let r = host
                            .call(&instance, CallKind::Invoke, body, CallOptions::default())
                            .await;
                        assert!(r.is_ok(), "{r:?}");
                        samples.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    samples
                })
                .await
                .unwrap()
            });
                let echoed: Vec<f64> = (0..250).map(|_| echo.round_trip_us()).collect();
                let framed: Vec<f64> = (0..250).map(|_| floor.round_trip_us()).collect();
                if keep {
                    rtt.extend(samples);
                    bare.extend(echoed);
                    floored.extend(framed);
                }
            }
            let echo = pct(&mut bare, 0.5);
            f.print(
                &format!("host_round_trip_p50_{name}"),
                pct(&mut rtt, 0.5),
                "us",
                None,
            );
            f.print(
                &format!("host_round_trip_p99_{name}"),
                pct(&mut rtt, 0.99),
                "us",
                Some((1000.0, true)),
            );
            f.print(&format!("bare_json_echo_p50_{name}"), echo, "us", None);
            f.print(
                &format!("bare_json_echo_p99_{name}"),
                pct(&mut bare, 0.99),
                "us",
                None,
            );
            // What the protocol's own shape costs on this runtime, with no Berth code in it.
            f.print(
                &format!("framed_echo_with_ack_p50_{name}"),
                pct(&mut floored, 0.5),
                "us",
                None,
            );
            f.print(
                &format!("host_round_trip_vs_bare_echo_{name}"),
                pct(&mut rtt, 0.5) / echo,
                "ratio",
                Some((2.0, true)),
            );

            let mut full = {
                let berth = berth.clone();
                rt.block_on(async move {
                    tokio::spawn(async move {
                        let mut full = Vec::new();
                        for i in 0..2000 {
                            let t = Instant::now();
                            berth
                                .invoke(
                                    "t0000",
                                    serde_json::json!({ "text": "x" }),
                                    None,
                                    None,
                                    Default::default(),
                                )
                                .await
                                .unwrap();
                            if i >= 1000 {
                                full.push(t.elapsed().as_secs_f64() * 1e6);
                            }
                        }
                        full
                    })
                    .await
                    .unwrap()
                })
            };
            f.print(
                &format!("invoke_with_receipt_p50_{name}"),
                pct(&mut full, 0.5),
                "us",
                Some((300.0, true)),
            );
            f.print(
                &format!("invoke_with_receipt_p99_{name}"),
                pct(&mut full, 0.99),
                "us",
                Some((2000.0, true)),
            );
            f.print(
                &format!("host_rss_one_tool_{name}"),
                host.info().rss_bytes as f64 / 1048576.0,
                "MiB",
                None,
            );
            rt.block_on(berth.shutdown_hosts());
            unsafe { std::env::remove_var("BERTH_BUN") };
        }
    }
    // --- restricted mode: host start and warm round trip beside compatible, same run --------
    if f.wants("restricted") {
        let tier = berth_runtime::host::boundary::tier();
        match &tier {
            Ok(t) => eprintln!("restricted mode: tier {t:?}"),
            Err(why) => eprintln!("restricted mode: skipped, no OS boundary here: {why}"),
        }
        for backend in [RuntimeKind::Bun, RuntimeKind::Node]
            .into_iter()
            .filter(|_| tier.is_ok())
        {
            let name = format!("{backend:?}").to_lowercase();
            let (env, project) = scratch(&tmp.path().join(format!("restricted-{name}")), 2);
            if backend == RuntimeKind::Node {
                // SAFETY: single-threaded at this point of the benchmark.
                unsafe { std::env::set_var("BERTH_BUN", "/nonexistent") };
            }
            let berth = open_prepared(
                tmp.path().join(format!("restricted-data-{name}")),
                env,
                project,
            );
            let ids: Vec<String> = berth
                .status()
                .sources
                .iter()
                .map(|s| s.id.clone())
                .collect();
            let (plain_id, boxed_id) = (ids[0].clone(), ids[1].clone());
            berth
                .set_policy(
                    &format!("mode.{boxed_id}"),
                    Some(serde_json::json!("restricted")),
                    "bench",
                )
                .unwrap();
            berth.decide(None, Decision::Allow, "cli", false).unwrap();
            let act = rt.block_on(berth.activate());
            assert!(act.problems.is_empty(), "{:?}", act.problems);
            // Start: a fresh host to its hello, alternating compatible and restricted.
            let (mut start_plain, mut start_boxed) = (Vec::new(), Vec::new());
            for _ in 0..10 {
                let t = Instant::now();
                rt.block_on(berth.host_for_bench(backend, BenchHost::Fresh));
                start_plain.push(t.elapsed().as_secs_f64() * 1e3);
                let t = Instant::now();
                rt.block_on(berth.host_for_bench(
                    backend,
                    BenchHost::Restricted {
                        source: &boxed_id,
                        fresh: true,
                    },
                ));
                start_boxed.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let (p, b) = (pct(&mut start_plain, 0.5), pct(&mut start_boxed, 0.5));
            f.print(&format!("host_start_p50_compatible_{name}"), p, "ms", None);
            f.print(&format!("host_start_p50_restricted_{name}"), b, "ms", None);
            f.print(
                &format!("host_start_restricted_extra_{name}"),
                b - p,
                "ms",
                Some((50.0, true)),
            );
            // Warm round trips, in alternating blocks on both hosts (loaded again after the
            // starts above).
            rt.block_on(berth.activate());
            let plain = rt.block_on(berth.host_for_bench(backend, BenchHost::Live));
            let boxed = rt.block_on(berth.host_for_bench(
                backend,
                BenchHost::Restricted {
                    source: &boxed_id,
                    fresh: false,
                },
            ));
            let (mut rtt_plain, mut rtt_boxed) = (Vec::new(), Vec::new());
            for block in 0..14 {
                for (host, id, into) in [
                    (plain.clone(), plain_id.clone(), &mut rtt_plain),
                    (boxed.clone(), boxed_id.clone(), &mut rtt_boxed),
                ] {
                    let tool = if id == plain_id { "t0000" } else { "t0001" };
                    let samples = rt.block_on(async move {
                        tokio::spawn(async move {
                            let mut samples = Vec::new();
                            for _ in 0..250 {
                                let body = serde_json::json!({ "tool": tool, "args": { "text": "x" }, "context": {} });
                                let t = Instant::now();
                                let r = host.call(&id, CallKind::Invoke, body, CallOptions::default()).await;
                                assert!(r.is_ok(), "{r:?}");
                                samples.push(t.elapsed().as_secs_f64() * 1e6);
                            }
                            samples
                        })
                        .await
                        .unwrap()
                    });
                    if block >= 4 {
                        into.extend(samples);
                    }
                }
            }
            let (p, b) = (pct(&mut rtt_plain, 0.5), pct(&mut rtt_boxed, 0.5));
            f.print(&format!("round_trip_p50_compatible_{name}"), p, "us", None);
            f.print(&format!("round_trip_p50_restricted_{name}"), b, "us", None);
            f.print(
                &format!("round_trip_restricted_vs_compatible_{name}"),
                b / p,
                "ratio",
                Some((1.1, true)),
            );
            f.print(
                &format!("host_rss_restricted_one_tool_{name}"),
                boxed.info().rss_bytes as f64 / 1048576.0,
                "MiB",
                None,
            );
            rt.block_on(berth.shutdown_hosts());
            unsafe { std::env::remove_var("BERTH_BUN") };
        }
    }
    // --- memory: 20 plugins + 50 standalone tools in the hosts ------------------------------
    if f.wants("memory") {
        {
            let (env, project) = scratch(&tmp.path().join("memory"), 50);
            write_plugins(&project, "p", 20, |i| {
                format!("import {{ tool }} from '@opencode-ai/plugin'\nexport default {{ id: 'p{i}', server: async () => ({{ 'chat.params': async (_i, o) => {{ o.options.p{i} = true }}, tool: {{ p{i}_echo: tool({{ description: 'echo', args: {{ text: tool.schema.string() }}, async execute(a) {{ return a.text }} }}) }} }}) }}\n")
            });
            let berth = open_prepared(tmp.path().join("memory-data"), env, project);
            let t = Instant::now();
            for _ in 0..2 {
                berth.decide(None, Decision::Allow, "cli", false).unwrap();
                rt.block_on(berth.activate());
            }
            let loaded = berth.status().tools.len();
            assert_eq!(loaded, 70, "50 tool files + 20 plugin tools");
            f.print(
                "activate_20_plugins_50_tools",
                t.elapsed().as_secs_f64() * 1e3,
                "ms",
                None,
            );
            let rss: u64 = berth.status().hosts.iter().map(|h| h.rss_bytes).sum();
            f.print(
                "rss_hosts_20_plugins_50_tools",
                rss as f64 / 1048576.0,
                "MiB",
                Some((300.0, true)),
            );
            // The same with 4 of the plugins restricted (each alone in a host inside its
            // boundary: a restricted source never shares a process).
            if berth_runtime::host::boundary::tier().is_ok() {
                let plugins: Vec<String> = berth
                    .status()
                    .sources
                    .iter()
                    .filter(|s| s.kind == berth_discovery::SourceKind::FilePlugin)
                    .take(4)
                    .map(|s| s.id.clone())
                    .collect();
                for id in &plugins {
                    berth
                        .set_policy(
                            &format!("mode.{id}"),
                            Some(serde_json::json!("restricted")),
                            "bench",
                        )
                        .unwrap();
                }
                let act = rt.block_on(berth.activate());
                assert!(act.problems.is_empty(), "{:?}", act.problems);
                assert_eq!(berth.status().tools.len(), 70);
                let hosts = berth.status().hosts.clone();
                let rss: u64 = hosts.iter().map(|h| h.rss_bytes).sum();
                f.print(
                    "hosts_with_4_restricted_plugins",
                    hosts.len() as f64,
                    "hosts",
                    None,
                );
                f.print(
                    "rss_hosts_20_plugins_50_tools_4_restricted",
                    rss as f64 / 1048576.0,
                    "MiB",
                    Some((300.0, true)),
                );
            }
            rt.block_on(berth.shutdown_hosts());
        }
    }
    // --- one hook through a chain of 10 plugins ---------------------------------------------
    if f.wants("chain") {
        for backend in [RuntimeKind::Bun, RuntimeKind::Node] {
            let name = format!("{backend:?}").to_lowercase();
            let (env, project) = scratch(&tmp.path().join(format!("chain-{name}")), 0);
            write_plugins(&project, "c", 10, |i| {
                format!("export default {{ id: 'c{i}', server: async () => ({{ 'chat.params': async (_i, o) => {{ o.options.c{i} = (o.options.c{i} ?? 0) + 1 }} }}) }}\n")
            });
            if backend == RuntimeKind::Node {
                // SAFETY: single-threaded at this point of the benchmark.
                unsafe { std::env::set_var("BERTH_BUN", "/nonexistent") };
            }
            let berth = open_prepared(tmp.path().join(format!("chain-data-{name}")), env, project);
            for _ in 0..2 {
                berth.decide(None, Decision::Allow, "cli", false).unwrap();
                rt.block_on(berth.activate());
            }
            let input =
                serde_json::json!({ "sessionID": "s", "agent": "build", "model": { "id": "m" } });
            let output = serde_json::json!({ "temperature": 0.2, "topP": 1, "options": {} });
            let first = rt
                .block_on(berth.run_active_hook("chat.params", input.clone(), output.clone()))
                .unwrap();
            assert_eq!(
                first["options"].as_object().map(|o| o.len()),
                Some(10),
                "{first}"
            );
            let mut samples = Vec::with_capacity(2000);
            for i in 0..2200 {
                let t = Instant::now();
                rt.block_on(berth.run_active_hook("chat.params", input.clone(), output.clone()))
                    .unwrap();
                if i >= 200 {
                    samples.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
            f.print(
                &format!("hook_chain_10_plugins_p50_{name}"),
                pct(&mut samples, 0.5),
                "us",
                Some((300.0, true)),
            );
            f.print(
                &format!("hook_chain_10_plugins_p99_{name}"),
                pct(&mut samples, 0.99),
                "us",
                None,
            );
            rt.block_on(berth.shutdown_hosts());
            if backend == RuntimeKind::Node {
                // SAFETY: single-threaded at this point of the benchmark.
                unsafe { std::env::remove_var("BERTH_BUN") };
            }
        }
    }
    // --- receipts --------------------------------------------------------------------------
    // A receipt's whole life as a call writes it (catalog's invoke): accepted before the call,
    // running once the host has the tool, finished with the answer (one UPDATE … RETURNING).
    // The target's 5,000 writes/s is read as 5,000 receipts written through per second, which
    // is three statements each.
    if f.wants("receipts") {
        let opened = berth_store::Store::open(&tmp.path().join("receipts.db")).unwrap();
        let store = &opened.store;
        let metadata = serde_json::json!({ "truncated": false });
        let n = 5000;
        let t = Instant::now();
        for i in 0..n {
            let id = format!("rcpt_{i:020}");
            store
                .accept_receipt(&berth_store::NewReceipt {
                    receipt_id: &id,
                    idempotency_key: None,
                    tool: "t",
                    source_id: "s",
                    args_digest: "sha256:0",
                    owner_pid: 1,
                    owner_start: 1,
                })
                .unwrap();
            store.mark_receipt_running(&id).unwrap();
            let finished = store
                .finish_receipt(
                    &id,
                    &berth_store::Finish {
                        output: Some("ok"),
                        metadata: Some(&metadata),
                        ..berth_store::Finish::new(berth_store::ReceiptStatus::Completed)
                    },
                )
                .unwrap();
            assert!(finished.is_some(), "receipt {id} was not open");
        }
        f.print(
            "receipt_lifecycles_per_s",
            n as f64 / t.elapsed().as_secs_f64(),
            "receipts/s",
            Some((5000.0, false)),
        );
    }
    // --- cold start of `berth status` -----------------------------------------------------
    if f.wants("status") {
        let exe = std::env::current_exe().unwrap().with_file_name("berth");
        if exe.exists() {
            let (env, project) = scratch(&tmp.path().join("status"), 10);
            let mut walls = Vec::new();
            for _ in 0..7 {
                let t = Instant::now();
                let ok = Command::new(&exe)
                    .args(["status", "--json", "--data-dir"])
                    .arg(tmp.path().join("status-data"))
                    .arg("--project")
                    .arg(&project)
                    .env("HOME", &env.home)
                    .stdout(Stdio::null())
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false);
                assert!(ok);
                walls.push(t.elapsed().as_secs_f64() * 1e3);
            }
            f.print(
                "berth_status_cold_start_p50",
                pct(&mut walls, 0.5),
                "ms",
                None,
            );
        }
    }

    // --- updates: downtime of a switch, npm preparing beside a warm source -----------------
    if f.wants("updates") {
        updates::run(&mut f, tmp.path(), &rt);
    }
    // --- MCP: tools/call through `berth mcp` vs in-process invoke, tools/list of 1,000 ------
    if f.wants("mcp") {
        mcp::run(&mut f, tmp.path(), &rt);
    }
    // --- built-ins: grep over this repository's tree vs rg, interleaved --------------------
    if f.wants("builtins") {
        builtins::run(&mut f);
    }

    if f.check && !f.missed.is_empty() {
        for m in &f.missed {
            eprintln!("missed: {m}");
        }
        std::process::exit(1);
    }
}

/// A bare JSON-line echo on the same runtime over stdin/stdout: the baseline round trip.
struct Echo {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    out: std::io::BufReader<std::process::ChildStdout>,
    line: String,
}

impl Echo {
    fn spawn(runtime: &Path) -> Echo {
        let script = "process.stdin.setEncoding('utf8');let b='';process.stdin.on('data',d=>{b+=d;let i;while((i=b.indexOf('\\n'))>=0){const l=b.slice(0,i);b=b.slice(i+1);process.stdout.write(JSON.stringify(JSON.parse(l))+'\\n')}})";
        let mut child = Command::new(runtime)
            .arg("-e")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        Echo {
            child,
            stdin,
            out,
            line: String::new(),
        }
    }

    fn round_trip_us(&mut self) -> f64 {
        use std::io::{BufRead, Write};
        let t = Instant::now();
        self.stdin
            .write_all(b"{\"tool\":\"t0000\",\"args\":{\"text\":\"x\"}}\n")
            .unwrap();
        self.line.clear();
        self.out.read_line(&mut self.line).unwrap();
        t.elapsed().as_secs_f64() * 1e6
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The protocol's floor on a runtime: length-prefixed JSON frames over a Unix socket, an ack
/// frame on receipt and the answer from a promise, as the host does, but with no Berth code.
struct FramedEcho {
    child: std::process::Child,
    sock: std::os::unix::net::UnixStream,
    buf: Vec<u8>,
}

impl FramedEcho {
    fn spawn(runtime: &Path, path: &Path) -> FramedEcho {
        let script = "const s=require('net').createConnection(process.env.BERTH_BENCH_SOCK);s.setNoDelay?.(true);let b=Buffer.alloc(0);function send(m){const j=JSON.stringify(m);const f=Buffer.allocUnsafe(4+Buffer.byteLength(j));f.writeUInt32BE(f.length-4,0);f.write(j,4);s.write(f)}s.on('data',c=>{b=b.length?Buffer.concat([b,c]):c;for(;;){if(b.length<4)return;const n=b.readUInt32BE(0);if(b.length<4+n)return;const m=JSON.parse(b.subarray(4,4+n).toString('utf8'));b=b.subarray(4+n);send({t:'ack',v:1,id:m.id});Promise.resolve(m.body).then(v=>send({t:'res',v:1,id:m.id,ok:true,value:v,error:null}))}})";
        let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
        let child = Command::new(runtime)
            .arg("-e")
            .arg(script)
            .env("BERTH_BENCH_SOCK", path)
            .spawn()
            .unwrap();
        let (sock, _) = listener.accept().unwrap();
        FramedEcho {
            child,
            sock,
            buf: vec![0; 64 * 1024],
        }
    }

    fn round_trip_us(&mut self) -> f64 {
        use std::io::{Read, Write};
        let body = br#"{"t":"req","v":1,"id":1,"kind":"invoke","body":{"tool":"t0000","args":{"text":"x"},"context":{}}}"#;
        let t = Instant::now();
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.sock.write_all(&frame).unwrap();
        for _ in 0..2 {
            let mut len = [0u8; 4];
            self.sock.read_exact(&mut len).unwrap();
            let n = u32::from_be_bytes(len) as usize;
            self.sock.read_exact(&mut self.buf[..n]).unwrap();
        }
        t.elapsed().as_secs_f64() * 1e6
    }
}

impl Drop for FramedEcho {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
