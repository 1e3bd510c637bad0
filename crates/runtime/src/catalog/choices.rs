//! The catalog's side of contested names: the store's words read into the election, what
//! Berth keeps while a conflict asks written back, and the person's choice (`berth choose`, the
//! page, the window).
//!
//! Owns: reading and writing `tool_choices`. Must not: decide who wins (`conflicts::elect`).

use crate::error::{code, BerthError};

use super::*;

impl Catalog {
    /// Elects every contested name with the store's words (the person's choices, made here or
    /// in another process), and records what Berth keeps serving while a conflict asks (so a
    /// restart keeps it too).
    pub(super) fn settle_conflicts(&self) {
        let (stored, person) = self.core.with_store(|s| {
            (
                s.tool_choices().unwrap_or_default(),
                s.person_tool_choices().unwrap_or_default(),
            )
        });
        let records = {
            let mut cat = self.state();
            cat.set_choices(stored, person);
            cat.take_records()
        };
        if !records.is_empty() {
            if let Err(e) = self.core.with_store(|s| s.record_tool_choices(&records)) {
                tracing::warn!(
                    "could not record who serves {} tool names: {e}",
                    records.len()
                );
            }
        }
    }

    /// The person chooses `candidate` (a source id, or `builtin`) to serve `tool`, for the
    /// candidates it has now; any later change of them asks again.
    pub(crate) async fn choose(&self, tool: &str, candidate: &str) -> Result<Conflict, BerthError> {
        self.activate().await;
        let conflict = self.state().conflicts.get(tool).cloned().ok_or_else(|| {
            BerthError::new(
                code::INVALID_ARGUMENTS,
                "conflicts",
                format!("`{tool}` is not contested: one candidate or none registers it"),
                "list the contested names with `berth conflicts`",
            )
        })?;
        let Some(c) = conflict.candidates.iter().find(|c| c.id == candidate) else {
            let ids: Vec<&str> = conflict.candidates.iter().map(|c| c.id.as_str()).collect();
            return Err(BerthError::new(
                code::INVALID_ARGUMENTS,
                "conflicts",
                format!(
                    "`{candidate}` is not a candidate for `{tool}` (its candidates: {})",
                    ids.join(", ")
                ),
                "choose one of the candidates `berth conflicts` lists",
            ));
        };
        if !c.available {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "conflicts",
                format!("`{candidate}` cannot serve `{tool}` now: it failed to load or its new version is held"),
                "look at its diagnostics, fix or approve it, then choose it",
            )
            .for_plugin(candidate.to_string()));
        }
        self.core
            .with_store(|s| s.set_tool_choice(tool, &conflict.digest, candidate, true))?;
        self.settle_conflicts();
        self.core.rescan();
        self.state().conflicts.get(tool).cloned().ok_or_else(|| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "conflicts",
                format!("the candidates for `{tool}` changed while you chose"),
                "list them again with `berth conflicts`",
            )
        })
    }
}
