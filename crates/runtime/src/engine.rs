//! `Berth`: the runtime facade the CLI, the desktop shell and the page server share. It owns
//! the store, the scanner and the current status snapshot, and publishes snapshot changes.
//!
//! Invariant: callers never wait on a plugin, an install or a hook to read the status — the
//! snapshot is computed from files and the store only.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use berth_discovery::{OpencodeEnv, Scanner};
use berth_discovery::{SourceKind, SourceState};

use berth_store::{ApprovalRow, Decision, NewApproval, Recovery, Store};
use tokio::sync::broadcast;

use crate::approval;
use crate::catalog::Catalog;
use crate::error::{code, BerthError};
use crate::host::{HostLayout, HostSupervisor};
use crate::runtimes::{self, RuntimeInfo};
use crate::snapshot::*;

/// How Berth is started.
#[derive(Debug, Clone)]
pub struct BerthOptions {
    pub data_dir: PathBuf,
    pub project: PathBuf,
    pub env: OpencodeEnv,
    pub log_file: Option<PathBuf>,
}

impl BerthOptions {
    /// Where prepared npm plugin packages live: `<data dir>/packages`, or the folder named by
    /// `BERTH_PACKAGE_CACHE`, which several data dirs may share (a prepared `name@request` is
    /// immutable and has its own install lock).
    pub fn packages_dir(&self) -> PathBuf {
        std::env::var_os("BERTH_PACKAGE_CACHE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| self.data_dir.join("packages"))
    }
}

/// The default data dir: `$XDG_DATA_HOME/berth`, else `~/.local/share/berth`.
pub fn default_data_dir(env: &OpencodeEnv) -> PathBuf {
    env.data_home().join("berth")
}

#[derive(Clone)]
pub struct Berth {
    inner: Arc<Inner>,
}

struct Inner {
    options: BerthOptions,
    /// One connection per process; SQLite serialises with other processes (WAL + busy timeout).
    store: Mutex<Store>,
    store_info: StoreInfo,
    /// Per-file parse cache lives here, so rescans only re-read what changed.
    scanner: Mutex<Scanner>,
    runtimes: Vec<RuntimeInfo>,
    /// This machine and user (`approval::execution_domain`).
    domain: String,
    current: RwLock<Arc<StatusSnapshot>>,
    /// Content fingerprint of `current`, to publish only real changes.
    fingerprint: Mutex<String>,
    events: broadcast::Sender<StatusEvent>,
    /// Started on first use (needs a tokio runtime); owns every plugin host.
    supervisor: tokio::sync::OnceCell<Arc<HostSupervisor>>,
    catalog: Mutex<Catalog>,
    /// One activation at a time: two passes over the same hosts would load, hold and retire
    /// the same sources against each other.
    activating: tokio::sync::Mutex<()>,
    /// The merged config after the `config` hooks ran (what plugins changed in it).
    effective_config: Mutex<Option<serde_json::Value>>,
    /// What plugin code reached in Berth: toasts, open permission prompts, auth flows.
    world: Mutex<crate::world::WorldState>,
}

/// A handle that does not keep Berth alive (the supervisor's upcalls hold one).
#[derive(Clone)]
pub(crate) struct WeakBerth(std::sync::Weak<Inner>);

impl WeakBerth {
    pub(crate) fn upgrade(&self) -> Option<Berth> {
        self.0.upgrade().map(|inner| Berth { inner })
    }
}

impl Berth {
    /// Opens the store (migrating it), scans the project once and builds the first snapshot.
    pub fn open(options: BerthOptions) -> Result<Berth, BerthError> {
        std::fs::create_dir_all(&options.data_dir).map_err(|e| {
            BerthError::new(
                code::ACTION_REQUIRED,
                "store",
                format!(
                    "cannot create the data directory {}: {e}",
                    options.data_dir.display()
                ),
                format!(
                    "make {} writable, or pass another folder with --data-dir",
                    options.data_dir.display()
                ),
            )
        })?;
        // Receipts, outputs and logs are the user's alone: nobody else may enter the folder.
        {
            use std::os::unix::fs::PermissionsExt;
            let _ =
                std::fs::set_permissions(&options.data_dir, std::fs::Permissions::from_mode(0o700));
        }
        let opened = Store::open(&options.data_dir.join("berth.db"))?;
        let moved_aside = opened
            .recovery
            .as_ref()
            .map(|Recovery::MovedAsideCorrupt { moved_to }| moved_to.clone());
        let store_info = StoreInfo {
            path: opened.store.path().to_path_buf(),
            schema_version: opened.store.schema_version()?,
            moved_aside,
        };
        // Calls left open by a process that died are `unknown` now, never replayed.
        let settled = opened.store.settle_orphaned_receipts(|pid, start| {
            crate::host::procs::start_time(pid) == Some(start)
        })?;
        if settled > 0 {
            tracing::warn!(
                settled,
                "receipts of calls interrupted by a crash are now `unknown`"
            );
        }
        let runtimes = runtimes::probe_all();
        let resolve_as = approval::backend_for(&runtimes).resolve_rules();
        let (events, _) = broadcast::channel(64);
        let berth = Berth {
            inner: Arc::new(Inner {
                store: Mutex::new(opened.store),
                store_info,
                scanner: Mutex::new(
                    Scanner::with_packages(options.packages_dir()).resolving_for(resolve_as),
                ),
                runtimes,
                domain: approval::execution_domain(),
                current: RwLock::new(Arc::new(placeholder(&options))),
                fingerprint: Mutex::new(String::new()),
                events,
                supervisor: tokio::sync::OnceCell::new(),
                catalog: Mutex::new(Catalog::default()),
                activating: tokio::sync::Mutex::new(()),
                effective_config: Mutex::new(None),
                world: Mutex::new(Default::default()),
                options,
            }),
        };
        berth.rescan();
        Ok(berth)
    }

    /// The project decisions may be limited to: the git worktree, else the directory.
    pub(crate) fn project_key(&self) -> String {
        let p = &self.status().project;
        if p.has_git {
            p.worktree.display().to_string()
        } else {
            p.directory.display().to_string()
        }
    }

    pub(crate) fn domain(&self) -> &str {
        &self.inner.domain
    }

    pub(crate) fn runtimes(&self) -> Vec<RuntimeInfo> {
        self.inner.runtimes.clone()
    }

    pub(crate) fn effective_config_slot(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<serde_json::Value>> {
        self.inner
            .effective_config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The merged config as the `config` hooks left it (None until a plugin was loaded).
    pub fn effective_config(&self) -> Option<serde_json::Value> {
        self.effective_config_slot().clone()
    }

    pub(crate) fn downgrade(&self) -> WeakBerth {
        WeakBerth(Arc::downgrade(&self.inner))
    }

    pub(crate) fn world(&self) -> std::sync::MutexGuard<'_, crate::world::WorldState> {
        self.inner.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn catalog(&self) -> &Mutex<Catalog> {
        &self.inner.catalog
    }

    /// Waits for any activation in progress; the turn is this caller's until dropped.
    pub(crate) async fn activation_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.activating.lock().await
    }

    pub(crate) async fn inner_supervisor(&self) -> Result<Arc<HostSupervisor>, BerthError> {
        self.inner
            .supervisor
            .get_or_try_init(|| async {
                let data_dir = self.inner.options.data_dir.clone();
                let packages = self.inner.options.packages_dir();
                // Preparing dependencies may download: off the async workers.
                let layout = tokio::task::spawn_blocking(move || {
                    HostLayout::locate(&data_dir, &packages, |seed| {
                        crate::deps::prepare_host_deps(&data_dir, seed)
                    })
                })
                .await
                .map_err(|e| {
                    BerthError::new(
                        code::TEMPORARILY_UNAVAILABLE,
                        "host",
                        e.to_string(),
                        "retry",
                    )
                })??;
                Ok(Arc::new(HostSupervisor::with_upcalls(
                    layout,
                    self.inner.runtimes.clone(),
                    Arc::new(crate::world::Upcaller(self.downgrade())),
                )))
            })
            .await
            .cloned()
    }

    /// The supervisor, if something started it (status reads never start hosts).
    pub(crate) fn inner_supervisor_if_started(&self) -> Option<Arc<HostSupervisor>> {
        self.inner.supervisor.get().cloned()
    }

    /// Stops every plugin host (their trees are killed and reaped).
    pub async fn shutdown_hosts(&self) {
        if let Some(s) = self.inner.supervisor.get() {
            // OpenCode's finaliser: every `dispose` hook, errors only logged, bounded in time
            // (nothing is sent when no plugin has one).
            let _ = self
                .run_chain_full(
                    "dispose",
                    serde_json::Value::Null,
                    serde_json::Value::Null,
                    Some(std::time::Duration::from_secs(2)),
                )
                .await;
            s.shutdown().await;
        }
    }

    pub fn receipts(&self, limit: usize) -> Result<Vec<berth_store::Receipt>, BerthError> {
        self.with_store(|s| s.receipts(limit)).map_err(Into::into)
    }

    pub fn options(&self) -> &BerthOptions {
        &self.inner.options
    }

    /// The current snapshot (cheap: a shared pointer).
    pub fn status(&self) -> Arc<StatusSnapshot> {
        self.inner
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<StatusEvent> {
        self.inner.events.subscribe()
    }

    /// Re-reads the config graph and publishes an event if anything changed.
    pub fn rescan(&self) -> Option<StatusEvent> {
        let o = &self.inner.options;
        let discovery = {
            let mut scanner = self.inner.scanner.lock().unwrap_or_else(|p| p.into_inner());
            scanner.scan(&o.env, &o.project)
        };
        let g = &discovery.graph;
        let backend = approval::backend_for(&self.inner.runtimes);
        let (tools, activity) = {
            let cat = self.inner.catalog.lock().unwrap_or_else(|p| p.into_inner());
            (
                cat.tools.values().cloned().collect::<Vec<_>>(),
                cat.activity.clone(),
            )
        };
        let hosts = self
            .inner
            .supervisor
            .get()
            .map(|s| s.hosts_now())
            .unwrap_or_default();
        let quarantined = self
            .inner
            .supervisor
            .get()
            .map(|s| s.quarantined())
            .unwrap_or_default();
        let project_key = if g.has_git {
            g.worktree.display().to_string()
        } else {
            g.directory.display().to_string()
        };
        let sources: Vec<SourceView> = self.with_store(|store| {
            let own = store.own_hosts().unwrap_or_default();
            discovery
                .sources
                .iter()
                .map(|src| {
                    let key = approval::key_for(src, &self.inner.domain, backend, &project_key);
                    let row = store.current_approval(&key).ok().flatten();
                    let observed = store
                        .contributions(&src.id, &src.digest, &key.backend)
                        .ok()
                        .flatten();
                    let (mut state, view) =
                        approval::evaluate(src, row.as_ref(), &key, observed.as_ref());
                    // The host's word, for sources the gate let through.
                    if state == SourceState::Discovered {
                        if let Some(s) = activity.get(&src.id) {
                            state = *s;
                        }
                    }
                    let mut source = src.clone();
                    source.state = state;
                    // Options go to the plugin as written; every view shows secrets redacted.
                    source.options = source.options.as_ref().map(crate::secret::redact_options);
                    if state == SourceState::Paused {
                        let why = match quarantined.get(&src.id) {
                            Some(why) => format!("{why}; it is paused, and the other plugins run on"),
                            None => format!(
                                "its plugin host was lost {} times within {} minutes and is paused; nothing of this source runs until it is resumed",
                                crate::host::RESTART_BUDGET,
                                crate::host::RESTART_WINDOW.as_secs() / 60
                            ),
                        };
                        source.diagnostics.push(berth_discovery::Diagnostic::new(
                            code::TEMPORARILY_UNAVAILABLE,
                            why,
                            "look at the plugin's diagnostics and log, then press Resume on the status page (or restart Berth)",
                        ));
                    }
                    SourceView {
                        own_host: own.contains(&source.id),
                        source,
                        approval: view,
                    }
                })
                .collect()
        });
        // Calls end in other processes too: their receipts are read here, and the watcher on
        // the data dir brings a rescan when any process writes one.
        let calls: Vec<CallView> = self
            .with_store(|s| s.receipts(RECENT_CALLS))
            .map(|r| r.into_iter().map(CallView::from).collect())
            .unwrap_or_default();
        let standing_answers = self
            .with_store(|s| s.permission_rules())
            .unwrap_or_default();
        // What plugins asked for (toasts, prompts) is published by `publish_world`, not here.
        let fingerprint = berth_discovery::sha256_hex(
            serde_json::json!([
                calls,
                standing_answers,
                g.dirs,
                g.files,
                sources,
                g.diagnostics,
                g.pure,
                tools,
                hosts
                    .iter()
                    .map(|h| (h.pid, &h.instances))
                    .collect::<Vec<_>>()
            ])
            .to_string()
            .as_bytes(),
        );
        let mut fp = self
            .inner
            .fingerprint
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if *fp == fingerprint {
            return None;
        }
        *fp = fingerprint;
        let old = self.status();
        let (notices, prompts) = {
            let w = self.world();
            (w.notices(), w.prompt_views())
        };
        let snapshot = Arc::new(StatusSnapshot {
            berth: BerthInfo {
                version: env!("CARGO_PKG_VERSION"),
                data_dir: o.data_dir.clone(),
                store: self.inner.store_info.clone(),
                log_file: o.log_file.clone(),
            },
            project: ProjectInfo {
                directory: g.directory.clone(),
                worktree: g.worktree.clone(),
                has_git: g.has_git,
            },
            config_dirs: Arc::new(g.dirs.clone()),
            config_files: Arc::new(g.files.clone()),
            pure: g.pure.clone(),
            runtimes: self.inner.runtimes.clone(),
            counts: Counts::of(&sources),
            diagnostics: g.diagnostics.clone(),
            sources: Arc::new(sources),
            tools: Arc::new(tools),
            hosts,
            notices,
            prompts,
            calls: Arc::new(calls),
            standing_answers: Arc::new(standing_answers),
            revision: old.revision + 1,
        });
        let diff = SnapshotDiff::between(&old, &snapshot);
        let event = self.install(snapshot, diff);
        drop(fp);
        tracing::info!(
            revision = event.revision,
            added = event.diff.added.len(),
            removed = event.diff.removed.len(),
            changed = event.diff.changed.len(),
            "snapshot changed"
        );
        Some(event)
    }

    /// Publishes a change of what plugins asked the person for (toasts, permission prompts)
    /// on the current snapshot, without rescanning anything.
    pub(crate) fn publish_world(&self) {
        // The same lock as `rescan`, so neither overwrites the other's newer snapshot.
        let _fp = self
            .inner
            .fingerprint
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let old = self.status();
        let (notices, prompts) = {
            let w = self.world();
            (w.notices(), w.prompt_views())
        };
        if old.notices == notices && old.prompts == prompts {
            return;
        }
        let mut next = (*old).clone();
        next.notices = notices;
        next.prompts = prompts;
        next.revision = old.revision + 1;
        self.install(Arc::new(next), SnapshotDiff::default());
    }

    /// Makes `snapshot` the current one and publishes it (the caller holds the fingerprint
    /// lock, so snapshots are installed in revision order).
    fn install(&self, snapshot: Arc<StatusSnapshot>, diff: SnapshotDiff) -> StatusEvent {
        let event = StatusEvent {
            revision: snapshot.revision,
            diff,
            snapshot: snapshot.clone(),
        };
        *self
            .inner
            .current
            .write()
            .unwrap_or_else(|p| p.into_inner()) = snapshot;
        let _ = self.inner.events.send(event.clone());
        event
    }

    /// The folders a watcher should observe for the current graph.
    pub fn watch_roots(&self) -> Vec<PathBuf> {
        let s = self.status();
        // The data dir: another process (the CLI next to the app) committing a decision
        // touches the WAL, and this process then shows it.
        let mut roots: Vec<PathBuf> = vec![self.inner.options.data_dir.clone()];
        roots.extend(s.config_dirs.iter().map(|d| d.path.clone()));
        for d in s.config_dirs.iter() {
            for sub in ["plugin", "plugins", "tool", "tools"] {
                roots.push(d.path.join(sub));
            }
        }
        roots.extend(
            s.config_files
                .iter()
                .filter_map(|f| f.path.parent().map(Path::to_path_buf)),
        );
        for src in s.sources.iter() {
            roots.extend(
                src.capabilities
                    .files
                    .iter()
                    .filter_map(|f| f.parent().map(Path::to_path_buf)),
            );
        }
        roots.sort();
        roots.dedup();
        roots.retain(|r| r.is_absolute());
        roots
    }

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
    ) -> Result<Vec<String>, BerthError> {
        self.rescan();
        let snapshot = self.status();
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
            if s.kind == SourceKind::Mcp || s.state == SourceState::Unsupported {
                return Err(BerthError::new(
                    code::UNSUPPORTED,
                    "approval",
                    format!("{} cannot be approved: it is not supported yet", s.id),
                    "see the source's diagnostics",
                )
                .for_plugin(s.id.clone()));
            }
        }
        let backend = approval::backend_for(&self.inner.runtimes);
        self.with_store(|store| -> Result<(), BerthError> {
            for s in &chosen {
                let key = approval::key_for(s, &self.inner.domain, backend, &self.project_key());
                let mut shown = serde_json::to_value(&s.capabilities).unwrap_or_default();
                // Every file with the digest it had when shown: the gate compares file by file.
                shown["manifest"] = serde_json::to_value(&s.manifest).unwrap_or_default();
                // What the loaded module showed (checkpoint two) is part of what is approved.
                if let Some(c) = store.contributions(&s.id, &s.digest, &key.backend)? {
                    shown["contributions"] =
                        serde_json::json!({ "tools": c.tools, "hooks": c.hooks });
                }
                store.record_approval(&NewApproval {
                    key: &key,
                    plugin_identity: &s.entry,
                    decision,
                    digest: &s.digest,
                    capability_digest: &s.capability_digest,
                    shown: &shown,
                    decided_by,
                    this_project_only,
                })?;
            }
            Ok(())
        })?;
        self.rescan();
        Ok(chosen.iter().map(|s| s.id.clone()).collect())
    }

    /// Gives each source of `ids` a host of its own (`own`), or puts it back in the shared one;
    /// the next activation moves it (its old host is stopped). Unknown ids fail first.
    pub fn set_own_host(&self, ids: &[String], own: bool) -> Result<Vec<String>, BerthError> {
        let snapshot = self.status();
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
        self.with_store(|s| {
            for id in ids {
                s.set_own_host(id, own)?;
            }
            Ok::<(), berth_store::StoreError>(())
        })?;
        self.rescan();
        Ok(ids.to_vec())
    }

    pub fn approvals(&self) -> Result<Vec<ApprovalRow>, BerthError> {
        self.with_store(|s| s.approvals()).map_err(Into::into)
    }

    pub fn backup(&self, dest: &Path) -> Result<(), BerthError> {
        let store = self.inner.store.lock().unwrap_or_else(|p| p.into_inner());
        store.backup_to(dest).map_err(Into::into)
    }

    pub fn restore(&self, src: &Path) -> Result<(), BerthError> {
        let mut store = self.inner.store.lock().unwrap_or_else(|p| p.into_inner());
        store.restore_from(src).map_err(Into::into)
    }

    /// Runs `f` with the store (for capabilities that keep state).
    pub fn with_store<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        let store = self.inner.store.lock().unwrap_or_else(|p| p.into_inner());
        f(&store)
    }
}

/// Whether `seen` (a full `sha256:…` digest, or at least 8 hex digits of one) names `digest`.
fn digest_matches(digest: &str, seen: &str) -> bool {
    let hex = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_ascii_lowercase();
    let (have, seen) = (hex(digest), hex(seen));
    seen.len() >= 8 && seen.chars().all(|c| c.is_ascii_hexdigit()) && have.starts_with(&seen)
}

fn placeholder(o: &BerthOptions) -> StatusSnapshot {
    StatusSnapshot {
        berth: BerthInfo {
            version: env!("CARGO_PKG_VERSION"),
            data_dir: o.data_dir.clone(),
            store: StoreInfo {
                path: PathBuf::new(),
                schema_version: 0,
                moved_aside: None,
            },
            log_file: None,
        },
        project: ProjectInfo {
            directory: o.project.clone(),
            worktree: o.project.clone(),
            has_git: false,
        },
        config_dirs: Default::default(),
        config_files: Default::default(),
        pure: berth_discovery::Switch::Off,
        runtimes: vec![],
        sources: Default::default(),
        counts: Counts::default(),
        diagnostics: vec![],
        tools: Default::default(),
        hosts: vec![],
        notices: vec![],
        prompts: vec![],
        calls: Default::default(),
        standing_answers: Default::default(),
        revision: 0,
    }
}
