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
        for d in &s.config_dirs {
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
        for src in &s.sources {
            let state = serde_json::to_value(src.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let kind = serde_json::to_value(src.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            println!("{:<40} {:<16} {:<18} {}", src.id, kind, state, src.entry);
            for line in &src.capabilities.summary {
                println!("    {line}");
            }
            for d in &src.diagnostics {
                println!("    ! {} [{}] — {}", d.message, d.code, d.recovery);
            }
        }
    }
}
