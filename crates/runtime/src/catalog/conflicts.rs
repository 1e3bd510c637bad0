//! Contested tool names (seed 003 §5.3): when several candidates — a built-in, tool files,
//! plugins' tools, MCP servers' tools — register one name, which of them serves it, and the
//! conflict the person sees until they choose.
//!
//! Owns: the election of one candidate per contested name and the conflict's view. Must not:
//! load anything, judge the policy's caps (what reaches the ballot was admitted already) or
//! touch the store (the catalog reads the choices and writes what Berth kept).
//!
//! The rules: a choice the person made holds only for the exact candidate set it was made for
//! (a digest over every candidate's identity and content version); until the person chooses,
//! the implementation serving before stays in place — Berth's built-in when there is one, else
//! the candidate that served the name before the conflict appeared (the store records who
//! serves every name, so neither a restart nor the order a pass loads sources in changes it),
//! else the one OpenCode would let win; a candidate that changed, or a chosen one
//! that failed to load, asks again and says so — nothing falls back silently.

pub use crate::snapshot::{CandidateView, Conflict, ConflictState, ProviderKind};
use berth_store::ToolChoice;

/// The candidate id of Berth's own built-in for a name.
pub const BUILTIN: &str = "builtin";

/// One claim on a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The source id, or [`BUILTIN`].
    pub id: String,
    pub kind: ProviderKind,
    /// The content version it claims the name with (its source's digest).
    pub digest: String,
    /// Its place in OpenCode's load order among its kind.
    pub order: usize,
    /// It is loaded and can serve now (a source whose load failed or whose host is held keeps
    /// its claim: a worker that is down does not make a conflict disappear).
    pub available: bool,
}

impl Candidate {
    /// OpenCode's rank: built-ins, then tool files, then plugins' tools, then MCP tools; the
    /// later one wins within each.
    fn rank(&self) -> (u8, usize) {
        let kind = match self.kind {
            ProviderKind::Builtin => 0,
            ProviderKind::StandaloneTool => 1,
            ProviderKind::FilePlugin | ProviderKind::NpmPlugin => 2,
            ProviderKind::Mcp => 3,
        };
        (kind, self.order)
    }
}

/// What one election decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The candidate that serves the name (none: no candidate can serve).
    pub winner: Option<String>,
    /// Set when several candidates claim the name.
    pub conflict: Option<Conflict>,
    /// What Berth keeps serving while the conflict asks, to record (it differs from the store's
    /// newest word).
    pub keep: Option<ToolChoice>,
}

/// The digest a choice is bound to: every candidate's identity and content version.
pub fn digest(candidates: &[Candidate]) -> String {
    let mut lines: Vec<String> = candidates
        .iter()
        .map(|c| format!("{}@{}", c.id, c.digest))
        .collect();
    lines.sort();
    berth_discovery::sha256_hex(lines.join("\n").as_bytes())
}

/// Elects who serves `tool` among `candidates`. `stored` is the store's newest word on it
/// (who served it last, contested or not), `person` the person's own newest choice;
/// `builtin_first`: Berth's built-in stays until the person chooses (the policy's tool-override
/// cap is `review`); otherwise (`allow`) an external candidate may win as in OpenCode.
pub fn elect(
    tool: &str,
    candidates: &[Candidate],
    stored: Option<&ToolChoice>,
    person: Option<&ToolChoice>,
    builtin_first: bool,
) -> Outcome {
    let available = |id: &str| candidates.iter().any(|c| c.id == id && c.available);
    // Berth's stand-in for OpenCode's pick: the later one of the highest kind, deterministic.
    let last_wins = candidates
        .iter()
        .filter(|c| c.available)
        .max_by_key(|c| c.rank())
        .map(|c| c.id.clone());
    // OpenCode's own pick is not fixed between MCP servers' tools on one key: say none.
    let mcp_tie = candidates
        .iter()
        .filter(|c| c.available && c.kind == ProviderKind::Mcp)
        .count()
        > 1;
    let opencode_winner = last_wins.clone().filter(|_| !mcp_tie);
    let digest = digest(candidates);
    let record = |serving: &Option<String>| {
        serving
            .as_ref()
            .filter(|k| {
                stored.is_none_or(|s| s.digest != digest || &s.candidate != *k || s.by_person)
            })
            .map(|k| ToolChoice {
                tool: tool.to_string(),
                digest: digest.clone(),
                candidate: k.clone(),
                by_person: false,
                set_at_ms: 0,
            })
    };
    if candidates.len() <= 1 {
        // Uncontested: who serves it is recorded too, so that when a newcomer claims the name
        // later (in this process or after a restart) the one serving before stays.
        return Outcome {
            keep: record(&last_wins),
            winner: last_wins,
            conflict: None,
        };
    }
    let view = |serving: Option<String>, state, reason: String| Conflict {
        tool: tool.to_string(),
        digest: digest.clone(),
        candidates: candidates
            .iter()
            .map(|c| CandidateView {
                id: c.id.clone(),
                kind: kind_name(c.kind).to_string(),
                available: c.available,
            })
            .collect(),
        serving,
        state,
        reason,
        opencode_winner: opencode_winner.clone(),
    };
    if let Some(s) = stored.filter(|s| s.by_person && s.digest == digest) {
        if available(&s.candidate) {
            let reason = format!("you chose `{}` for `{tool}`", s.candidate);
            return Outcome {
                winner: Some(s.candidate.clone()),
                conflict: Some(view(
                    Some(s.candidate.clone()),
                    ConflictState::Chosen,
                    reason,
                )),
                keep: None,
            };
        }
    }
    // It asks: the implementation serving before stays in place.
    let builtin = candidates
        .iter()
        .find(|c| c.kind == ProviderKind::Builtin && c.available && builtin_first)
        .map(|c| c.id.clone());
    let kept_before = stored.map(|s| s.candidate.clone()).filter(|c| available(c));
    let keep = builtin.or(kept_before).or_else(|| last_wins.clone());
    let why = match person {
        Some(p) if p.digest == digest && !available(&p.candidate) => format!(
            "you chose `{}` for `{tool}`, and it cannot serve now (it failed to load or is held)",
            p.candidate
        ),
        Some(p) if p.digest != digest => format!(
            "the candidates for `{tool}` changed since you chose `{}`",
            p.candidate
        ),
        _ => format!("{} candidates register `{tool}`", candidates.len()),
    };
    let reason = match &keep {
        Some(k) => format!("{why}; Berth keeps `{k}` serving it until you choose"),
        None => format!("{why}; none of them can serve it now"),
    };
    Outcome {
        keep: record(&keep),
        winner: keep.clone(),
        conflict: Some(view(keep, ConflictState::Asks, reason)),
    }
}

fn kind_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Builtin => BUILTIN,
        ProviderKind::StandaloneTool => "standalone-tool",
        ProviderKind::FilePlugin => "file-plugin",
        ProviderKind::NpmPlugin => "npm-plugin",
        ProviderKind::Mcp => "mcp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: &str, kind: ProviderKind, digest: &str, order: usize) -> Candidate {
        Candidate {
            id: id.into(),
            kind,
            digest: digest.into(),
            order,
            available: true,
        }
    }

    fn word(c: &[Candidate], who: &str, by_person: bool) -> ToolChoice {
        ToolChoice {
            tool: "x".into(),
            digest: digest(c),
            candidate: who.into(),
            by_person,
            set_at_ms: 1,
        }
    }

    #[test]
    fn two_mcp_servers_on_one_key_have_no_opencode_winner_but_one_serves() {
        let foo = cand("mcp-foo", ProviderKind::Mcp, "d1", 0);
        let foo_bar = cand("mcp-foo_bar", ProviderKind::Mcp, "d2", 1);
        let o = elect(
            "foo_bar_baz",
            &[foo.clone(), foo_bar.clone()],
            None,
            None,
            true,
        );
        let c = o.conflict.unwrap();
        assert_eq!(
            c.opencode_winner, None,
            "OpenCode's pick between them is not fixed"
        );
        assert_eq!(o.winner.as_deref(), Some("mcp-foo_bar"));
        assert_eq!(c.serving.as_deref(), Some("mcp-foo_bar"));
        // Beside a plugin's tool, OpenCode's MCP tools still win over it, but which one is not
        // fixed either.
        let plugin = cand("plugin:p", ProviderKind::FilePlugin, "d3", 0);
        let o = elect(
            "foo_bar_baz",
            &[plugin.clone(), foo.clone(), foo_bar],
            None,
            None,
            true,
        );
        assert_eq!(o.conflict.unwrap().opencode_winner, None);
        // One MCP tool against a plugin's: OpenCode's MCP tool replaces it, always.
        let o = elect("foo_bar_baz", &[plugin, foo], None, None, true);
        assert_eq!(
            o.conflict.unwrap().opencode_winner.as_deref(),
            Some("mcp-foo")
        );
    }

    #[test]
    fn one_candidate_is_no_conflict() {
        let c = [cand("tool:a", ProviderKind::StandaloneTool, "d1", 0)];
        let o = elect("x", &c, None, None, true);
        assert_eq!(o.winner.as_deref(), Some("tool:a"));
        assert!(o.conflict.is_none());
        assert_eq!(
            o.keep.unwrap().candidate,
            "tool:a",
            "who serves is recorded"
        );
    }

    #[test]
    fn a_new_conflict_keeps_the_builtin_then_the_incumbent_then_opencodes_winner() {
        let plugin = cand("plugin:p", ProviderKind::FilePlugin, "d2", 0);
        let tool = cand("tool:a", ProviderKind::StandaloneTool, "d1", 3);
        let builtin = cand(BUILTIN, ProviderKind::Builtin, "berth", 0);
        // A plugin never takes over a built-in's name by itself.
        let c = [builtin.clone(), plugin.clone()];
        let o = elect("x", &c, None, None, true);
        assert_eq!(o.winner.as_deref(), Some(BUILTIN));
        let conflict = o.conflict.unwrap();
        assert_eq!(conflict.state, ConflictState::Asks);
        assert_eq!(conflict.opencode_winner.as_deref(), Some("plugin:p"));
        // The tool-override cap at `allow`: the external candidate may win, as in OpenCode.
        let o = elect("x", &c, None, None, false);
        assert_eq!(o.winner.as_deref(), Some("plugin:p"));
        // The one serving before the conflict appeared stays, though OpenCode would pick the
        // plugin.
        let before = elect("x", std::slice::from_ref(&tool), None, None, true)
            .keep
            .unwrap();
        assert_eq!(before.candidate, "tool:a");
        let c = [tool.clone(), plugin.clone()];
        let o = elect("x", &c, Some(&before), None, true);
        assert_eq!(o.winner.as_deref(), Some("tool:a"));
        let kept = o.keep.unwrap();
        assert_eq!(kept.candidate, "tool:a");
        let o = elect("x", &c, Some(&kept), None, true);
        assert_eq!(o.winner.as_deref(), Some("tool:a"));
        assert!(o.keep.is_none(), "nothing new to record");
        // Both new at once: OpenCode's winner (plugins over tool files).
        let o = elect("x", &c, None, None, true);
        assert_eq!(o.winner.as_deref(), Some("plugin:p"));
    }

    #[test]
    fn a_choice_holds_for_its_exact_candidate_set_and_a_change_asks_again() {
        let a = cand("tool:a", ProviderKind::StandaloneTool, "d1", 0);
        let b = cand("plugin:p", ProviderKind::FilePlugin, "d2", 0);
        let c = [a.clone(), b.clone()];
        let chosen = word(&c, "tool:a", true);
        let o = elect("x", &c, Some(&chosen), Some(&chosen), true);
        assert_eq!(o.winner.as_deref(), Some("tool:a"));
        assert_eq!(o.conflict.unwrap().state, ConflictState::Chosen);
        // The plugin's bytes changed: it asks again, and says why.
        let changed = [
            a.clone(),
            cand("plugin:p", ProviderKind::FilePlugin, "d3", 0),
        ];
        let o = elect("x", &changed, Some(&chosen), Some(&chosen), true);
        let conflict = o.conflict.unwrap();
        assert_eq!(conflict.state, ConflictState::Asks);
        assert!(
            conflict.reason.contains("changed since you chose `tool:a`"),
            "{}",
            conflict.reason
        );
        assert_eq!(
            o.winner.as_deref(),
            Some("tool:a"),
            "what served before stays"
        );
        // Negative control: the same set does not ask.
        let o = elect("x", &c, Some(&chosen), Some(&chosen), true);
        assert_eq!(o.conflict.unwrap().state, ConflictState::Chosen);
    }

    #[test]
    fn a_chosen_candidate_that_cannot_load_asks_and_says_so() {
        let mut a = cand("tool:a", ProviderKind::StandaloneTool, "d1", 0);
        let b = cand("plugin:p", ProviderKind::FilePlugin, "d2", 0);
        let chosen = word(&[a.clone(), b.clone()], "tool:a", true);
        a.available = false;
        let c = [a, b];
        let o = elect("x", &c, Some(&chosen), Some(&chosen), true);
        let conflict = o.conflict.unwrap();
        assert_eq!(conflict.state, ConflictState::Asks);
        assert!(
            conflict.reason.contains("cannot serve now"),
            "{}",
            conflict.reason
        );
        assert_eq!(o.winner.as_deref(), Some("plugin:p"));
        assert_eq!(
            conflict.candidates.len(),
            2,
            "the failed candidate stays listed"
        );
    }

    #[test]
    fn the_digest_covers_identity_and_content_whatever_the_order() {
        let a = cand("a", ProviderKind::Builtin, "1", 0);
        let b = cand("b", ProviderKind::Mcp, "2", 0);
        assert_eq!(
            digest(&[a.clone(), b.clone()]),
            digest(&[b.clone(), a.clone()])
        );
        assert_ne!(
            digest(&[a.clone(), b.clone()]),
            digest(&[a, cand("b", ProviderKind::Mcp, "3", 0)])
        );
    }
}
