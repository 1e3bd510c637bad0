//! What every owner of the runtime shares: how Berth was started, the store, the runtimes this
//! machine has, the execution domain, the current status snapshot (read-only here), the plugin
//! hosts' supervisor, and OpenCode's project. The owners above reach each other only through
//! their own fields; the one way up is [`Publisher`], through which a change below asks the
//! status owner to publish.
//!
//! Owns: those shared facts and handles. Must not: hold any owner's state, or decide anything.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use berth_discovery::{OpencodeEnv, Scanner};
use berth_store::{Recovery, Store};
use tokio::sync::broadcast;

use crate::approval;
use crate::error::{code, BerthError};
use crate::host::{HostLayout, HostSupervisor, Upcalls};
use crate::project::OpencodeProject;
use crate::runtimes::{self, RuntimeInfo};
use crate::snapshot::*;

/// How Berth is started.
#[derive(Debug, Clone)]
pub struct BerthOptions {
    pub data_dir: PathBuf,
    /// The project folder; empty when no project is open (the app started from a menu):
    /// then only what applies to every project is read (`scan_target`).
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

    /// Whether a project folder is open.
    pub fn has_project(&self) -> bool {
        !self.project.as_os_str().is_empty()
    }

    /// What a scan reads: the project's config graph, or with no project open, the config
    /// that applies to every project — the global folders and OpenCode's variables, read from
    /// the home folder with the project's files off (as `OPENCODE_DISABLE_PROJECT_CONFIG`
    /// does), so a home folder's own `opencode.json` is not taken for a project's.
    pub fn scan_target(&self) -> (std::borrow::Cow<'_, OpencodeEnv>, &Path) {
        if self.has_project() {
            return (std::borrow::Cow::Borrowed(&self.env), &self.project);
        }
        let mut env = self.env.clone();
        env.disable_project_config = Some("1".into());
        (std::borrow::Cow::Owned(env), &self.env.home)
    }
}

impl BerthOptions {
    /// The organisation's policy file: the one `BERTH_MANAGED_POLICY` names, else
    /// `/etc/berth/managed.json` (its drop-ins in `managed.d/` beside it).
    pub fn managed_policy_path(&self) -> PathBuf {
        std::env::var_os("BERTH_MANAGED_POLICY")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/etc/berth/managed.json"))
    }
}

/// The default data dir: `$XDG_DATA_HOME/berth`, else `~/.local/share/berth`.
pub fn default_data_dir(env: &OpencodeEnv) -> PathBuf {
    env.data_home().join("berth")
}

/// How long a publish for this process's own commits waits for more of them.
const SOON: std::time::Duration = std::time::Duration::from_millis(25);

/// What the status owner does when something below it changed.
pub(crate) trait Publisher: Send + Sync {
    /// Re-reads everything and publishes the snapshot if it changed.
    fn rescan(&self);
    /// Publishes what plugins put before the person (toasts, prompts), without a rescan.
    fn publish_world(&self);
    /// Publishes the recent calls as the store has them, without a rescan.
    fn publish_calls(&self);
}

pub(crate) struct Core {
    pub(crate) options: BerthOptions,
    /// One connection per process; SQLite serialises with other processes (WAL + busy timeout).
    store: Mutex<Store>,
    pub(crate) store_info: StoreInfo,
    pub(crate) runtimes: Vec<RuntimeInfo>,
    /// This machine and user (`approval::execution_domain`).
    domain: String,
    /// The snapshot the status owner installed last.
    pub(crate) current: RwLock<Arc<StatusSnapshot>>,
    pub(crate) events: broadcast::Sender<StatusEvent>,
    /// Started on first use (needs a tokio runtime); owns every plugin host.
    supervisor: tokio::sync::OnceCell<Arc<HostSupervisor>>,
    /// Where calls from plugin code go (set once, when the owners are wired).
    upcalls: OnceLock<Arc<dyn Upcalls>>,
    publisher: OnceLock<Weak<dyn Publisher>>,
    /// A publish of the recent calls is pending (`publish_calls` coalesces them).
    calls_pending: Arc<std::sync::atomic::AtomicBool>,
    /// A rescan for this process's own commits is pending (`rescan_soon`).
    rescan_pending: Arc<std::sync::atomic::AtomicBool>,
    /// Work that ends with a rescan of its own is running (`defer_rescans`): its commits wait
    /// for that one, and `rescans_owed` says one is owed.
    deferring: std::sync::atomic::AtomicUsize,
    rescans_owed: std::sync::atomic::AtomicBool,
    /// How the other processes on the data dir hear of this one's commits.
    signal: Arc<crate::signals::Signal>,
    pub(crate) project: OpencodeProject,
}

impl Core {
    /// Makes the data dir private, opens the store (migrating it; a corrupt file is moved
    /// aside), settles receipts of calls a dead process left open, and probes the runtimes.
    pub(crate) fn open(options: BerthOptions) -> Result<Core, BerthError> {
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
        crate::signals::prepare(&options.data_dir);
        let signal = Arc::new(crate::signals::Signal::open(&options.data_dir));
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
        let (events, _) = broadcast::channel(64);
        Ok(Core {
            current: RwLock::new(Arc::new(placeholder(&options))),
            options,
            store: Mutex::new(opened.store),
            store_info,
            runtimes,
            domain: approval::execution_domain(),
            events,
            supervisor: tokio::sync::OnceCell::new(),
            upcalls: OnceLock::new(),
            publisher: OnceLock::new(),
            calls_pending: Default::default(),
            rescan_pending: Default::default(),
            deferring: Default::default(),
            rescans_owed: Default::default(),
            signal,
            project: OpencodeProject::default(),
        })
    }

    /// Wires the ways out of this layer: calls from plugin code, and publishing.
    pub(crate) fn wire(&self, upcalls: Arc<dyn Upcalls>, publisher: Weak<dyn Publisher>) {
        let _ = self.upcalls.set(upcalls);
        let _ = self.publisher.set(publisher);
    }

    /// Runs `f` with the store.
    pub(crate) fn with_store<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        let store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let before = store.changes_beyond_calls();
        let out = f(&store);
        // Something the status shows was committed (receipts go through `publish_calls`).
        let changed = store.changes_beyond_calls() != before;
        drop(store);
        if changed {
            use std::sync::atomic::Ordering;
            if self.deferring.load(Ordering::SeqCst) > 0 {
                self.rescans_owed.store(true, Ordering::SeqCst);
            } else {
                self.rescan_soon();
            }
        }
        out
    }

    /// Until the guard ends, the store changes this process commits do not each schedule a
    /// rescan: the work that holds it ends with one (`Deferred::rescan_now`), which covers
    /// them. An activation of 1,000 sources committed for each and rescanned hundreds of times
    /// while it ran, every rescan holding the store for 1,000 approvals (the activation waited
    /// on each: minutes instead of seconds). A guard dropped without `rescan_now` (an early
    /// return) schedules the rescan it owes.
    pub(crate) fn defer_rescans(self: &Arc<Self>) -> Deferred {
        self.deferring
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Deferred(Some(self.clone()))
    }

    /// The store itself, for what must hold it exclusively (backup, restore).
    pub(crate) fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn options(&self) -> &BerthOptions {
        &self.options
    }

    pub(crate) fn domain(&self) -> &str {
        &self.domain
    }

    pub(crate) fn runtimes(&self) -> Vec<RuntimeInfo> {
        self.runtimes.clone()
    }

    /// The current status snapshot (cheap: an `Arc`).
    pub(crate) fn status(&self) -> Arc<StatusSnapshot> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<StatusEvent> {
        self.events.subscribe()
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

    /// OpenCode's `project` for `info` (cached while the git facts stay).
    pub(crate) async fn project_value(&self, info: &ProjectInfo) -> serde_json::Value {
        self.project.value(info).await
    }

    /// A scanner that sees the prepared packages and resolves imports by the backend's rules.
    pub(crate) fn scanner(&self) -> Scanner {
        Scanner::with_packages(self.options.packages_dir())
            .resolving_for(approval::backend_for(&self.runtimes).resolve_rules())
    }

    /// A scan that reads the bytes as they are now (no cache), including prepared packages.
    pub(crate) fn fresh_scan(&self) -> berth_discovery::Discovery {
        let target = self.options.scan_target();
        self.scanner().scan(&target.0, target.1)
    }

    /// The packages Berth links into npm plugins' installs (`HostLayout::provided_packages`,
    /// D-044); none when the host cannot be located (its load then fails in its own words).
    pub(crate) async fn provided_packages(&self) -> Vec<(&'static str, std::path::PathBuf)> {
        match self.supervisor().await {
            Ok(sup) => sup.layout().provided_packages(),
            Err(_) => Vec::new(),
        }
    }

    /// The supervisor, started on first use (preparing the host's dependencies may download:
    /// off the async workers).
    pub(crate) async fn supervisor(&self) -> Result<Arc<HostSupervisor>, BerthError> {
        self.supervisor
            .get_or_try_init(|| async {
                let data_dir = self.options.data_dir.clone();
                let packages = self.options.packages_dir();
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
                let upcalls = self.upcalls.get().cloned().ok_or_else(|| {
                    BerthError::new(
                        code::TEMPORARILY_UNAVAILABLE,
                        "host",
                        "the runtime is not wired yet",
                        "retry",
                    )
                })?;
                Ok(Arc::new(HostSupervisor::with_upcalls(
                    layout,
                    self.runtimes.clone(),
                    upcalls,
                )))
            })
            .await
            .cloned()
    }

    /// The supervisor, if something started it (status reads never start hosts).
    pub(crate) fn supervisor_if_started(&self) -> Option<Arc<HostSupervisor>> {
        self.supervisor.get().cloned()
    }

    /// Asks the status owner to rescan and publish.
    pub(crate) fn rescan(&self) {
        if let Some(p) = self.publisher.get().and_then(Weak::upgrade) {
            p.rescan();
        }
    }

    /// Ends one `defer_rescans` guard; true when it was the last and a rescan is owed.
    fn end_deferral(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.deferring.fetch_sub(1, Ordering::SeqCst) == 1
            && self.rescans_owed.swap(false, Ordering::SeqCst)
    }

    /// A receipt of this process changed: the other processes are signalled (`signals`; at
    /// most once per [`SOON`] while calls stream, the last one owed until the publish), and
    /// this one publishes its recent calls shortly, off the call's path, once for a burst.
    pub(crate) fn publish_calls(&self) {
        self.signal.touch_at_most_every(SOON);
        let signal = self.signal.clone();
        self.soon(&self.calls_pending, move |p| {
            p.publish_calls();
            signal.settle();
        });
    }

    /// This process committed something the status shows (a permission rule, a version, …):
    /// the other processes are signalled, and this one rescans shortly, once for a burst (its
    /// own commits do not wake its watcher).
    fn rescan_soon(&self) {
        self.signal.touch();
        self.soon(&self.rescan_pending, |p| p.rescan());
    }

    /// Runs `work` with the status owner after [`SOON`], once for every request made while
    /// `pending`, off the async workers. Without a runtime (a one-shot command: nobody
    /// listens for long) nothing runs.
    fn soon(
        &self,
        pending: &Arc<std::sync::atomic::AtomicBool>,
        work: impl FnOnce(&dyn Publisher) + Send + 'static,
    ) {
        use std::sync::atomic::Ordering;
        let (Some(p), Ok(rt)) = (
            self.publisher.get().and_then(Weak::upgrade),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        if pending.swap(true, Ordering::SeqCst) {
            return;
        }
        let pending = pending.clone();
        rt.spawn(async move {
            tokio::time::sleep(SOON).await;
            pending.store(false, Ordering::SeqCst);
            let _ = tokio::task::spawn_blocking(move || work(&*p)).await;
        });
    }

    /// Asks the status owner to publish what plugins put before the person.
    pub(crate) fn publish_world(&self) {
        if let Some(p) = self.publisher.get().and_then(Weak::upgrade) {
            p.publish_world();
        }
    }
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
            open: o.has_project(),
        },
        config_dirs: Default::default(),
        config_files: Default::default(),
        pure: berth_discovery::Switch::Off,
        runtimes: vec![],
        sources: Default::default(),
        counts: Counts::default(),
        diagnostics: vec![],
        tools: Default::default(),
        builtins: Default::default(),
        conflicts: Default::default(),
        hosts: vec![],
        notices: vec![],
        prompts: vec![],
        calls: Default::default(),
        standing_answers: Default::default(),
        policy: Default::default(),
        boundary: Arc::new(crate::host::boundary::info()),
        revision: 0,
    }
}

/// See [`Core::defer_rescans`].
pub(crate) struct Deferred(Option<Arc<Core>>);

impl Deferred {
    /// Rescans now, covering every change committed under the guard (the other processes are
    /// signalled if any was).
    pub(crate) fn rescan_now(mut self) {
        if let Some(core) = self.0.take() {
            if core.end_deferral() {
                core.signal.touch();
            }
            core.rescan();
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if let Some(core) = self.0.take() {
            if core.end_deferral() {
                core.rescan_soon();
            }
        }
    }
}
