//! An activation's own store commits do not each rescan the world: it ends with one rescan that
//! covers them. (Each rescan reads every source and its approval under the store's lock; an
//! activation of 1,000 tool files that rescanned after every commit waited on those rescans for
//! minutes.) Counted as the snapshots published while the activation runs, which grow with the
//! sources when every commit rescans.

use std::time::Duration;

use berth_runtime::Decision;

#[path = "support.rs"]
mod support;

#[test]
fn an_activation_of_many_sources_publishes_a_few_snapshots_not_one_per_commit() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("project/.opencode/tools");
    std::fs::create_dir_all(&tools).unwrap();
    for i in 0..40 {
        std::fs::write(
            tools.join(format!("t{i:02}.ts")),
            format!("import {{ tool }} from '@opencode-ai/plugin'\nexport default tool({{ description: 'echo {i}', args: {{}}, async execute() {{ return '{i}' }} }})\n"),
        )
        .unwrap();
    }
    let berth = support::open_project(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        berth.decide(None, Decision::Allow, "test", false).unwrap();
        // What the decision scheduled has run.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = berth.status().revision;
        let act = berth.activate().await;
        assert_eq!(act.tools.len(), 40, "{:?}", act.problems);
        // Anything the activation left scheduled runs too.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let published = berth.status().revision - before;
        assert!(
            published <= 6,
            "{published} snapshots were published while 40 sources activated"
        );
        berth.shutdown_hosts().await;
    });
}
