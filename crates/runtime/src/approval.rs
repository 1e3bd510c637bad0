//! The approval plane's rules: the key a decision applies to, and whether a source's current
//! capabilities stay within what was approved (checkpoint one, before anything is prepared).
//!
//! Must not: import or prepare anything. The gate that re-checks immediately before an import
//! lives with the host supervisor and calls [`gate`].

use std::collections::BTreeSet;

use berth_discovery::{Capabilities, Scope, Source, SourceKind, SourceState};
use berth_store::{ActiveContributions, ApprovalKey, ApprovalRow, Contributions, Decision, Store};
use serde::{Deserialize, Serialize};

use crate::error::{code, BerthError};
use crate::runtimes::{RuntimeInfo, RuntimeKind};

/// This machine and OS user: approvals do not travel to another user or machine.
pub fn execution_domain() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    // SAFETY: getuid has no failure mode and touches no memory of ours.
    let uid = unsafe { libc::getuid() };
    format!("{host}/uid-{uid}")
}

/// The backend a source would run on: Bun when available (OpenCode's runtime), else Node.
pub fn backend_for(runtimes: &[RuntimeInfo]) -> RuntimeKind {
    let usable = |k| runtimes.iter().any(|r| r.name == k && r.problem.is_none());
    if usable(RuntimeKind::Bun) || !usable(RuntimeKind::Node) {
        RuntimeKind::Bun
    } else {
        RuntimeKind::Node
    }
}

/// The backend as approvals and contributions record it.
pub fn backend_name(backend: RuntimeKind) -> &'static str {
    match backend {
        RuntimeKind::Bun => "bun",
        RuntimeKind::Node => "node",
    }
}

pub fn key_for(source: &Source, domain: &str, backend: RuntimeKind, project: &str) -> ApprovalKey {
    ApprovalKey {
        source_id: source.id.clone(),
        domain: domain.to_string(),
        // An MCP server runs on no JavaScript backend: its decision does not move with one.
        backend: if source.kind == SourceKind::Mcp {
            "none"
        } else {
            backend_name(backend)
        }
        .into(),
        project: project.to_string(),
    }
}

/// A decision as the page and the window send it: the sources, and for each the digest the
/// person was shown (so that what is approved is exactly what was shown).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    pub ids: Vec<String>,
    #[serde(default)]
    pub digests: std::collections::BTreeMap<String, String>,
    /// For npm plugins not fetched yet: allow what the fetch brings too (both steps at once).
    #[serde(default)]
    pub including_fetch: bool,
}

impl DecisionRequest {
    /// The `id@digest` choices `Berth::decide` takes. An approval must carry a digest for
    /// every id (the error names the first that has none); a denial may come without.
    pub fn choices(&self, decision: Decision) -> Result<Vec<String>, BerthError> {
        self.ids
            .iter()
            .map(|id| match self.digests.get(id) {
                Some(d) => Ok(format!("{id}@{d}")),
                None if decision == Decision::Deny => Ok(id.clone()),
                None => Err(BerthError::new(
                    code::INVALID_ARGUMENTS,
                    "approval",
                    format!("an approval must carry the digest that was shown for {id}"),
                    "reload the page or the window and decide again (an API client sends {\"ids\": [..], \"digests\": {\"<id>\": \"sha256:…\"}})",
                )
                .for_plugin(id.clone())),
            })
            .collect()
    }
}

/// What the status shows about a source's approval.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ApprovalView {
    /// `allow`, `deny`, or null when nobody decided yet.
    pub decision: Option<Decision>,
    pub decided_at_ms: Option<i64>,
    /// Capabilities that grew since the approval (non-empty ⇒ asked again).
    pub grew: Vec<String>,
    /// The backend and domain the decision applies to.
    pub backend: String,
    pub domain: String,
    /// For an npm plugin waiting for the person, which of its two steps this is.
    pub step: Option<String>,
}

/// The first of an npm plugin's two steps: its bytes are not here yet.
pub const STEP_FETCH: &str =
    "1 of 2: allow fetching the package (install scripts off); what it contains is shown next";
/// The second: the fetched bytes are here and were read.
pub const STEP_CONTENTS: &str =
    "2 of 2: the package was fetched (no code of it ran); decide on what it can do";

/// Applies the decision in force to `source`'s state. `observed` is what the loaded module
/// really contributed for these bytes (checkpoint two), once they were loaded; `baseline` is
/// what the source contributed when it was last active (for any bytes).
pub fn evaluate(
    source: &Source,
    row: Option<&ApprovalRow>,
    key: &ApprovalKey,
    observed: Option<&Contributions>,
    baseline: Option<&ActiveContributions>,
) -> (SourceState, ApprovalView) {
    let mut view = ApprovalView {
        decision: row.map(|r| r.decision),
        decided_at_ms: row.map(|r| r.decided_at_ms),
        grew: vec![],
        backend: key.backend.clone(),
        domain: key.domain.clone(),
        step: None,
    };
    // What discovery already knows does not run: a broken or unusable entry, Berth itself, an
    // MCP server switched off in the config (`enabled: false`, never asked about).
    if matches!(
        source.state,
        SourceState::Unsupported | SourceState::IncompatibleVersion | SourceState::Disabled
    ) {
        return (source.state, view);
    }
    let state = match row {
        None => SourceState::PendingApproval,
        Some(r) if r.decision == Decision::Deny => SourceState::Disabled,
        Some(r) => {
            let approved: Capabilities = capabilities_from_json(&r.shown);
            view.grew = growth(&approved, &source.capabilities);
            let moved = r.digest != source.digest;
            // A project's source came with the repository: any change of its bytes is someone
            // else's update and is asked again. A source in the person's own global folders
            // reloads without asking only when nothing grew (growth covers what cannot be read;
            // D-024).
            if moved && source.scope == Scope::Local && identity_verifiable(source) {
                view.grew.push(changed_files(&r.shown, source));
            }
            if !view.grew.is_empty() || (moved && !identity_verifiable(source)) {
                SourceState::PendingApproval
            } else {
                let extra = unconfirmed_growth(r, source, observed, baseline);
                if extra.is_empty() {
                    SourceState::Approved
                } else {
                    view.grew = extra;
                    SourceState::PendingActivation
                }
            }
        }
    };
    if state == SourceState::PendingApproval && source.kind == SourceKind::NpmPlugin {
        view.step = Some(
            if source.capabilities.contents_unknown {
                STEP_FETCH
            } else {
                STEP_CONTENTS
            }
            .into(),
        );
    }
    (state, view)
}

/// What a load of `source`'s bytes contributes beyond the version that was active before,
/// when those bytes are not the ones the person decided on (seed 003 §3.1: contributions found
/// at the first load of approved bytes only update the real contributions; a *later* load that
/// contributes more is held until confirmed). Empty: nothing to confirm.
pub fn unconfirmed_growth(
    row: &ApprovalRow,
    source: &Source,
    observed: Option<&Contributions>,
    baseline: Option<&ActiveContributions>,
) -> Vec<String> {
    let (Some(observed), Some(baseline)) = (observed, baseline) else {
        return Vec::new();
    };
    // An update's decision covers its bytes, not what only its load reveals (`by_update`).
    let decided_on_these = row.digest == source.digest && row.shown.get("by_update").is_none();
    if decided_on_these || baseline.digest == source.digest {
        return Vec::new();
    }
    let mut known = baseline.contributions.clone();
    if let Some(c) = row.shown.get("contributions") {
        known.tools.extend(strings(c.get("tools")));
        known.hooks.extend(strings(c.get("hooks")));
    }
    unapproved_contributions(&known, observed)
}

fn strings(v: Option<&serde_json::Value>) -> Vec<String> {
    v.and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// What changed in a project source since its approval, in plain words: the files whose
/// bytes differ, appeared or went (from the manifest the approval recorded).
fn changed_files(shown: &serde_json::Value, source: &Source) -> String {
    let before: std::collections::BTreeMap<String, String> = shown
        .pointer("/manifest/files")
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_default();
    let now: std::collections::BTreeMap<String, String> = source
        .manifest
        .files
        .iter()
        .map(|(p, d)| (p.display().to_string(), d.clone()))
        .collect();
    let mut parts: Vec<String> = Vec::new();
    for (path, digest) in &now {
        match before.get(path) {
            None => parts.push(format!("{path} (new)")),
            Some(d) if d != digest => parts.push(path.clone()),
            _ => {}
        }
    }
    parts.extend(
        before
            .keys()
            .filter(|p| !now.contains_key(*p))
            .map(|p| format!("{p} (gone)")),
    );
    if parts.is_empty() {
        "its code changed since you approved it (a project's plugins are asked again on any change)"
            .into()
    } else {
        format!(
            "its code changed since you approved it (a project's plugins are asked again on any change): {}",
            parts.join(", ")
        )
    }
}

/// Local files are verified by their path and bytes; npm specs only once prepared.
fn identity_verifiable(source: &Source) -> bool {
    matches!(
        source.kind,
        SourceKind::StandaloneTool | SourceKind::FilePlugin
    )
}

/// The capability summary an approval recorded as shown to the person.
pub fn capabilities_shown(shown: &serde_json::Value) -> Capabilities {
    capabilities_from_json(shown)
}

/// Rebuilds the comparable part of a shown capability summary.
fn capabilities_from_json(v: &serde_json::Value) -> Capabilities {
    let set = |k: &str| -> BTreeSet<String> {
        v.get(k)
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Capabilities {
        tools: set("tools").into_iter().collect(),
        packages: set("packages"),
        bun_apis: set("bun_apis"),
        process: set("process"),
        network: set("network"),
        filesystem: set("filesystem"),
        environment: set("environment"),
        install_scripts: set("install_scripts"),
        outside_files: set("outside_files"),
        opaque: set("opaque"),
        dependencies: set("dependencies"),
        loads_computed_modules: v
            .get("loads_computed_modules")
            .and_then(|b| b.as_bool())
            .unwrap_or(false),
        contents_unknown: v
            .get("contents_unknown")
            .and_then(|b| b.as_bool())
            .unwrap_or(false),
        analysis_incomplete: v
            .get("analysis_incomplete")
            .and_then(|b| b.as_bool())
            .unwrap_or(false),
        ..Capabilities::default()
    }
}

/// What `now` can do that `approved` could not, in plain words.
pub fn growth(approved: &Capabilities, now: &Capabilities) -> Vec<String> {
    let mut grew = Vec::new();
    let mut diff = |label: &str, a: &BTreeSet<String>, b: &BTreeSet<String>| {
        let new: Vec<&String> = b.difference(a).collect();
        if !new.is_empty() {
            grew.push(format!(
                "{label}: {}",
                new.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    };
    diff(
        "may do anything (Berth cannot read ahead)",
        &approved.opaque,
        &now.opaque,
    );
    diff("starts programs", &approved.process, &now.process);
    diff("uses the network", &approved.network, &now.network);
    diff(
        "reads or writes files",
        &approved.filesystem,
        &now.filesystem,
    );
    diff(
        "reads the environment",
        &approved.environment,
        &now.environment,
    );
    diff("Bun APIs", &approved.bun_apis, &now.bun_apis);
    diff("packages", &approved.packages, &now.packages);
    diff(
        "install scripts",
        &approved.install_scripts,
        &now.install_scripts,
    );
    diff(
        "runs files outside its folder",
        &approved.outside_files,
        &now.outside_files,
    );
    diff(
        "its folder's package.json installs",
        &approved.dependencies,
        &now.dependencies,
    );
    let tools_a: BTreeSet<String> = approved.tools.iter().cloned().collect();
    let tools_b: BTreeSet<String> = now.tools.iter().cloned().collect();
    diff("tools", &tools_a, &tools_b);
    if now.loads_computed_modules && !approved.loads_computed_modules {
        grew.push("loads modules with computed names".into());
    }
    if now.analysis_incomplete && !approved.analysis_incomplete {
        grew.push("its code can no longer be fully read".into());
    }
    grew
}

/// The gate at import: `source` may be imported on `backend` only if the decision in force
/// allows it, its capabilities (re-read from the bytes about to be imported) did not grow, and
/// these bytes are not known to contribute more than was active before without the person's
/// confirmation (their code must not run while held).
pub fn gate(
    store: &Store,
    source: &Source,
    domain: &str,
    backend: RuntimeKind,
    project: &str,
) -> Result<(), String> {
    let key = key_for(source, domain, backend, project);
    let row = store.current_approval(&key).map_err(|e| e.to_string())?;
    let observed = store
        .contributions(&source.id, &source.digest, &key.backend)
        .map_err(|e| e.to_string())?;
    let baseline = store
        .active_contributions(&source.id, &key.backend)
        .map_err(|e| e.to_string())?;
    match evaluate(
        source,
        row.as_ref(),
        &key,
        observed.as_ref(),
        baseline.as_ref(),
    ) {
        (SourceState::PendingActivation, view) => Err(format!(
            "{} is held for review: it registers more than its last active version ({})",
            source.id,
            view.grew.join("; ")
        )),
        (SourceState::Approved, _) => Ok(()),
        (SourceState::Disabled, _) => Err(format!("{} is denied", source.id)),
        (_, view) if !view.grew.is_empty() => Err(format!(
            "{} grew since approval: {}",
            source.id,
            view.grew.join("; ")
        )),
        _ => Err(format!(
            "{} is not approved for {} on {}",
            source.id, key.backend, key.domain
        )),
    }
}

/// What the person is shown and an approval records: the capability summary, every file with
/// its digest (the gate compares file by file), and what the loaded module contributed for
/// these bytes when that is known.
pub fn shown_for(
    capabilities: &Capabilities,
    manifest: &berth_discovery::Manifest,
    observed: Option<&Contributions>,
) -> serde_json::Value {
    let mut shown = serde_json::to_value(capabilities).unwrap_or_default();
    shown["manifest"] = serde_json::to_value(manifest).unwrap_or_default();
    if let Some(c) = observed {
        shown["contributions"] = serde_json::json!({ "tools": c.tools, "hooks": c.hooks });
    }
    shown
}

/// What `observed` contributes beyond `known`, in plain words.
pub fn unapproved_contributions(known: &Contributions, observed: &Contributions) -> Vec<String> {
    let mut out = Vec::new();
    let mut list = |label: &str, have: &[String], now: &[String]| {
        let new: Vec<&str> = now
            .iter()
            .filter(|t| !have.contains(t))
            .map(String::as_str)
            .collect();
        if !new.is_empty() {
            out.push(format!("{label}: {}", new.join(", ")));
        }
    };
    list("registers tools", &known.tools, &observed.tools);
    list("registers hooks", &known.hooks, &observed.hooks);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_names_exactly_what_grew() {
        let mut a = Capabilities::default();
        a.network.insert("fetch".into());
        let mut b = a.clone();
        assert!(growth(&a, &b).is_empty());
        b.process.insert("Bun.spawn".into());
        b.network.insert("fetch".into());
        assert_eq!(
            growth(&a, &b),
            vec!["starts programs: Bun.spawn".to_string()]
        );
        // Shrinking is not growth.
        assert!(growth(&b, &a).is_empty());
    }
}
