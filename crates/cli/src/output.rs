//! Rendering: one JSON document with `--json`, short human text otherwise.

use std::io::Write;

use berth_runtime::{BerthError, StatusSnapshot};

pub struct Out {
    pub json: bool,
}

pub fn print_json(v: &serde_json::Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = serde_json::to_writer_pretty(&mut stdout, v);
    let _ = writeln!(stdout);
    let _ = stdout.flush();
}

impl Out {
    pub fn done(&self, json: serde_json::Value, human: &str) {
        if self.json {
            print_json(&json);
        } else {
            println!("{human}");
        }
    }

    pub fn error(&self, e: &BerthError) {
        if self.json {
            print_json(&serde_json::json!({ "error": e }));
        } else {
            eprintln!("berth: {} [{}]", e.message, e.code);
            eprintln!("  what to do: {}", e.recovery);
        }
    }

    pub fn status(&self, s: &StatusSnapshot) {
        if self.json {
            print_json(&serde_json::to_value(s).unwrap_or_default());
            return;
        }
        println!(
            "Berth {} — project {}",
            s.berth.version,
            s.project.directory.display()
        );
        if s.sources.is_empty() {
            println!("No OpenCode plugins or tools were found.");
        } else {
            println!(
                "{} source(s): {} waiting for approval, {} active, {} failed",
                s.counts.sources, s.counts.pending_approval, s.counts.active, s.counts.failed
            );
        }
        println!("OpenCode config folders looked at:");
        for d in s.config_dirs.iter() {
            println!(
                "  {} {}",
                if d.exists { "✓" } else { "·" },
                d.path.display()
            );
        }
        for d in &s.diagnostics {
            println!("! {} [{}] — {}", d.message, d.code, d.recovery);
        }
    }

    pub fn tools(&self, act: &berth_runtime::catalog::Activation) {
        if self.json {
            print_json(
                &serde_json::json!({ "tools": act.tools, "builtins": act.builtins, "conflicts": act.conflicts, "problems": act.problems }),
            );
            return;
        }
        if act.tools.is_empty() {
            println!("No active tools. Approve sources with `berth approve`.");
        }
        for t in &act.tools {
            let contested = act.conflicts.iter().any(|c| c.tool == t.name);
            println!(
                "{:<32} {:<40} {}{}",
                t.name,
                t.provider.source_id,
                if contested {
                    "[contested: `berth conflicts`] "
                } else {
                    ""
                },
                t.description
            );
        }
        self.problems(&act.problems);
    }

    /// `berth conflicts`: each contested name, its candidates, who serves it and why.
    pub fn conflicts(&self, act: &berth_runtime::catalog::Activation) {
        if self.json {
            print_json(
                &serde_json::json!({ "conflicts": act.conflicts, "problems": act.problems }),
            );
            return;
        }
        if act.conflicts.is_empty() {
            println!("No tool name is registered by more than one candidate.");
        }
        for c in &act.conflicts {
            let state = match c.state {
                berth_runtime::snapshot::ConflictState::Asks => "asks",
                berth_runtime::snapshot::ConflictState::Chosen => "chosen",
            };
            println!("{} ({state}): {}", c.tool, c.reason);
            for cand in &c.candidates {
                let mark = if c.serving.as_deref() == Some(cand.id.as_str()) {
                    "*"
                } else {
                    " "
                };
                let down = if cand.available {
                    ""
                } else {
                    " (cannot serve now)"
                };
                let oc = if c.opencode_winner.as_deref() == Some(cand.id.as_str()) {
                    " (OpenCode's pick)"
                } else {
                    ""
                };
                println!("  {mark} {:<40} {}{down}{oc}", cand.id, cand.kind);
            }
            if c.state == berth_runtime::snapshot::ConflictState::Asks {
                println!("  choose: berth choose {} <candidate>", c.tool);
            }
        }
        self.problems(&act.problems);
    }

    fn problems(&self, problems: &[berth_runtime::BerthError]) {
        for p in problems {
            println!(
                "! {} [{}] {} — {}",
                p.plugin.as_deref().unwrap_or("berth"),
                p.code,
                p.message,
                p.recovery
            );
        }
    }

    pub fn receipt(&self, r: &berth_store::Receipt) {
        if self.json {
            print_json(&serde_json::to_value(r).unwrap_or_default());
            return;
        }
        match &r.error {
            None => println!("{}", r.output.as_deref().unwrap_or("")),
            Some(e) => eprintln!(
                "berth: {} [{}] (receipt {})",
                e.message, e.code, r.receipt_id
            ),
        }
    }

    pub fn receipts(&self, rows: &[berth_store::Receipt]) {
        if self.json {
            print_json(&serde_json::json!({ "receipts": rows }));
            return;
        }
        for r in rows {
            println!(
                "{} {:<10} {:<24} {}",
                r.receipt_id,
                r.status.as_str(),
                r.tool,
                r.error.as_ref().map(|e| e.code.as_str()).unwrap_or("")
            );
        }
    }

    pub fn approvals(&self, rows: &[berth_store::ApprovalRow]) {
        if self.json {
            print_json(&serde_json::json!({ "approvals": rows }));
            return;
        }
        if rows.is_empty() {
            println!("No decisions yet.");
        }
        for r in rows {
            let d = if r.decision == berth_store::Decision::Allow {
                "allow"
            } else {
                "deny"
            };
            println!(
                "{:<6} {:<40} {} on {} ({}), capabilities {}",
                d,
                r.source_id,
                r.backend,
                r.domain,
                r.decided_by,
                &r.capability_digest[..19]
            );
        }
    }

    pub fn sources(&self, s: &StatusSnapshot) {
        if self.json {
            print_json(&serde_json::json!({ "sources": s.sources, "diagnostics": s.diagnostics }));
            return;
        }
        if s.sources.is_empty() {
            println!("No OpenCode plugins or tools were found.");
        }
        for src in s.sources.iter() {
            let state = serde_json::to_value(src.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let kind = serde_json::to_value(src.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            // Plugins say which OpenCode plugin API they are written for (`v1`, `v2`, `v1+v2`).
            let kind = match src.capabilities.generation {
                Some(g) => format!(
                    "{kind} {}",
                    serde_json::to_value(g)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
                None => kind,
            };
            println!("{:<40} {:<19} {:<18} {}", src.id, kind, state, src.entry);
            if let (Some(g), Some(id)) = (src.capabilities.generation, &src.capabilities.plugin_id)
            {
                println!("    {} plugin `{id}`", g.label());
            }
            for line in &src.capabilities.summary {
                println!("    {line}");
            }
            for d in &src.diagnostics {
                println!("    ! {} [{}] — {}", d.message, d.code, d.recovery);
            }
            if let Some(step) = &src.approval.step {
                println!("    step {step}");
            }
            for l in &src.limited {
                println!(
                    "    held: {} ({} is {}; allow it with `berth policy allow {} {}`)",
                    l.item,
                    l.category.key(),
                    l.cap,
                    src.id,
                    l.item
                );
            }
            if matches!(
                src.state,
                berth_discovery::SourceState::PendingApproval
                    | berth_discovery::SourceState::PendingActivation
            ) {
                // The digest pins the approval to exactly what was printed above.
                println!(
                    "    approve exactly this: berth approve {}@{}",
                    src.id,
                    short_digest(&src.digest)
                );
            }
        }
    }
}

impl Out {
    /// The effective policy, and the mode each source runs in.
    pub fn policy(&self, p: &berth_runtime::policy::Effective, s: &StatusSnapshot) {
        let sources: Vec<serde_json::Value> = s
            .sources
            .iter()
            .map(
                |v| serde_json::json!({ "id": v.id, "run_mode": v.run_mode, "limited": v.limited }),
            )
            .collect();
        if self.json {
            print_json(&serde_json::json!({ "policy": p, "sources": sources }));
            return;
        }
        println!(
            "organisation file: {} ({})",
            p.organisation_file.display(),
            if p.organisation_present {
                "present"
            } else {
                "none"
            }
        );
        for problem in &p.problems {
            println!("  ! {problem}");
        }
        for e in &p.entries {
            let layer = serde_json::to_value(e.layer).unwrap_or_default();
            let change = serde_json::to_value(e.changeable).unwrap_or_default();
            println!(
                "{:<22} {:<14} {:<13} {:<14} {}",
                e.key,
                e.value.to_string(),
                layer.as_str().unwrap_or_default(),
                change.as_str().unwrap_or_default(),
                e.about
            );
            if let Some(o) = &e.overruled {
                println!("    ! {o}");
            }
        }
        for v in s.sources.iter() {
            println!("{:<40} {}", v.id, v.run_mode.why);
        }
    }
}

/// The first 16 hex digits of a `sha256:` digest: what the person types to approve exactly it.
pub fn short_digest(digest: &str) -> &str {
    let hex = digest.trim_start_matches("sha256:");
    &hex[..hex.len().min(16)]
}
