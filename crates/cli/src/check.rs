//! `berth check <path-or-npm-spec>`: for plugin authors. Loads the plugin or tool file in a
//! throw-away domain (its own HOME, project and data dir; nothing of the user's is read or
//! written), approves every checkpoint on the author's behalf, and reports what it contributes
//! and every problem. Exit code 1 when there is a problem, so it fits a plugin's CI.

use std::path::{Path, PathBuf};

use berth_discovery::OpencodeEnv;
use berth_runtime::{code, Berth, BerthError, BerthOptions, Decision};

use crate::output::Out;

pub fn check(target: &str, out: &Out) -> Result<bool, BerthError> {
    let tmp = tempfile::tempdir().map_err(|e| {
        BerthError::new(
            code::TEMPORARILY_UNAVAILABLE,
            "check",
            format!("cannot create a scratch folder: {e}"),
            "free some disk space",
        )
    })?;
    let root = tmp.path();
    let (home, project) = (root.join("home"), root.join("project"));
    for d in [
        home.clone(),
        project.join(".git"),
        project.join(".opencode"),
    ] {
        std::fs::create_dir_all(&d).map_err(|e| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "check",
                e.to_string(),
                "retry",
            )
        })?;
    }
    place(target, &project)?;
    let env = OpencodeEnv {
        home,
        cwd: project.clone(),
        managed_config_dir: root.join("managed"),
        ..OpencodeEnv::default()
    };
    let berth = Berth::open(BerthOptions {
        data_dir: root.join("data"),
        project,
        env,
        log_file: None,
    })?;
    // Everything the plugin contributes registers here (what Berth's default caps would hold
    // is reported beside it, `held_by_default`): the author sees the whole plugin.
    for d in berth_runtime::policy::keys::KEYS
        .iter()
        .filter(|d| d.key.starts_with("cap."))
    {
        berth.set_policy(d.key, Some(serde_json::json!("allow")), "check")?;
    }
    let defaults = berth_runtime::policy::product_defaults();
    // The fetch, then the bytes: each step approved for the author.
    let act = crate::block_on(async {
        let mut act = berth_runtime::catalog::Activation::default();
        for _ in 0..3 {
            berth.decide(None, Decision::Allow, "cli", false)?;
            act = berth.activate().await;
            let waiting = berth.status().sources.iter().any(|s| {
                matches!(
                    s.state,
                    berth_discovery::SourceState::PendingApproval
                        | berth_discovery::SourceState::PendingActivation
                )
            });
            if !waiting {
                break;
            }
        }
        berth.shutdown_hosts().await;
        Ok::<_, BerthError>(act)
    })??;
    let status = berth.status();
    let mut problems: Vec<serde_json::Value> = act
        .problems
        .iter()
        .map(|p| serde_json::to_value(p).unwrap_or_default())
        .collect();
    for s in status.sources.iter() {
        for d in &s.diagnostics {
            problems.push(serde_json::json!({ "code": d.code, "message": d.message, "plugin": s.id, "capability": "discovery", "recovery": d.recovery }));
        }
    }
    let sources: Vec<serde_json::Value> = status
        .sources
        .iter()
        .map(|s| {
            let seen = berth.with_store(|st| st.contributions(&s.id, &s.digest, &s.approval.backend)).ok().flatten().unwrap_or_default();
            let held = defaults.judge(&s.id, &seen.tools, &seen.hooks).limited;
            serde_json::json!({ "id": s.id, "kind": s.kind, "entry": s.entry, "state": s.state, "capabilities": s.capabilities.summary, "hooks": seen.hooks, "held_by_default": held })
        })
        .collect();
    let passed = problems.is_empty() && !sources.is_empty();
    let doc = serde_json::json!({ "check": { "target": target, "passed": passed, "sources": sources, "tools": act.tools, "problems": problems } });
    if out.json {
        crate::output::print_json(&doc);
    } else {
        println!("{} {target}", if passed { "ok" } else { "problems in" });
        for s in &sources {
            println!(
                "  {} [{}] hooks: {}",
                s["id"].as_str().unwrap_or(""),
                s["state"].as_str().unwrap_or(""),
                s["hooks"]
            );
            for h in s["held_by_default"].as_array().into_iter().flatten() {
                println!(
                    "    held by Berth's default caps: {} ({} is {})",
                    h["item"].as_str().unwrap_or(""),
                    h["category"].as_str().unwrap_or(""),
                    h["cap"].as_str().unwrap_or("")
                );
            }
        }
        for t in &act.tools {
            println!("  tool {} — {}", t.name, t.description);
        }
        for p in &problems {
            println!(
                "  ! {} [{}] — {}",
                p["message"].as_str().unwrap_or(""),
                p["code"].as_str().unwrap_or(""),
                p["recovery"].as_str().unwrap_or("")
            );
        }
    }
    Ok(passed)
}

/// Puts the target where OpenCode would find it: a tool file into `.opencode/tools/`, a plugin
/// file into `.opencode/plugins/`, a folder or an npm spec into `opencode.json`.
fn place(target: &str, project: &Path) -> Result<(), BerthError> {
    let path = PathBuf::from(target);
    let bad = |m: String| {
        BerthError::new(code::INVALID_ARGUMENTS, "check", m, "pass a plugin file, a tool file (in a tool/ or tools/ folder), a plugin folder, or an npm spec")
    };
    let spec = if path.is_file() {
        let in_tools = path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "tool" || n == "tools");
        let dest = project
            .join(".opencode")
            .join(if in_tools { "tools" } else { "plugins" });
        std::fs::create_dir_all(&dest).map_err(|e| bad(e.to_string()))?;
        let name = path
            .file_name()
            .ok_or_else(|| bad(format!("{target} has no file name")))?;
        // Relative imports must keep working: link, do not copy.
        let abs = std::fs::canonicalize(&path).map_err(|e| bad(e.to_string()))?;
        std::os::unix::fs::symlink(&abs, dest.join(name)).map_err(|e| bad(e.to_string()))?;
        return Ok(());
    } else if path.is_dir() {
        std::fs::canonicalize(&path)
            .map_err(|e| bad(e.to_string()))?
            .display()
            .to_string()
    } else if target.starts_with('.') || target.starts_with('/') {
        return Err(bad(format!("{target} does not exist")));
    } else {
        target.to_string()
    };
    std::fs::write(
        project.join("opencode.json"),
        serde_json::json!({ "plugin": [spec] }).to_string(),
    )
    .map_err(|e| bad(e.to_string()))
}
