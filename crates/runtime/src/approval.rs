//! The approval plane's rules: the key a decision applies to, and whether a source's current
//! capabilities stay within what was approved (checkpoint one, before anything is prepared).
//!
//! Must not: import or prepare anything. The gate that re-checks immediately before an import
//! lives with the host supervisor and calls [`gate`].

use std::collections::BTreeSet;

use berth_discovery::{Capabilities, Scope, Source, SourceKind, SourceState};
use berth_store::{ApprovalKey, ApprovalRow, Contributions, Decision, Store};
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
        backend: backend_name(backend).into(),
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
}

/// Applies the decision in force to `source`'s state. `observed` is what the loaded module
/// really contributed (checkpoint two), when it has been loaded.
pub fn evaluate(
    source: &Source,
    row: Option<&ApprovalRow>,
    key: &ApprovalKey,
    observed: Option<&Contributions>,
) -> (SourceState, ApprovalView) {
    let mut view = ApprovalView {
        decision: row.map(|r| r.decision),
        decided_at_ms: row.map(|r| r.decided_at_ms),
        grew: vec![],
        backend: key.backend.clone(),
        domain: key.domain.clone(),
    };
    if source.kind == SourceKind::Mcp
        || matches!(
            source.state,
            SourceState::Unsupported | SourceState::IncompatibleVersion
        )
    {
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
                let extra = observed
                    .map(|o| unapproved_contributions(&r.shown, o))
                    .unwrap_or_default();
                if extra.is_empty() {
                    SourceState::Discovered
                } else {
                    view.grew = extra;
                    SourceState::PendingActivation
                }
            }
        }
    };
    (state, view)
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
/// allows it and its capabilities (re-read from the bytes about to be imported) did not grow.
pub fn gate(
    store: &Store,
    source: &Source,
    domain: &str,
    backend: RuntimeKind,
    project: &str,
) -> Result<(), String> {
    let key = key_for(source, domain, backend, project);
    let row = store.current_approval(&key).map_err(|e| e.to_string())?;
    // Import is checkpoint one; what the module then contributes is checked after it — and once
    // these bytes are known to contribute more than was approved, they are not imported again
    // until the person approves that (their code must not run while held).
    let observed = store
        .contributions(&source.id, &source.digest, &key.backend)
        .map_err(|e| e.to_string())?;
    match evaluate(source, row.as_ref(), &key, observed.as_ref()) {
        (SourceState::PendingActivation, view) => Err(format!(
            "{} is held for review: it registers more than was approved ({})",
            source.id,
            view.grew.join("; ")
        )),
        (SourceState::Discovered, _) => Ok(()),
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

/// Contributions observed after import that the approval did not show, in plain words.
pub fn unapproved_contributions(
    shown: &serde_json::Value,
    observed: &Contributions,
) -> Vec<String> {
    let list = |v: Option<&serde_json::Value>| -> BTreeSet<String> {
        v.and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut tools = list(shown.get("tools"));
    tools.extend(list(shown.pointer("/contributions/tools")));
    let hooks = list(shown.pointer("/contributions/hooks"));
    let mut out = Vec::new();
    let new_tools: Vec<&String> = observed
        .tools
        .iter()
        .filter(|t| !tools.contains(*t))
        .collect();
    if !new_tools.is_empty() {
        out.push(format!(
            "registers tools: {}",
            new_tools
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let new_hooks: Vec<&String> = observed
        .hooks
        .iter()
        .filter(|h| !hooks.contains(*h))
        .collect();
    if !new_hooks.is_empty() {
        out.push(format!(
            "registers hooks: {}",
            new_hooks
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
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
