//! Updates and rollbacks of npm plugins (seed 003 §4, §5.2, §9). A check asks the registry what
//! the plugin's spec allows now — only when the person asks, or when their update policy says
//! so (OpenCode 1.18.4 never refreshes a cached `latest`; neither does Berth on its own). An
//! update prepares the exact version in a folder of its own while the version that runs keeps
//! serving (install scripts off), judges what it can do before anything of it is imported (more
//! than before waits for the person), then points the spec at it and reloads — the old host
//! stopped first (`HostSupervisor::replace`). A rollback points the spec back at an exact
//! version that ran before, if its bytes are still there as they were, and reloads the same way.
//!
//! Owns: the check, the update and rollback steps, their progress, and the policy-driven
//! background check. Must not: import or run plugin code itself (activation does, behind the
//! gate), take a version the registry gives no integrity for, or rebuild a version from today's
//! source and call it the old one.

use std::sync::Arc;
use std::time::Duration;

use berth_discovery::{Source, SourceKind, SourceState};
use serde::Serialize;
use serde_json::{json, Value};

use crate::approval;
use crate::catalog::Catalog;
use crate::core::Core;
use crate::decisions::Decisions;
use crate::error::{code, BerthError};
use crate::governor::Governor;
use crate::snapshot::UpdateProgress;
use crate::status::Status;

mod mcp;

/// What the registry offers for one npm plugin, as last checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offer {
    pub source_id: String,
    pub name: String,
    /// The version, range or tag the config asks for.
    pub request: String,
    /// The version that runs (or was prepared) now.
    pub current: Option<String>,
    /// The newest version the request allows now, when it is newer than `current`.
    pub available: Option<Candidate>,
    /// The registry's `latest` tag (it may lie outside the request).
    pub latest: Option<String>,
    pub checked_at_ms: i64,
}

/// What one check of several plugins found: an offer per plugin checked, and the plugins whose
/// check failed (the others were checked).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Checks {
    pub offers: Vec<Offer>,
    pub errors: Vec<BerthError>,
}

impl Checks {
    fn of(results: Vec<Result<Offer, BerthError>>) -> Checks {
        let mut c = Checks::default();
        for r in results {
            match r {
                Ok(o) => c.offers.push(o),
                Err(e) => c.errors.push(e),
            }
        }
        c
    }
}

/// One version the registry offers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub version: String,
    /// npm's integrity of its tarball (an offer without one is never taken).
    pub integrity: Option<String>,
    /// When it was published (the registry's word).
    pub published: Option<String>,
}

/// How an update or rollback ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Nothing newer is allowed by the spec now.
    UpToDate { version: Option<String> },
    /// The new version runs.
    Updated { from: Option<String>, to: String },
    /// The exact older version runs again.
    RolledBack { from: Option<String>, to: String },
    /// The new version was imported and registers more than the version before: nothing of
    /// it is registered until the person approves it (pending-activation).
    Held { to: String, grew: Vec<String> },
}

pub(crate) struct Updates {
    pub(crate) core: Arc<Core>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) status: Arc<Status>,
    pub(crate) decisions: Decisions,
    pub(crate) policy: Arc<Governor>,
}

impl Updates {
    /// Checks the npm plugins `ids` (all of them with `None`) against the registry now.
    /// A plugin whose check failed is an error in the list; the others are checked.
    pub async fn check(&self, ids: Option<&[String]>) -> Checks {
        let scan = self.core.fresh_scan();
        let chosen: Vec<Source> = scan
            .sources
            .into_iter()
            .filter(|s| s.kind == SourceKind::NpmPlugin)
            .filter(|s| ids.is_none_or(|ids| ids.contains(&s.id)))
            .collect();
        let mut out = Vec::new();
        if let Some(ids) = ids {
            for id in ids.iter().filter(|id| !chosen.iter().any(|s| &s.id == *id)) {
                out.push(Err(not_npm(id)));
            }
        }
        for s in &chosen {
            out.push(self.check_one(s).await);
        }
        self.status.rescan();
        Checks::of(out)
    }

    async fn check_one(&self, source: &Source) -> Result<Offer, BerthError> {
        let npm = registry_spec(source)?;
        self.progress(&source.id, Some(UpdateProgress::Checking));
        let packages = self.core.options().packages_dir();
        let (name, request) = (npm.name.clone(), npm.request.clone());
        let budget = self.policy.current().budget("budget.prepare");
        let answer = tokio::task::spawn_blocking(move || {
            crate::deps::npm_view(&packages, &name, &request, budget)
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        self.progress(&source.id, None);
        let answer = answer.map_err(|why| {
            BerthError::new(
                code::DEPENDENCY_FAILED,
                "update check",
                format!("cannot ask the registry about {}: {why}", npm.name),
                "check the network and the registry in your npm configuration, then check again",
            )
            .for_plugin(source.id.clone())
        })?;
        let offer = offer_from(&source.id, source.npm.as_ref(), &answer);
        self.keep_check(&offer, None);
        Ok(offer)
    }

    /// Keeps `offer` as the last check, with `failed` (an update that did not happen) shown
    /// until the next update or rollback, and every version that failed to load here kept
    /// across checks (an automatic update never takes one again).
    fn keep_check(&self, offer: &Offer, failed: Option<&UpdateProgress>) {
        let before = self
            .core
            .with_store(|s| s.update_check(&offer.source_id))
            .ok()
            .flatten()
            .map(|(a, _)| a)
            .unwrap_or_default();
        let mut answer = serde_json::to_value(offer).unwrap_or_default();
        let mut broken: Vec<Value> = before["failed_versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(UpdateProgress::Failed {
            target, code: c, ..
        }) = failed
        {
            // Only a version that was loaded and failed (not one refused before import).
            if c == code::PLUGIN_FAILED && !broken.iter().any(|v| v == target) {
                broken.push(json!(target));
            }
        }
        if let Some(o) = answer.as_object_mut() {
            if let Some(f) = failed {
                o.insert("failed".into(), serde_json::to_value(f).unwrap_or_default());
            }
            o.insert("failed_versions".into(), Value::Array(broken));
        }
        let _ = self
            .core
            .with_store(|s| s.record_update_check(&offer.source_id, &answer));
    }

    /// Versions of `id` that failed to load here after an update.
    fn failed_versions(&self, id: &str) -> Vec<String> {
        self.core
            .with_store(|s| s.update_check(id))
            .ok()
            .flatten()
            .and_then(|(a, _)| a["failed_versions"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }

    /// Updates `id` to the newest version its spec allows now. `approve_growth`: the person saw
    /// what the new version can do beyond the one that runs, and allows it.
    pub async fn update(&self, id: &str, approve_growth: bool) -> Result<Outcome, BerthError> {
        if let Some(server) = self.mcp_source(id) {
            return self.update_mcp(&server).await;
        }
        self.update_because(id, approve_growth, Asked::Person).await
    }

    async fn update_because(
        &self,
        id: &str,
        approve_growth: bool,
        asked: Asked,
    ) -> Result<Outcome, BerthError> {
        let source = self.approved_npm_source(id)?;
        let offer = self.check_one(&source).await?;
        let Some(target) = offer.available.clone() else {
            return Ok(Outcome::UpToDate {
                version: offer.current,
            });
        };
        let result = self
            .update_to(&source, &offer, &target, approve_growth, asked)
            .await;
        let waiting = matches!(
            self.catalog.state().update_progress.get(id),
            Some(UpdateProgress::WaitingForYou { .. })
        );
        match &result {
            // Waiting for the person is not a failure; its progress says so already.
            Err(_) if waiting => {}
            Err(e) => {
                let failed = UpdateProgress::Failed {
                    target: target.version.clone(),
                    code: e.code.to_string(),
                    message: e.message.clone(),
                    recovery: e.recovery.clone(),
                };
                self.keep_check(&offer, Some(&failed));
                self.progress(id, Some(failed));
            }
            Ok(_) => self.progress(id, None),
        }
        self.status.rescan();
        result
    }

    async fn update_to(
        &self,
        source: &Source,
        offer: &Offer,
        target: &Candidate,
        approve_growth: bool,
        asked: Asked,
    ) -> Result<Outcome, BerthError> {
        let npm = registry_spec(source)?;
        let Some(integrity) = target.integrity.clone() else {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "update",
                format!("the registry gives no integrity for {}@{}: its bytes could not be told from any others, so it is not taken", npm.name, target.version),
                "ask the package's publisher, or keep the version that runs",
            )
            .for_plugin(source.id.clone()));
        };
        // Prepared in the background; the version that runs keeps serving meanwhile.
        self.progress(
            &source.id,
            Some(UpdateProgress::Preparing {
                target: target.version.clone(),
            }),
        );
        let packages = self.core.options().packages_dir();
        let budget = self.policy.current().budget("budget.prepare");
        let (name, version) = (npm.name.clone(), target.version.clone());
        // What it can do is read from its bytes before anything of it runs, in the same
        // background step (off the async workers, at the preparation's low priority).
        let provided = self.core.provided_packages().await;
        let (dir, candidate) = {
            let packages = packages.clone();
            let mut scanner = self.core.scanner();
            let source = source.clone();
            tokio::task::spawn_blocking(move || {
                let dir = crate::deps::prepare_npm_version(
                    &packages, &name, &version, &integrity, budget, &provided,
                )?;
                let candidate = crate::deps::in_background(|| scanner.npm_candidate(&source, &dir))
                    .ok_or_else(|| not_npm(&source.id))?;
                Ok::<_, BerthError>((dir, candidate))
            })
            .await
            .map_err(|e| {
                BerthError::new(code::DEPENDENCY_FAILED, "update", e.to_string(), "retry")
            })??
        };
        if matches!(
            candidate.state,
            SourceState::Unsupported | SourceState::IncompatibleVersion
        ) {
            let why = candidate
                .diagnostics
                .first()
                .map(|d| d.message.clone())
                .unwrap_or_else(|| "OpenCode would not load it".into());
            return Err(BerthError::new(
                code::UNSUPPORTED,
                "update",
                format!("{}@{} cannot run: {why}", npm.name, target.version),
                "keep the version that runs; a later version may fix it",
            )
            .for_plugin(source.id.clone()));
        }
        let approved = self.approved_capabilities(source);
        let grew = approval::growth(&approved, &candidate.capabilities);
        if !grew.is_empty() && !approve_growth {
            self.progress(
                &source.id,
                Some(UpdateProgress::WaitingForYou {
                    target: target.version.clone(),
                    grew: grew.clone(),
                }),
            );
            self.status.rescan();
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "update",
                format!(
                    "{}@{} can do more than the version that runs ({}); it is prepared, and nothing of it runs until you allow it",
                    npm.name,
                    target.version,
                    grew.join("; ")
                ),
                "look at what it adds, then update with --approve-growth (the page: Review and update)",
            )
            .for_plugin(source.id.clone()));
        }
        self.progress(
            &source.id,
            Some(UpdateProgress::Applying {
                target: target.version.clone(),
            }),
        );
        let folder = dir
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (because, decided_by) = match asked {
            Asked::Person => ("you asked for it", "update"),
            Asked::Policy => ("your update policy is auto", "auto-update"),
        };
        let why = format!(
            "updated from {} to {} ({because})",
            offer
                .current
                .as_deref()
                .unwrap_or("the version prepared first"),
            target.version
        );
        self.switch(source, Some(&folder), &candidate, &why, decided_by)
            .await?;
        self.outcome_after(&source.id, offer.current.clone(), &target.version, false)
    }

    /// Runs the exact version `to` (an execution version's id; the one before the current with
    /// `None`) of `id` again, if its bytes are still there as they ran.
    pub async fn rollback(&self, id: &str, to: Option<i64>) -> Result<Outcome, BerthError> {
        if let Some(server) = self.mcp_source(id) {
            return self.rollback_mcp(&server, to).await;
        }
        let local = self.core.fresh_scan().sources.into_iter().find(|s| {
            s.id == id && matches!(s.kind, SourceKind::FilePlugin | SourceKind::StandaloneTool)
        });
        if let Some(source) = local {
            return self.rollback_local(&source, to).await;
        }
        let source = self.approved_npm_source(id)?;
        let npm = registry_spec(&source)?;
        let backend = approval::backend_name(approval::backend_for(&self.core.runtimes()));
        let versions = self
            .core
            .with_store(|s| s.execution_versions(id, backend, 100))?;
        let current = versions.first().cloned();
        let target = pick_target(&versions, to, &source.digest, id)?;
        let install = crate::versions::recoverable(&self.core.options().data_dir, &target.record)
            .map_err(|why| {
            BerthError::new(
                code::ACTION_REQUIRED,
                "rollback",
                format!("{why}; nothing was changed"),
                "update to a version the registry offers instead",
            )
            .for_plugin(id.to_string())
        })?;
        let packages = self.core.options().packages_dir();
        let install = std::path::PathBuf::from(install);
        let folder = if install.parent()
            == Some(berth_discovery::npm_versions_dir(&packages).as_path())
        {
            install
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        } else if install == berth_discovery::npm_slot_dir(&packages, &npm.name, &npm.request) {
            None
        } else {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "rollback",
                format!("previous version not recoverable: its install {} is not one of this spec's prepared versions", install.display()),
                "update to a version the registry offers instead",
            )
            .for_plugin(id.to_string()));
        };
        let candidate = self
            .core
            .scanner()
            .npm_candidate(&source, &install)
            .ok_or_else(|| not_npm(id))?;
        if candidate.digest != target.digest {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "rollback",
                format!("previous version not recoverable: its files are not the ones that ran ({} now, {} then)", candidate.digest, target.digest),
                "update to a version the registry offers instead",
            )
            .for_plugin(id.to_string()));
        }
        let to_version = target
            .version
            .clone()
            .unwrap_or_else(|| target.digest.clone());
        // From what the spec points at now (it may be a version that never loaded).
        let from = npm
            .resolved
            .as_ref()
            .map(|r| r.version.clone())
            .or_else(|| current.and_then(|c| c.version));
        let why = format!(
            "rolled back from {} to {to_version} (you asked for it)",
            from.as_deref().unwrap_or("the version that ran")
        );
        self.progress(
            id,
            Some(UpdateProgress::Applying {
                target: to_version.clone(),
            }),
        );
        let done = self
            .switch(&source, folder.as_deref(), &candidate, &why, "rollback")
            .await
            .and_then(|_| self.outcome_after(id, from, &to_version, true));
        if done.is_ok() {
            // The failed update it undoes is no longer what the page shows.
            if let Ok(Some((mut answer, _))) = self.core.with_store(|s| s.update_check(id)) {
                if let Some(o) = answer.as_object_mut() {
                    o.remove("failed");
                }
                let _ = self.core.with_store(|s| s.record_update_check(id, &answer));
            }
        }
        self.progress(id, None);
        self.status.rescan();
        done
    }

    /// A local source runs an exact earlier version again: its recorded files, their bytes
    /// from Berth's copies (the files on disk are the person's and stay as they are), pinned
    /// until those files change again or the person decides on them.
    async fn rollback_local(
        &self,
        source: &Source,
        to: Option<i64>,
    ) -> Result<Outcome, BerthError> {
        let id = source.id.as_str();
        let backend = approval::backend_for(&self.core.runtimes());
        let name = approval::backend_name(backend);
        let versions = self
            .core
            .with_store(|s| s.execution_versions(id, name, 100))?;
        let current = versions.first().cloned();
        let target = pick_target(&versions, to, &source.digest, id)?;
        crate::versions::recoverable(&self.core.options().data_dir, &target.record).map_err(
            |why| {
                BerthError::new(
                    code::ACTION_REQUIRED,
                    "rollback",
                    format!("{why}; nothing was changed"),
                    "restore the file's earlier content yourself (your editor or version control)",
                )
                .for_plugin(id.to_string())
            },
        )?;
        // What the person approved it with then (a version that ran was approved).
        let then = self
            .core
            .with_store(|s| s.approvals())?
            .into_iter()
            .find(|r| {
                r.source_id == id
                    && r.digest == target.digest
                    && r.decision == berth_store::Decision::Allow
            })
            .ok_or_else(|| {
                BerthError::new(
                    code::ACTION_REQUIRED,
                    "rollback",
                    format!("no approval of {id} as it was then is on record"),
                    "restore the file's earlier content yourself and approve it",
                )
                .for_plugin(id.to_string())
            })?;
        let label = target
            .version
            .clone()
            .unwrap_or_else(|| crate::snapshot::short(&target.digest));
        let why = format!(
            "rolled back to {label}, its bytes from Berth's copy; the files on disk stay as they are (you asked for it)"
        );
        {
            let _turn = self.catalog.turn().await;
            let key = approval::key_for(
                source,
                self.core.domain(),
                backend,
                &self.core.project_key(),
            );
            let mut shown = then.shown.clone();
            if let Some(o) = shown.as_object_mut() {
                o.insert("rolled_back_to".into(), json!(target.id));
            }
            self.core.with_store(|s| -> Result<(), BerthError> {
                s.record_approval(&berth_store::NewApproval {
                    key: &key,
                    plugin_identity: &source.entry,
                    decision: berth_store::Decision::Allow,
                    digest: &target.digest,
                    capability_digest: &then.capability_digest,
                    shown: &shown,
                    decided_by: "rollback",
                    this_project_only: then.project.is_some(),
                })?;
                s.pin(id, target.id, &source.digest)?;
                Ok(())
            })?;
            self.catalog.state().reasons.insert(id.to_string(), why);
            self.catalog.activate_in_turn().await;
        }
        self.status.rescan();
        let from = current.map(|c| {
            c.version
                .unwrap_or_else(|| crate::snapshot::short(&c.digest))
        });
        let running = self.catalog.state().activity.get(id).copied();
        match running {
            Some(SourceState::Active) => Ok(Outcome::RolledBack { from, to: label }),
            other => Err(BerthError::new(
                code::PLUGIN_FAILED,
                "rollback",
                format!("the kept version of {id} did not load (it is {other:?})"),
                "look at its diagnostics and log",
            )
            .for_plugin(id.to_string())),
        }
    }

    /// Points the spec at `folder`, records the person's decision for exactly the bytes that
    /// now run (`candidate`), and reloads — all in one activation turn, so no activation sees
    /// the new bytes before the decision. The reload stops the old host before importing.
    async fn switch(
        &self,
        source: &Source,
        folder: Option<&str>,
        candidate: &Source,
        why: &str,
        decided_by: &str,
    ) -> Result<(), BerthError> {
        let npm = registry_spec(source)?;
        let packages = self.core.options().packages_dir();
        let previous = berth_discovery::npm_current_version(&packages, &npm.name, &npm.request);
        let _turn = self.catalog.turn().await;
        crate::deps::point_npm_spec(&packages, &npm.name, &npm.request, folder).map_err(|why| {
            BerthError::new(code::DEPENDENCY_FAILED, decided_by, why, "retry")
                .for_plugin(source.id.clone())
        })?;
        let decided = self.decisions.decide_exact(
            &source.id,
            &candidate.digest,
            decided_by,
            // An update's new contributions were not seen by the person unless the scan saw
            // them: what the load reveals beyond them and the version before is held.
            (decided_by != "rollback").then(|| json!({ "by_update": true, "contributions": { "tools": candidate.capabilities.tools } })),
        );
        if let Err(e) = decided {
            // Nothing was decided: the spec points where it did.
            let _ = crate::deps::point_npm_spec(
                &packages,
                &npm.name,
                &npm.request,
                previous.as_deref(),
            );
            self.status.rescan();
            return Err(e);
        }
        self.catalog
            .state()
            .reasons
            .insert(source.id.clone(), why.to_string());
        self.catalog.activate_in_turn().await;
        Ok(())
    }

    /// What the reload of `id` led to.
    fn outcome_after(
        &self,
        id: &str,
        from: Option<String>,
        to: &str,
        rollback: bool,
    ) -> Result<Outcome, BerthError> {
        let snapshot = self.core.status();
        let Some(view) = snapshot.sources.iter().find(|s| s.id == id) else {
            return Err(not_npm(id));
        };
        match view.state {
            SourceState::Active if rollback => Ok(Outcome::RolledBack {
                from,
                to: to.into(),
            }),
            SourceState::Active => Ok(Outcome::Updated {
                from,
                to: to.into(),
            }),
            SourceState::PendingActivation => Ok(Outcome::Held {
                to: to.into(),
                grew: view.approval.grew.clone(),
            }),
            _ => {
                let why = view
                    .diagnostics
                    .iter()
                    .map(|d| d.message.clone())
                    .next_back()
                    .unwrap_or_else(|| format!("it is {:?} now", view.state));
                Err(BerthError::new(
                    code::PLUGIN_FAILED,
                    if rollback { "rollback" } else { "update" },
                    format!("{to} did not load: {why}; the version before was stopped first, so nothing of {id} runs now"),
                    if rollback { "look at its diagnostics and log" } else { "roll back to the version before (berth rollback, or Roll back on the page)" },
                )
                .for_plugin(id.to_string()))
            }
        }
    }

    /// `id` as an npm plugin the person approved (an update needs an approved version to
    /// replace).
    fn approved_npm_source(&self, id: &str) -> Result<Source, BerthError> {
        let source = self
            .core
            .fresh_scan()
            .sources
            .into_iter()
            .find(|s| s.id == id && s.kind == SourceKind::NpmPlugin)
            .ok_or_else(|| not_npm(id))?;
        registry_spec(&source)?;
        let view_state = self
            .core
            .status()
            .sources
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.state);
        let decided = self
            .approval_row(&source)
            .is_some_and(|r| r.decision == berth_store::Decision::Allow);
        if !decided || source.capabilities.contents_unknown {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "update",
                format!(
                    "{id} has no approved version yet (it is {:?})",
                    view_state.unwrap_or(source.state)
                ),
                "approve it first; updates replace a version you approved",
            )
            .for_plugin(id.to_string()));
        }
        Ok(source)
    }

    fn approval_row(&self, source: &Source) -> Option<berth_store::ApprovalRow> {
        let backend = approval::backend_for(&self.core.runtimes());
        let key = approval::key_for(
            source,
            self.core.domain(),
            backend,
            &self.core.project_key(),
        );
        self.core
            .with_store(|s| s.current_approval(&key))
            .ok()
            .flatten()
    }

    /// What the person approved `source` with (the capability summary they were shown).
    fn approved_capabilities(&self, source: &Source) -> berth_discovery::Capabilities {
        self.approval_row(source)
            .map(|r| approval::capabilities_shown(&r.shown))
            .unwrap_or_default()
    }

    fn progress(&self, id: &str, p: Option<UpdateProgress>) {
        {
            let mut cat = self.catalog.state();
            match p {
                Some(p) => cat.update_progress.insert(id.to_string(), p),
                None => cat.update_progress.remove(id),
            };
        }
        self.status.rescan();
    }

    /// Every version of source `id` that ran here, the current first, with whole records.
    pub fn versions(&self, id: &str) -> Result<Vec<crate::versions::VersionView>, BerthError> {
        let mcp = self
            .core
            .status()
            .sources
            .iter()
            .any(|s| s.id == id && s.kind == SourceKind::Mcp);
        let backend = if mcp {
            crate::versions::MCP_BACKEND
        } else {
            approval::backend_name(approval::backend_for(&self.core.runtimes()))
        };
        let rows = self
            .core
            .with_store(|s| s.execution_versions(id, backend, 1000))?;
        if rows.is_empty() && !self.core.status().sources.iter().any(|s| s.id == id) {
            return Err(BerthError::new(
                code::INVALID_ARGUMENTS,
                "versions",
                format!("no source has the id `{id}`"),
                "list the ids with `berth sources`",
            ));
        }
        Ok(crate::versions::views(
            &self.core.options().data_dir,
            &rows,
            true,
        ))
    }

    /// The background side of the person's update policy, for long-running front ends: every
    /// `every`, the npm plugins whose policy is `notify` or `auto` are checked; with `auto`, a
    /// version the spec allows that is at least the policy's minimum age is taken (one that can
    /// do more still waits for the person). `manual` plugins are never checked here.
    pub async fn keep_updated(self: Arc<Self>) {
        // `BERTH_UPDATE_CHECK_EVERY_S` (default six hours); the first round runs at start.
        let every = std::env::var("BERTH_UPDATE_CHECK_EVERY_S")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|s| *s > 0)
            .map_or(Duration::from_secs(6 * 3600), Duration::from_secs);
        loop {
            let policy = self.policy.current();
            // The snapshot's sources (no scan of its own: with every plugin on `manual`, a
            // round costs nothing).
            let sources: Vec<Source> = self
                .core
                .status()
                .sources
                .iter()
                .map(|v| v.source.clone())
                .filter(|s| s.kind == SourceKind::NpmPlugin && registry_spec(s).is_ok())
                .collect();
            for s in sources {
                let (mode, min_age, _) = policy.updates(&s.id);
                if mode == "manual" {
                    continue;
                }
                let Ok(offer) = self.check_one(&s).await else {
                    continue;
                };
                let old_enough = offer
                    .available
                    .as_ref()
                    .and_then(|c| c.published.as_deref())
                    .and_then(age_of)
                    .is_some_and(|age| age >= min_age);
                // A version that failed to load here is never taken again on its own.
                let failed_before = offer
                    .available
                    .as_ref()
                    .is_some_and(|c| self.failed_versions(&s.id).contains(&c.version));
                if mode == "auto" && offer.available.is_some() && old_enough && !failed_before {
                    if let Err(e) = self.update_because(&s.id, false, Asked::Policy).await {
                        tracing::warn!(plugin = %s.id, code = e.code, "automatic update not taken: {}", e.message);
                    }
                }
            }
            self.status.rescan();
            tokio::time::sleep(every).await;
        }
    }
}

/// The version a rollback runs: `to` (an execution version's id), or the newest that ran whose
/// bytes are not the ones the source has now.
fn pick_target(
    versions: &[berth_store::ExecutionVersion],
    to: Option<i64>,
    now: &str,
    id: &str,
) -> Result<berth_store::ExecutionVersion, BerthError> {
    match to {
        Some(v) => versions.iter().find(|x| x.id == v),
        None => versions.iter().find(|x| x.digest != now),
    }
    .cloned()
    .ok_or_else(|| {
        BerthError::new(
            code::INVALID_ARGUMENTS,
            "rollback",
            format!("{id} has no earlier version that ran here"),
            "list its versions with `berth versions`",
        )
        .for_plugin(id.to_string())
    })
}

/// Who asked for an update: the person, or their update policy (`auto`).
#[derive(Clone, Copy)]
enum Asked {
    Person,
    Policy,
}

/// How long ago an RFC 3339 time was (None when it cannot be read).
fn age_of(published: &str) -> Option<Duration> {
    let then = parse_rfc3339_ms(published)?;
    let now = berth_base::now_ms() as i64;
    Some(Duration::from_millis(now.saturating_sub(then).max(0) as u64))
}

/// Milliseconds since the epoch of `YYYY-MM-DDTHH:MM:SS(.fff)Z` (what registries write).
fn parse_rfc3339_ms(t: &str) -> Option<i64> {
    let (date, time) = t.trim_end_matches('Z').split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut h = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (h.next()??, h.next()??, h.next()??);
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

fn not_npm(id: &str) -> BerthError {
    BerthError::new(
        code::INVALID_ARGUMENTS,
        "update",
        format!("no npm plugin has the id `{id}`"),
        "list the ids with `berth sources`; only npm plugins are updated from a registry",
    )
}

/// The source's npm spec, when it names a registry version, range or tag (a `file:` folder or
/// a URL has no registry to update from).
fn registry_spec(source: &Source) -> Result<&berth_discovery::NpmRef, BerthError> {
    let npm = source.npm.as_ref().ok_or_else(|| not_npm(&source.id))?;
    if !npm.from_registry() {
        return Err(BerthError::new(
            code::UNSUPPORTED,
            "update",
            format!(
                "{} comes from {} , not from a registry: there is nothing to check",
                source.id, npm.request
            ),
            "change the spec in opencode.json to a registry version to get updates",
        )
        .for_plugin(source.id.clone()));
    }
    Ok(npm)
}

/// The offer in npm's `view` answer: the version npm would install for the request (the
/// `latest` tag when the request allows it, else the highest it allows, as npm-pick-manifest
/// picks), offered when it is newer than the version that runs.
fn offer_from(source_id: &str, npm: Option<&berth_discovery::NpmRef>, answer: &Value) -> Offer {
    let rows: Vec<&Value> = match answer {
        Value::Array(a) => a.iter().collect(),
        v @ Value::Object(_) => vec![v],
        _ => Vec::new(),
    };
    let latest = rows
        .first()
        .and_then(|r| r["dist-tags"]["latest"].as_str())
        .map(str::to_string);
    let pick = rows
        .iter()
        .find(|r| r["version"].as_str().is_some() && r["version"].as_str() == latest.as_deref())
        .or_else(|| {
            rows.iter()
                .filter(|r| r["version"].as_str().is_some_and(|v| !v.contains('-')))
                .max_by(|a, b| {
                    semver_cmp(
                        a["version"].as_str().unwrap_or(""),
                        b["version"].as_str().unwrap_or(""),
                    )
                })
        });
    let current = npm
        .and_then(|n| n.resolved.as_ref())
        .map(|r| r.version.clone());
    let available = pick.and_then(|r| {
        let version = r["version"].as_str()?.to_string();
        let newer = current
            .as_deref()
            .is_none_or(|c| semver_cmp(&version, c) == std::cmp::Ordering::Greater);
        newer.then(|| Candidate {
            published: r["time"][version.as_str()].as_str().map(str::to_string),
            integrity: r["dist.integrity"].as_str().map(str::to_string),
            version,
        })
    });
    Offer {
        source_id: source_id.to_string(),
        name: npm.map(|n| n.name.clone()).unwrap_or_default(),
        request: npm.map(|n| n.request.clone()).unwrap_or_default(),
        current,
        available,
        latest,
        checked_at_ms: berth_base::now_ms() as i64,
    }
}

/// Orders two `x.y.z[-pre]` versions as semver does (a pre-release before its release).
fn semver_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |v: &str| {
        let (core, pre) = v
            .split_once('-')
            .map_or((v, None), |(c, p)| (c, Some(p.to_string())));
        let nums: Vec<u64> = core.split('.').map(|n| n.parse().unwrap_or(0)).collect();
        (nums, pre)
    };
    let (na, pa) = split(a);
    let (nb, pb) = split(b);
    na.cmp(&nb).then_with(|| match (pa, pb) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(x), Some(y)) => x.cmp(&y),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_as_semver_does() {
        use std::cmp::Ordering::*;
        assert_eq!(semver_cmp("1.10.0", "1.9.0"), Greater);
        assert_eq!(semver_cmp("2.0.0-beta.1", "2.0.0"), Less);
        assert_eq!(semver_cmp("1.0.0", "1.0.0"), Equal);
    }

    #[test]
    fn the_offer_is_what_npm_would_install_for_the_spec() {
        let npm = Some(berth_discovery::NpmRef {
            name: "p".into(),
            request: "^1.0.0".into(),
            resolved: Some(berth_discovery::Resolved {
                version: "1.0.0".into(),
                integrity: None,
                packages: 1,
            }),
        });
        let row = |v: &str, latest: &str| json!({ "version": v, "dist.integrity": format!("sha512-{v}"), "time": { v: "2026-01-01T00:00:00.000Z" }, "dist-tags": { "latest": latest } });
        // `latest` lies outside ^1: the highest 1.x is offered.
        let answer = json!([
            row("1.0.0", "2.0.0"),
            row("1.4.0", "2.0.0"),
            row("1.10.0", "2.0.0")
        ]);
        let offer = offer_from("npm-p-00000000", npm.as_ref(), &answer);
        assert_eq!(
            offer.available.as_ref().map(|c| c.version.as_str()),
            Some("1.10.0")
        );
        assert_eq!(offer.latest.as_deref(), Some("2.0.0"));
        // `latest` inside the spec wins over a higher version (npm-pick-manifest's rule).
        let answer = json!([
            row("1.0.0", "1.4.0"),
            row("1.4.0", "1.4.0"),
            row("1.10.0", "1.4.0")
        ]);
        assert_eq!(
            offer_from("npm-p-00000000", npm.as_ref(), &answer)
                .available
                .map(|c| c.version),
            Some("1.4.0".into())
        );
        // One match is an object; the version that runs is not offered again.
        assert_eq!(
            offer_from("npm-p-00000000", npm.as_ref(), &row("1.0.0", "1.0.0")).available,
            None
        );
    }

    #[test]
    fn registry_times_are_read_to_the_millisecond() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("2026-12-01T20:48:40.964Z"),
            Some(1_796_158_120_964)
        );
        assert_eq!(parse_rfc3339_ms("not a time"), None);
    }
}
