//! OpenCode V2 plugins in Berth (ledger D-044), on Bun and on Node: recognised before they run
//! (`capabilities.generation`), set up through the V2 adapter with Berth's own
//! `@opencode/plugin`, their tools in the catalog with their JSON Schemas and called through
//! receipts, their `execute.before` refusing (`Tool.Error`) and rewriting calls, `ctx.storage`
//! kept in Berth's store, unsupported context parts failing with a stable `unsupported` that
//! names the method, and their cleanup run when Berth unloads them. A `{ id, server, setup }`
//! module runs its V1 entry.

use berth_runtime::{Berth, Decision};
use serde_json::json;

#[path = "support.rs"]
mod support;

const V2_PLUGINS: &[(&str, &str)] = &[
    ("v2/promise-tools.ts", ".opencode/plugins/promise-tools.ts"),
    ("v2/combined.ts", ".opencode/plugins/combined.ts"),
    (
        "v2/unsupported-part.ts",
        ".opencode/plugins/unsupported-part.ts",
    ),
    ("v2/effect-scoped.ts", ".opencode/plugins/effect-scoped.ts"),
    (
        "v2/storage-neighbour.ts",
        ".opencode/plugins/storage-neighbour.ts",
    ),
];

/// What `v2n_peek` (the neighbour plugin) finds in its storage after counting one more call.
async fn peek(berth: &Berth) -> serde_json::Value {
    let r = call(berth, "v2n_peek", json!({})).await;
    serde_json::from_str(r.output.as_deref().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

async fn call(berth: &Berth, tool: &str, args: serde_json::Value) -> berth_runtime::Receipt {
    berth
        .invoke(tool, args, None, None, Default::default())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e:?}"))
}

async fn v2_plugins_run(node: bool) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("cleanup.txt");
    std::env::set_var("BERTH_TEST_V2_MARKER", &marker);
    if node {
        std::env::set_var("BERTH_BUN", "/nonexistent");
    }
    let berth = support::open_project(dir.path(), V2_PLUGINS);

    // Recognised statically, before anything runs.
    let generation = |stem: &str| {
        let status = berth.status();
        let s = status
            .sources
            .iter()
            .find(|s| s.source.id.starts_with(&format!("plugin-{stem}")))
            .unwrap_or_else(|| panic!("{stem} is a source"));
        (
            serde_json::to_value(s.source.capabilities.generation).unwrap(),
            s.source.capabilities.plugin_id.clone(),
            s.source.capabilities.packages.clone(),
        )
    };
    let (g, id, packages) = generation("promise-tools");
    assert_eq!(g, json!("v2"));
    assert_eq!(id.as_deref(), Some("example.v2-echo"));
    assert!(
        !packages.contains("@opencode/plugin"),
        "Berth provides it, nothing to prepare: {packages:?}"
    );
    assert_eq!(generation("combined").0, json!("v1+v2"));
    assert_eq!(generation("unsupported-part").0, json!("v2"));
    assert_eq!(generation("effect-scoped").0, json!("v2"));

    berth.decide(None, Decision::Allow, "test", false).unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    let names: Vec<&str> = act.tools.iter().map(|t| t.name.as_str()).collect();
    for want in ["v2_echo", "v2_remembered", "v2_caught", "combined_hello"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let echo = act.tools.iter().find(|t| t.name == "v2_echo").unwrap();
    assert_eq!(
        echo.parameters["properties"]["text"]["type"], "string",
        "its JSON Schema: {}",
        echo.parameters
    );

    // Called through receipts.
    let r = call(&berth, "v2_echo", json!({ "text": "hi" })).await;
    assert_eq!(r.output.as_deref(), Some("v2 echo: hi"), "{r:?}");
    assert_eq!(
        r.metadata.as_ref().unwrap()["callID"],
        json!(r.receipt_id),
        "the V2 context's call id is the receipt's"
    );
    // execute.before refuses with Tool.Error: the call fails naming the plugin's words.
    let refused = call(&berth, "v2_echo", json!({ "text": "a forbidden word" })).await;
    let e = refused.error.as_ref().expect("refused");
    assert_eq!(e.code, "plugin-failed", "{e:?}");
    assert!(
        e.message.contains("the V2 guard refuses forbidden text"),
        "{e:?}"
    );
    // ... and rewrites input before the tool decodes it; the receipt names what ran.
    let rewritten = call(&berth, "v2_echo", json!({ "text": "rewrite-me" })).await;
    assert_eq!(
        rewritten.output.as_deref(),
        Some("v2 echo: rewritten by execute.before")
    );
    assert_ne!(rewritten.args_digest, r.args_digest);
    // ctx.storage: what setup stored, in Berth's store.
    let remembered = call(&berth, "v2_remembered", json!({})).await;
    let stored: serde_json::Value =
        serde_json::from_str(remembered.output.as_deref().unwrap()).unwrap();
    assert_eq!(stored["by"], "setup", "{stored}");
    assert_eq!(stored["app"], "2.3.0");
    assert!(stored["directory"].as_str().unwrap().ends_with("project"));
    // One space per plugin id: the neighbour stored under the same key in the same host, and
    // each reads its own.
    assert_eq!(
        peek(&berth).await,
        json!({ "calls": 1, "keys": ["calls", "loaded"], "loaded": { "by": "neighbour" } })
    );
    // Unsupported parts: a stable code naming the method; the rest of the plugin works.
    let caught = call(&berth, "v2_caught", json!({})).await;
    let text = caught.output.unwrap();
    assert!(
        text.contains(
            "unsupported: example.v2-unsupported: ctx.agent.transform is not served by Berth"
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"ctx.session.hook("http.request") is not served"#),
        "{text}"
    );
    // A session hook through Berth's chains (`berth hook session.context`): the event is the
    // output, changed in place.
    let out = berth
        .run_hook(
            "session.context",
            json!({}),
            json!({
                "sessionID": "s",
                "tools": { "read": { "description": "Read", "input": {} }, "write": { "description": "Write", "input": {} } },
                "system": [],
            }),
            None,
        )
        .await
        .expect("the context hook runs");
    assert_eq!(
        out["tools"]["read"]["description"],
        "Read a file (described by example.v2-echo)"
    );
    assert!(out["tools"].get("write").is_none(), "{out}");
    assert_eq!(out["system"], json!(["from example.v2-echo"]));
    // Berth's events reach `ctx.event.subscribe()` (the tool calls above sent some).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let events = loop {
        let seen = call(&berth, "v2_events", json!({}))
            .await
            .output
            .unwrap_or_default();
        if seen.contains("message.part.updated") || std::time::Instant::now() > until {
            break seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(events.contains("message.part.updated"), "{events}");
    // The V1 entry of a V1 + V2 module ran (its `setup` throws if it runs).
    let hello = call(&berth, "combined_hello", json!({ "name": "V1" })).await;
    assert_eq!(hello.output.as_deref(), Some("hello V1 from server"));
    // The Effect flavour: its tool's Effect runs, with the resource its scope holds.
    let effect = call(&berth, "effect_echo", json!({ "text": "hi" })).await;
    assert_eq!(
        effect.output.as_deref(),
        Some("effect echo: hi (setup)"),
        "{effect:?}"
    );

    assert!(!marker.exists(), "no cleanup while loaded");
    berth.shutdown_hosts().await;
    let mut ran: Vec<String> = std::fs::read_to_string(&marker)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    ran.sort();
    assert_eq!(
        ran,
        ["cleanup ran", "finalizer ran"],
        "the cleanup setup returned and the Effect scope's finalizer ran once each on unload"
    );
    drop(berth);

    // What a plugin stored outlives Berth: the same data dir, opened again, serves it back.
    let berth = support::open_project(dir.path(), V2_PLUGINS);
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    assert_eq!(peek(&berth).await["calls"], 2);
    berth.shutdown_hosts().await;
    std::env::remove_var("BERTH_TEST_V2_MARKER");
    std::env::remove_var("BERTH_BUN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_plugins_run_on_bun() {
    v2_plugins_run(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_plugins_run_on_node() {
    v2_plugins_run(true).await;
}

/// The source whose id starts with `prefix`.
fn source(berth: &Berth, prefix: &str) -> berth_runtime::snapshot::SourceView {
    berth
        .status()
        .sources
        .iter()
        .find(|s| s.source.id.starts_with(prefix))
        .cloned()
        .unwrap_or_else(|| panic!("a source {prefix}…"))
}

/// V2's configuration beside V1's: `plugins` with `{ package, options }` (a file, as the seeds
/// write it, and a folder, as the released docs do), and `mcp.servers.<name>` with `disabled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_configuration_reaches_the_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        ("v2/options.ts", "extra/options.ts"),
        ("v2/dir-plugin/index.ts", "extra/dir-plugin/index.ts"),
    ];
    // The config is written before Berth opens the project.
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("opencode.json"),
        serde_json::to_string(&json!({
            "plugins": [
                { "package": "./extra/options.ts", "options": { "greeting": "hej" } },
                { "package": "./extra/dir-plugin" },
            ],
            "mcp": { "servers": { "docs": { "type": "remote", "url": "http://127.0.0.1:9/mcp", "disabled": true } } },
        }))
        .unwrap(),
    )
    .unwrap();
    let berth = support::open_project(dir.path(), &files);
    let options = source(&berth, "plugin-options");
    assert_eq!(
        options.source.capabilities.plugin_id.as_deref(),
        Some("example.v2-options")
    );
    assert_eq!(options.source.options, Some(json!({ "greeting": "hej" })));
    let folder = source(&berth, "plugin-index");
    assert!(
        folder.source.entry.ends_with("dir-plugin/index.ts"),
        "{}",
        folder.source.entry
    );
    let docs = source(&berth, "mcp-docs");
    assert_eq!(docs.source.state, berth_discovery::SourceState::Disabled);

    berth.decide(None, Decision::Allow, "test", false).unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    let r = call(&berth, "v2_options", json!({})).await;
    assert_eq!(r.output.as_deref(), Some(r#"{"greeting":"hej"}"#));
    let r = call(&berth, "v2_dir", json!({})).await;
    assert_eq!(r.output.as_deref(), Some("from the folder plugin"));
    berth.shutdown_hosts().await;
}

/// One V2 id from two sources refuses the V2 set with one diagnostic naming both (seed 000:
/// never a silent priority win); `-<id>` in `plugins` switches one off and the other loads.
/// V1 plugins are not touched by either rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_v2_id_from_two_sources_refuses_the_set_and_a_selector_settles_it() {
    let files = [
        ("v2/promise-tools.ts", ".opencode/plugins/promise-tools.ts"),
        ("v2/promise-tools.ts", ".opencode/plugin/again.ts"),
        ("v2/options.ts", ".opencode/plugins/options.ts"),
        ("plugins/hook-matrix.ts", ".opencode/plugins/hook-matrix.ts"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let berth = support::open_project(dir.path(), &files);
    let status = berth.status();
    let about: Vec<&berth_discovery::Diagnostic> = status
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("`example.v2-echo`"))
        .collect();
    assert_eq!(about.len(), 1, "one diagnostic: {:?}", status.diagnostics);
    assert!(
        about[0].message.contains("promise-tools.ts") && about[0].message.contains("again.ts"),
        "it names both: {}",
        about[0].message
    );
    for prefix in ["plugin-promise-tools", "plugin-again", "plugin-options"] {
        assert_eq!(
            source(&berth, prefix).source.state,
            berth_discovery::SourceState::Disabled,
            "{prefix}: the V2 set is refused"
        );
    }
    assert_ne!(
        source(&berth, "plugin-hook-matrix").source.state,
        berth_discovery::SourceState::Disabled,
        "a V1 plugin is not"
    );
    drop(berth);

    // The control: with `-example.v2-echo` both copies are off, and the set is no longer refused.
    std::fs::write(
        dir.path().join("project/opencode.json"),
        r#"{ "plugins": ["-example.v2-echo"] }"#,
    )
    .unwrap();
    let berth = support::open_project(dir.path(), &files);
    assert!(
        !berth
            .status()
            .diagnostics
            .iter()
            .any(|d| d.message.contains("two sources give")),
        "{:?}",
        berth.status().diagnostics
    );
    for prefix in ["plugin-promise-tools", "plugin-again"] {
        let s = source(&berth, prefix);
        assert_eq!(s.source.state, berth_discovery::SourceState::Disabled);
        assert!(s
            .source
            .diagnostics
            .iter()
            .any(|d| d.message.contains("`-example.v2-echo`")));
    }
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    let names: Vec<&str> = act.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"v2_options"), "{names:?}");
    assert!(!names.contains(&"v2_echo"), "switched off: {names:?}");
    berth.shutdown_hosts().await;
}

/// What the tool hooks of V1 and V2 plugins in one host leave on one call of `v2_trail`.
async fn trail(files: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let berth = support::open_project(dir.path(), files);
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    let r = call(&berth, "v2_trail", json!({ "trail": "s" })).await;
    berth.shutdown_hosts().await;
    r.output.unwrap_or_default()
}

/// The merged order of V1 and V2 plugins (D-044): one order, the load order of the plugins
/// whatever their generation, for `tool.execute.before` (V2 `execute.before`) and
/// `tool.execute.after` (V2 `execute.after`) alike. The control renames the files so the V2
/// plugin loads first: the trail follows, so the order is the files', not the generations'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_and_v2_tool_hooks_run_in_one_load_order() {
    let v2_second = trail(&[
        ("v2/order-v1.ts", ".opencode/plugins/a-one.ts"),
        ("v2/order-v2.ts", ".opencode/plugins/b-two.ts"),
        ("v2/order-v1.ts", ".opencode/plugins/c-three.ts"),
    ])
    .await;
    assert_eq!(v2_second, "s>a-one>b-two>c-three|a-one|b-two|c-three");
    let v2_first = trail(&[
        ("v2/order-v2.ts", ".opencode/plugins/a-two.ts"),
        ("v2/order-v1.ts", ".opencode/plugins/b-one.ts"),
        ("v2/order-v1.ts", ".opencode/plugins/c-three.ts"),
    ])
    .await;
    assert_eq!(v2_first, "s>a-two>b-one>c-three|a-two|b-one|c-three");
    // The check can fail: the reversed order is a different trail.
    assert_ne!(v2_second, "s>c-three>b-two>a-one|c-three|b-two|a-one");
}

/// OpenCode 2 also loads package folders from `plugins/` (seed 000): a folder whose entry is a
/// V2 plugin is a source — found by `index.ts`, or by its `package.json` `main`, also through
/// a symlink to a folder elsewhere; a folder holding a V1 plugin is not, as OpenCode 1.18.4
/// ignores folders there (the control).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_package_folder_in_plugins_is_found_and_a_v1_folder_is_not() {
    let dir = tempfile::tempdir().unwrap();
    // A package folder kept elsewhere, linked in; its entry is named by `main`.
    let elsewhere = dir.path().join("project/vendor/options-pkg");
    std::fs::create_dir_all(elsewhere.join("lib")).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    std::fs::copy(
        root.join("fixtures/v2/options.ts"),
        elsewhere.join("lib/entry.ts"),
    )
    .unwrap();
    std::fs::write(
        elsewhere.join("package.json"),
        r#"{ "main": "lib/entry.ts" }"#,
    )
    .unwrap();
    let plugins = dir.path().join("project/.opencode/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::os::unix::fs::symlink(&elsewhere, plugins.join("linked")).unwrap();
    let berth = support::open_project(
        dir.path(),
        &[
            (
                "v2/dir-plugin/index.ts",
                ".opencode/plugins/v2-folder/index.ts",
            ),
            (
                "plugins/hook-matrix.ts",
                ".opencode/plugins/v1-folder/index.ts",
            ),
        ],
    );
    let entries: Vec<String> = berth
        .status()
        .sources
        .iter()
        .map(|s| s.source.entry.clone())
        .collect();
    assert!(
        entries.iter().any(|e| e.ends_with("v2-folder/index.ts")),
        "{entries:?}"
    );
    assert!(
        entries.iter().any(|e| e.ends_with("lib/entry.ts")),
        "{entries:?}"
    );
    assert!(
        !entries.iter().any(|e| e.contains("v1-folder")),
        "{entries:?}"
    );
    berth.decide(None, Decision::Allow, "test", false).unwrap();
    let act = berth.activate().await;
    assert!(act.problems.is_empty(), "{:?}", act.problems);
    assert_eq!(
        call(&berth, "v2_dir", json!({})).await.output.as_deref(),
        Some("from the folder plugin")
    );
    assert_eq!(
        call(&berth, "v2_options", json!({}))
            .await
            .output
            .as_deref(),
        Some("{}"),
        "the linked folder's plugin runs"
    );
    berth.shutdown_hosts().await;
}

/// The TypeScript compiler the set-up installs, with the published V2 typings' early mirror.
fn tsc(project: &str) -> std::process::Output {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    std::process::Command::new("node")
        .arg(root.join(".tools/v2-types/node_modules/typescript/bin/tsc"))
        .arg("-p")
        .arg(root.join("fixtures/v2/typed").join(project))
        .output()
        .expect("node runs tsc (scripts/setup installs it)")
}

/// Where the published typings (`@opencode-ai/plugin@1.18.33` `./v2/promise`) cover what a
/// fixture uses, it type-checks against them — and a wrong one does not (the control) — and
/// Berth runs it as written: its options reach it, and a part Berth does not serve fails the
/// load with `unsupported` naming the method when the plugin lets it through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixture_typed_against_the_published_v2_typings_checks_and_runs() {
    let ok = tsc("tsconfig.json");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    let wrong = tsc("wrong/tsconfig.json");
    let said = String::from_utf8_lossy(&wrong.stdout);
    assert!(!wrong.status.success(), "the control must fail");
    assert!(said.contains("TS2322") && said.contains("TS2339"), "{said}");

    for (greeting, fails) in [("hej", false), ("fail-on-unsupported", true)] {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            project.join("opencode.json"),
            json!({ "plugins": [{ "package": "./typed-options.ts", "options": { "greeting": greeting } }] }).to_string(),
        )
        .unwrap();
        let berth = support::open_project(
            dir.path(),
            &[("v2/typed/typed-options.ts", "typed-options.ts")],
        );
        let typed = source(&berth, "plugin-typed-options");
        assert_eq!(
            typed.source.capabilities.plugin_id.as_deref(),
            Some("example.v2-typed")
        );
        berth.decide(None, Decision::Allow, "test", false).unwrap();
        let act = berth.activate().await;
        if fails {
            let p = act.problems.first().expect("the load fails");
            assert_eq!(p.code, "unsupported", "{p:?}");
            assert!(
                p.message.contains("ctx.agent.transform is not served"),
                "{p:?}"
            );
        } else {
            assert!(act.problems.is_empty(), "{:?}", act.problems);
        }
        berth.shutdown_hosts().await;
    }
}
