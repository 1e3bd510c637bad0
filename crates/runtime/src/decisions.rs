//! The person's decisions: approving or denying sources exactly as they were shown (every
//! file with its digest; a source that moved since is refused), a host of its own, and the
//! store's backups. The rules are `approval`'s; this records them and has the status re-read.
//!
//! Owns: recording decisions. Must not: load anything (activation does, on the next call), or
//! record a decision for bytes the person was not shown.

use std::path::Path;
use std::sync::Arc;

use berth_discovery::{SourceKind, SourceState};
use berth_store::{ApprovalRow, Decision, NewApproval};

use crate::approval;
use crate::core::Core;
use crate::error::{code, BerthError};
use crate::governor::Governor;
use crate::snapshot::SourceView;
use crate::status::Status;

/// One source a decision was recorded for, with the digest of the bytes it was recorded for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub id: String,
    pub digest: String,
}

pub(crate) struct Decisions {
    pub(crate) core: Arc<Core>,
    pub(crate) status: Arc<Status>,
    pub(crate) policy: Arc<Governor>,
}

impl Decisions {
    /// Records `decision` for each chosen source (all sources waiting for a decision with
    /// `ids = None`), exactly as the current snapshot shows them — every file with its digest —
    /// then rescans. A choice is a source id, or `id@digest` with the digest the person was
    /// shown (the full `sha256:…` or at least 8 of its hex digits): an approval of a source
    /// whose bytes moved since is refused, so what is approved is what was shown. Unknown ids
    /// and moved sources fail the whole call before anything is recorded.
    pub fn decide(
        &self,
        ids: Option<&[String]>,
        decision: Decision,
        decided_by: &str,
        this_project_only: bool,
        including_fetch: bool,
    ) -> Result<Vec<Decided>, BerthError> {
        self.status.rescan();
        let snapshot = self.core.status();
        let chosen: Vec<&SourceView> = match ids {
            Some(ids) => {
                let mut out = Vec::new();
                for choice in ids {
                    let (id, seen) = match choice.split_once('@') {
                        Some((id, digest)) => (id, Some(digest)),
                        None => (choice.as_str(), None),
                    };
                    let Some(s) = snapshot.sources.iter().find(|s| s.id == id) else {
                        return Err(BerthError::new(
                            code::INVALID_ARGUMENTS,
                            "approval",
                            format!("no source has the id `{id}`"),
                            "list the ids with `berth sources`",
                        ));
                    };
                    if let Some(seen) = seen {
                        if !digest_matches(&s.digest, seen) && decision == Decision::Allow {
                            return Err(BerthError::new(
                                code::ACTION_REQUIRED,
                                "approval",
                                format!(
                                    "{id} changed since it was shown to you (shown {seen}, now {}); nothing was approved",
                                    s.digest
                                ),
                                "look at it again (`berth sources` or the status page) and approve what it is now",
                            )
                            .for_plugin(id.to_string()));
                        }
                    }
                    out.push(s);
                }
                out
            }
            None => snapshot
                .sources
                .iter()
                .filter(|s| {
                    matches!(
                        s.state,
                        SourceState::PendingApproval | SourceState::PendingActivation
                    )
                })
                .collect(),
        };
        for s in &chosen {
            // Unusable, or switched off in the config (disabled without a denial): nothing to
            // decide on. A denied source (disabled by that denial) may be approved again.
            let off_in_config =
                s.state == SourceState::Disabled && s.approval.decision != Some(Decision::Deny);
            if s.state == SourceState::Unsupported || off_in_config {
                return Err(BerthError::new(
                    code::UNSUPPORTED,
                    "approval",
                    format!(
                        "{} cannot be approved: {}",
                        s.id,
                        s.diagnostics
                            .first()
                            .map(|d| d.message.as_str())
                            .unwrap_or("it is not supported")
                    ),
                    "see the source's diagnostics",
                )
                .for_plugin(s.id.clone()));
            }
        }
        // The organisation decides which sources may run at all; nothing outside its list is
        // approved.
        if decision == Decision::Allow {
            let policy = self.policy.current();
            for s in &chosen {
                if let Err(why) =
                    policy.source_allowed(&s.id, s.npm.as_ref().map(|n| n.name.as_str()))
                {
                    return Err(BerthError::new(
                        code::POLICY_LIMITED,
                        "approval",
                        format!("{} cannot be approved: {why}", s.id),
                        "ask your administrator to add it to `sources.allow`",
                    )
                    .for_plugin(s.id.clone()));
                }
            }
        }
        let backend = approval::backend_for(&self.core.runtimes);
        self.core.with_store(|store| -> Result<(), BerthError> {
            for s in &chosen {
                let key =
                    approval::key_for(s, self.core.domain(), backend, &self.core.project_key());
                // What the loaded module showed (checkpoint two) is part of what is approved.
                let observed = store.contributions(&s.id, &s.digest, &key.backend)?;
                let mut shown =
                    approval::shown_for(&s.capabilities, &s.manifest, observed.as_ref());
                // An npm plugin allowed before its fetch, with what the fetch brings: its second
                // step is taken by this decision (the bytes are judged and recorded when here).
                if including_fetch
                    && s.kind == SourceKind::NpmPlugin
                    && s.capabilities.contents_unknown
                {
                    shown["including_fetch"] = serde_json::Value::Bool(true);
                }
                record(
                    store,
                    &key,
                    s,
                    decision,
                    &shown,
                    decided_by,
                    this_project_only,
                )?;
            }
            Ok(())
        })?;
        self.status.rescan();
        Ok(chosen
            .iter()
            .map(|s| Decided {
                id: s.id.clone(),
                digest: s.digest.clone(),
            })
            .collect())
    }

    /// Approves exactly the bytes `digest` of `id` as the current snapshot shows them, for an
    /// update or a rollback the person asked for (`decided_by` says which); `extra` is merged
    /// into what the approval records as shown. A source that moved since is refused.
    pub fn decide_exact(
        &self,
        id: &str,
        digest: &str,
        decided_by: &str,
        extra: Option<serde_json::Value>,
    ) -> Result<(), BerthError> {
        self.status.rescan();
        let snapshot = self.core.status();
        let s = snapshot
            .sources
            .iter()
            .find(|s| s.id == id)
            .filter(|s| s.digest == digest)
            .ok_or_else(|| {
                BerthError::new(
                    code::ACTION_REQUIRED,
                    decided_by,
                    format!("{id} is not the version that was prepared (its files moved meanwhile); nothing was changed"),
                    "check for updates again",
                )
                .for_plugin(id.to_string())
            })?;
        let backend = approval::backend_for(&self.core.runtimes);
        let this_project_only = self
            .core
            .with_store(|st| {
                let key =
                    approval::key_for(s, self.core.domain(), backend, &self.core.project_key());
                st.current_approval(&key)
                    .map(|r| r.is_some_and(|r| r.project.is_some()))
            })
            .unwrap_or(false);
        self.core.with_store(|store| -> Result<(), BerthError> {
            let key = approval::key_for(s, self.core.domain(), backend, &self.core.project_key());
            let observed = store.contributions(&s.id, &s.digest, &key.backend)?;
            let mut shown = approval::shown_for(&s.capabilities, &s.manifest, observed.as_ref());
            if let (Some(extra), Some(obj)) = (extra, shown.as_object_mut()) {
                for (k, v) in extra.as_object().into_iter().flatten() {
                    obj.insert(k.clone(), v.clone());
                }
            }
            record(
                store,
                &key,
                s,
                Decision::Allow,
                &shown,
                decided_by,
                this_project_only,
            )?;
            Ok(())
        })?;
        self.status.rescan();
        Ok(())
    }

    /// Gives each source of `ids` a host of its own (`own`), or puts it back in the shared one;
    /// the next activation moves it (its old host is stopped). Unknown ids fail first.
    pub fn set_own_host(&self, ids: &[String], own: bool) -> Result<Vec<String>, BerthError> {
        let snapshot = self.core.status();
        for id in ids {
            if !snapshot.sources.iter().any(|s| &s.id == id) {
                return Err(BerthError::new(
                    code::INVALID_ARGUMENTS,
                    "host",
                    format!("no source has the id `{id}`"),
                    "list the ids with `berth sources`",
                ));
            }
        }
        self.core.with_store(|s| {
            for id in ids {
                s.set_own_host(id, own)?;
            }
            Ok::<(), berth_store::StoreError>(())
        })?;
        self.status.rescan();
        Ok(ids.to_vec())
    }

    pub fn approvals(&self) -> Result<Vec<ApprovalRow>, BerthError> {
        self.core.with_store(|s| s.approvals()).map_err(Into::into)
    }

    pub fn backup(&self, dest: &Path) -> Result<(), BerthError> {
        let store = self.core.store();
        store.backup_to(dest).map_err(Into::into)
    }

    pub fn restore(&self, src: &Path) -> Result<(), BerthError> {
        let mut store = self.core.store();
        store.restore_from(src).map_err(Into::into)
    }
}

/// Records `decision` for exactly the bytes of `s` with what the person was `shown`.
fn record(
    store: &berth_store::Store,
    key: &berth_store::ApprovalKey,
    s: &berth_discovery::Source,
    decision: Decision,
    shown: &serde_json::Value,
    decided_by: &str,
    this_project_only: bool,
) -> Result<(), berth_store::StoreError> {
    store
        .record_approval(&NewApproval {
            key,
            plugin_identity: &s.entry,
            decision,
            digest: &s.digest,
            capability_digest: &s.capability_digest,
            shown,
            decided_by,
            this_project_only,
        })
        .map(drop)
}

/// Whether `seen` (a full `sha256:…` digest, or at least 8 hex digits of one) names `digest`.
fn digest_matches(digest: &str, seen: &str) -> bool {
    let hex = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_ascii_lowercase();
    let (have, seen) = (hex(digest), hex(seen));
    seen.len() >= 8 && seen.chars().all(|c| c.is_ascii_hexdigit()) && have.starts_with(&seen)
}
