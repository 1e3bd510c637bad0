//! What deserves the person's attention while they are not looking at Berth: a source that
//! starts waiting for their approval (a new one, or one asked again because it changed or
//! grew), and a tool's permission prompt that opens. The desktop shell turns each notice
//! into a desktop notification whose click brings the window to the item.
//!
//! Owns: telling what is new in a snapshot since the last one (each wait once: a source by
//! its id and the digest it waits with, a prompt by its id), and the notice's words. Must
//! not: show anything, or know whether a window is in front (the shell decides).

use std::collections::HashSet;

use berth_discovery::{SourceKind, SourceState};
use serde::Serialize;

use crate::snapshot::{SourceView, StatusSnapshot};

/// The item a notice is about, as the page's focus names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "lowercase")]
pub enum Item {
    Source(String),
    Prompt(String),
}

/// One desktop notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    pub item: Item,
    pub title: String,
    pub body: String,
}

/// The waits seen so far. The first snapshot is the baseline: what already waited when
/// Berth started is on screen, not news.
#[derive(Debug, Default)]
pub struct Attention {
    seen: Option<HashSet<String>>,
}

impl Attention {
    /// The notices `snap` brings: at most one for sources (several new ones are counted in
    /// it, and it leads to the first) and one per new prompt.
    pub fn news(&mut self, snap: &StatusSnapshot) -> Vec<Notice> {
        let waiting: Vec<(String, &SourceView)> = snap
            .sources
            .iter()
            .filter(|s| {
                matches!(
                    s.source.state,
                    SourceState::PendingApproval | SourceState::PendingActivation
                )
            })
            .map(|s| (format!("source:{}:{}", s.source.id, s.source.digest), s))
            .collect();
        let prompts: Vec<(String, &crate::snapshot::PromptView)> = snap
            .prompts
            .iter()
            .map(|p| (format!("prompt:{}", p.id), p))
            .collect();
        let now: HashSet<String> = waiting
            .iter()
            .map(|(k, _)| k.clone())
            .chain(prompts.iter().map(|(k, _)| k.clone()))
            .collect();
        let Some(seen) = self.seen.replace(now) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let fresh: Vec<&SourceView> = waiting
            .iter()
            .filter(|(k, _)| !seen.contains(k))
            .map(|(_, s)| *s)
            .collect();
        if let Some(first) = fresh.first() {
            let title = match fresh.len() {
                1 => format!("{} waits for your approval", name(first)),
                n => format!("{n} plugins and tools wait for your approval"),
            };
            out.push(Notice {
                item: Item::Source(first.source.id.clone()),
                title,
                body: "Nothing of it runs until you allow it in Berth.".into(),
            });
        }
        for (key, p) in &prompts {
            if seen.contains(key) {
                continue;
            }
            out.push(Notice {
                item: Item::Prompt(p.id.clone()),
                title: format!("{} asks for permission", p.tool),
                body: format!(
                    "{} ({}): {}. The call waits for your answer in Berth.",
                    p.plugin, p.permission, p.title
                ),
            });
        }
        out
    }
}

/// How a person recognises a source: an npm plugin by its package, a file by its name.
fn name(s: &SourceView) -> String {
    let src = &s.source;
    if let (SourceKind::NpmPlugin, Some(npm)) = (src.kind, &src.npm) {
        return npm.name.clone();
    }
    if src.kind == SourceKind::Mcp {
        return format!("The MCP server {}", src.entry);
    }
    std::path::Path::new(&src.entry)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| src.id.clone())
}
