//! `berth-bench --only mcp`: Berth served over MCP (#17), measured from a real MCP client
//! (`berth-mcp-client`, the connection Berth itself uses for MCP servers) that starts
//! `berth mcp` as a child on stdio, as an agent does.
//! - `mcp_tools_call_*`: a warm `tools/call` of an approved tool file that echoes its argument,
//!   in blocks alternating with the same tool's in-process `Berth::invoke` (receipts in both:
//!   `berth mcp` calls through `invoke`; each with a data dir of its own), the ratio of the
//!   p50s, and what `berth mcp` adds to `invoke` counted in bare MCP hops (`mcp_floor_*`).
//! - `mcp_tools_list_1000_*`: `tools/list` of a catalog of 1,000 approved tool files.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_mcp_client::{Connection, Target};
use berth_runtime::runtimes::RuntimeKind;
use berth_runtime::Decision;

use super::{open_prepared, pct, scratch, Figures};

/// `berth mcp` on `data`/`project` as the client of an agent starts it, with the scratch
/// project's home and managed config folder (the same world the in-process Berth sees).
fn berth_mcp(exe: &Path, root: &Path, data: &Path, project: &Path) -> Target {
    let home = root.join("home");
    let path = |p: &Path| p.display().to_string();
    Target::Local {
        program: path(exe),
        args: vec![
            "mcp".into(),
            "--data-dir".into(),
            path(data),
            "--project".into(),
            path(project),
        ],
        environment: vec![
            ("HOME".into(), path(&home)),
            ("XDG_CONFIG_HOME".into(), path(&home.join(".config"))),
            ("XDG_DATA_HOME".into(), path(&home.join(".local/share"))),
            ("XDG_CACHE_HOME".into(), path(&home.join(".cache"))),
            (
                "OPENCODE_TEST_MANAGED_CONFIG_DIR".into(),
                path(&root.join("managed")),
            ),
        ]
        .into_iter()
        // Where the host code is, when the bench was told (else both find it above their
        // executable).
        .chain(
            ["BERTH_HOST_DIR", "TOKIO_WORKER_THREADS"]
                .into_iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v))),
        )
        .collect(),
        cwd: project.to_path_buf(),
    }
}

pub fn run(f: &mut Figures, tmp: &Path, rt: &tokio::runtime::Runtime) {
    let exe = std::env::current_exe().unwrap().with_file_name("berth");
    if !exe.exists() {
        eprintln!(
            "mcp: skipped, no `berth` binary beside berth-bench (build both: cargo build --release -p berth-cli)"
        );
        return;
    }
    call_vs_invoke(f, tmp, rt, &exe);
    list_1000(f, tmp, rt, &exe);
}

/// A minimal MCP server over stdio (newline-delimited JSON-RPC): the handshake, and
/// `tools/call` answered with its `text` argument. No Berth code: the MCP hop's floor.
const FLOOR_SERVER: &str = "let b='';process.stdin.setEncoding('utf8');process.stdin.on('data',d=>{b+=d;let i;while((i=b.indexOf('\\n'))>=0){const m=JSON.parse(b.slice(0,i));b=b.slice(i+1);if(m.id===undefined)continue;let result;if(m.method==='initialize')result={protocolVersion:m.params.protocolVersion,capabilities:{tools:{}},serverInfo:{name:'floor',version:'0'}};else if(m.method==='tools/call')result={content:[{type:'text',text:m.params.arguments.text}],isError:false};else result={};process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,result})+'\\n')}})";

/// `n` warm `tools/call`s of `t0000` through `conn`, as a task on the runtime (µs each).
fn calls(rt: &tokio::runtime::Runtime, conn: &Arc<Connection>, n: usize) -> Vec<f64> {
    let conn = conn.clone();
    rt.block_on(async move {
        tokio::spawn(async move {
            let cancel = Arc::new(tokio::sync::Notify::new());
            let mut samples = Vec::new();
            for _ in 0..n {
                let t = Instant::now();
                let r = conn
                    .call(
                        "t0000",
                        serde_json::json!({ "text": "x" }),
                        Duration::from_secs(10),
                        cancel.clone(),
                    )
                    .await
                    .unwrap();
                samples.push(t.elapsed().as_secs_f64() * 1e6);
                // The tool's output first (Berth adds the receipt's id as a block of its own).
                assert!(!r.is_error && r.content[0]["text"] == "x", "{r:?}");
            }
            samples
        })
        .await
        .unwrap()
    })
}

fn call_vs_invoke(f: &mut Figures, tmp: &Path, rt: &tokio::runtime::Runtime, exe: &Path) {
    let root = tmp.join("mcp");
    let data = tmp.join("mcp-data");
    let (env, project) = scratch(&root, 1);
    // `berth mcp` gets a data dir of its own, approved here first: it watches its data dir
    // (for other processes' decisions), so the in-process Berth's receipts written there would
    // wake its watch and slow the very invoke it is compared with (pinned: 340–360 µs instead
    // of 200–220).
    let approve = open_prepared(data.clone(), env.clone(), project.clone());
    approve.decide(None, Decision::Allow, "cli", false).unwrap();
    drop(approve);
    let berth = open_prepared(tmp.join("mcp-invoke-data"), env, project.clone());
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

    let target = berth_mcp(exe, &root, &data, &project);
    let conn = Arc::new(
        rt.block_on(Connection::connect(
            "berth",
            &target,
            Duration::from_secs(30),
        ))
        .unwrap(),
    );
    // Both paths run as tasks on the runtime, in alternating blocks: drift on a shared machine
    // falls on both alike.
    let bun = berth_runtime::runtimes::probe(RuntimeKind::Bun)
        .path
        .unwrap();
    let floor_target = Target::Local {
        program: bun.display().to_string(),
        args: vec!["-e".into(), FLOOR_SERVER.into()],
        environment: vec![],
        cwd: project.clone(),
    };
    let floor = Arc::new(
        rt.block_on(Connection::connect(
            "floor",
            &floor_target,
            Duration::from_secs(30),
        ))
        .unwrap(),
    );
    let (mut mcp, mut invoke, mut floored) = (Vec::new(), Vec::new(), Vec::new());
    for block in 0..14 {
        let keep = block >= 4; // warm-up blocks (V8 optimizes the host's hot path)
        let called = calls(rt, &conn, 200);
        let bare = calls(rt, &floor, 200);
        let berth = berth.clone();
        let invoked = rt.block_on(async move {
            tokio::spawn(async move {
                let mut samples = Vec::new();
                for _ in 0..200 {
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
                    samples.push(t.elapsed().as_secs_f64() * 1e6);
                }
                samples
            })
            .await
            .unwrap()
        });
        if keep {
            mcp.extend(called);
            invoke.extend(invoked);
            floored.extend(bare);
        }
    }
    let (m, i) = (pct(&mut mcp, 0.5), pct(&mut invoke, 0.5));
    let floor_p50 = pct(&mut floored, 0.5);
    f.print("mcp_tools_call_p50", m, "us", None);
    f.print("mcp_tools_call_p99", pct(&mut mcp, 0.99), "us", None);
    f.print("invoke_same_tool_p50", i, "us", None);
    f.print("invoke_same_tool_p99", pct(&mut invoke, 0.99), "us", None);
    f.print("mcp_floor_tools_call_p50", floor_p50, "us", None);
    f.print(
        "mcp_floor_tools_call_p99",
        pct(&mut floored, 0.99),
        "us",
        None,
    );
    f.print(
        "mcp_tools_call_vs_invoke",
        m / i,
        "ratio",
        Some((1.5, true)),
    );
    // What `berth mcp` adds to `invoke`, in bare MCP hops (the floor above: the same client and
    // stdio pipes to a server that only echoes): the part of the cost that is Berth's, whatever
    // the machine's pipe and wake-up costs are (the target proposed in #17's note).
    f.print(
        "mcp_added_over_invoke_in_floors",
        (m - i) / floor_p50,
        "ratio",
        Some((2.0, true)),
    );
    rt.block_on(async {
        conn.close().await;
        floor.close().await;
        berth.shutdown_hosts().await;
    });
}

fn list_1000(f: &mut Figures, tmp: &Path, rt: &tokio::runtime::Runtime, exe: &Path) {
    let root = tmp.join("mcp-list");
    let data = tmp.join("mcp-list-data");
    let (env, project) = scratch(&root, 1000);
    let berth = open_prepared(data.clone(), env, project.clone());
    berth.decide(None, Decision::Allow, "cli", false).unwrap();
    drop(berth);

    // `berth mcp` activates what is approved before it answers the handshake.
    let target = berth_mcp(exe, &root, &data, &project);
    let t = Instant::now();
    let conn = rt
        .block_on(Connection::connect(
            "berth",
            &target,
            Duration::from_secs(120),
        ))
        .unwrap();
    f.print(
        "mcp_start_to_handshake_1000_tools",
        t.elapsed().as_secs_f64() * 1e3,
        "ms",
        None,
    );
    let mut lists = Vec::new();
    rt.block_on(async {
        for i in 0..40 {
            let t = Instant::now();
            let tools = conn.list_tools().await.unwrap();
            if i >= 5 {
                lists.push(t.elapsed().as_secs_f64() * 1e3);
            }
            assert_eq!(tools.len(), 1000, "the 1,000 approved tool files");
        }
        conn.close().await;
    });
    f.print(
        "mcp_tools_list_1000_p50",
        pct(&mut lists, 0.5),
        "ms",
        Some((20.0, true)),
    );
    f.print("mcp_tools_list_1000_p99", pct(&mut lists, 0.99), "ms", None);
}
