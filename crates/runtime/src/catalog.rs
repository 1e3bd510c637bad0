//! The active tool catalog and the invocation path: activation of approved sources in a plugin
//! host (behind the import gate), the contribution check, receipts, and one call end to end.
//!
//! Invariant: nothing is imported unless `approval::gate` passed for the bytes on disk at that
//! moment; a tool the approved summary did not show is not registered (`pending-activation`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use berth_discovery::{SourceKind, SourceState};
use berth_protocol::CallKind;
use berth_store::{Accepted, Finish, NewReceipt, Receipt, ReceiptStatus};
use serde::Serialize;
use serde_json::{json, Value};

use crate::approval;
use crate::core::Core;
use crate::error::{code, BerthError};
use crate::host::{CallOptions, HostKey, HostSupervisor};
use crate::runtimes::RuntimeKind;
pub use crate::snapshot::{Provider, ToolEntry};
use crate::world::World;
use berth_base::now_ms;

/// The outcome of activating the approved sources.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Activation {
    pub tools: Vec<ToolEntry>,
    /// Sources that could not be activated, each with its error.
    pub problems: Vec<BerthError>,
    /// A held source's host was stopped during this pass: what it loaded before is loaded again.
    #[serde(skip)]
    held_code: bool,
}

#[derive(Default)]
pub(crate) struct CatalogState {
    /// By tool name, the tool the model gets: the claimant OpenCode lets win (`elect`).
    pub tools: BTreeMap<String, ToolEntry>,
    /// Every claim on each name, by source (the winner's too).
    claims: BTreeMap<String, BTreeMap<String, ToolEntry>>,
    /// The names each source claims.
    claimed_by: HashMap<String, Vec<String>>,
    /// Sources imported in the live host, with the digest of the bytes imported.
    pub loaded: HashMap<String, String>,
    /// What activation made of each cleared source (active, pending-activation, load-failed).
    pub activity: HashMap<String, SourceState>,
    /// Active plugins with the hooks they registered, in OpenCode's load order.
    pub hooks: Vec<HookOwner>,
    /// The store's decisions marker when activation last read the decisions: a call that finds
    /// it moved (a decision made here or in another process) activates first.
    pub decisions_seen: Option<i64>,
}

impl CatalogState {
    /// Registers what source `id` contributes now (each entry with its source's place in
    /// OpenCode's load order and its host), in place of what it registered before. A name several sources register goes to the one
    /// OpenCode lets win — plugins over tool files, and among each the later one — whatever
    /// order Berth imported them in; the others keep their claim and take the name back when
    /// the winner goes.
    pub fn register_tools(&mut self, id: &str, tools: Vec<ToolEntry>) {
        self.withdraw_tools(id);
        let mut names = Vec::with_capacity(tools.len());
        for tool in tools {
            let name = tool.name.clone();
            self.claims
                .entry(name.clone())
                .or_default()
                .insert(id.to_string(), tool);
            self.elect(&name);
            names.push(name);
        }
        if !names.is_empty() {
            self.claimed_by.insert(id.to_string(), names);
        }
    }

    /// Withdraws every tool source `id` registered (a name it held goes to the next claimant).
    pub fn withdraw_tools(&mut self, id: &str) {
        for name in self.claimed_by.remove(id).unwrap_or_default() {
            if let Some(by) = self.claims.get_mut(&name) {
                by.remove(id);
                if by.is_empty() {
                    self.claims.remove(&name);
                }
            }
            self.elect(&name);
        }
    }

    /// Gives `name` to the claimant OpenCode would let win, or drops it when none is left.
    fn elect(&mut self, name: &str) {
        let winner = self.claims.get(name).and_then(|by| {
            by.values()
                .max_by_key(|t| (t.provider.kind != SourceKind::StandaloneTool, t.order))
        });
        match winner {
            Some(t) => {
                self.tools.insert(name.to_string(), t.clone());
            }
            None => {
                self.tools.remove(name);
            }
        }
    }

    /// The active plugins registering hook `name`, in OpenCode's load order.
    pub fn with_hook(&self, name: &str) -> Vec<String> {
        self.with_hook_in(name)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }

    /// The same plugins, each with the host its hooks run in.
    pub fn with_hook_in(&self, name: &str) -> Vec<(String, HostKey)> {
        self.hooks
            .iter()
            .filter(|h| h.hooks.iter().any(|n| n == name))
            .map(|h| (h.source_id.clone(), h.host.clone()))
            .collect()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct HookOwner {
    pub source_id: String,
    /// The host its hooks run in.
    pub host: HostKey,
    pub order: usize,
    pub hooks: Vec<String>,
    /// `{provider, methods: [{type, label, prompts?}]}` of each `auth` hook it registered.
    pub auth: Vec<Value>,
}

/// The owner of the tool catalog: what is active, in which host, in OpenCode's order, and
/// every call through it.
pub(crate) struct Catalog {
    core: Arc<Core>,
    world: Arc<World>,
    state: Mutex<CatalogState>,
    /// One activation at a time: two passes over the same hosts would load, hold and retire
    /// the same sources against each other.
    activating: tokio::sync::Mutex<()>,
    /// The merged config after the `config` hooks ran (what plugins changed in it).
    effective_config: Mutex<Option<Value>>,
    /// Itself, for the tasks it starts (events, `keep_active`).
    me: Weak<Catalog>,
}

impl Catalog {
    pub(crate) fn new(core: Arc<Core>, world: Arc<World>) -> Arc<Catalog> {
        Arc::new_cyclic(|me| Catalog {
            core,
            world,
            state: Mutex::new(CatalogState::default()),
            activating: tokio::sync::Mutex::new(()),
            effective_config: Mutex::new(None),
            me: me.clone(),
        })
    }

    /// The registry, for the owners that read it (status, plugin calls, logins).
    pub(crate) fn state(&self) -> MutexGuard<'_, CatalogState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The merged config as the `config` hooks left it (None until a plugin was loaded).
    pub(crate) fn effective_config(&self) -> Option<Value> {
        self.effective_config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops every plugin host after OpenCode's finaliser: every `dispose` hook, errors only
    /// logged, bounded in time (nothing is sent when no plugin has one).
    pub(crate) async fn shutdown_hosts(&self) {
        if let Some(s) = self.core.supervisor_if_started() {
            let _ = self
                .run_chain_full(
                    "dispose",
                    Value::Null,
                    Value::Null,
                    Some(Duration::from_secs(2)),
                )
                .await;
            s.shutdown().await;
        }
    }

    /// The live shared host of `backend` (for the benchmark's raw round trips).
    pub(crate) async fn host_for_bench(&self, backend: RuntimeKind) -> Arc<crate::host::Host> {
        self.core
            .supervisor()
            .await
            .expect("supervisor")
            .host(backend)
            .await
            .expect("host")
    }

    /// Sends one Berth event to the plugins' `event` hooks in OpenCode's shape
    /// (`{event: {id, type, properties}}`), not awaited; failures are isolated in the host.
    pub fn emit_event(&self, kind: &str, properties: Value) {
        let wanted = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .with_hook("event");
        if wanted.is_empty() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Some(berth) = self.me.upgrade() else {
            return;
        };
        let input = json!({ "event": { "id": format!("evt_{}", berth_base::random_hex(10)), "type": kind, "properties": properties } });
        rt.spawn(async move {
            if let Err(e) = berth
                .run_chain_full("event", input, Value::Null, Some(Duration::from_secs(5)))
                .await
            {
                tracing::debug!("event delivery failed: {}", e.message);
            }
        });
    }
}

impl Catalog {
    /// Imports every approved standalone tool source whose bytes still match its approval,
    /// withdraws the tools of every source that is no longer approved, and returns the
    /// catalog. Problems are per source; the others still load. Publishes the new status.
    pub async fn activate(&self) -> Activation {
        let _turn = self.activating.lock().await;
        self.activate_in_turn().await
    }

    async fn activate_in_turn(&self) -> Activation {
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
        self.core.rescan();
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
        if now.is_none() || now != seen {
            Box::pin(self.activate_in_turn()).await;
        }
    }

    async fn activate_inner(&self) -> Activation {
        let mut act = Activation::default();
        let marker = self.core.with_store(|s| s.decisions_marker()).ok();
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .decisions_seen = marker;
        // The gate reads the bytes as they are now, not a cached view.
        let mut fresh = self.core.fresh_scan();
        // npm plugins approved before their bytes were known are prepared now (no code runs:
        // install scripts are off), then judged again on what the package really contains.
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
            let result = tokio::task::spawn_blocking(move || {
                crate::deps::prepare_npm_plugin(&packages, &name, &request)
            })
            .await;
            self.state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .activity
                .remove(&source.id);
            match result {
                Ok(Ok(_)) => prepared_any = true,
                Ok(Err(e)) => act.problems.push(e.for_plugin(source.id.clone())),
                Err(e) => act.problems.push(
                    BerthError::new(
                        code::DEPENDENCY_FAILED,
                        "dependencies",
                        e.to_string(),
                        "retry",
                    )
                    .for_plugin(source.id.clone()),
                ),
            }
        }
        if prepared_any {
            fresh = self.core.fresh_scan();
        }
        let backend = approval::backend_for(&self.core.runtimes());
        let mut cleared: HashMap<String, &berth_discovery::Source> = HashMap::new();
        // Only sources whose bytes are here and that OpenCode would load at all.
        let loadable = |s: &&berth_discovery::Source| {
            matches!(
                s.kind,
                SourceKind::StandaloneTool | SourceKind::FilePlugin | SourceKind::NpmPlugin
            ) && !s.capabilities.contents_unknown
                && !matches!(
                    s.state,
                    SourceState::Unsupported | SourceState::IncompatibleVersion
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
            let gone: Vec<String> = cat
                .loaded
                .keys()
                .filter(|id| !cleared.contains_key(*id))
                .cloned()
                .collect();
            for id in &gone {
                cat.hooks.retain(|h| &h.source_id != id);
                cat.withdraw_tools(id);
                cat.loaded.remove(id);
                cat.activity.remove(id);
            }
            drop(cat);
            self.withdraw_world(&gone);
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            cat.activity
                .retain(|id, st| cleared.contains_key(id) || *st == SourceState::Paused);
            gone
        };
        let sup = match self.core.supervisor().await {
            Ok(s) => s,
            Err(e) => {
                act.problems.push(e);
                return act;
            }
        };
        // Where each source runs: its own host if the person gave it one, else the shared one
        // (D-030).
        let own: std::collections::BTreeSet<String> =
            self.core.with_store(|s| s.own_hosts()).unwrap_or_default();
        let key_of = |id: &str| {
            if own.contains(id) {
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
            let prepared = tokio::task::spawn_blocking(move || {
                crate::deps::prepare_config_dir_deps(&data_dir, &dir)
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
            if known {
                // The held ones' hosts stop before anything else is imported there.
                self.retire_held(&sup, &mut held).await;
            }
            let host_key = key_of(&id);
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
                    cat.withdraw_tools(&id);
                    cat.hooks.retain(|h| h.source_id != id);
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
                    let _ = self.core.with_store(|s| {
                        s.record_contributions(&id, &source.digest, &key.backend, &observed)
                    });
                    let shown = self
                        .core
                        .with_store(|s| s.current_approval(&key))
                        .ok()
                        .flatten()
                        .map(|r| r.shown)
                        .unwrap_or_default();
                    let extra = approval::unapproved_contributions(&shown, &observed);
                    if !extra.is_empty() {
                        // Checkpoint two: the module contributes more than was approved. None
                        // of it is registered, and its code — already imported — must not keep
                        // running: its host is stopped once the plugins not loaded before are
                        // imported (one stop however many are held), before anything else is.
                        {
                            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                            cat.withdraw_tools(&id);
                            cat.activity
                                .insert(id.clone(), SourceState::PendingActivation);
                            cat.hooks.retain(|h| h.source_id != id);
                        }
                        held.entry(host_key.clone()).or_default().push(id.clone());
                        act.held_code = true;
                        act.problems.push(
                            BerthError::new(
                                code::ACTION_REQUIRED,
                                "activation",
                                format!("the loaded module contributes more than was approved ({}); none of it is registered and its code was stopped (pending-activation)", extra.join("; ")),
                                "review what it registers and approve the source again",
                            )
                            .for_plugin(id.clone()),
                        );
                        self.withdraw_world(std::slice::from_ref(&id));
                        continue;
                    }
                    let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    host.loaded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id.clone());
                    cat.loaded.insert(id.clone(), source.digest.clone());
                    cat.activity.insert(id.clone(), SourceState::Active);
                    cat.register_tools(&id, loaded);
                    cat.hooks.retain(|h| h.source_id != id);
                    if source.kind != SourceKind::StandaloneTool {
                        newly_loaded_plugins += 1;
                        cat.hooks.push(HookOwner {
                            source_id: id.clone(),
                            host: host_key.clone(),
                            order: source.order,
                            hooks,
                            auth,
                        });
                        cat.hooks.sort_by_key(|h| h.order);
                    }
                }
                Err(e) => {
                    let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    cat.activity.insert(id.clone(), SourceState::LoadFailed);
                    cat.withdraw_tools(&id);
                    cat.loaded.remove(&id);
                    act.problems.push(e.for_plugin(id.clone()));
                }
            }
        }
        self.retire_held(&sup, &mut held).await;
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
        act.tools = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .tools
            .values()
            .cloned()
            .collect();
        act
    }

    /// Stops the hosts that imported a plugin held for review (`held`: host → those plugins).
    async fn retire_held(&self, sup: &HostSupervisor, held: &mut BTreeMap<HostKey, Vec<String>>) {
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

    /// Stops `key`'s host — at once for a revocation (`revoked`: the sources whose calls end
    /// `cancelled`), or once its calls in flight end (a changed source) — and forgets that the
    /// sources it ran are loaded, so they load again in a fresh host.
    async fn retire_host(
        &self,
        sup: &HostSupervisor,
        key: &HostKey,
        revoked: Option<&[String]>,
        why: &str,
    ) {
        if let Some(host) = sup.current_for(key).await {
            let ran: Vec<String> = host
                .loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned()
                .collect();
            let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            for id in &ran {
                cat.loaded.remove(id);
            }
        }
        match revoked {
            Some(ids) => sup.revoke(key, ids, why).await,
            None => sup.recycle(key, why).await,
        }
    }

    /// Takes back the toasts and open prompts of sources that no longer run.
    fn withdraw_world(&self, ids: &[String]) {
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
    async fn load_manifest(&self, source: &berth_discovery::Source) -> Result<Value, BerthError> {
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
        let checked = tokio::task::spawn_blocking(move || {
            installs
                .iter()
                .try_for_each(|(d, approved)| crate::integrity::verify(d, approved.as_deref()))
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
        deps.push(sup.layout().deps_dir.clone());
        let files: serde_json::Map<String, Value> = source
            .manifest
            .files
            .iter()
            .map(|(p, d)| (p.display().to_string(), Value::String(d.clone())))
            .collect();
        Ok(serde_json::json!({ "files": files, "deps": deps }))
    }

    /// Runs one hook chain as OpenCode would (active plugins in load order, one shared output)
    /// and returns the final output.
    pub async fn run_hook(
        &self,
        name: &str,
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        let act = self.activate().await;
        if let Some(p) = act.problems.first() {
            tracing::debug!(plugin = p.plugin.as_deref().unwrap_or(""), "{}", p.message);
        }
        self.run_chain(name, input, output, timeout).await
    }

    /// One chain over the plugins active now, without activating first (the hot path the
    /// benchmark measures); the final output.
    pub async fn run_active_hook(
        &self,
        name: &str,
        input: Value,
        output: Value,
    ) -> Result<Value, BerthError> {
        self.run_chain(name, input, output, None).await
    }

    /// One chain over the plugins active now (no activation first); the final output.
    async fn run_chain(
        &self,
        name: &str,
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        Ok(self.run_chain_full(name, input, output, timeout).await?["output"].take())
    }

    /// One chain over the plugins active now: the host's whole answer (`output`, `steps`, and
    /// for `permission.ask` the plugin that set the status, `answeredBy`).
    pub(crate) async fn run_chain_full(
        &self,
        name: &str,
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        let owners = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .with_hook_in(name);
        self.run_segments(name, &owners, input, output, timeout)
            .await
    }

    /// One chain over `owners` in their order, on one shared output: consecutive plugins of
    /// one host run in one call there, and the output passes on to the next host's plugins
    /// (plugins with a host of their own sit in the chain where OpenCode's order puts them).
    /// The answer is the host's shape: `output`, every `steps`, and `answeredBy`.
    async fn run_segments(
        &self,
        name: &str,
        owners: &[(String, HostKey)],
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        let mut output = output;
        let mut steps: Vec<Value> = Vec::new();
        let mut answered_by = Value::Null;
        if owners.is_empty() {
            return Ok(serde_json::json!({ "output": output, "steps": [] }));
        }
        let sup = self.core.supervisor().await?;
        let mut i = 0;
        let mut first = true;
        while i < owners.len() {
            let key = &owners[i].1;
            let mut instances = Vec::new();
            while i < owners.len() && &owners[i].1 == key {
                instances.push(owners[i].0.clone());
                i += 1;
            }
            let host = sup.host_for(key).await?;
            let opts = CallOptions {
                timeout: timeout.unwrap_or(Duration::from_secs(30)),
                ..CallOptions::default()
            };
            let body = serde_json::json!({ "name": name, "instances": instances, "input": input, "output": output });
            let mut v = host
                .call("hooks", CallKind::HookChain, body, opts)
                .await
                .map_err(|e| {
                    let plugin = instances
                        .iter()
                        .find(|i| e.message.contains(i.as_str()))
                        .cloned();
                    let mut err = BerthError::new(
                        e.code,
                        name,
                        e.message,
                        "fix or disable the plugin named; OpenCode fails this operation the same way",
                    );
                    err.plugin = plugin;
                    err
                })?;
            if i == owners.len() && first {
                // One host ran the whole chain (the usual case): its answer as it is.
                return Ok(v);
            }
            first = false;
            output = v["output"].take();
            if let Some(s) = v["steps"].as_array_mut() {
                steps.append(s);
            }
            if !v["answeredBy"].is_null() {
                answered_by = v["answeredBy"].take();
            }
        }
        Ok(serde_json::json!({ "output": output, "steps": steps, "answeredBy": answered_by }))
    }

    /// Imports one tool file in `host` (fresh bytes: the URL carries the content digest).
    async fn load_tools(
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
            code::WORKER_LOST,
            "fix the tool file; the other tools keep working",
        )
        .await?;
        Ok(tool_entries(&v, source, &host.key, backend))
    }

    /// One call through the full path: idempotency, receipt, host, result.
    pub async fn invoke(
        &self,
        tool: &str,
        args: Value,
        idempotency_key: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Receipt, BerthError> {
        if let Some(key) = idempotency_key {
            if let Some(existing) = self.core.with_store(|s| s.receipt_by_key(key))? {
                return Ok(existing);
            }
        }
        // A decision made a moment ago (here or by another process) holds for this call.
        self.apply_new_decisions().await;
        // A tool is called with the definition its file has now: when the source's bytes moved
        // since its load (or the file is gone), activation runs first (and reloads or withdraws).
        let known = {
            let status = self.core.status();
            let cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            cat.tools.get(tool).cloned().filter(|e| {
                let id = &e.provider.source_id;
                let now = status.sources.iter().find(|s| &s.id == id);
                now.is_some_and(|s| cat.loaded.get(id) == Some(&s.digest))
            })
        };
        let entry = match known {
            Some(e) => e,
            None => {
                let act = self.activate().await;
                match act.tools.into_iter().find(|t| t.name == tool) {
                    Some(e) => e,
                    None => {
                        let problem = act.problems.into_iter().next();
                        return Err(problem.unwrap_or_else(|| {
                            BerthError::new(code::UNSUPPORTED, "invoke", format!("no active tool is named `{tool}`"), "list the tools with `berth tools`; a source must be approved first")
                        }));
                    }
                }
            }
        };
        let receipt_id = format!("rcpt_{}", berth_base::random_hex(10));
        let args_digest = berth_discovery::sha256_hex(args.to_string().as_bytes());
        let me = std::process::id();
        let accepted = self.core.with_store(|s| {
            s.accept_receipt(&NewReceipt {
                receipt_id: &receipt_id,
                idempotency_key,
                tool,
                source_id: &entry.provider.source_id,
                args_digest: &args_digest,
                owner_pid: me,
                owner_start: crate::host::procs::own_start_time(),
            })
        })?;
        if let Accepted::Existing(r) = accepted {
            return Ok(*r);
        }
        let sup = self.core.supervisor().await?;
        let tool_host = entry.host.clone();
        let host = sup.host_for(&tool_host).await?;
        if !host
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&entry.provider.source_id)
        {
            // The host was replaced since activation: load again (a load, not a replay).
            let act = self.activate().await;
            if !act.tools.iter().any(|t| t.name == tool) {
                let e = act.problems.into_iter().next().unwrap_or_else(|| {
                    BerthError::new(
                        code::WORKER_LOST,
                        "invoke",
                        "the tool could not be loaded again",
                        "retry",
                    )
                });
                self.core.with_store(|s| {
                    s.finish_receipt(
                        &receipt_id,
                        &Finish {
                            error: Some((e.code, &e.message)),
                            ..Finish::new(ReceiptStatus::Failed)
                        },
                    )
                })?;
                return Err(e);
            }
        }
        self.core
            .with_store(|s| s.mark_receipt_running(&receipt_id))?;
        let opts = CallOptions {
            timeout: timeout.unwrap_or(crate::host::DEFAULT_TOOL_TIMEOUT),
            lost_code: code::WORKER_LOST,
            ..CallOptions::default()
        };
        let project = &self.core.status().project;
        let context = serde_json::json!({
            "directory": project.directory,
            "worktree": project.worktree,
            "callID": receipt_id,
        });
        // OpenCode's tool part events, for plugins' `event` hooks.
        let started_ms = now_ms();
        let part = |state: Value| {
            serde_json::json!({ "part": {
                "id": format!("prt_{}", &receipt_id[5..]),
                "sessionID": "berth",
                "messageID": format!("msg_{}", &receipt_id[5..]),
                "type": "tool",
                "callID": receipt_id,
                "tool": tool,
                "state": state,
            }})
        };
        self.emit_event(
            "message.part.updated",
            part(serde_json::json!({ "status": "running", "input": args, "time": { "start": started_ms } })),
        );
        // The plugins whose `tool.execute.before/after` hooks run around the call, in order.
        let (before, after) = {
            let cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            (
                cat.with_hook_in("tool.execute.before"),
                cat.with_hook_in("tool.execute.after"),
            )
        };
        let outcome = if before
            .iter()
            .chain(after.iter())
            .all(|(_, k)| k == &tool_host)
        {
            // One host runs the hooks and the tool in one call (the usual case).
            let ids = |o: &[(String, HostKey)]| -> Vec<String> {
                o.iter().map(|(i, _)| i.clone()).collect()
            };
            host.call(
                &entry.provider.source_id,
                CallKind::Invoke,
                serde_json::json!({ "tool": tool, "args": args, "context": context, "before": ids(&before), "after": ids(&after) }),
                opts,
            )
            .await
        } else {
            self.invoke_across_hosts(
                &host,
                &entry.provider.source_id,
                tool,
                &args,
                context,
                &before,
                &after,
                opts,
            )
            .await
        };
        // The output budget holds on this side too, whatever the host let through.
        let outcome = outcome.and_then(|v| {
            let size = v["output"].as_str().map_or(0, str::len);
            if size > berth_protocol::MAX_TOOL_OUTPUT_BYTES {
                Err(crate::host::CallError {
                    code: code::INVALID_RESPONSE,
                    message: format!(
                        "the tool's output is {size} bytes, over the {}-byte limit",
                        berth_protocol::MAX_TOOL_OUTPUT_BYTES
                    ),
                })
            } else {
                Ok(v)
            }
        });
        let by: Vec<String> = outcome
            .as_ref()
            .ok()
            .and_then(|v| v["transformedBy"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect();
        // When `tool.execute.before` hooks changed the arguments, the receipt names what ran.
        let ran_with = outcome
            .as_ref()
            .ok()
            .filter(|v| !v["finalArgs"].is_null())
            .map(|v| berth_discovery::sha256_hex(v["finalArgs"].to_string().as_bytes()));
        let end = match &outcome {
            Ok(v) => Finish {
                title: v["title"].as_str(),
                output: v["output"].as_str(),
                metadata: Some(&v["metadata"]),
                raw: Some(&v["raw"]).filter(|r| !by.is_empty() && !r.is_null()),
                transformed_by: &by,
                args_digest: ran_with.as_deref(),
                ..Finish::new(ReceiptStatus::Completed)
            },
            Err(e) => Finish {
                error: Some((e.code, &e.message)),
                ..Finish::new(if e.code == code::CANCELLED || e.code == code::TIMEOUT {
                    ReceiptStatus::Cancelled
                } else {
                    ReceiptStatus::Failed
                })
            },
        };
        let finished = self
            .core
            .with_store(|s| s.finish_receipt(&receipt_id, &end))?;
        let ended = match &outcome {
            Ok(v) => {
                serde_json::json!({ "status": "completed", "input": args, "output": v["output"], "title": v["title"], "metadata": v["metadata"], "time": { "start": started_ms, "end": now_ms() } })
            }
            Err(e) => {
                serde_json::json!({ "status": "error", "input": args, "error": e.message, "time": { "start": started_ms, "end": now_ms() } })
            }
        };
        self.emit_event("message.part.updated", part(ended));
        // The row as the update left it; read again only if something else ended it first.
        let receipt = match finished {
            Some(r) => Some(r),
            None => self.core.with_store(|s| s.receipt(&receipt_id))?,
        };
        receipt.ok_or_else(|| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "receipts",
                "the receipt vanished",
                "retry",
            )
        })
    }
}

impl Catalog {
    /// One call whose `tool.execute.before/after` hooks live in other hosts than the tool (a
    /// plugin with a host of its own): the chains run host by host in OpenCode's order and
    /// the tool runs on the arguments they left (its host checks them against its schema
    /// again). The answer has the shape the one-host call gives.
    #[allow(clippy::too_many_arguments)]
    async fn invoke_across_hosts(
        &self,
        host: &crate::host::Host,
        source_id: &str,
        tool: &str,
        args: &Value,
        context: Value,
        before: &[(String, HostKey)],
        after: &[(String, HostKey)],
        opts: CallOptions,
    ) -> Result<Value, crate::host::CallError> {
        let lost = |e: BerthError| crate::host::CallError {
            code: e.code,
            message: e.message,
        };
        let hook_input =
            serde_json::json!({ "tool": tool, "sessionID": "berth", "callID": context["callID"] });
        let instances = |v: &Value| -> Vec<String> {
            v["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["instance"].as_str().map(str::to_string))
                .collect()
        };
        let mut args = args.clone();
        let mut by: Vec<String> = Vec::new();
        if !before.is_empty() {
            let v = self
                .run_segments(
                    "tool.execute.before",
                    before,
                    hook_input.clone(),
                    serde_json::json!({ "args": args }),
                    Some(opts.timeout),
                )
                .await
                .map_err(lost)?;
            if v["output"]["args"] != args {
                by = instances(&v);
                args = v["output"]["args"].clone();
            }
        }
        let mut v = host
            .call(
                source_id,
                CallKind::Invoke,
                serde_json::json!({ "tool": tool, "args": args, "context": context, "before": [], "after": [] }),
                opts.clone(),
            )
            .await?;
        if !by.is_empty() {
            v["finalArgs"] = args.clone();
        }
        if after.is_empty() {
            v["transformedBy"] = serde_json::json!(by);
            return Ok(v);
        }
        let raw = serde_json::json!({ "title": v["title"], "output": v["output"], "metadata": v["metadata"] });
        let mut input = hook_input;
        input["args"] = args;
        let chained = self
            .run_segments(
                "tool.execute.after",
                after,
                input,
                raw.clone(),
                Some(opts.timeout),
            )
            .await
            .map_err(lost)?;
        let fin = &chained["output"];
        if !fin["output"].is_string() {
            return Err(crate::host::CallError {
                code: code::INVALID_RESPONSE,
                message: "tool.execute.after left a result without an output string".into(),
            });
        }
        for i in instances(&chained) {
            if !by.contains(&i) {
                by.push(i);
            }
        }
        let changed = fin != &raw;
        Ok(serde_json::json!({
            "title": fin["title"], "output": fin["output"], "metadata": fin["metadata"],
            "raw": if changed { raw } else { Value::Null },
            "transformedBy": by,
            "finalArgs": v["finalArgs"],
        }))
    }
}

/// Test builds only (compiled out of release builds): between the gate and the load, waits for
/// the test named by `BERTH_TEST_PAUSE_BEFORE_LOAD` — a folder with two FIFOs: the entry is
/// written to `paused`, then `resume` is read — so that a file can be swapped in exactly that
/// window, deterministically.
#[cfg(debug_assertions)]
async fn pause_before_load(entry: &str) {
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
async fn load_call(
    host: &crate::host::Host,
    source: &berth_discovery::Source,
    kind: CallKind,
    body: Value,
    lost_code: &'static str,
    recovery: &str,
) -> Result<Value, BerthError> {
    let opts = CallOptions {
        lost_code,
        timeout: Duration::from_secs(30),
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
fn tool_entries(
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
                kind: source.kind,
                backend,
            },
            state: SourceState::Active,
        })
        .collect()
}

impl Catalog {
    /// Manual resume of plugin hosts paused after their restart budget was spent: their crash
    /// history is forgotten and the paused sources are activated again. Returns the backends
    /// that were paused.
    pub async fn resume_hosts(&self) -> Vec<RuntimeKind> {
        let Some(sup) = self.core.supervisor().await.ok() else {
            return Vec::new();
        };
        let resumed: Vec<RuntimeKind> = [RuntimeKind::Bun, RuntimeKind::Node]
            .into_iter()
            .filter(|b| sup.resume(*b))
            .collect();
        if !resumed.is_empty() {
            self.state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .activity
                .retain(|_, s| *s != SourceState::Paused);
            self.activate().await;
        }
        resumed
    }

    /// For long-running front ends (`serve`, the app): activates sources as they are approved
    /// and withdraws them as they are revoked, driven by snapshot events (no polling). The
    /// returned task ends when the event channel closes.
    pub fn keep_active(&self) -> tokio::task::JoinHandle<()> {
        let berth = self
            .me
            .upgrade()
            .expect("the catalog is alive while a method runs");
        let mut events = self.core.subscribe();
        tokio::spawn(async move {
            let mut last = String::new();
            loop {
                // What activation depends on: approved ids with their digests and decisions.
                let signature: String = berth
                    .core
                    .status()
                    .sources
                    .iter()
                    .filter(|s| {
                        matches!(
                            s.kind,
                            SourceKind::StandaloneTool
                                | SourceKind::FilePlugin
                                | SourceKind::NpmPlugin
                        )
                    })
                    .map(|s| {
                        format!(
                            "{}:{}:{:?}:{:?}:{};",
                            s.id, s.digest, s.approval.decision, s.approval.grew, s.own_host
                        )
                    })
                    .collect();
                if signature != last {
                    last = signature;
                    let act = berth.activate().await;
                    for p in &act.problems {
                        tracing::warn!(
                            plugin = p.plugin.as_deref().unwrap_or(""),
                            code = p.code,
                            "{}",
                            p.message
                        );
                    }
                }
                match events.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        })
    }
}
