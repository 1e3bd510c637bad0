//! Files: writing outside the boundary, writing inside it, reading a secret file, and
//! protected paths inside a writable project — in each tier, with node and bun. Every
//! assertion is on the file system afterwards or on data reaching the child's output.

mod common;

use std::path::Path;

use common::{boundary, marker, path_arg, run_plan, runtimes, tiers};
use serde_json::json;

#[tokio::test]
async fn writes_land_only_inside_and_secrets_stay_unread() {
    for tier in tiers() {
        for rt in runtimes() {
            let outside = tempfile::tempdir().expect("tempdir");
            let project = tempfile::tempdir().expect("tempdir");
            let secrets = tempfile::tempdir().expect("tempdir");
            let key = secrets.path().join("id_rsa");
            let canary = marker("private-key-canary");
            std::fs::write(&key, &canary).expect("write the key");
            let mut b = boundary(tier, &marker("fs"));
            b.write = vec![project.path().to_path_buf()];
            let escaped = outside.path().join("escaped.txt");
            let inside = project.path().join("inside.txt");
            let plan = json!({"steps": [
                {"name": "outside", "op": "write", "path": path_arg(&escaped)},
                {"name": "inside", "op": "write", "path": path_arg(&inside)},
                {"name": "secret", "op": "read", "path": path_arg(&key)},
                {"name": "parent-environ", "op": "read",
                 "path": format!("/proc/{}/environ", std::process::id())},
            ]});
            let out = run_plan(&rt, &b, &plan).await;
            let what = format!("{} under {tier:?}", rt.name);
            assert!(
                !escaped.exists(),
                "{what}: a file appeared outside: {out:?}"
            );
            assert!(!out.ok("outside").0, "{what}: {out:?}");
            assert!(out.ok("inside").0, "{what}: {out:?}");
            let written = std::fs::read_to_string(&inside).expect("the inside file exists");
            assert_eq!(written, "written by the sandboxed child", "{what}");
            assert!(!out.ok("secret").0, "{what}: {out:?}");
            assert!(
                !out.stdout.contains(&canary),
                "{what}: the key reached the child"
            );
            assert!(!out.ok("parent-environ").0, "{what}: {out:?}");
            assert!(
                !out.stdout.contains("CARGO_MANIFEST_DIR="),
                "{what}: Berth's env was read"
            );
        }
    }
}

fn make_project(root: &Path, with_opencode_dir: bool) {
    for d in ["src", ".git/hooks", ".git/objects"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    if with_opencode_dir {
        std::fs::create_dir_all(root.join(".opencode")).expect("mkdir");
    }
    std::fs::write(root.join("opencode.json"), "{\"original\": true}").expect("write");
}

#[tokio::test]
async fn protected_paths_stay_read_only_inside_a_writable_project() {
    for tier in tiers() {
        for with_opencode_dir in [true, false] {
            let rt = &runtimes()[0];
            let project = tempfile::tempdir().expect("tempdir");
            let p = project.path();
            make_project(p, with_opencode_dir);
            let mut b = boundary(tier, &marker("protect"));
            b.write = vec![p.to_path_buf()];
            b.protect = vec![
                p.join(".git/hooks"),
                p.join(".opencode"),
                p.join("opencode.json"),
            ];
            let plan = json!({"steps": [
                {"name": "hook", "op": "write", "path": path_arg(&p.join(".git/hooks/pre-commit"))},
                {"name": "plugin", "op": "write", "mkdir": true,
                 "path": path_arg(&p.join(".opencode/plugin/evil.js"))},
                {"name": "config", "op": "write", "path": path_arg(&p.join("opencode.json"))},
                {"name": "remove-config", "op": "remove", "path": path_arg(&p.join("opencode.json"))},
                {"name": "src", "op": "write", "path": path_arg(&p.join("src/x.txt"))},
                {"name": "objects", "op": "write", "path": path_arg(&p.join(".git/objects/o"))},
            ]});
            let out = run_plan(rt, &b, &plan).await;
            let what = format!("{tier:?}, .opencode present: {with_opencode_dir}");
            for step in ["hook", "plugin", "config", "remove-config"] {
                assert!(!out.ok(step).0, "{what}: {step} was allowed: {out:?}");
            }
            assert!(!p.join(".git/hooks/pre-commit").exists(), "{what}");
            assert!(!p.join(".opencode/plugin").exists(), "{what}");
            assert_eq!(p.join(".opencode").exists(), with_opencode_dir, "{what}");
            let config = std::fs::read_to_string(p.join("opencode.json")).expect("config kept");
            assert_eq!(config, "{\"original\": true}", "{what}");
            assert!(out.ok("src").0, "{what}: {out:?}");
            assert!(out.ok("objects").0, "{what}: {out:?}");
            assert!(p.join("src/x.txt").is_file() && p.join(".git/objects/o").is_file());
        }
    }
}

#[tokio::test]
async fn a_read_only_project_refuses_writes_to_git_hooks() {
    for tier in tiers() {
        for rt in runtimes() {
            let project = tempfile::tempdir().expect("tempdir");
            make_project(project.path(), true);
            let hook = project.path().join(".git/hooks/post-checkout");
            let mut b = boundary(tier, &marker("ro"));
            b.read.push(project.path().to_path_buf());
            let plan = json!({"steps": [
                {"name": "hook", "op": "write", "path": path_arg(&hook)},
                {"name": "read", "op": "read", "path": path_arg(&project.path().join("opencode.json"))},
            ]});
            let out = run_plan(&rt, &b, &plan).await;
            let what = format!("{} under {tier:?}", rt.name);
            assert!(!out.ok("hook").0 && !hook.exists(), "{what}: {out:?}");
            assert!(out.ok("read").1.contains("original"), "{what}: {out:?}");
        }
    }
}
