//! OpenCode V2's plugin IDs over the sources a scan found (seed 000, ledger D-044): a `-<id>`
//! selector in `plugins` (`id`, `prefix.*`, `*`) switches the plugins with that `id` off, and
//! one `id` given by two active V2 sources refuses the V2 set — no silent priority win — with
//! one diagnostic naming both. V1 plugins keep V1's rules (they have no such ID), and so does a
//! `{ id, server, setup }` module, which runs its V1 entry.
//!
//! Owns: those two rules, read from the static `plugin_id` (a module whose `id` is not a
//! literal, or an npm plugin not prepared yet, is not matched). Must not: change V1 sources.

use std::path::PathBuf;

use crate::source::{Diagnostic, Generation, Source, SourceState};

/// Whether `selector` (`*`, `prefix.*`, or an exact ID) names `id`, as OpenCode 2 matches.
pub fn selects(selector: &str, id: &str) -> bool {
    selector == "*"
        || match selector.strip_suffix(".*") {
            Some(prefix) => id.starts_with(&format!("{prefix}.")),
            None => selector == id,
        }
}

/// Applies the selectors, then the duplicate rule; returns the scan-level diagnostics.
pub fn apply(sources: &mut [Source], disabled: &[(String, PathBuf)]) -> Vec<Diagnostic> {
    let with_id = |s: &Source| {
        s.capabilities
            .generation
            .filter(|g| *g != Generation::V1)
            .and(s.capabilities.plugin_id.clone())
    };
    for s in sources.iter_mut() {
        let Some(id) = with_id(s) else { continue };
        if let Some((selector, file)) = disabled.iter().find(|(sel, _)| selects(sel, &id)) {
            s.state = SourceState::Disabled;
            s.diagnostics.push(
                Diagnostic::new(
                    "action-required",
                    format!("the plugin `{id}` is switched off by `-{selector}` in `plugins` of {}: not loaded, nothing is asked", file.display()),
                    format!("remove `-{selector}` from `plugins` to use it"),
                )
                .at(file.clone()),
            );
        }
    }
    let v2: Vec<(usize, String)> = sources
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.capabilities.generation == Some(Generation::V2) && s.state != SourceState::Disabled
        })
        .filter_map(|(i, s)| s.capabilities.plugin_id.clone().map(|id| (i, id)))
        .collect();
    let mut out = Vec::new();
    for (n, (i, id)) in v2.iter().enumerate() {
        let Some((j, _)) = v2[..n].iter().find(|(_, other)| other == id) else {
            continue;
        };
        let (a, b) = (sources[*j].entry.clone(), sources[*i].entry.clone());
        let message = format!(
            "two sources give the OpenCode V2 plugin id `{id}`: {a} and {b}; like OpenCode 2, Berth refuses the V2 set rather than pick one, so no V2 plugin is loaded"
        );
        let recovery = format!("remove one of them, or switch one off with `\"-{id}\"` in `plugins` (the other then loads)");
        out.push(Diagnostic::new(
            "action-required",
            message.clone(),
            recovery.clone(),
        ));
        for (k, _) in &v2 {
            let s = &mut sources[*k];
            s.state = SourceState::Disabled;
            s.diagnostics.push(Diagnostic::new(
                "action-required",
                message.clone(),
                recovery.clone(),
            ));
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::selects;

    #[test]
    fn selectors_match_as_opencode_2_does() {
        assert!(selects("*", "a.b"));
        assert!(selects("a.*", "a.b"));
        assert!(!selects("a.*", "ab.c"));
        assert!(!selects("a.*", "a"));
        assert!(selects("a.b", "a.b"));
        assert!(!selects("a.b", "a.bc"));
    }
}
