//! The project limit: whatever the path's spelling (absolute, `..`, a symlink inside the project
//! pointing out), a built-in reaches nothing outside the project and says so with
//! `policy-limited`, naming the path and the project. Paths inside (through an inside symlink
//! too) still work, and a cancelled call stops with `cancelled`.

mod common;

use berth_builtins::{call, BuiltinError};
use common::Tree;
use serde_json::{json, Value};

async fn refused(tree: &Tree, tool: &str, args: Value) -> BuiltinError {
    match call(tool, args.clone(), &tree.ctx()).await {
        Err(e) => e,
        Ok(o) => panic!("{tool} {args} reached outside the project: {}", o.output),
    }
}

fn assert_policy_limited(tree: &Tree, e: &BuiltinError, path: &str) {
    assert_eq!(e.code(), "policy-limited", "{e}");
    let text = e.to_string();
    assert!(
        text.contains(path),
        "the message names the path {path}: {text}"
    );
    assert!(
        text.contains(&tree.project().display().to_string()),
        "the message names the project: {text}"
    );
    assert!(!e.recovery().is_empty());
}

#[tokio::test]
async fn a_symlink_out_of_the_project_is_refused_by_every_tool() {
    let tree = Tree::new();
    let link = tree.project().join("link-out");
    let file = link.join("secret.ts").display().to_string();
    let e = refused(&tree, "read", json!({ "filePath": file })).await;
    assert_policy_limited(&tree, &e, &file);
    let e = refused(&tree, "glob", json!({ "pattern": "*", "path": link })).await;
    assert_policy_limited(&tree, &e, "link-out");
    let e = refused(
        &tree,
        "grep",
        json!({ "pattern": "secret", "path": "link-out" }),
    )
    .await;
    assert_policy_limited(&tree, &e, "link-out");
}

#[tokio::test]
async fn dotdot_paths_are_refused_even_when_nothing_is_there() {
    let tree = Tree::new();
    for path in [
        "../outside/secret.ts",
        "../outside/not-there.ts",
        "src/../../outside",
        "../../../../etc/passwd",
    ] {
        let e = refused(&tree, "read", json!({ "filePath": path })).await;
        assert_eq!(e.code(), "policy-limited", "{path}: {e}");
    }
    let e = refused(&tree, "grep", json!({ "pattern": "x", "path": ".." })).await;
    assert_eq!(e.code(), "policy-limited", "{e}");
    let e = refused(
        &tree,
        "glob",
        json!({ "pattern": "**", "path": "src/../.." }),
    )
    .await;
    assert_eq!(e.code(), "policy-limited", "{e}");
}

#[tokio::test]
async fn absolute_paths_outside_are_refused() {
    let tree = Tree::new();
    let outside = tree.case.join("outside");
    let e = refused(
        &tree,
        "read",
        json!({ "filePath": outside.join("secret.ts") }),
    )
    .await;
    assert_policy_limited(&tree, &e, "outside/secret.ts");
    for tool in ["glob", "grep"] {
        let e = refused(&tree, tool, json!({ "pattern": "secret", "path": outside })).await;
        assert_eq!(e.code(), "policy-limited", "{tool}: {e}");
    }
    let e = refused(&tree, "read", json!({ "filePath": "/" })).await;
    assert_eq!(e.code(), "policy-limited", "{e}");
}

#[tokio::test]
async fn a_symlink_that_stays_inside_works() {
    let tree = Tree::new();
    std::os::unix::fs::symlink("src/lib", tree.project().join("lib-link")).unwrap();
    let out = call(
        "read",
        json!({ "filePath": "lib-link/deep.ts" }),
        &tree.ctx(),
    )
    .await
    .unwrap();
    assert!(
        out.output.contains("2: export const depth = 2"),
        "{}",
        out.output
    );
    let out = call(
        "grep",
        json!({ "pattern": "depth", "path": "lib-link" }),
        &tree.ctx(),
    )
    .await
    .unwrap();
    assert!(out.output.starts_with("Found 2 matches"), "{}", out.output);
}

#[tokio::test]
async fn the_walks_do_not_follow_a_symlink_out() {
    let tree = Tree::new();
    for (tool, args) in [
        ("glob", json!({ "pattern": "**/secret.ts" })),
        ("grep", json!({ "pattern": "outside the project" })),
    ] {
        let out = call(tool, args, &tree.ctx()).await.unwrap();
        assert_eq!(out.output, "No files found", "{tool}");
    }
}

#[tokio::test]
async fn a_cancelled_call_ends_cancelled() {
    let tree = Tree::new();
    let ctx = tree.ctx();
    ctx.cancel.cancel();
    let e = call("grep", json!({ "pattern": "export" }), &ctx)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "cancelled");
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_invalid_arguments() {
    let tree = Tree::new();
    for (tool, args) in [
        ("read", json!({})),
        ("read", json!({ "filePath": 3 })),
        ("read", json!({ "filePath": "README.md", "offset": -1 })),
        ("grep", json!({ "pattern": "" })),
        ("glob", json!("**")),
        ("list", json!({ "path": "." })),
    ] {
        let e = call(tool, args.clone(), &tree.ctx()).await.unwrap_err();
        assert_eq!(e.code(), "invalid-arguments", "{tool} {args}: {e}");
    }
}
