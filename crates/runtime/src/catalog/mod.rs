//! The active tool catalog and the invocation path: activation of approved sources in a plugin
//! host (behind the import gate), the contribution check, receipts, and one call end to end.
//!
//! Invariant: nothing is imported unless `approval::gate` passed for the bytes on disk at that
//! moment; what a loaded source offers is registered only as far as the policy's caps admit it
//! (`offer`, `judge`), and a later load of bytes the person did not decide on that contributes
//! more than the version active before registers nothing (`pending-activation`).

mod activate;
mod around;
mod builtins;
mod chains;
mod choices;
pub mod conflicts;
mod invoke;
pub use invoke::CallControl;
pub use mcp_sign_in::SignedIn;
mod mcp;
mod mcp_prepare;
mod mcp_sign_in;
pub mod outputs;
mod prepare;
mod receipting;
mod restricted;
pub mod streaks;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use berth_discovery::{SourceKind, SourceState};
use serde::Serialize;
use serde_json::{json, Value};

use berth_store::ToolChoice;
use conflicts::{Candidate, Conflict};

use crate::core::Core;
use crate::error::BerthError;
use crate::governor::Governor;
use crate::host::HostKey;
use crate::policy::{Effective, Limited};
use crate::runtimes::RuntimeKind;
pub use crate::snapshot::{Provider, ProviderKind, ToolEntry};
use crate::world::World;

/// The outcome of activating the approved sources.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Activation {
    pub tools: Vec<ToolEntry>,
    /// Names several candidates register (`conflicts`): who serves each, whether it asks.
    pub conflicts: Vec<Conflict>,
    /// Berth's built-in tools (each a candidate for its name).
    pub builtins: Vec<ToolEntry>,
    /// Sources that could not be activated, each with its error.
    pub problems: Vec<BerthError>,
    /// A held source's host was stopped during this pass: what it loaded before is loaded again.
    #[serde(skip)]
    held_code: bool,
}

#[derive(Default)]
pub(crate) struct CatalogState {
    /// By tool name, the tool the model gets: the candidate the election picks (`elect`).
    pub tools: BTreeMap<String, ToolEntry>,
    /// Every claim on each name, by source (the winner's too, and those that cannot serve now).
    claims: BTreeMap<String, BTreeMap<String, Claim>>,
    /// Names several candidates claim, as the person sees them.
    pub conflicts: BTreeMap<String, Conflict>,
    /// The store's newest word on each contested name (the person's or what Berth kept).
    choices: HashMap<String, ToolChoice>,
    /// The person's own newest choice on each name (to say what they chose before).
    person_choices: HashMap<String, ToolChoice>,
    /// What Berth decided to keep serving since the store was last written.
    to_record: Vec<ToolChoice>,
    /// The policy's tool-override cap is `allow`: an external candidate may take a built-in's
    /// name as in OpenCode (otherwise the built-in stays until the person chooses).
    override_allowed: bool,
    /// Berth's built-ins, registered as candidates once (`ensure_builtins`).
    pub builtins: Vec<ToolEntry>,
    /// The names each source claims.
    claimed_by: HashMap<String, Vec<String>>,
    /// Sources imported in the live host, with the digest of the bytes imported.
    pub loaded: HashMap<String, String>,
    /// What activation made of each cleared source (active, pending-activation, load-failed).
    pub activity: HashMap<String, SourceState>,
    /// Why a source's next load happens, when the person asked for it (an update, a rollback);
    /// recorded with the execution version that load starts.
    pub reasons: HashMap<String, String>,
    /// Updates and rollbacks under way (or failed), per source.
    pub update_progress: HashMap<String, crate::snapshot::UpdateProgress>,
    /// Sign-ins to remote MCP servers waiting for the person's browser (or failed), per source.
    pub sign_ins: HashMap<String, crate::snapshot::SignInProgress>,
    /// Active plugins with the hooks they registered, in OpenCode's load order.
    pub hooks: Vec<HookOwner>,
    /// The store's decisions marker when activation last read the decisions: a call that finds
    /// it moved (a decision made here or in another process) activates first.
    pub decisions_seen: Option<i64>,
    /// What each loaded source offered (before the policy's caps), to judge again when the
    /// policy changes without importing anything again.
    offered: HashMap<String, Offered>,
    /// What the caps keep from each loaded source (held for review or refused).
    pub limited: HashMap<String, Vec<Limited>>,
    /// Why a cleared source could not be prepared or loaded, shown on it until it works.
    pub failures: HashMap<String, BerthError>,
    /// Loaded sources whose files cannot be read now while they are still listed (a read
    /// error, a listed file missing for a moment): the version loaded keeps serving, nothing
    /// new of it runs, and the page says so (seed 003 §12: no withdrawal for a read error).
    pub unreadable: HashMap<String, String>,
    /// Local sources rolled back to a kept version: the files whose bytes the host reads from
    /// Berth's copies (path → copy), and the execution version that runs.
    pub pinned: HashMap<String, (i64, BTreeMap<std::path::PathBuf, std::path::PathBuf>)>,
    /// Where a source's load failed, with the digest it failed with: that host admitted those
    /// bytes (and may run what they did before failing), so other bytes of it load elsewhere.
    pub failed_in: HashMap<String, (HostKey, String)>,
}

/// One source's claim on a name.
#[derive(Debug, Clone)]
struct Claim {
    entry: ToolEntry,
    /// The content version it claims with.
    digest: String,
    /// It serves now (loaded, not held).
    available: bool,
}

/// Everything a loaded source offered, and where it runs.
#[derive(Debug, Clone)]
pub(crate) struct Offered {
    pub host: HostKey,
    pub order: usize,
    pub plugin: bool,
    pub tools: Vec<ToolEntry>,
    pub hooks: Vec<String>,
    pub auth: Vec<Value>,
}

impl CatalogState {
    /// Registers what source `id` contributes now (each entry with its source's place in
    /// OpenCode's load order and its host), in place of what it claimed before. A name one
    /// source claims is its own; a name several claim is a conflict (`conflicts::elect`): the
    /// person's choice serves it, or until they choose, what served it before.
    pub fn register_tools(&mut self, id: &str, tools: Vec<ToolEntry>) {
        let digest = self.loaded.get(id).cloned().unwrap_or_default();
        let mut touched = self.drop_claims(id);
        let mut names = Vec::with_capacity(tools.len());
        for tool in tools {
            let name = tool.name.clone();
            self.claims.entry(name.clone()).or_default().insert(
                id.to_string(),
                Claim {
                    entry: tool,
                    digest: digest.clone(),
                    available: true,
                },
            );
            touched.push(name.clone());
            names.push(name);
        }
        if !names.is_empty() {
            self.claimed_by.insert(id.to_string(), names);
        }
        self.elect_all(touched);
    }

    /// Claims of `source` known from the store (the tools it registered when it last worked),
    /// for a source that has none in this process: candidates that cannot serve, so their
    /// conflicts stay shown.
    pub fn remember_claims(
        &mut self,
        source: &berth_discovery::Source,
        host: &HostKey,
        names: &[String],
    ) {
        if names.is_empty() || self.claimed_by.contains_key(&source.id) {
            return;
        }
        for name in names {
            self.claims.entry(name.clone()).or_default().insert(
                source.id.clone(),
                Claim {
                    entry: ToolEntry {
                        host: host.clone(),
                        order: source.order,
                        name: name.clone(),
                        description: String::new(),
                        parameters: Value::Null,
                        provider: Provider {
                            source_id: source.id.clone(),
                            kind: source.kind.into(),
                            backend: host.backend,
                        },
                        state: SourceState::LoadFailed,
                    },
                    digest: source.digest.clone(),
                    available: false,
                },
            );
        }
        self.claimed_by.insert(source.id.clone(), names.to_vec());
        self.elect_all(names.to_vec());
    }

    /// Source `id` cannot serve now (its load failed, its new version is held): what it
    /// registered is withdrawn, but its claims stay as candidates — a conflict does not go
    /// away because a worker is down, and a choice of it asks again instead of falling back.
    pub fn suspend(&mut self, id: &str) {
        let names = self.claimed_by.get(id).cloned().unwrap_or_default();
        for name in &names {
            if let Some(c) = self.claims.get_mut(name).and_then(|by| by.get_mut(id)) {
                c.available = false;
            }
        }
        self.hooks.retain(|h| h.source_id != id);
        self.offered.remove(id);
        self.limited.remove(id);
        self.elect_all(names);
    }

    /// Registers Berth's built-ins as candidates for their names (once).
    pub fn ensure_builtins(&mut self, backend: RuntimeKind) {
        if !self.builtins.is_empty() {
            return;
        }
        self.builtins = builtins::entries(backend);
        let digest = builtins::builtin_digest();
        let mut names = Vec::new();
        for tool in self.builtins.clone() {
            names.push(tool.name.clone());
            self.claims.entry(tool.name.clone()).or_default().insert(
                conflicts::BUILTIN.to_string(),
                Claim {
                    entry: tool,
                    digest: digest.clone(),
                    available: true,
                },
            );
        }
        self.claimed_by
            .insert(conflicts::BUILTIN.to_string(), names.clone());
        self.elect_all(names);
    }

    /// The tools sources provide that serve their names now (the built-ins are listed apart).
    pub fn source_tools(&self) -> Vec<ToolEntry> {
        self.tools
            .values()
            .filter(|t| t.provider.kind != ProviderKind::Builtin)
            .cloned()
            .collect()
    }

    /// Takes back everything source `id` offered and registered.
    pub fn withdraw(&mut self, id: &str) {
        self.withdraw_tools(id);
        self.hooks.retain(|h| h.source_id != id);
        self.offered.remove(id);
        self.limited.remove(id);
    }

    /// Registers what `id` offers as the policy admits it: the tools and hooks it allows, the
    /// `auth` methods only when its credentials cap does; the rest is recorded as limited.
    pub fn offer(&mut self, id: &str, offered: Offered, policy: &Effective) {
        self.offered.insert(id.to_string(), offered);
        self.judge(id, policy);
    }

    /// Records a call of `id` a cap refused; true when it was not shown yet.
    pub fn note_limited(&mut self, id: &str, limit: Limited) -> bool {
        let list = self.limited.entry(id.to_string()).or_default();
        if list.contains(&limit) {
            return false;
        }
        list.push(limit);
        true
    }

    /// Judges every loaded source again (the policy changed).
    pub fn judge_all(&mut self, policy: &Effective) {
        self.override_allowed = policy.value("cap.tool-override") == "allow";
        let ids: Vec<String> = self.offered.keys().cloned().collect();
        for id in ids {
            self.judge(&id, policy);
        }
    }

    fn judge(&mut self, id: &str, policy: &Effective) {
        let Some(o) = self.offered.get(id).cloned() else {
            return;
        };
        let names: Vec<String> = o.tools.iter().map(|t| t.name.clone()).collect();
        let judged = policy.judge(id, &names, &o.hooks);
        let tools: Vec<ToolEntry> = o
            .tools
            .into_iter()
            .filter(|t| judged.tools.contains(&t.name))
            .collect();
        self.register_tools(id, tools);
        self.hooks.retain(|h| h.source_id != id);
        if o.plugin {
            let auth = if judged.hooks.iter().any(|h| h == "auth") {
                o.auth
            } else {
                Vec::new()
            };
            self.hooks.push(HookOwner {
                source_id: id.to_string(),
                host: o.host,
                order: o.order,
                hooks: judged.hooks,
                auth,
            });
            self.hooks.sort_by_key(|h| h.order);
        }
        // Calls a cap refused stay shown while the cap still refuses them.
        let mut limited = judged.limited;
        if let Some(before) = self.limited.get(id) {
            limited.extend(
                before
                    .iter()
                    .filter(|l| l.item.starts_with("call:"))
                    .filter(|l| policy.admits(id, &l.item, l.category).is_err())
                    .cloned(),
            );
        }
        if limited.is_empty() {
            self.limited.remove(id);
        } else {
            self.limited.insert(id.to_string(), limited);
        }
    }

    /// Withdraws every tool source `id` claimed (a name it held goes to the next claimant).
    pub fn withdraw_tools(&mut self, id: &str) {
        let touched = self.drop_claims(id);
        self.elect_all(touched);
    }

    /// Removes `id`'s claims without electing; returns the names it claimed.
    fn drop_claims(&mut self, id: &str) -> Vec<String> {
        let names = self.claimed_by.remove(id).unwrap_or_default();
        for name in &names {
            if let Some(by) = self.claims.get_mut(name) {
                by.remove(id);
                if by.is_empty() {
                    self.claims.remove(name);
                }
            }
        }
        names
    }

    /// The sources holding a claim (loaded, failed or held), for revocation to take back.
    pub fn claimants(&self) -> impl Iterator<Item = &String> {
        self.claimed_by.keys()
    }

    /// Takes the store's words on contested names (the newest per name, and the person's own)
    /// and elects every claimed name again.
    pub fn set_choices(&mut self, stored: Vec<ToolChoice>, person: Vec<ToolChoice>) {
        self.choices = stored.into_iter().map(|c| (c.tool.clone(), c)).collect();
        self.person_choices = person.into_iter().map(|c| (c.tool.clone(), c)).collect();
        self.to_record.clear();
        let names: Vec<String> = self.claims.keys().cloned().collect();
        for name in names {
            if let Some(keep) = self.elect(&name) {
                self.choices.insert(name, keep.clone());
                self.to_record.push(keep);
            }
        }
    }

    /// What Berth decided to keep serving while conflicts ask, for the store.
    pub fn take_records(&mut self) -> Vec<ToolChoice> {
        std::mem::take(&mut self.to_record)
    }

    /// Elects `names` with the words read at the last `set_choices` (within a pass, the order
    /// sources load in decides nothing: what is recorded is decided once the pass is done).
    fn elect_all(&mut self, mut names: Vec<String>) {
        names.sort();
        names.dedup();
        for name in names {
            self.elect(&name);
        }
    }

    /// Gives `name` to the candidate the election picks, or drops it when none can serve;
    /// returns who serves it when that differs from the store's word.
    fn elect(&mut self, name: &str) -> Option<ToolChoice> {
        let candidates: Vec<Candidate> = self
            .claims
            .get(name)
            .map(|by| {
                by.iter()
                    .map(|(id, c)| Candidate {
                        id: id.clone(),
                        kind: c.entry.provider.kind,
                        digest: c.digest.clone(),
                        order: c.entry.order,
                        available: c.available,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let outcome = conflicts::elect(
            name,
            &candidates,
            self.choices.get(name),
            self.person_choices.get(name),
            !self.override_allowed,
        );
        let entry = outcome
            .winner
            .and_then(|w| self.claims.get(name).and_then(|by| by.get(&w)))
            .map(|c| c.entry.clone());
        match entry {
            Some(t) => {
                self.tools.insert(name.to_string(), t);
            }
            None => {
                self.tools.remove(name);
            }
        }
        match outcome.conflict {
            Some(c) => {
                self.conflicts.insert(name.to_string(), c);
            }
            None => {
                self.conflicts.remove(name);
            }
        }
        outcome.keep
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
    policy: Arc<Governor>,
    state: Mutex<CatalogState>,
    /// One activation at a time: two passes over the same hosts would load, hold and retire
    /// the same sources against each other.
    activating: tokio::sync::Mutex<()>,
    /// The merged config after the `config` hooks ran (what plugins changed in it).
    effective_config: Mutex<Option<Value>>,
    /// Itself, for the tasks it starts (events, `keep_active`).
    me: Weak<Catalog>,
    /// The connections to approved MCP servers (their tools are registered here like others).
    mcp: crate::mcp_servers::McpServers,
    /// Hooks and tools failing again and again: their log lines and their own pauses.
    streaks: streaks::Streaks,
}

impl Catalog {
    pub(crate) fn new(core: Arc<Core>, world: Arc<World>, policy: Arc<Governor>) -> Arc<Catalog> {
        let domain = core.domain().to_string();
        Arc::new_cyclic(|me| Catalog {
            core,
            world,
            policy,
            state: Mutex::new(CatalogState::default()),
            activating: tokio::sync::Mutex::new(()),
            effective_config: Mutex::new(None),
            me: me.clone(),
            mcp: crate::mcp_servers::McpServers::new(&domain),
            streaks: streaks::Streaks::default(),
        })
    }

    /// Whether `id` runs restricted (inside an OS boundary) under the policy in force.
    pub(crate) fn runs_restricted(&self, id: &str) -> bool {
        self.policy.current().restricted(id).0
    }

    /// The registry, for the owners that read it (status, plugin calls, logins).
    /// Holds the activation turn: no activation runs until the guard is dropped (an update
    /// switches a spec and records the decision for it in one turn).
    pub(crate) async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.activating.lock().await
    }

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
        self.mcp.close_all().await;
        if let Some(s) = self.core.supervisor_if_started() {
            let _ = self
                .run_chain_full(
                    "dispose",
                    Value::Null,
                    Value::Null,
                    Some(self.policy.current().budget("budget.dispose")),
                )
                .await;
            s.shutdown().await;
        }
    }

    /// A host of `backend` for the benchmark's raw round trips and start times (`BenchHost`).
    pub(crate) async fn host_for_bench(
        &self,
        backend: RuntimeKind,
        which: BenchHost<'_>,
    ) -> Arc<crate::host::Host> {
        let sup = self.core.supervisor().await.expect("supervisor");
        let (key, fresh) = match which {
            BenchHost::Live => (HostKey::shared(backend), false),
            BenchHost::Fresh => (HostKey::shared(backend), true),
            BenchHost::Restricted { source, fresh } => {
                (HostKey::restricted(backend, source), fresh)
            }
        };
        if fresh {
            sup.replace(&key, &[], std::time::Duration::ZERO, "benchmark")
                .await;
        }
        sup.host_for(&key).await.expect("host")
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
                .run_chain_full(
                    "event",
                    input,
                    Value::Null,
                    Some(berth.policy.current().budget("budget.event")),
                )
                .await
            {
                tracing::debug!("event delivery failed: {}", e.message);
            }
        });
    }
}

impl Catalog {
    /// Manual resume of plugin hosts paused after their restart budget was spent (their crash
    /// history is forgotten and the paused sources are activated again), and of hooks and tools
    /// paused on their own. Returns the backends that were paused.
    pub async fn resume_hosts(&self) -> Vec<RuntimeKind> {
        let Some(sup) = self.core.supervisor().await.ok() else {
            return Vec::new();
        };
        let resumed: Vec<RuntimeKind> = [RuntimeKind::Bun, RuntimeKind::Node]
            .into_iter()
            .filter(|b| sup.resume(*b))
            .collect();
        // Hooks and tools paused on their own run again too (`streaks`).
        if self.resume_parts() > 0 {
            let core = self.core.clone();
            let _ = tokio::task::spawn_blocking(move || core.rescan()).await;
        }
        if self.mcp.resume_all() || !resumed.is_empty() {
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
                // What activation depends on: approved ids with their digests and decisions,
                // and the policy (its values, the person's grants: the decisions marker).
                let status = berth.core.status();
                let marker = berth
                    .core
                    .with_store(|s| s.decisions_marker())
                    .unwrap_or(-1);
                let policy = serde_json::to_string(&status.policy.entries).unwrap_or_default();
                let sources: String = status
                    .sources
                    .iter()
                    .filter(|s| {
                        matches!(
                            s.kind,
                            SourceKind::StandaloneTool
                                | SourceKind::FilePlugin
                                | SourceKind::NpmPlugin
                                | SourceKind::Mcp
                        )
                    })
                    .map(|s| {
                        format!(
                            "{}:{}:{:?}:{:?}:{};",
                            s.id, s.digest, s.approval.decision, s.approval.grew, s.own_host
                        )
                    })
                    .collect();
                let signature = format!("{marker}|{policy}|{sources}");
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

/// The loops a long-running front end keeps (`Berth::keep_active`); dropping it stops them, so
/// a window that opens another project leaves nothing of the first one running.
pub struct KeepActive(Vec<tokio::task::JoinHandle<()>>);

impl KeepActive {
    pub(crate) fn new(tasks: Vec<tokio::task::JoinHandle<()>>) -> KeepActive {
        KeepActive(tasks)
    }
}

impl Drop for KeepActive {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Which host the benchmark wants (`Berth::host_for_bench`).
#[doc(hidden)]
pub enum BenchHost<'a> {
    /// The live shared host.
    Live,
    /// A new shared host in place of the live one (the old one retired), to time its start.
    Fresh,
    /// The host `source` runs in when it is restricted (activated before), or a new one.
    Restricted { source: &'a str, fresh: bool },
}
