//! Activation: the approved sources imported in their hosts behind the gate (npm fetches first,
//! `prepare`; restricted sources inside their boundary, `restricted`), what they contribute
//! checked against the version active before (checkpoint two), then offered to the catalog as
//! the policy admits it; revoked and changed sources withdrawn and their hosts retired.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use berth_discovery::{SourceKind, SourceState};
use berth_protocol::CallKind;
use serde_json::Value;

use crate::approval;
use crate::error::{code, BerthError};
use crate::host::{CallOptions, HostKey, HostSupervisor};
use crate::runtimes::RuntimeKind;
pub use crate::snapshot::{Provider, ToolEntry};

use super::restricted;
use super::*;

impl Catalog {
    /// Imports every approved standalone tool source whose bytes still match its approval,
    /// withdraws the tools of every source that is no longer approved, and returns the
    /// catalog. Problems are per source; the others still load. Publishes the new status.
    pub async fn activate(&self) -> Activation {
        let _turn = self.activating.lock().await;
        self.activate_in_turn().await
    }

    /// `activate` for a caller that holds the turn (`Catalog::turn`).
    pub(crate) async fn activate_in_turn(&self) -> Activation {
        // Its commits are covered by the rescan it ends with.
        let quiet = self.core.defer_rescans();
        let mut act = self.activate_inner().await;
        if act.held_code {
            // The sources loaded before the held one shared its stopped host.
            let again = self.activate_inner().await;
            for p in again.problems {
                if !act
                    .problems
                    .iter()
                    .any(|q| q.plugin == p.plugin && q.code == p.code)
                {
                    act.problems.push(p);
                }
            }
            act.tools = again.tools;
        }
        quiet.rescan_now();
        act
    }

    /// Decisions recorded since the last activation (by any process) take effect now, before
    /// anything runs: revoked sources are withdrawn and their code stopped.
    pub(crate) async fn apply_new_decisions(&self) {
        // Read under the turn: an activation that just finished has recorded what it saw.
        let _turn = self.activating.lock().await;
        let now = self.core.with_store(|s| s.decisions_marker()).ok();
        let seen = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .decisions_seen;
        // The organisation's file changed (it is not in the store): the caps are judged again.
        let policy_moved = self.policy.refresh();
        if now.is_none() || now != seen || policy_moved {
            Box::pin(self.activate_in_turn()).await;
        }
    }

    pub(super) async fn activate_inner(&self) -> Activation {
        let mut act = Activation::default();
        self.policy.refresh();
        let marker = self.core.with_store(|s| s.decisions_marker()).ok();
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .decisions_seen = marker;
        // The gate reads the bytes as they are now, not a cached view.
        let mut fresh = self.core.fresh_scan();
        // npm plugins approved before their bytes were known are prepared now (no code runs:
        // install scripts are off), then judged again on what the package really contains.
        if self.prepare_fetches(&fresh, &mut act).await {
            fresh = self.core.fresh_scan();
        }
        let backend = approval::backend_for(&self.core.runtimes());
        self.state().ensure_builtins(backend);
        self.apply_pins(&mut fresh, backend);
        let mut cleared: HashMap<String, &berth_discovery::Source> = HashMap::new();
        // Only sources whose bytes are here and that OpenCode would load at all.
        let loadable = |s: &&berth_discovery::Source| {
            matches!(
                s.kind,
                SourceKind::StandaloneTool
                    | SourceKind::FilePlugin
                    | SourceKind::NpmPlugin
                    | SourceKind::Mcp
            ) && !s.capabilities.contents_unknown
                && !matches!(
                    s.state,
                    SourceState::Unsupported
                        | SourceState::IncompatibleVersion
                        | SourceState::Disabled
                )
        };
        for source in fresh.sources.iter().filter(loadable) {
            let key = approval::key_for(
                source,
                self.core.domain(),
                backend,
                &self.core.project_key(),
            );
            let row = self
                .core
                .with_store(|s| s.current_approval(&key))
                .ok()
                .flatten();
            let Some(row) = row else { continue };
            match self.core.with_store(|s| {
                approval::gate(
                    s,
                    source,
                    self.core.domain(),
                    backend,
                    &self.core.project_key(),
                )
            }) {
                Ok(()) => {
                    cleared.insert(source.id.clone(), source);
                }
                Err(why) if row.decision == berth_store::Decision::Allow => act.problems.push(
                    BerthError::new(
                        code::ACTION_REQUIRED,
                        "approval",
                        why,
                        "review what grew and approve again",
                    )
                    .for_plugin(source.id.clone()),
                ),
                Err(_) => {}
            }
        }
        // Still listed, but its files cannot be read now (a read error, a listed file missing
        // for a moment): the version loaded before keeps serving, with a diagnostic; nothing of
        // it is withdrawn for a read error, and nothing new of it runs.
        let unreadable: HashMap<String, String> = {
            let cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            fresh
                .sources
                .iter()
                .filter(|s| {
                    matches!(s.kind, SourceKind::StandaloneTool | SourceKind::FilePlugin)
                        && s.capabilities.contents_unknown
                        && cat.loaded.contains_key(&s.id)
                })
                .map(|s| {
                    let why = s
                        .diagnostics
                        .first()
                        .map(|d| d.message.clone())
                        .unwrap_or_else(|| format!("{} cannot be read", s.entry));
                    (s.id.clone(), why)
                })
                .collect()
        };
        // A plugin that spent its own restart budget is paused until the person resumes it;
        // the others run on (it is withdrawn like a revoked source).
        if let Some(sup) = self.core.supervisor_if_started() {
            for (id, why) in sup.quarantined() {
                if cleared.remove(&id).is_some() {
                    self.state
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .activity
                        .insert(id.clone(), SourceState::Paused);
                    act.problems.push(
                        BerthError::new(
                            code::TEMPORARILY_UNAVAILABLE,
                            "host",
                            format!("{id} is paused: {why}"),
                            "look at its diagnostics and log, then press Resume on the status page",
                        )
                        .for_plugin(id),
                    );
                }
            }
        }
        // Revocation: tools of sources no longer cleared are withdrawn at once.
        let withdrawn: Vec<String> = {
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            // What is loaded, or still registered after its host went: withdrawn unless cleared
            // (or kept while it cannot be read).
            let mut gone: Vec<String> = cat
                .loaded
                .keys()
                .chain(cat.tools.values().map(|t| &t.provider.source_id))
                .chain(cat.claimants())
                .filter(|id| *id != super::conflicts::BUILTIN)
                .filter(|id| !cleared.contains_key(*id) && !unreadable.contains_key(*id))
                .cloned()
                .collect();
            gone.sort();
            gone.dedup();
            for id in &gone {
                cat.withdraw(id);
                cat.loaded.remove(id);
                cat.activity.remove(id);
            }
            drop(cat);
            self.withdraw_world(&gone);
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let failures = std::mem::take(&mut cat.failures);
            cat.activity.retain(|id, st| {
                cleared.contains_key(id)
                    || unreadable.contains_key(id)
                    || *st == SourceState::Paused
                    || failures.contains_key(id)
            });
            cat.failures = failures;
            cat.unreadable = unreadable.clone();
            gone
        };
        // A revoked MCP server is disconnected and its process stopped now.
        self.mcp.disconnect(&withdrawn).await;
        let sup = match self.core.supervisor().await {
            Ok(s) => s,
            Err(e) => {
                act.problems.push(e);
                // MCP servers need no plugin host.
                let mcp: Vec<&berth_discovery::Source> = cleared
                    .values()
                    .filter(|s| s.kind == SourceKind::Mcp)
                    .copied()
                    .collect();
                for source in mcp {
                    self.activate_mcp(&fresh.graph, source, backend, &mut act)
                        .await;
                }
                act.tools = self.state().tools.values().cloned().collect();
                return act;
            }
        };
        // Where each source runs: its own host if the person gave it one, else the shared one
        // (D-030).
        let own: std::collections::BTreeSet<String> =
            self.core.with_store(|s| s.own_hosts()).unwrap_or_default();
        // A restricted source runs alone, inside its OS boundary (which splits hosts too).
        let policy = self.policy.current();
        let key_of = |id: &str| {
            if policy.restricted(id).0 {
                HostKey::restricted(backend, id)
            } else if own.contains(id) {
                HostKey::own(backend, id)
            } else {
                HostKey::shared(backend)
            }
        };
        // Code of a source no longer cleared (revoked, grown, gone) must not keep running: its
        // calls end now and its host stops after the cancel grace. So must a source that moved
        // to or from a host of its own. A changed source's new bytes must not meet its old
        // module graph: that host is recycled (fresh host for what comes next; the old one ends
        // once its calls in flight have).
        for key in sup.running(&withdrawn).await {
            self.retire_host(
                &sup,
                &key,
                Some(&withdrawn),
                "its source is no longer approved",
            )
            .await;
        }
        for (key, loaded) in sup.placement().await {
            let moved: Vec<String> = loaded
                .into_iter()
                .filter(|id| cleared.contains_key(id) && key_of(id) != key)
                .collect();
            if !moved.is_empty() {
                self.retire_host(
                    &sup,
                    &key,
                    Some(&moved),
                    "a source it ran moved to another host",
                )
                .await;
            }
        }
        let changed: Vec<String> = {
            let cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            cleared
                .iter()
                .filter(|(id, s)| cat.loaded.get(*id).is_some_and(|d| d != &s.digest))
                .map(|(id, _)| id.clone())
                .collect()
        };
        for key in sup.running(&changed).await {
            self.retire_host(&sup, &key, None, "a source it ran changed on disk")
                .await;
        }
        // A host where a source failed to load holds what those bytes did before failing: other
        // bytes of that source (a fix, a rollback) load in a fresh host.
        let failed_elsewhere: Vec<HostKey> = {
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let moved: Vec<String> = cat
                .failed_in
                .iter()
                .filter(|(id, (_, digest))| cleared.get(*id).is_none_or(|s| &s.digest != digest))
                .map(|(id, _)| id.clone())
                .collect();
            moved
                .iter()
                .filter_map(|id| cat.failed_in.remove(id).map(|(key, _)| key))
                .collect()
        };
        for key in failed_elsewhere {
            self.retire_host(
                &sup,
                &key,
                None,
                "a source that failed to load there changed",
            )
            .await;
        }
        // A config folder's own package.json dependencies, prepared in the data dir before any
        // file of that folder is imported (install scripts off; D-001).
        let mut dirs: BTreeMap<std::path::PathBuf, Vec<String>> = BTreeMap::new();
        for (id, source) in &cleared {
            if matches!(
                source.kind,
                SourceKind::StandaloneTool | SourceKind::FilePlugin
            ) {
                if let Some(dir) = crate::deps::config_dir_of(std::path::Path::new(&source.entry)) {
                    if dir.join("package.json").is_file() {
                        dirs.entry(dir).or_default().push(id.clone());
                    }
                }
            }
        }
        for (dir, ids) in dirs {
            let data_dir = self.core.options().data_dir.clone();
            let budget = self.policy.current().budget("budget.prepare");
            let prepared = tokio::task::spawn_blocking(move || {
                crate::deps::prepare_config_dir_deps(&data_dir, &dir, budget)
            })
            .await;
            let err = match prepared {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e),
                Err(e) => Some(BerthError::new(
                    code::DEPENDENCY_FAILED,
                    "dependencies",
                    e.to_string(),
                    "retry",
                )),
            };
            if let Some(e) = err {
                for id in ids {
                    act.problems.push(e.clone().for_plugin(id));
                }
            }
        }
        let mut newly_loaded_plugins = 0usize;
        // The versions that start running in this pass, recorded together after it.
        let mut ran: Vec<(&berth_discovery::Source, String, berth_store::Contributions)> =
            Vec::new();
        // Hosts that imported a plugin held for review, with those plugins.
        let mut held: BTreeMap<HostKey, Vec<String>> = BTreeMap::new();
        // Plugins whose bytes were never loaded first (what they register is not known yet: one
        // may be held, and its host stopped, before the others are imported there), then tool
        // files, then plugins in OpenCode's load order. Registration does not depend on this
        // order: hooks are kept in load order, and a tool name goes to the source OpenCode
        // would let win (`CatalogState::register_tools`).
        let backend_name = approval::backend_name(backend);
        let mut cleared: Vec<(String, &berth_discovery::Source, bool)> = cleared
            .into_iter()
            .map(|(id, s)| {
                let known = s.kind == SourceKind::StandaloneTool
                    || self
                        .core
                        .with_store(|st| st.contributions(&id, &s.digest, backend_name))
                        .ok()
                        .flatten()
                        .is_some();
                (id, s, known)
            })
            .collect();
        cleared
            .sort_by_key(|(_, s, known)| (*known, s.kind != SourceKind::StandaloneTool, s.order));
        for (id, source, known) in cleared {
            if source.kind == SourceKind::Mcp {
                self.activate_mcp(&fresh.graph, source, backend, &mut act)
                    .await;
                continue;
            }
            if known {
                // The held ones' hosts stop before anything else is imported there.
                self.retire_held(&sup, &mut held).await;
            }
            let host_key = key_of(&id);
            if host_key.restricted {
                if let Err(why) = crate::host::boundary::tier() {
                    self.state
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .activity
                        .insert(id.clone(), SourceState::PolicyLimited);
                    act.problems.push(
                        BerthError::new(
                            code::POLICY_LIMITED,
                            "restricted mode",
                            format!("it must run restricted, and no OS boundary can be made here: {why}; nothing of it runs"),
                            "run Berth where bubblewrap or Landlock works, or set this source to compatible mode if your policy allows",
                        )
                        .for_plugin(id.clone()),
                    );
                    continue;
                }
                let kept: Vec<std::path::PathBuf> = self
                    .state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pinned
                    .get(&id)
                    .map(|(_, kept)| kept.values().cloned().collect())
                    .unwrap_or_default();
                let r = restricted::restriction_for(&self.core, source, &policy, &kept);
                // What it may reach changed (the project's access, the network): its running
                // host was made for the old boundary.
                if sup.restrict(&host_key, r) && sup.current_for(&host_key).await.is_some() {
                    self.retire_host(&sup, &host_key, None, "its boundary changed")
                        .await;
                }
            }
            let host = match sup.host_for(&host_key).await {
                Ok(h) => h,
                Err(e) => {
                    // A backend out of restarts pauses every source it would run.
                    if sup.is_paused(backend) {
                        self.state
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .activity
                            .insert(id.clone(), SourceState::Paused);
                    }
                    act.problems.push(e.for_plugin(id.clone()));
                    continue;
                }
            };
            let already = {
                let cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                cat.loaded.get(&id) == Some(&source.digest)
                    && host
                        .loaded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .contains(&id)
            };
            if already {
                continue;
            }
            // What it sends while it loads is shown again, even if it was withdrawn before.
            self.world.state().readmit(&id);
            #[cfg(debug_assertions)]
            pause_before_load(&source.entry).await;
            let loading = if source.kind != SourceKind::StandaloneTool {
                self.load_plugin(&host, source, backend).await
            } else {
                self.load_tools(&host, source, backend)
                    .await
                    .map(|t| (t, Vec::new(), Vec::new()))
            };
            // Revoked while the import ran: nothing of it is registered, and the code that
            // already ran is stopped with its host (the rest is reloaded on the next pass).
            let still_cleared = self
                .core
                .with_store(|s| {
                    approval::gate(
                        s,
                        source,
                        self.core.domain(),
                        backend,
                        &self.core.project_key(),
                    )
                })
                .is_ok();
            if loading.is_ok() && !still_cleared {
                {
                    let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    cat.withdraw(&id);
                    cat.activity.remove(&id);
                }
                // Only what this host ran loads again; the revoked source's calls end `cancelled`.
                self.retire_host(
                    &sup,
                    &host_key,
                    Some(std::slice::from_ref(&id)),
                    "a source was revoked while it was being imported",
                )
                .await;
                act.problems.push(
                    BerthError::new(
                        code::CANCELLED,
                        "activation",
                        format!(
                            "{} was revoked while it loaded; nothing of it was registered",
                            source.entry
                        ),
                        "approve it again to load it",
                    )
                    .for_plugin(id.clone()),
                );
                continue;
            }
            match loading {
                Ok((loaded, hooks, auth)) => {
                    // Checkpoint two: what the module really contributes, recorded for these
                    // bytes, compared with what was approved.
                    let observed = berth_store::Contributions {
                        tools: loaded.iter().map(|t| t.name.clone()).collect(),
                        hooks: hooks.clone(),
                    };
                    let key = approval::key_for(
                        source,
                        self.core.domain(),
                        backend,
                        &self.core.project_key(),
                    );
                    let (row, baseline) = self.core.with_store(|s| {
                        let _ =
                            s.record_contributions(&id, &source.digest, &key.backend, &observed);
                        (
                            s.current_approval(&key).ok().flatten(),
                            s.active_contributions(&id, &key.backend).ok().flatten(),
                        )
                    });
                    let extra = row
                        .as_ref()
                        .map(|r| {
                            approval::unconfirmed_growth(
                                r,
                                source,
                                Some(&observed),
                                baseline.as_ref(),
                            )
                        })
                        .unwrap_or_default();
                    if !extra.is_empty() {
                        // A later load (changed bytes the person did not decide on) contributes
                        // more than the version that was active before. None of it is
                        // registered, and its code — already imported — must not keep running:
                        // its host is stopped once the plugins not loaded before are imported
                        // (one stop however many are held), before anything else is.
                        {
                            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                            cat.suspend(&id);
                            cat.activity
                                .insert(id.clone(), SourceState::PendingActivation);
                        }
                        held.entry(host_key.clone()).or_default().push(id.clone());
                        act.held_code = true;
                        act.problems.push(
                            BerthError::new(
                                code::ACTION_REQUIRED,
                                "activation",
                                format!("its new version contributes more than the version that was active before ({}); none of it is registered and its code was stopped (pending-activation)", extra.join("; ")),
                                "review what it registers now and approve the source again",
                            )
                            .for_plugin(id.clone()),
                        );
                        self.withdraw_world(std::slice::from_ref(&id));
                        continue;
                    }
                    // What it really contributes is now its baseline (the first load of the
                    // bytes the person approved, or no more than before).
                    let _ = self.core.with_store(|s| {
                        s.record_active_contributions(&id, &key.backend, &source.digest, &observed)
                    });
                    ran.push((source, key.backend.clone(), observed.clone()));
                    let policy = self.policy.current();
                    let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    host.loaded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id.clone());
                    cat.loaded.insert(id.clone(), source.digest.clone());
                    cat.activity.insert(id.clone(), SourceState::Active);
                    cat.failures.remove(&id);
                    let plugin = source.kind != SourceKind::StandaloneTool;
                    if plugin {
                        newly_loaded_plugins += 1;
                    }
                    cat.offer(
                        &id,
                        Offered {
                            host: host_key.clone(),
                            order: source.order,
                            plugin,
                            tools: loaded,
                            hooks,
                            auth,
                        },
                        &policy,
                    );
                }
                Err(e) => {
                    // What it registered when it last worked here: its claims stay candidates
                    // even when it never loaded in this process (a restart does not make a
                    // conflict disappear because a worker is down).
                    let key = approval::key_for(
                        source,
                        self.core.domain(),
                        backend,
                        &self.core.project_key(),
                    );
                    let known = self
                        .core
                        .with_store(|s| s.active_contributions(&id, &key.backend))
                        .ok()
                        .flatten()
                        .map(|a| a.contributions.tools)
                        .unwrap_or_default();
                    let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    cat.failed_in
                        .insert(id.clone(), (host_key.clone(), source.digest.clone()));
                    cat.activity.insert(id.clone(), SourceState::LoadFailed);
                    cat.failures
                        .insert(id.clone(), e.clone().for_plugin(id.clone()));
                    cat.remember_claims(source, &host_key, &known);
                    cat.suspend(&id);
                    cat.loaded.remove(&id);
                    act.problems.push(e.for_plugin(id.clone()));
                }
            }
        }
        self.retire_held(&sup, &mut held).await;
        self.record_versions(&ran, backend);
        // After every plugin is constructed, all `config` hooks run once over the merged config,
        // in plugin order (OpenCode only logs their failures).
        if newly_loaded_plugins > 0 {
            match self
                .run_chain("config", Value::Null, fresh.graph.merged.clone(), None)
                .await
            {
                Ok(cfg) => {
                    *self
                        .effective_config
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(cfg)
                }
                Err(e) => tracing::warn!(
                    plugin = e.plugin.as_deref().unwrap_or(""),
                    "config hook failed: {}",
                    e.message
                ),
            }
        }
        // The caps in force now decide what of every loaded source is registered (a policy
        // change takes effect here, without importing anything again).
        let policy = self.policy.current();
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .judge_all(&policy);
        self.settle_conflicts();
        let cat = self.state();
        act.tools = cat.source_tools();
        act.builtins = cat.builtins.clone();
        act.conflicts = cat.conflicts.values().cloned().collect();
        drop(cat);
        act
    }

    /// A local source rolled back to a kept version runs that version (its recorded files,
    /// bytes from Berth's copies) while its files on disk are still the ones seen at the
    /// rollback and the person decided nothing newer; otherwise the pin is dropped and the
    /// files on disk take their normal course.
    fn apply_pins(&self, fresh: &mut berth_discovery::Discovery, backend: RuntimeKind) {
        let pins = self.core.with_store(|s| s.pins()).unwrap_or_default();
        let mut pinned = HashMap::new();
        for pin in pins {
            let Some(src) = fresh.sources.iter_mut().find(|s| s.id == pin.source_id) else {
                continue;
            };
            let key = approval::key_for(src, self.core.domain(), backend, &self.core.project_key());
            let (version, row) = self.core.with_store(|s| {
                (
                    s.execution_version(pin.version_id).ok().flatten(),
                    s.current_approval(&key).ok().flatten(),
                )
            });
            let holds = src.digest == pin.disk_digest
                && version
                    .as_ref()
                    .zip(row.as_ref())
                    .is_some_and(|(v, r)| r.digest == v.digest);
            let made = version.zip(row).filter(|_| holds).and_then(|(v, r)| {
                crate::versions::pinned(
                    &self.core.options().data_dir,
                    src,
                    &v,
                    approval::capabilities_shown(&r.shown),
                )
            });
            match made {
                Some((source, kept)) => {
                    *src = source;
                    pinned.insert(pin.source_id.clone(), (pin.version_id, kept));
                }
                None => {
                    let _ = self.core.with_store(|s| s.unpin(&pin.source_id));
                }
            }
        }
        self.state.lock().unwrap_or_else(|p| p.into_inner()).pinned = pinned;
    }

    /// Stops the hosts that imported a plugin held for review (`held`: host → those plugins).
    pub(super) async fn retire_held(
        &self,
        sup: &HostSupervisor,
        held: &mut BTreeMap<HostKey, Vec<String>>,
    ) {
        for (key, ids) in std::mem::take(held) {
            self.retire_host(
                sup,
                &key,
                Some(&ids),
                "it imported a plugin held for review",
            )
            .await;
        }
    }

    /// Stops `key`'s host before anything else is imported there (`HostSupervisor::replace`):
    /// a revocation (`revoked`: the sources whose calls end `cancelled` at once, their code
    /// stopped after the cancel grace) or a reload (a changed source: its calls in flight may
    /// finish within `budget.drain`). The other sources it ran show `updating` until they are
    /// loaded again in a fresh host; new calls wait for that meanwhile.
    pub(super) async fn retire_host(
        &self,
        sup: &HostSupervisor,
        key: &HostKey,
        revoked: Option<&[String]>,
        why: &str,
    ) {
        let Some(host) = sup.current_for(key).await else {
            return;
        };
        let ran: Vec<String> = host
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        drop(host);
        {
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            for id in &ran {
                cat.loaded.remove(id);
                if !revoked.is_some_and(|r| r.contains(id)) && cat.activity.contains_key(id) {
                    cat.activity.insert(id.clone(), SourceState::Updating);
                }
            }
        }
        self.core.rescan();
        let (cancel_now, grace) = match revoked {
            Some(ids) => (ids.to_vec(), crate::host::CANCEL_GRACE),
            None => (Vec::new(), self.policy.current().budget("budget.drain")),
        };
        sup.replace(key, &cancel_now, grace, why).await;
    }

    /// The execution versions that started running (seed 003 §4): each one's facts recorded the
    /// first time its bytes run here, its bytes kept (local files, content-addressed), and why
    /// it runs — all in one store transaction.
    fn record_versions(
        &self,
        ran: &[(&berth_discovery::Source, String, berth_store::Contributions)],
        backend: RuntimeKind,
    ) {
        if ran.is_empty() {
            return;
        }
        let data_dir = &self.core.options().data_dir;
        let runtime_version = self
            .core
            .runtimes()
            .iter()
            .find(|r| r.name == backend)
            .and_then(|r| r.version.clone());
        let asked: HashMap<String, String> = {
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            ran.iter()
                .filter_map(|(s, _, _)| cat.reasons.remove(&s.id).map(|w| (s.id.clone(), w)))
                .collect()
        };
        let _ = self.core.with_store(|store| {
            store.in_one_transaction(|store| {
                for (source, backend_name, observed) in ran {
                    let current = store
                        .execution_versions(&source.id, backend_name, 1)?
                        .into_iter()
                        .next();
                    let why = asked
                        .get(&source.id)
                        .cloned()
                        .unwrap_or_else(|| match &current {
                            None => "its first load here".to_string(),
                            Some(c) if c.digest == source.digest => c.why.clone(),
                            Some(_) if source.kind == SourceKind::NpmPlugin => {
                                "its prepared package changed".to_string()
                            }
                            Some(_) => "its files changed on disk".to_string(),
                        });
                    let record = if store.ran_before(&source.id, backend_name, &source.digest)? {
                        // Recorded when it first ran; never rewritten.
                        Value::Null
                    } else {
                        crate::versions::retain(data_dir, source);
                        let install = source
                            .npm
                            .as_ref()
                            .filter(|_| source.kind == SourceKind::NpmPlugin)
                            .map(|n| {
                                berth_discovery::npm_install_dir(
                                    &self.core.options().packages_dir(),
                                    &n.name,
                                    &n.request,
                                )
                            });
                        crate::versions::record(
                            source,
                            install.as_deref(),
                            (backend_name, runtime_version.as_deref()),
                            observed,
                        )
                    };
                    let label = source
                        .npm
                        .as_ref()
                        .and_then(|n| n.resolved.as_ref())
                        .map(|r| r.version.clone());
                    store.record_execution(
                        &source.id,
                        backend_name,
                        &source.digest,
                        label.as_deref(),
                        &record,
                        &why,
                    )?;
                }
                Ok(())
            })
        });
    }

    /// Takes back the toasts and open prompts of sources that no longer run.
    pub(super) fn withdraw_world(&self, ids: &[String]) {
        if !ids.is_empty() && self.world.state().withdraw(ids) {
            self.core.publish_world();
        }
    }

    /// Imports one server plugin in `host` and runs its factories (OpenCode's module rules).
    /// Returns the tools it registered, the names of its hooks and its `auth` descriptions.
    pub(crate) async fn load_plugin(
        &self,
        host: &crate::host::Host,
        source: &berth_discovery::Source,
        backend: RuntimeKind,
    ) -> Result<(Vec<ToolEntry>, Vec<String>, Vec<Value>), BerthError> {
        let version = source.digest.get(7..19).unwrap_or_default();
        let status = self.core.status();
        let project = self.core.project_value(&status.project).await;
        // The plugin's own `serverUrl` and the token that opens it, through the channel.
        let (server_url, server_token) = host.service_for(&source.id).await.map_err(|e| {
            BerthError::new(e.code, "activation", e.message, "retry").for_plugin(source.id.clone())
        })?;
        let body = serde_json::json!({
            "manifest": self.load_manifest(source).await?,
            "serverUrl": server_url,
            "serverToken": server_token,
            "path": source.capabilities.files.first().map(|p| p.display().to_string()).unwrap_or_else(|| source.entry.clone()),
            "version": version,
            "options": source.options,
            "kind": if source.kind == SourceKind::NpmPlugin { "npm" } else { "file" },
            "packageName": source.npm.as_ref().map(|n| n.name.clone()),
            "context": {
                "directory": status.project.directory,
                "worktree": status.project.worktree,
                "project": project,
            },
        });
        let v = load_call(
            host,
            source,
            CallKind::LoadPlugin,
            body,
            self.policy.current().budget("budget.init"),
            code::PROCESS_LOST,
            "fix the plugin; the other plugins keep loading",
        )
        .await?;
        let tools = tool_entries(&v, source, &host.key, backend);
        let hooks = v["hooks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h.as_str().map(str::to_string))
            .collect();
        let auth = v["auth"].as_array().cloned().unwrap_or_default();
        Ok((tools, hooks, auth))
    }

    /// What the host may run of `source` — every file of its manifest with the digest the gate
    /// cleared — and where its bare imports resolve: the packages Berth prepared for it (an npm
    /// plugin's install; a config folder's own dependencies), then Berth's host dependencies
    /// (`@opencode-ai/plugin`, zod).
    pub(super) async fn load_manifest(
        &self,
        source: &berth_discovery::Source,
    ) -> Result<Value, BerthError> {
        let sup = self.core.supervisor().await?;
        let mut deps: Vec<std::path::PathBuf> = Vec::new();
        match (&source.npm, source.kind) {
            (Some(npm), SourceKind::NpmPlugin) => deps.push(berth_discovery::npm_install_dir(
                &self.core.options().packages_dir(),
                &npm.name,
                &npm.request,
            )),
            _ => {
                if let Some(dir) =
                    berth_discovery::config_dir_of(std::path::Path::new(&source.entry))
                {
                    let prepared =
                        crate::deps::config_deps_dir(&self.core.options().data_dir, &dir);
                    if prepared.join("node_modules").is_dir() {
                        deps.push(prepared);
                    }
                }
            }
        }
        // The installs load natively: each is checked against its file list first (for an npm
        // plugin, the list the approval covered).
        let installs: Vec<(std::path::PathBuf, Option<String>)> = deps
            .iter()
            .map(|d| {
                let real = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
                let approved = source.manifest.trees.get(&real).cloned();
                (d.clone(), approved)
            })
            .collect();
        let trusted = sup.layout().trusted.clone();
        let provided: Vec<std::path::PathBuf> = sup
            .layout()
            .provided_packages()
            .into_iter()
            .map(|(_, d)| d)
            .collect();
        let checked = tokio::task::spawn_blocking(move || {
            installs.iter().try_for_each(|(d, approved)| {
                crate::integrity::verify(d, approved.as_deref(), &trusted, &provided)
            })
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        if let Err(why) = checked {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "activation",
                format!("{why}; nothing of it was loaded"),
                "remove that prepared folder from Berth's data dir so Berth prepares it again, then approve the plugin again",
            )
            .for_plugin(source.id.clone()));
        }
        // OpenCode 2 provides `effect` (and `@opencode/plugin`) to V2 plugins: Berth's host
        // dependencies resolve first for them, so every V2 import of `effect` is Berth's one
        // pinned copy whatever their own dependencies hold (D-044); for the others, last.
        if source.capabilities.generation == Some(berth_discovery::Generation::V2) {
            deps.insert(0, sup.layout().deps_dir.clone());
        } else {
            deps.push(sup.layout().deps_dir.clone());
        }
        let files: serde_json::Map<String, Value> = source
            .manifest
            .files
            .iter()
            .map(|(p, d)| (p.display().to_string(), Value::String(d.clone())))
            .collect();
        // A source rolled back to a kept version: its bytes come from Berth's copies.
        let kept: serde_json::Map<String, Value> = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pinned
            .get(&source.id)
            .map(|(_, kept)| {
                kept.iter()
                    .map(|(p, c)| {
                        (
                            p.display().to_string(),
                            Value::String(c.display().to_string()),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(serde_json::json!({ "files": files, "deps": deps, "kept": kept }))
    }

    /// Imports one tool file in `host` (fresh bytes: the URL carries the content digest).
    pub(super) async fn load_tools(
        &self,
        host: &crate::host::Host,
        source: &berth_discovery::Source,
        backend: RuntimeKind,
    ) -> Result<Vec<ToolEntry>, BerthError> {
        let stem = std::path::Path::new(&source.entry)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        // New bytes under an unchanged approval must load as new code: the module URL carries
        // a short content digest (the ESM cache keys on the URL).
        let version = source.digest.get(7..19).unwrap_or_default();
        // The real path: the runtime runs a symlinked file from there.
        let path = source
            .capabilities
            .files
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| source.entry.clone());
        let body = serde_json::json!({
            "path": path,
            "stem": stem,
            "version": version,
            "manifest": self.load_manifest(source).await?,
        });
        let v = load_call(
            host,
            source,
            CallKind::LoadTools,
            body,
            self.policy.current().budget("budget.init"),
            code::WORKER_LOST,
            "fix the tool file; the other tools keep working",
        )
        .await?;
        Ok(tool_entries(&v, source, &host.key, backend))
    }
}

/// Test builds only (compiled out of release builds): between the gate and the load, waits for
/// the test named by `BERTH_TEST_PAUSE_BEFORE_LOAD` — a folder with two FIFOs: the entry is
/// written to `paused`, then `resume` is read — so that a file can be swapped in exactly that
/// window, deterministically.
#[cfg(debug_assertions)]
pub(super) async fn pause_before_load(entry: &str) {
    let Some(dir) = std::env::var_os("BERTH_TEST_PAUSE_BEFORE_LOAD") else {
        return;
    };
    let (dir, entry) = (std::path::PathBuf::from(dir), entry.to_string());
    let _ = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("paused"))
        {
            let _ = writeln!(f, "{entry}");
        }
        let mut go = String::new();
        if let Ok(mut f) = std::fs::File::open(dir.join("resume")) {
            let _ = f.read_to_string(&mut go);
        }
    })
    .await;
}

/// Sends one load request; a failure names the file and keeps the lost/unsupported codes.
pub(super) async fn load_call(
    host: &crate::host::Host,
    source: &berth_discovery::Source,
    kind: CallKind,
    body: Value,
    timeout: Duration,
    lost_code: &'static str,
    recovery: &str,
) -> Result<Value, BerthError> {
    // The policy's `budget.init`: importing it and running its factory.
    let opts = CallOptions {
        lost_code,
        timeout,
        ..CallOptions::default()
    };
    host.call(&source.id, kind, body, opts).await.map_err(|e| {
        // The host's gate refused a file: it is not what was approved. Nothing of it ran.
        if e.code == code::ACTION_REQUIRED {
            return BerthError::new(
                code::ACTION_REQUIRED,
                "activation",
                format!("{} was not loaded: {}", source.entry, e.message),
                "look at the source again (berth sources or the status page) and approve what it is now",
            );
        }
        let code = if e.code == lost_code || e.code == code::UNSUPPORTED {
            e.code
        } else {
            code::PLUGIN_FAILED
        };
        // A load that hangs or dies usually said why on its stderr: the tail goes with it.
        let tail = if e.code == code::TIMEOUT || e.code == lost_code {
            let out = host.recent_output();
            let out = out.trim();
            let start = out
                .char_indices()
                .rev()
                .nth(600)
                .map(|(i, _)| i)
                .unwrap_or(0);
            if out.is_empty() {
                String::new()
            } else {
                format!("; its last output: {}", &out[start..])
            }
        } else {
            String::new()
        };
        BerthError::new(
            code,
            "activation",
            format!("{} failed to load: {}{tail}", source.entry, e.message),
            recovery,
        )
    })
}

/// The `tools` a load in `host` answered with, as catalog entries of `source`.
pub(super) fn tool_entries(
    v: &Value,
    source: &berth_discovery::Source,
    host: &HostKey,
    backend: RuntimeKind,
) -> Vec<ToolEntry> {
    v["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| ToolEntry {
            host: host.clone(),
            order: source.order,
            name: t["name"].as_str().unwrap_or_default().to_string(),
            description: t["description"].as_str().unwrap_or_default().to_string(),
            parameters: t["parameters"].clone(),
            provider: Provider {
                source_id: source.id.clone(),
                kind: source.kind.into(),
                backend,
            },
            state: SourceState::Active,
        })
        .collect()
}
