//! Preparation: npm plugins approved before their bytes were known are fetched now (install
//! scripts off, within the policy's `budget.prepare`; no code of theirs runs), a failure kept on
//! the source until one succeeds, and a decision taken "including what the fetch brings"
//! recorded for the fetched bytes.
//!
//! Owns: that step of activation. Must not: import anything (activation judges the fetched
//! bytes against the approval after this, as for any source).

use berth_discovery::{SourceKind, SourceState};
use serde_json::Value;

use crate::approval;
use crate::error::{code, BerthError};
use crate::runtimes::RuntimeKind;

use super::*;

impl Catalog {
    /// Prepares every approved npm plugin of `fresh` whose bytes are not here yet; true when
    /// one was (the caller scans again).
    pub(super) async fn prepare_fetches(
        &self,
        fresh: &berth_discovery::Discovery,
        act: &mut Activation,
    ) -> bool {
        let backend_now = approval::backend_for(&self.core.runtimes());
        let mut prepared_any = false;
        for source in fresh
            .sources
            .iter()
            .filter(|s| s.kind == SourceKind::NpmPlugin && s.capabilities.contents_unknown)
        {
            let key = approval::key_for(
                source,
                self.core.domain(),
                backend_now,
                &self.core.project_key(),
            );
            let approved = self
                .core
                .with_store(|s| s.current_approval(&key))
                .ok()
                .flatten()
                .is_some_and(|r| r.decision == berth_store::Decision::Allow);
            let Some(npm) = &source.npm else { continue };
            let (name, request) = (npm.name.as_str(), npm.request.as_str());
            if !approved {
                continue;
            }
            self.state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .activity
                .insert(source.id.clone(), SourceState::Preparing);
            self.core.rescan();
            let (packages, name, request) = (
                self.core.options().packages_dir(),
                name.to_string(),
                request.to_string(),
            );
            let budget = self.policy.current().budget("budget.prepare");
            let provided = self.core.provided_packages().await;
            let result = tokio::task::spawn_blocking(move || {
                crate::deps::prepare_npm_plugin(&packages, &name, &request, budget, &provided)
            })
            .await;
            let failure = match result {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.for_plugin(source.id.clone())),
                Err(e) => Some(
                    BerthError::new(
                        code::DEPENDENCY_FAILED,
                        "dependencies",
                        e.to_string(),
                        "retry",
                    )
                    .for_plugin(source.id.clone()),
                ),
            };
            // A failed preparation stays on the source (load-failed, with npm's message) until
            // one succeeds: the person sees why it does not run, not only the log.
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match failure {
                None => {
                    prepared_any = true;
                    cat.activity.remove(&source.id);
                    cat.failures.remove(&source.id);
                }
                Some(e) => {
                    cat.activity
                        .insert(source.id.clone(), SourceState::LoadFailed);
                    cat.failures.insert(source.id.clone(), e.clone());
                    act.problems.push(e);
                }
            }
        }
        if prepared_any {
            let fresh = self.core.fresh_scan();
            self.approve_fetched(&fresh.sources, backend_now);
        }
        prepared_any
    }

    /// npm plugins the person allowed together with what their fetch brings: now that the
    /// bytes are here, that decision is recorded for them (the audit trail says so).
    fn approve_fetched(&self, sources: &[berth_discovery::Source], backend: RuntimeKind) {
        for source in sources
            .iter()
            .filter(|s| s.kind == SourceKind::NpmPlugin && !s.capabilities.contents_unknown)
        {
            let key = approval::key_for(
                source,
                self.core.domain(),
                backend,
                &self.core.project_key(),
            );
            let _ = self
                .core
                .with_store(|s| -> Result<(), berth_store::StoreError> {
                    let Some(row) = s.current_approval(&key)? else {
                        return Ok(());
                    };
                    let before_fetch =
                        row.shown.get("contents_unknown") == Some(&Value::Bool(true));
                    let with_fetch = row.shown.get("including_fetch") == Some(&Value::Bool(true));
                    if row.decision != berth_store::Decision::Allow
                        || !before_fetch
                        || !with_fetch
                        || row.digest == source.digest
                    {
                        return Ok(());
                    }
                    let shown = approval::shown_for(&source.capabilities, &source.manifest, None);
                    s.record_approval(&berth_store::NewApproval {
                        key: &key,
                        plugin_identity: &source.entry,
                        decision: berth_store::Decision::Allow,
                        digest: &source.digest,
                        capability_digest: &source.capability_digest,
                        shown: &shown,
                        decided_by: &format!("{} (allowed with its fetch)", row.decided_by),
                        this_project_only: row.project.is_some(),
                    })?;
                    Ok(())
                });
        }
    }
}
