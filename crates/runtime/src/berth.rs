//! `Berth`: the one facade the CLI, the desktop shell and the page server call. It wires the
//! owners together when it opens and then only delegates — every rule lives in an owner:
//! `core` (what they share), `world` (what plugins put before the person), `catalog` (tools,
//! hooks, activation, calls), `plugin_calls` (answers to plugin code), `auth` (logins),
//! `status` (the snapshot), `decisions` (the person's approvals), `updates` (checks, updates
//! and rollbacks of npm plugins), `versions` (what ran).
//!
//! Must not: hold state of its own or decide anything (a check in this file is a rule in the
//! wrong room).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use berth_store::{ApprovalRow, Decision, Receipt, Store};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::auth::{Auth, AuthOutcome, AuthPrompt, AuthProvider};
use crate::catalog::{Activation, Catalog};
use crate::core::{BerthOptions, Core, Publisher};
use crate::decisions::{Decided, Decisions};
use crate::error::BerthError;
use crate::governor::Governor;
use crate::plugin_calls::{PluginCalls, Upcaller};
use crate::policy::{Effective, Entry};
use crate::runtimes::RuntimeKind;
use crate::secret::Secret;
use crate::snapshot::{Conflict, StatusEvent, StatusSnapshot};
use crate::status::Status;
use crate::updates::{Checks, Outcome, Updates};
use crate::versions::VersionView;
use crate::world::{PromptReply, World};

#[derive(Clone)]
pub struct Berth {
    parts: Arc<Parts>,
}

struct Parts {
    core: Arc<Core>,
    world: Arc<World>,
    catalog: Arc<Catalog>,
    /// Kept alive here; the supervisor reaches it through a weak handle.
    _calls: Arc<PluginCalls>,
    auth: Auth,
    status: Arc<Status>,
    decisions: Decisions,
    updates: Arc<Updates>,
    policy: Arc<Governor>,
}

impl Berth {
    /// Opens the store (migrating it), scans the project once and builds the first snapshot.
    pub fn open(options: BerthOptions) -> Result<Berth, BerthError> {
        let core = Arc::new(Core::open(options)?);
        let policy = Governor::new(core.clone());
        let world = Arc::new(World::default());
        let catalog = Catalog::new(core.clone(), world.clone(), policy.clone());
        let calls = Arc::new(PluginCalls {
            core: core.clone(),
            world: world.clone(),
            catalog: catalog.clone(),
            policy: policy.clone(),
        });
        let status = Arc::new(Status::new(
            core.clone(),
            world.clone(),
            catalog.clone(),
            policy.clone(),
        ));
        let publisher: Weak<dyn Publisher> = Arc::downgrade(&status) as Weak<dyn Publisher>;
        core.wire(Arc::new(Upcaller(Arc::downgrade(&calls))), publisher);
        let berth = Berth {
            parts: Arc::new(Parts {
                auth: Auth {
                    core: core.clone(),
                    catalog: catalog.clone(),
                },
                decisions: Decisions {
                    core: core.clone(),
                    status: status.clone(),
                    policy: policy.clone(),
                },
                updates: Arc::new(Updates {
                    core: core.clone(),
                    catalog: catalog.clone(),
                    status: status.clone(),
                    decisions: Decisions {
                        core: core.clone(),
                        status: status.clone(),
                        policy: policy.clone(),
                    },
                    policy: policy.clone(),
                }),
                policy,
                core,
                world,
                catalog,
                _calls: calls,
                status,
            }),
        };
        berth.rescan();
        Ok(berth)
    }

    // ---- the status -----------------------------------------------------------------------

    /// The current snapshot (cheap: a shared pointer).
    pub fn status(&self) -> Arc<StatusSnapshot> {
        self.parts.core.status()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<StatusEvent> {
        self.parts.core.subscribe()
    }

    /// Re-reads the config graph and publishes an event if anything changed.
    pub fn rescan(&self) -> Option<StatusEvent> {
        self.parts.status.rescan()
    }

    /// The folders a watcher should observe for the current graph.
    pub fn watch_roots(&self) -> Vec<PathBuf> {
        self.parts.status.watch_roots()
    }

    pub fn options(&self) -> &BerthOptions {
        self.parts.core.options()
    }

    /// Runs `f` with the store (for capabilities that keep state).
    pub fn with_store<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        self.parts.core.with_store(f)
    }

    pub fn receipts(&self, limit: usize) -> Result<Vec<Receipt>, BerthError> {
        self.with_store(|s| s.receipts(limit)).map_err(Into::into)
    }

    // ---- the person's decisions -----------------------------------------------------------

    /// Records `decision` for each chosen source, exactly as the current snapshot shows it
    /// (`decisions::Decisions::decide`), then rescans.
    pub fn decide(
        &self,
        ids: Option<&[String]>,
        decision: Decision,
        decided_by: &str,
        this_project_only: bool,
    ) -> Result<Vec<Decided>, BerthError> {
        self.parts
            .decisions
            .decide(ids, decision, decided_by, this_project_only, false)
    }

    /// Approves npm plugins together with what their fetch brings (both steps at once): the
    /// fetched bytes are judged and recorded as approved when they are here.
    pub fn approve_including_fetch(
        &self,
        ids: Option<&[String]>,
        decided_by: &str,
        this_project_only: bool,
    ) -> Result<Vec<Decided>, BerthError> {
        self.parts
            .decisions
            .decide(ids, Decision::Allow, decided_by, this_project_only, true)
    }

    // ---- the policy -----------------------------------------------------------------------

    /// The effective policy: each value with the layer that set it.
    pub fn policy(&self) -> Arc<Effective> {
        self.parts.policy.refresh();
        self.parts.policy.current()
    }

    /// The person's value of a policy key (`None`: the layer above's); refused if it loosens one.
    pub fn set_policy(
        &self,
        key: &str,
        value: Option<Value>,
        by: &str,
    ) -> Result<Entry, BerthError> {
        let entry = self.parts.policy.set(key, value, by)?;
        self.rescan();
        Ok(entry)
    }

    /// Lets one contribution of a source through a `review` cap (or takes that back).
    pub fn grant(&self, source_id: &str, item: &str, granted: bool) -> Result<(), BerthError> {
        self.parts.policy.grant(source_id, item, granted)?;
        self.rescan();
        Ok(())
    }

    /// Gives each source of `ids` a host of its own (`own`), or puts it back in the shared one.
    pub fn set_own_host(&self, ids: &[String], own: bool) -> Result<Vec<String>, BerthError> {
        self.parts.decisions.set_own_host(ids, own)
    }

    pub fn approvals(&self) -> Result<Vec<ApprovalRow>, BerthError> {
        self.parts.decisions.approvals()
    }

    pub fn backup(&self, dest: &Path) -> Result<(), BerthError> {
        self.parts.decisions.backup(dest)
    }

    pub fn restore(&self, src: &Path) -> Result<(), BerthError> {
        self.parts.decisions.restore(src)
    }

    // ---- the catalog ----------------------------------------------------------------------

    /// Activates every approved source whose bytes still match its approval (`Catalog::activate`).
    pub async fn activate(&self) -> Activation {
        self.parts.catalog.activate().await
    }

    /// One call through the full path: idempotency, receipt, host, result. `control` cancels
    /// it and follows its `metadata()` reports (`CallControl::default()`: neither).
    pub async fn invoke(
        &self,
        tool: &str,
        args: Value,
        idempotency_key: Option<&str>,
        timeout: Option<Duration>,
        control: crate::catalog::CallControl,
    ) -> Result<Receipt, BerthError> {
        self.parts
            .catalog
            .invoke(tool, args, idempotency_key, timeout, control)
            .await
    }

    /// Prepares the package an MCP server's fetch-and-run launcher would fetch at every start,
    /// and runs it from Berth's data dir (`mcp_servers::prepared`).
    pub async fn prepare_mcp(&self, id: &str) -> Result<berth_store::McpPrepared, BerthError> {
        self.parts.catalog.prepare_mcp(id).await
    }

    /// Signs in to a remote MCP server that asks (`catalog::mcp_sign_in`); `on_url` gets the
    /// provider's page (also opened in the browser).
    pub async fn mcp_sign_in(
        &self,
        source: &str,
        on_url: impl FnOnce(&str) + Send,
    ) -> Result<crate::SignedIn, BerthError> {
        self.parts.catalog.mcp_sign_in(source, on_url).await
    }

    /// The same in the background (the page, the window): the provider's page once known.
    pub async fn start_mcp_sign_in(&self, source: &str) -> Result<String, BerthError> {
        self.parts.catalog.start_mcp_sign_in(source).await
    }

    /// Forgets a remote MCP server's sign-in.
    pub async fn mcp_sign_out(&self, source: &str) -> Result<crate::SignedIn, BerthError> {
        self.parts.catalog.mcp_sign_out(source).await
    }

    /// The person chooses who serves a contested tool name (`catalog::conflicts`).
    pub async fn choose(&self, tool: &str, candidate: &str) -> Result<Conflict, BerthError> {
        self.parts.catalog.choose(tool, candidate).await
    }

    /// Runs one hook chain as OpenCode would and returns the final output.
    pub async fn run_hook(
        &self,
        name: &str,
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        self.parts
            .catalog
            .run_hook(name, input, output, timeout)
            .await
    }

    /// One chain over the plugins active now, without activating first.
    pub async fn run_active_hook(
        &self,
        name: &str,
        input: Value,
        output: Value,
    ) -> Result<Value, BerthError> {
        self.parts
            .catalog
            .run_active_hook(name, input, output)
            .await
    }

    /// Sends one Berth event to the plugins' `event` hooks (not awaited).
    pub fn emit_event(&self, kind: &str, properties: Value) {
        self.parts.catalog.emit_event(kind, properties)
    }

    /// The merged config as the `config` hooks left it (None until a plugin was loaded).
    pub fn effective_config(&self) -> Option<Value> {
        self.parts.catalog.effective_config()
    }

    /// Resumes plugin hosts paused after their restart budget was spent.
    pub async fn resume_hosts(&self) -> Vec<RuntimeKind> {
        self.parts.catalog.resume_hosts().await
    }

    /// For long-running front ends: activation, update checks, freed memory given back.
    pub fn keep_active(&self) -> crate::catalog::KeepActive {
        let trim = tokio::spawn(crate::memory::keep_trimmed(self.subscribe()));
        let updates = tokio::spawn(self.parts.updates.clone().keep_updated());
        crate::catalog::KeepActive::new(vec![self.parts.catalog.keep_active(), updates, trim])
    }

    // ---- versions and updates ------------------------------------------------------------

    /// Asks the registry what the spec of each npm plugin of `ids` (all with `None`) allows now.
    pub async fn check_updates(&self, ids: Option<&[String]>) -> Checks {
        self.parts.updates.check(ids).await
    }

    /// Updates `id` to the newest version its spec allows now (stop old, import new).
    pub async fn update(&self, id: &str, approve_growth: bool) -> Result<Outcome, BerthError> {
        self.parts.updates.update(id, approve_growth).await
    }

    /// Runs an exact earlier version of `id` again (`to`: its execution version id).
    pub async fn rollback(&self, id: &str, to: Option<i64>) -> Result<Outcome, BerthError> {
        self.parts.updates.rollback(id, to).await
    }

    /// Every version of `id` that ran here, the current first, with its whole record.
    pub fn versions(&self, id: &str) -> Result<Vec<VersionView>, BerthError> {
        self.parts.updates.versions(id)
    }

    /// Stops every plugin host after their `dispose` hooks (their trees are killed and reaped).
    pub async fn shutdown_hosts(&self) {
        self.parts.catalog.shutdown_hosts().await
    }

    /// A host for the benchmark's raw round trips and start times.
    #[doc(hidden)]
    pub async fn host_for_bench(
        &self,
        backend: RuntimeKind,
        which: crate::catalog::BenchHost<'_>,
    ) -> Arc<crate::host::Host> {
        self.parts.catalog.host_for_bench(backend, which).await
    }

    // ---- what plugins ask of the person ---------------------------------------------------

    /// Lets plugin permission prompts wait for a person (the app and `berth serve` call it).
    pub fn enable_prompts(&self) {
        self.parts.world.enable_prompts()
    }

    /// Answers an open permission prompt (from the app, the page or the CLI).
    pub fn answer_prompt(&self, id: &str, reply: PromptReply) -> Result<(), BerthError> {
        self.parts.world.answer_prompt(id, reply)?;
        self.parts.core.publish_world();
        Ok(())
    }

    // ---- logins ---------------------------------------------------------------------------

    /// The login methods of every active plugin's `auth` hook, by provider.
    pub fn auth_providers(&self) -> Vec<AuthProvider> {
        self.parts.auth.auth_providers()
    }

    /// Runs one login method of a plugin's `auth` hook and files the credential in the OS
    /// keyring (`auth::Auth::auth_login`). The result never contains the credential.
    pub async fn auth_login(
        &self,
        provider: &str,
        method: usize,
        inputs: serde_json::Map<String, Value>,
        ask_secret: impl FnOnce(&AuthPrompt) -> Option<Secret>,
    ) -> Result<AuthOutcome, BerthError> {
        self.parts
            .auth
            .auth_login(provider, method, inputs, ask_secret)
            .await
    }

    /// Removes the stored credential of `provider`. Returns whether there was one.
    pub fn auth_logout(&self, provider: &str) -> Result<bool, BerthError> {
        self.parts.auth.auth_logout(provider)
    }

    /// The stored credential of `provider`. Never log it.
    pub fn stored_credential(&self, provider: &str) -> Result<Option<Secret>, BerthError> {
        self.parts.auth.stored_credential(provider)
    }
}
