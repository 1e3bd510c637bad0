//! The host supervisor: spawns plugin hosts (`host/berth-host.mjs` on Bun or Node), speaks the
//! protocol with them, and turns every way a call can end into one outcome — result, error,
//! timeout, cancel, overload, or a lost process — without ever replaying a call.
//!
//! Invariant: only this module holds child process handles; a call whose host dies is failed
//! with `process-lost`/`worker-lost`, never sent again.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_protocol::{
    decode, encode, read_frame, CallKind, FromHost, ToHost, WireError, PROTOCOL_VERSION,
};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};

use berth_base::{code, random_hex, BerthError};

use crate::budget::{Loss, RestartBudget, RESTART_BUDGET, RESTART_WINDOW};
use crate::runtimes::{RuntimeInfo, RuntimeKind};
use crate::{channel, procs};

mod replace;
pub use replace::Replaced;

/// Cancel first signals the plugin's AbortSignal; this long later the process tree is killed.
pub const CANCEL_GRACE: Duration = Duration::from_millis(500);
/// A request not acknowledged within this long marks the host unresponsive.
pub const ACK_TIMEOUT: Duration = Duration::from_secs(3);
/// The default deadline of a tool call.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(30);
/// Calls waiting or running per host, at most; more are refused with `overloaded`.
pub const QUEUE_LIMIT: usize = 64;
/// Calls from plugin code into Berth (`up` frames) served at once per plugin; more are refused.
pub const UPCALL_LIMIT: usize = 16;
/// How often a busy host's memory is checked.
const MEMORY_CHECK_EVERY: Duration = Duration::from_millis(100);

/// The resident memory a host may use (`BERTH_HOST_MEMORY_MB`, default 2048 MiB); a host over
/// it is stopped and its calls fail as lost (never replayed).
pub fn memory_budget() -> u64 {
    std::env::var("BERTH_HOST_MEMORY_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(2048)
        << 20
}

/// Bytes of the host's stdout/stderr kept for diagnostics (the rest is counted and dropped).
const LOG_KEEP: usize = 64 * 1024;

/// Where the host code and its npm dependencies are.
#[derive(Debug, Clone)]
pub struct HostLayout {
    pub script: PathBuf,
    pub deps_dir: PathBuf,
    /// Folders the private socket directory may be made in, best first
    /// (`channel::socket_bases`).
    pub socket_bases: Vec<PathBuf>,
    /// Berth's own folders, by real path, whose files load as they are: the host's
    /// dependencies, prepared npm plugin installs and config folders' prepared dependencies.
    /// Each is private to this user (its file lists were hashed when Berth prepared it); every
    /// file outside them passes the host's load gate.
    pub trusted: Vec<PathBuf>,
}

impl HostLayout {
    /// The packages Berth provides plugins itself, as (npm package name, folder): Berth's
    /// `@opencode/plugin` (`host/opencode-plugin`) and its one pinned `effect` (in the host's
    /// dependencies), as OpenCode 2 provides both at runtime (D-044). An npm plugin's install
    /// links these folders in where npm would fetch the packages (`berth_runtime::deps`).
    pub fn provided_packages(&self) -> Vec<(&'static str, PathBuf)> {
        let host = self.script.parent().unwrap_or(std::path::Path::new("."));
        vec![
            (berth_discovery::V2_API, host.join("opencode-plugin")),
            (
                berth_discovery::V2_EFFECT,
                self.deps_dir
                    .join("node_modules")
                    .join(berth_discovery::V2_EFFECT),
            ),
        ]
    }

    /// The host code (`BERTH_HOST_DIR`, else `host/` found above the running executable, else
    /// the installed package's `../lib/berth/host` beside its `bin/`), and its dependencies
    /// (`BERTH_HOST_DEPS` overrides; otherwise `prepare_deps` prepares them in the data dir,
    /// given the copy the set-up or the package placed — `.tools/host-deps` above the
    /// executable, or `../lib/berth/host-deps` — if any).
    pub fn locate(
        data_dir: &std::path::Path,
        packages_dir: &std::path::Path,
        prepare_deps: impl FnOnce(Option<&std::path::Path>) -> Result<PathBuf, BerthError>,
    ) -> Result<HostLayout, BerthError> {
        let env_path = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let exe = std::env::current_exe().ok();
        let ancestors: Vec<PathBuf> = exe
            .iter()
            .flat_map(|e| e.ancestors().skip(1).map(PathBuf::from).collect::<Vec<_>>())
            .collect();
        // An installed package keeps its files in `<prefix>/lib/berth` for `<prefix>/bin/…`.
        let installed = ancestors.get(1).map(|prefix| prefix.join("lib/berth"));
        let script = env_path("BERTH_HOST_DIR")
            .map(|d| d.join("berth-host.mjs"))
            .or_else(|| {
                ancestors
                    .iter()
                    .map(|a| a.join("host/berth-host.mjs"))
                    .chain(installed.iter().map(|l| l.join("host/berth-host.mjs")))
                    .find(|p| p.is_file())
            })
            .ok_or_else(|| {
                BerthError::new(
                    code::TEMPORARILY_UNAVAILABLE,
                    "host",
                    "the plugin host code (host/berth-host.mjs) was not found",
                    "set BERTH_HOST_DIR to the folder holding berth-host.mjs",
                )
            })?;
        let deps_dir = match env_path("BERTH_HOST_DEPS") {
            Some(d) => d,
            None => {
                let seed = ancestors
                    .iter()
                    .map(|a| a.join(".tools/host-deps"))
                    .chain(installed.iter().map(|l| l.join("host-deps")))
                    .find(|p| p.is_dir());
                prepare_deps(seed.as_deref())?
            }
        };
        let trusted = [
            deps_dir.clone(),
            packages_dir.to_path_buf(),
            data_dir.join("config-deps"),
        ]
        .iter()
        .map(|d| channel::private_folder(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|why| {
            BerthError::new(
                code::ACTION_REQUIRED,
                "host",
                format!("a folder Berth runs prepared code from is not private: {why}"),
                "make it a folder only you can write (chmod 700), or point Berth elsewhere",
            )
        })?;
        Ok(HostLayout {
            script,
            deps_dir,
            socket_bases: channel::socket_bases(data_dir),
            trusted,
        })
    }
}

/// How a call ended without a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallError {
    pub code: &'static str,
    pub message: String,
}

impl CallError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        CallError {
            code,
            message: message.into(),
        }
    }
}

fn stable_code(wire: &str) -> &'static str {
    match wire {
        "action-required" => code::ACTION_REQUIRED,
        "unsupported" => code::UNSUPPORTED,
        "invalid-arguments" => code::INVALID_ARGUMENTS,
        "invalid-response" => code::INVALID_RESPONSE,
        "cancelled" => code::CANCELLED,
        "timeout" => code::TIMEOUT,
        "policy-limited" => code::POLICY_LIMITED,
        "overloaded" => code::OVERLOADED,
        "temporarily-unavailable" => code::TEMPORARILY_UNAVAILABLE,
        _ => code::PLUGIN_FAILED,
    }
}

/// One call's options.
#[derive(Clone)]
pub struct CallOptions {
    pub timeout: Duration,
    /// Cancelling this token cancels the call (a caller that gives up).
    pub cancel: Arc<Notify>,
    /// `ctx.metadata()` updates, if the caller wants them.
    pub metadata: Option<mpsc::UnboundedSender<(Option<String>, Value)>>,
    /// How a lost process is reported: `worker-lost` for standalone tools.
    pub lost_code: &'static str,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            timeout: DEFAULT_TOOL_TIMEOUT,
            cancel: Arc::new(Notify::new()),
            metadata: None,
            lost_code: code::PROCESS_LOST,
        }
    }
}

/// Answers calls plugin code makes into Berth (`up` frames and the host's loopback
/// `serverUrl`). The engine implements it (`crate::world`); the supervisor only routes.
pub trait Upcalls: Send + Sync + 'static {
    fn call(
        &self,
        instance: String,
        method: String,
        body: Value,
    ) -> futures_util::future::BoxFuture<'static, Result<Value, WireError>>;
}

/// Calls into Berth from an instance that is not active in its host are refused.
struct ActiveOnly {
    host: std::sync::Weak<Host>,
    inner: Arc<dyn Upcalls>,
}

impl Upcalls for ActiveOnly {
    fn call(
        &self,
        instance: String,
        method: String,
        body: Value,
    ) -> futures_util::future::BoxFuture<'static, Result<Value, WireError>> {
        if self.host.upgrade().is_some_and(|h| h.is_active(&instance)) {
            return self.inner.call(instance, method, body);
        }
        Box::pin(async move { Err(not_active(&instance, &method)) })
    }
}

fn not_active(instance: &str, method: &str) -> WireError {
    WireError {
        code: code::ACTION_REQUIRED.into(),
        message: format!(
            "{instance} is not active (held for review, denied or not loaded): its call {method} into Berth was refused"
        ),
    }
}

/// Upcalls when no engine is attached: every method is unsupported.
struct NoUpcalls;

impl Upcalls for NoUpcalls {
    fn call(
        &self,
        _instance: String,
        method: String,
        _body: Value,
    ) -> futures_util::future::BoxFuture<'static, Result<Value, WireError>> {
        Box::pin(async move {
            Err(WireError {
                code: code::UNSUPPORTED.into(),
                message: format!("{method} is not served here"),
            })
        })
    }
}

struct Pending {
    tx: oneshot::Sender<Result<Value, CallError>>,
    /// The plugin instance the call is for (a revoked source's calls are stopped by it).
    instance: String,
    /// Every plugin whose code the call runs (a hook chain's plugins, a tool's hooks): a loss
    /// while it is in flight is blamed on that plugin only when it is the only one.
    involves: Vec<String>,
    acked: bool,
    meta: Option<mpsc::UnboundedSender<(Option<String>, Value)>>,
}

/// Which host a source runs in: the backend's shared host, or a host of its own (`own`: the
/// one source it runs). Sources that share a host are one trust domain (seed 003 §8.1). The
/// facts that split hosts: the backend, a host of its own, and the policy mode — a restricted
/// source always runs alone, inside the OS boundary made for it (`restricted`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct HostKey {
    pub backend: RuntimeKind,
    pub own: Option<String>,
    pub restricted: bool,
}

impl HostKey {
    pub fn shared(backend: RuntimeKind) -> HostKey {
        HostKey {
            backend,
            own: None,
            restricted: false,
        }
    }

    pub fn own(backend: RuntimeKind, source: &str) -> HostKey {
        HostKey {
            backend,
            own: Some(source.to_string()),
            restricted: false,
        }
    }

    /// `source` alone, inside the boundary `HostSupervisor::restrict` gave it.
    pub fn restricted(backend: RuntimeKind, source: &str) -> HostKey {
        HostKey {
            backend,
            own: Some(source.to_string()),
            restricted: true,
        }
    }
}

/// Facts about a running host, for the status page.
#[derive(Debug, Clone, Serialize)]
pub struct HostInfo {
    pub backend: RuntimeKind,
    /// The source it runs alone, when it is that source's own host (else shared).
    pub own: Option<String>,
    pub pid: u32,
    pub generation: u64,
    pub rss_bytes: u64,
    pub instances: Vec<String>,
    pub dropped_frames: u64,
    /// The OS boundary it runs in (restricted mode), or null.
    pub boundary: Option<crate::boundary::Tier>,
}

/// One running host process.
pub struct Host {
    pub backend: RuntimeKind,
    /// Which host this is (shared, or a source's own).
    pub key: HostKey,
    pub generation: u64,
    /// The process Berth started (its group is the host's tree).
    pub pid: u32,
    /// The runtime's own process: `pid` itself, or the one inside its boundary's wrapper.
    runtime_pid: u32,
    /// The boundary it runs in; what it owns (a private folder) lives as long as the host.
    boundary: Option<(crate::boundary::Tier, berth_sandbox::Wrapped)>,
    /// The value of `procs::TREE_VAR` in this host's processes.
    tree: String,
    /// Where its loss is counted (the supervisor's budgets).
    budget: Arc<Mutex<RestartBudget>>,
    /// This host itself, for work that outlives a borrowed call (a caller that gave up).
    me: std::sync::Weak<Host>,
    /// Callers write their own frames (no hop through a writer task); the lock keeps frames whole.
    writer: Arc<tokio::sync::Mutex<tokio::net::unix::OwnedWriteHalf>>,
    pending: Mutex<HashMap<u64, Pending>>,
    next_id: AtomicU64,
    lost: AtomicBool,
    /// Set by a deliberate shutdown, so its end is not reported as a loss.
    stopping: AtomicBool,
    lost_notify: Notify,
    queue: Arc<Semaphore>,
    /// Frames dropped: late, duplicate or unknown ids.
    dropped: AtomicU64,
    pub loaded: Mutex<HashSet<String>>,
    /// Instances whose load is running now (their factories may already call into Berth).
    loading: Mutex<HashSet<String>>,
    logs: Arc<Mutex<VecDeque<u8>>>,
    upcalls: Arc<dyn Upcalls>,
    /// Open calls into Berth, per plugin instance.
    upcall_slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Each plugin instance's loopback compatibility service (`serverUrl`): instance → its
    /// URL, token and task. One per plugin, so every request is attributed to the plugin that
    /// made it; all stop with the host.
    compat: Mutex<HashMap<String, (String, String, tokio::task::AbortHandle)>>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop_services();
    }
}

impl Host {
    /// Whether `instance` may call into Berth: it is active here, or its load is running. A
    /// plugin held for review, denied or never loaded is refused (its code may still be
    /// running until its host stops; it reaches nothing).
    pub fn is_active(&self, instance: &str) -> bool {
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(instance)
            || self
                .loading
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(instance)
    }

    /// The `serverUrl` of `instance` in this host and the token that opens it (started on
    /// first use). The token reaches the host in the load request, never its environment.
    pub async fn service_for(&self, instance: &str) -> Result<(String, String), CallError> {
        if let Some((url, token, _)) = self
            .compat
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(instance)
        {
            return Ok((url.clone(), token.clone()));
        }
        let token = random_hex(24);
        let only_active: Arc<dyn Upcalls> = Arc::new(ActiveOnly {
            host: self.me.clone(),
            inner: self.upcalls.clone(),
        });
        let (url, task) = crate::compat::start(only_active, instance.to_string(), token.clone())
            .await
            .map_err(|e| {
                CallError::new(
                    code::TEMPORARILY_UNAVAILABLE,
                    format!("cannot start the loopback service: {e}"),
                )
            })?;
        let mut map = self.compat.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_lost() {
            task.abort();
            return Err(CallError::new(
                code::PROCESS_LOST,
                "the plugin host stopped",
            ));
        }
        map.insert(instance.to_string(), (url.clone(), token.clone(), task));
        Ok((url, token))
    }

    fn stop_services(&self) {
        for (_, (_, _, task)) in self
            .compat
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
        {
            task.abort();
        }
    }

    /// Calls sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The instances with a call in flight now.
    fn instances_in_flight(&self) -> Vec<String> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<String> = pending.values().map(|p| p.instance.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// The last bytes the host (and its plugins) wrote to stdout/stderr.
    pub fn recent_output(&self) -> String {
        let logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&logs.iter().copied().collect::<Vec<u8>>()).into_owned()
    }

    pub fn info(&self) -> HostInfo {
        HostInfo {
            backend: self.backend,
            own: self.key.own.clone(),
            pid: self.pid,
            generation: self.generation,
            rss_bytes: procs::rss_bytes(self.runtime_pid),
            instances: self
                .loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned()
                .collect(),
            dropped_frames: self.dropped.load(Ordering::Relaxed),
            boundary: self.boundary.as_ref().map(|(t, _)| *t),
        }
    }

    /// Ends the calls in flight for `instances` now, with `cancelled` (their AbortSignal fires;
    /// nothing is repeated), and returns how many there were. Their code keeps running until
    /// the host stops: a revoked source's host is retired right after (`HostSupervisor::replace`).
    pub fn stop_calls_of(&self, instances: &[String], why: &str) -> usize {
        let stopped: Vec<(u64, Pending)> = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, p)| instances.contains(&p.instance))
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| pending.remove(&id).map(|p| (id, p)))
                .collect()
        };
        let n = stopped.len();
        for (id, p) in stopped {
            if let Ok(frame) = encode(&ToHost::Cancel {
                v: PROTOCOL_VERSION,
                cancel_id: id,
            }) {
                self.send_detached(frame);
            }
            let _ = p.tx.send(Err(CallError::new(
                code::CANCELLED,
                format!("{why}; the call was stopped and is not repeated"),
            )));
        }
        n
    }

    /// Stops the host on purpose (a revoked or changed source): like `kill`, but not counted as
    /// a crash against the restart budget.
    pub fn retire(&self, why: &str) {
        self.stopping.store(true, Ordering::SeqCst);
        tracing::info!(
            pid = self.pid,
            generation = self.generation,
            why,
            "retiring plugin host"
        );
        self.kill(why);
    }

    /// Kills the host's process tree and fails its in-flight calls (never replayed). The loss
    /// is blamed on the one plugin whose work was in flight, if there was exactly one.
    pub fn kill(&self, why: &str) {
        self.kill_blaming(why, None);
    }

    /// Kills the host, blaming `culprit` when the cause is known to be its call.
    fn kill_blaming(&self, why: &str, culprit: Option<String>) {
        procs::kill_group(self.pid as i32);
        self.mark_lost(why, culprit);
        // A descendant that left the group (its own session) is reparented to us only once the
        // host's last thread has exited: reclaiming before that finds nothing, and the
        // descendant then outlives Berth (seen in 19 of 30 runs). SIGKILL lands within
        // milliseconds.
        let wait_and_reclaim = || {
            let until = Instant::now() + Duration::from_secs(1);
            while procs::is_running(self.pid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            procs::reclaim_orphans(&self.tree);
        };
        // The wait blocks: on a tokio worker, the runtime is told so (its other tasks move on).
        let on_worker = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if on_worker {
            tokio::task::block_in_place(wait_and_reclaim);
        } else {
            wait_and_reclaim();
        }
    }

    fn mark_lost(&self, why: &str, culprit: Option<String>) {
        if self.lost.swap(true, Ordering::SeqCst) {
            return;
        }
        self.stop_services();
        let culprit = culprit.or_else(|| {
            let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let mut who: Vec<&String> = pending.values().flat_map(|p| &p.involves).collect();
            who.sort();
            who.dedup();
            (who.len() == 1).then(|| who[0].clone())
        });
        // One physical loss, counted once, here.
        let quarantined = self
            .budget
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(&Loss {
                backend: self.backend,
                why: why.to_string(),
                culprit: culprit.clone(),
                crashed: !self.stopping.load(Ordering::SeqCst),
            });
        if let Some(plugin) = quarantined {
            tracing::warn!(plugin = %plugin, "a plugin spent its restart budget and is paused until resumed");
        }
        if self.stopping.load(Ordering::SeqCst) {
            tracing::info!(
                pid = self.pid,
                generation = self.generation,
                "plugin host stopped"
            );
        } else {
            tracing::warn!(
                pid = self.pid,
                generation = self.generation,
                why,
                "plugin host lost"
            );
        }
        let pending: Vec<Pending> = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in pending {
            let _ = p.tx.send(Err(CallError::new(
                code::PROCESS_LOST,
                format!("the plugin host stopped ({why}); the call was not repeated"),
            )));
        }
        self.lost_notify.notify_waiters();
    }

    /// Sends one request and waits for its outcome.
    pub async fn call(
        &self,
        instance: &str,
        kind: CallKind,
        body: Value,
        opts: CallOptions,
    ) -> Result<Value, CallError> {
        if self.is_lost() {
            return Err(CallError::new(
                opts.lost_code,
                "the plugin host is not running",
            ));
        }
        let Ok(permit) = self.queue.clone().try_acquire_owned() else {
            return Err(CallError::new(
                code::OVERLOADED,
                format!(
                    "more than {QUEUE_LIMIT} calls are waiting for this host; try again shortly"
                ),
            ));
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let input_digest = berth_discovery::sha256_hex(body.to_string().as_bytes());
        let involves = involved(instance, kind, &body);
        let frame = encode(&ToHost::Req {
            v: PROTOCOL_VERSION,
            id,
            instance: instance.to_string(),
            kind,
            deadline_ms: opts.timeout.as_millis() as u64,
            cancel_id: id,
            input_digest,
            body,
        })
        .map_err(|e| CallError::new(code::INVALID_ARGUMENTS, e.to_string()))?;
        let loading = matches!(kind, CallKind::LoadTools | CallKind::LoadPlugin);
        if loading {
            self.loading
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(instance.to_string());
        }
        let _loading = LoadingMark {
            host: self,
            instance: loading.then(|| instance.to_string()),
        };
        let (tx, mut rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id,
                Pending {
                    tx,
                    involves,
                    instance: instance.to_string(),
                    acked: false,
                    meta: opts.metadata.clone(),
                },
            );
        let written = tokio::time::timeout(opts.timeout, async {
            self.writer.lock().await.write_all(&frame).await
        })
        .await;
        if !matches!(written, Ok(Ok(()))) {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(CallError::new(
                opts.lost_code,
                "the plugin host is not accepting requests",
            ));
        }
        // A caller that gives up (drops this future) cancels the call like an explicit cancel.
        let mut guard = GiveUpGuard {
            host: self,
            id,
            armed: true,
            permit: Some(permit),
        };
        let ack_deadline = tokio::time::sleep(ACK_TIMEOUT);
        tokio::pin!(ack_deadline);
        let deadline = tokio::time::sleep(opts.timeout);
        tokio::pin!(deadline);
        let mut ack_checked = false;
        // Memory is watched only while a call is in flight (an idle host costs nothing).
        let mut memory_check = tokio::time::interval_at(
            tokio::time::Instant::now() + MEMORY_CHECK_EVERY,
            MEMORY_CHECK_EVERY,
        );
        memory_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let outcome = loop {
            tokio::select! {
                _ = memory_check.tick() => {
                    let rss = procs::rss_bytes(self.pid);
                    if rss > memory_budget() {
                        self.kill(&format!("it used {} MiB, over its {} MiB budget", rss >> 20, memory_budget() >> 20));
                    }
                }
                r = &mut rx => break r.unwrap_or_else(|_| Err(CallError::new(opts.lost_code, "the plugin host stopped; the call was not repeated"))),
                _ = &mut ack_deadline, if !ack_checked => {
                    ack_checked = true;
                    let acked = self.pending.lock().unwrap_or_else(|p| p.into_inner()).get(&id).map(|p| p.acked).unwrap_or(true);
                    if !acked {
                        self.kill("a request was not acknowledged within 3 s (unresponsive)");
                    }
                }
                _ = &mut deadline => break self.abort(id, &mut rx, code::TIMEOUT, format!("the call did not finish within {} ms", opts.timeout.as_millis())).await,
                _ = opts.cancel.notified() => break self.abort(id, &mut rx, code::CANCELLED, "cancelled by the caller".to_string()).await,
            }
        };
        guard.armed = false;
        match outcome {
            Err(e) if e.code == code::PROCESS_LOST => {
                Err(CallError::new(opts.lost_code, e.message))
            }
            other => other,
        }
    }

    /// Cancel: the AbortSignal first; after the grace, the whole tree is killed.
    async fn abort(
        &self,
        id: u64,
        rx: &mut oneshot::Receiver<Result<Value, CallError>>,
        code: &'static str,
        message: String,
    ) -> Result<Value, CallError> {
        if let Ok(frame) = encode(&ToHost::Cancel {
            v: PROTOCOL_VERSION,
            cancel_id: id,
        }) {
            self.send_detached(frame);
        }
        match tokio::time::timeout(CANCEL_GRACE, &mut *rx).await {
            // The plugin honoured the signal and ended (either way, the caller asked to stop).
            Ok(_) => {}
            Err(_) => {
                let culprit = self
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id)
                    .map(|p| p.instance);
                self.kill_blaming(
                    &format!(
                        "a call did not stop within {} ms of its cancel",
                        CANCEL_GRACE.as_millis()
                    ),
                    culprit,
                );
            }
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        Err(CallError::new(code, message))
    }

    /// Sends a frame without waiting (cancel notices from sync contexts).
    fn send_detached(&self, frame: Vec<u8>) {
        let writer = self.writer.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    writer.lock().await.write_all(&frame).await
                })
                .await;
            });
        }
    }

    fn on_frame(&self, msg: FromHost) {
        match msg {
            FromHost::Ack { id, .. } => match self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(&id)
            {
                Some(p) => p.acked = true,
                None => self.drop_frame("ack", id),
            },
            FromHost::Res {
                id,
                ok,
                value,
                error,
                ..
            } => {
                let pending = self
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                match pending {
                    Some(p) => {
                        let outcome = if ok {
                            Ok(value)
                        } else {
                            let WireError { code, message } = error.unwrap_or(WireError {
                                code: "plugin-failed".into(),
                                message: "the plugin failed without a message".into(),
                            });
                            Err(CallError::new(stable_code(&code), message))
                        };
                        let _ = p.tx.send(outcome);
                    }
                    None => self.drop_frame("result", id),
                }
            }
            FromHost::Meta {
                id,
                title,
                metadata,
                ..
            } => {
                if let Some(Some(tx)) = self
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&id)
                    .map(|p| p.meta.clone())
                {
                    let _ = tx.send((title, metadata));
                }
            }
            FromHost::Up {
                up,
                instance,
                method,
                body,
                ..
            } => self.on_upcall(up, instance, method, body),
            FromHost::Hello { .. } => self.drop_frame("second hello", 0),
            FromHost::Note {
                instance,
                level,
                message,
                ..
            } => {
                // Bounded: a plugin cannot grow the log without limit through this lane.
                let message: String = message.chars().take(2000).collect();
                match level.as_str() {
                    "error" => tracing::error!(plugin = %instance, "{message}"),
                    "warn" => tracing::warn!(plugin = %instance, "{message}"),
                    "debug" => tracing::debug!(plugin = %instance, "{message}"),
                    _ => tracing::info!(plugin = %instance, "{message}"),
                }
            }
        }
    }

    /// Serves one call from plugin code into Berth, off the reader task, bounded per host.
    fn on_upcall(&self, up: u64, instance: String, method: String, body: Value) {
        let active = self.is_active(&instance);
        let writer = self.writer.clone();
        let reply = move |outcome: Result<Value, WireError>| async move {
            let (ok, value, error) = match outcome {
                Ok(v) => (true, v, None),
                Err(e) => (false, Value::Null, Some(e)),
            };
            let frame = encode(&ToHost::Down {
                v: PROTOCOL_VERSION,
                up,
                ok,
                value,
                error,
            })
            .or_else(|e| {
                encode(&ToHost::Down {
                    v: PROTOCOL_VERSION,
                    up,
                    ok: false,
                    value: Value::Null,
                    error: Some(WireError {
                        code: code::INVALID_RESPONSE.into(),
                        message: e.to_string(),
                    }),
                })
            });
            if let Ok(frame) = frame {
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    writer.lock().await.write_all(&frame).await
                })
                .await;
            }
        };
        if !active {
            tokio::spawn(reply(Err(not_active(&instance, &method))));
            return;
        }
        if method.len() > 128 {
            tokio::spawn(reply(Err(WireError {
                code: code::INVALID_ARGUMENTS.into(),
                message: format!(
                    "{instance} asked for a method name of {} bytes; Berth has none that long",
                    method.len()
                ),
            })));
            return;
        }
        // Slots per plugin: one plugin's open calls (prompts waiting on a person) cannot lock
        // its neighbours out.
        let slots = self
            .upcall_slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(instance.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(UPCALL_LIMIT)))
            .clone();
        let Ok(permit) = slots.try_acquire_owned() else {
            tokio::spawn(reply(Err(WireError {
                code: code::OVERLOADED.into(),
                message: format!(
                    "{instance} has more than {UPCALL_LIMIT} calls into Berth open; {method} was refused"
                ),
            })));
            return;
        };
        // A restricted host's `serverUrl` requests come on the channel (D-034).
        if method == "serverUrl.request" {
            let restricted = self.key.restricted;
            let upcalls = self.upcalls.clone();
            tokio::spawn(async move {
                let outcome = if restricted {
                    Ok(crate::compat::on_channel(&upcalls, &instance, body).await)
                } else {
                    Err(WireError {
                        code: code::UNSUPPORTED.into(),
                        message:
                            "serverUrl requests travel on the channel only from a restricted host"
                                .into(),
                    })
                };
                drop(permit);
                reply(outcome).await;
            });
            return;
        }
        let fut = self.upcalls.call(instance, method, body);
        tokio::spawn(async move {
            let outcome = fut.await;
            drop(permit);
            reply(outcome).await;
        });
    }

    fn drop_frame(&self, what: &str, id: u64) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            pid = self.pid,
            what,
            id,
            "dropped a late, duplicate or unknown frame"
        );
    }
}

/// While a load runs, its instance may call into Berth (its factories do).
struct LoadingMark<'h> {
    host: &'h Host,
    instance: Option<String>,
}

impl Drop for LoadingMark<'_> {
    fn drop(&mut self) {
        if let Some(i) = &self.instance {
            self.host
                .loading
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(i);
        }
    }
}

/// The plugins whose code a call runs: a hook chain's instances, a tool's source and the
/// plugins of its `tool.execute.before/after` hooks, or the one instance.
fn involved(instance: &str, kind: CallKind, body: &Value) -> Vec<String> {
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let mut out = match kind {
        CallKind::HookChain => names(&body["instances"]),
        CallKind::Invoke => {
            let mut v = vec![instance.to_string()];
            v.extend(names(&body["before"]));
            v.extend(names(&body["after"]));
            v
        }
        _ => vec![instance.to_string()],
    };
    out.sort();
    out.dedup();
    out
}

/// A call whose caller gave up (dropped the future: an HTTP client that went away, a shorter
/// deadline above) is cancelled like any other: its AbortSignal fires, and if it has not ended
/// after the grace the host's tree is killed. Its queue slot stays taken until then.
struct GiveUpGuard<'h> {
    host: &'h Host,
    id: u64,
    armed: bool,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for GiveUpGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(frame) = encode(&ToHost::Cancel {
            v: PROTOCOL_VERSION,
            cancel_id: self.id,
        }) {
            self.host.send_detached(frame);
        }
        let (Some(host), Ok(rt)) = (
            self.host.me.upgrade(),
            tokio::runtime::Handle::try_current(),
        ) else {
            self.host
                .kill("a call whose caller gave up could not be watched");
            return;
        };
        let (id, permit) = (self.id, self.permit.take());
        rt.spawn(async move {
            let until = tokio::time::Instant::now() + CANCEL_GRACE;
            // The result (or the host's loss) removes the entry; a late answer is dropped.
            while host
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&id)
                && !host.is_lost()
                && tokio::time::Instant::now() < until
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let still = host
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            if let Some(call) = still.filter(|_| !host.is_lost()) {
                host.kill_blaming(
                    &format!(
                        "a call whose caller gave up did not stop within {} ms of its cancel",
                        CANCEL_GRACE.as_millis()
                    ),
                    Some(call.instance),
                );
            }
            drop(permit);
        });
    }
}

/// Owns the hosts: one per backend (execution domain and policy are one each for now).
pub struct HostSupervisor {
    layout: HostLayout,
    runtimes: Vec<RuntimeInfo>,
    hosts: tokio::sync::Mutex<HashMap<HostKey, Arc<Host>>>,
    /// The same hosts, readable without awaiting (the status snapshot is built synchronously).
    live: Mutex<Vec<Arc<Host>>>,
    generation: AtomicU64,
    /// Losses per backend and per plugin, shared with every host (each reports its own loss).
    budget: Arc<Mutex<RestartBudget>>,
    upcalls: Arc<dyn Upcalls>,
    /// The private folder the hosts' sockets are made in; created on the first spawn and
    /// removed with the supervisor.
    run_dir: Mutex<Option<Arc<channel::RunDir>>>,
    /// What each restricted host may reach, as the runtime set it before asking for the host.
    restrictions: Mutex<HashMap<HostKey, crate::boundary::Restriction>>,
    /// Hosts being replaced (`replace`): their key, and the signal that the old one is gone.
    draining: Mutex<HashMap<HostKey, tokio::sync::watch::Sender<bool>>>,
}

impl HostSupervisor {
    pub fn new(layout: HostLayout, runtimes: Vec<RuntimeInfo>) -> HostSupervisor {
        Self::with_upcalls(layout, runtimes, Arc::new(NoUpcalls))
    }

    /// A supervisor whose hosts send plugin calls into Berth (`client`, `ctx.ask`, `serverUrl`)
    /// to `upcalls`.
    pub fn with_upcalls(
        layout: HostLayout,
        runtimes: Vec<RuntimeInfo>,
        upcalls: Arc<dyn Upcalls>,
    ) -> HostSupervisor {
        procs::become_subreaper();
        HostSupervisor {
            layout,
            runtimes,
            hosts: Default::default(),
            live: Default::default(),
            generation: AtomicU64::new(1),
            budget: Default::default(),
            upcalls,
            run_dir: Mutex::new(None),
            restrictions: Mutex::new(HashMap::new()),
            draining: Mutex::new(HashMap::new()),
        }
    }

    /// What the restricted host `key` may reach (set before `host_for(key)`; a running host
    /// whose restriction changed is the caller's to retire). Returns whether it changed.
    pub fn restrict(&self, key: &HostKey, r: crate::boundary::Restriction) -> bool {
        let mut all = self.restrictions.lock().unwrap_or_else(|p| p.into_inner());
        all.insert(key.clone(), r.clone()) != Some(r)
    }

    /// Where the host code and its dependencies are.
    pub fn layout(&self) -> &HostLayout {
        &self.layout
    }

    /// Manual resume of a paused backend and of quarantined plugins: their loss history is
    /// forgotten (a new budget), so the next call starts a fresh host. Returns whether anything
    /// was paused.
    pub fn resume(&self, backend: RuntimeKind) -> bool {
        let was = self
            .budget
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .resume(backend);
        if was {
            tracing::info!(?backend, "paused plugin host resumed by the user");
        }
        was
    }

    /// Whether `backend` spent its restart budget (it stays paused until resumed).
    pub fn is_paused(&self, backend: RuntimeKind) -> bool {
        self.budget
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_paused(backend)
    }

    /// Plugins that spent their own restart budget, with the reason; paused until resumed.
    pub fn quarantined(&self) -> std::collections::BTreeMap<String, String> {
        self.budget
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .quarantined()
    }

    /// Running hosts, without awaiting.
    pub fn hosts_now(&self) -> Vec<HostInfo> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.iter()
            .filter(|h| !h.is_lost())
            .map(|h| h.info())
            .collect()
    }

    pub async fn hosts(&self) -> Vec<HostInfo> {
        self.hosts
            .lock()
            .await
            .values()
            .filter(|h| !h.is_lost())
            .map(|h| h.info())
            .collect()
    }

    /// The live shared host for `backend`, starting one if needed (within the restart budget).
    pub async fn host(&self, backend: RuntimeKind) -> Result<Arc<Host>, BerthError> {
        self.host_for(&HostKey::shared(backend)).await
    }

    /// The live host for `key` (shared, or a source's own), starting one if needed.
    pub async fn host_for(&self, key: &HostKey) -> Result<Arc<Host>, BerthError> {
        let mut hosts = loop {
            let hosts = self.hosts.lock().await;
            // Its old host is finishing its calls: the caller waits until that one is gone (a
            // new host must not start beside it), then gets the new one.
            match self.replacement_of(key) {
                Some(mut gone) => {
                    drop(hosts);
                    let _ = gone.wait_for(|g| *g).await;
                }
                None => break hosts,
            }
        };
        if let Some(h) = hosts.get(key) {
            if !h.is_lost() {
                return Ok(h.clone());
            }
            // Its loss was counted once, when it happened; it is not asked again.
            hosts.remove(key);
        }
        let backend = key.backend;
        if self.is_paused(backend) {
            return Err(BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "host",
                format!("the {backend:?} plugin host was lost {RESTART_BUDGET} times within {} minutes, with no one plugin to blame, and is paused", RESTART_WINDOW.as_secs() / 60),
                "look at the plugins' diagnostics and the log, then press Resume on the status page (or restart Berth)",
            ));
        }
        let host = self.spawn(key.clone()).await?;
        hosts.insert(key.clone(), host.clone());
        self.track(&host);
        Ok(host)
    }

    /// A host of its own for one piece of work (a plugin's login flow): started fresh, never
    /// shared, listed among the running hosts until it is retired. A restricted source's runs
    /// inside the same boundary as its own host (`restrict` set it).
    pub async fn dedicated(
        &self,
        backend: RuntimeKind,
        source: &str,
        restricted: bool,
    ) -> Result<Arc<Host>, BerthError> {
        if self.is_paused(backend) {
            return Err(BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "host",
                format!("the {backend:?} plugin host is paused"),
                "press Resume on the status page (or restart Berth)",
            ));
        }
        let key = if restricted {
            HostKey::restricted(backend, source)
        } else {
            HostKey::own(backend, source)
        };
        let host = self.spawn(key).await?;
        self.track(&host);
        Ok(host)
    }

    /// The running host for `key`, if any (never starts one).
    pub async fn current_for(&self, key: &HostKey) -> Option<Arc<Host>> {
        self.hosts
            .lock()
            .await
            .get(key)
            .filter(|h| !h.is_lost())
            .cloned()
    }

    /// The running hosts (shared and own) whose loaded sources include any of `ids`.
    /// Every live host with the sources loaded in it, read once.
    pub async fn placement(&self) -> Vec<(HostKey, Vec<String>)> {
        self.hosts
            .lock()
            .await
            .iter()
            .filter(|(_, h)| !h.is_lost())
            .map(|(k, h)| {
                let loaded = h.loaded.lock().unwrap_or_else(|p| p.into_inner());
                (k.clone(), loaded.iter().cloned().collect())
            })
            .collect()
    }

    pub async fn running(&self, ids: &[String]) -> Vec<HostKey> {
        self.hosts
            .lock()
            .await
            .iter()
            .filter(|(_, h)| {
                !h.is_lost()
                    && h.loaded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .iter()
                        .any(|id| ids.contains(id))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Lists `host` among the running ones (and forgets those that ended).
    fn track(&self, host: &Arc<Host>) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|h| !h.is_lost());
        live.push(host.clone());
    }

    /// The private socket folder, made on first use and verified on every use.
    fn run_dir(&self) -> Result<Arc<channel::RunDir>, String> {
        let mut slot = self.run_dir.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(dir) = slot.as_ref() {
            dir.verify()?;
            return Ok(dir.clone());
        }
        let dir = Arc::new(channel::RunDir::create(&self.layout.socket_bases)?);
        *slot = Some(dir.clone());
        Ok(dir)
    }

    /// The boundary a restricted host runs in (None for the others): the runtime's
    /// restriction for it, plus the host's own code and channel. No restriction, or no tier
    /// that works here, and the host does not start.
    fn boundary_of(
        &self,
        key: &HostKey,
        socket: &std::path::Path,
        tree: &str,
    ) -> Result<Option<berth_sandbox::Boundary>, BerthError> {
        if !key.restricted {
            return Ok(None);
        }
        let tier = crate::boundary::tier().map_err(|e| restricted_unavailable(key, e))?;
        let r = self
            .restrictions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
            .ok_or_else(|| restricted_unavailable(key, "no restriction was set for it".into()))?;
        let mut code = vec![self.layout.deps_dir.clone()];
        code.extend(
            self.layout
                .script
                .parent()
                .map(std::path::Path::to_path_buf),
        );
        Ok(Some(crate::boundary::boundary_for(
            &r, tier, &code, socket, tree,
        )))
    }

    async fn spawn(&self, key: HostKey) -> Result<Arc<Host>, BerthError> {
        let backend = key.backend;
        let unavailable = |msg: String| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "host",
                msg,
                "run scripts/setup, or set BERTH_BUN / BERTH_NODE",
            )
        };
        let rt = self
            .runtimes
            .iter()
            .find(|r| r.name == backend && r.problem.is_none())
            .and_then(|r| r.path.clone())
            .ok_or_else(|| unavailable(format!("no usable {backend:?} runtime")))?;
        let run_dir = self.run_dir().map_err(&unavailable)?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        // Two secrets, given to the host on its stdin (never in its environment): the one the
        // supervisor proves itself with, and the one the host answers with.
        let welcome_secret = random_hex(24);
        let secret = random_hex(24);
        // Unique per spawn: several supervisors may live in one process.
        let sock_path = run_dir.path().join(format!(
            "h{}-{generation}-{}.sock",
            std::process::id(),
            random_hex(4)
        ));
        let listener = UnixListener::bind(&sock_path)
            .map_err(|e| unavailable(format!("cannot listen on {}: {e}", sock_path.display())))?;

        let tree = format!("{}-{generation}-{}", std::process::id(), random_hex(4));
        // Bun would otherwise download any package a plugin imports that is not installed
        // (auto-install), behind the approval's back and with no lockfile: never.
        let flag = match backend {
            RuntimeKind::Node => "--no-warnings",
            RuntimeKind::Bun => "--no-install",
        };
        let boundary = self.boundary_of(&key, &sock_path, &tree)?;
        let ready = crate::launch::Launch {
            program: rt.clone(),
            args: vec![flag.into(), self.layout.script.clone().into()],
            tree: tree.clone(),
            boundary: boundary.clone(),
        }
        .command()
        .map_err(|e| restricted_unavailable(&key, e))?;
        let (mut cmd, wrapped) = (ready.command, ready.wrapped);
        let mut child = cmd
            .spawn()
            .map_err(|e| unavailable(format!("cannot start {}: {e}", rt.display())))?;
        if let Some(mut stdin) = child.stdin.take() {
            let handshake = serde_json::json!({
                "socket": sock_path,
                "generation": generation,
                "welcome": welcome_secret,
                "secret": secret,
                "hostDeps": self.layout.deps_dir,
                "trusted": self.layout.trusted,
                // Inside a boundary, requests to the plugin's `serverUrl` travel on the
                // channel (the loopback service is out of its reach).
                "restricted": key.restricted,
                "boundary": boundary.as_ref().map(|b| serde_json::json!({
                    "roots": b.read.iter().chain(&b.write).collect::<Vec<_>>(),
                    "network": b.network,
                })),
            });
            // Small enough for the pipe buffer; dropping `stdin` closes it (the host reads to EOF).
            let _ = stdin.write_all(format!("{handshake}\n").as_bytes()).await;
        }
        let pid = child.id().unwrap_or(0);
        let logs = Arc::new(Mutex::new(VecDeque::with_capacity(4096)));
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            child.stderr.take().map(|s| Box::new(s) as _),
        ]
        .into_iter()
        .flatten()
        {
            tokio::spawn(capture(stream, logs.clone()));
        }

        // Only the spawned process may connect (peer credentials); it is welcomed with the
        // supervisor's secret and must answer with its own and the generation. Anything else
        // is closed. The host has 10 s to say hello.
        let stream = tokio::time::timeout(
            Duration::from_secs(10),
            accept_hello(
                &listener,
                pid,
                boundary.is_some(),
                &welcome_secret,
                &secret,
                generation,
            ),
        )
        .await;
        let _ = std::fs::remove_file(&sock_path);
        let (stream, runtime_pid) = match stream {
            Ok(Ok(s)) => s,
            other => {
                let exited = child.try_wait().ok().flatten();
                procs::kill_group(pid as i32);
                let _ = child.kill().await;
                let out = String::from_utf8_lossy(
                    &logs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .iter()
                        .copied()
                        .collect::<Vec<u8>>(),
                )
                .into_owned();
                let why = match other {
                    Ok(Err(e)) => e,
                    _ => match exited {
                        Some(status) => format!("it exited ({status}) before connecting"),
                        None => "it did not connect within 10 s".into(),
                    },
                };
                return Err(BerthError::new(
                    code::PLUGIN_FAILED,
                    "host",
                    format!(
                        "the {backend:?} plugin host did not start: {why}; its output: {}",
                        out.trim()
                    ),
                    "run scripts/setup; if it persists, report the output",
                ));
            }
        };
        // Later connections to this listener are refused by dropping it here (the path is gone).
        drop(listener);
        let (rd, wr) = stream.into_split();
        // Buffered: an `ack` and its result usually arrive together and are read in one go.
        let mut rd = tokio::io::BufReader::with_capacity(64 * 1024, rd);
        let writer = Arc::new(tokio::sync::Mutex::new(wr));
        let host = Arc::new_cyclic(|me| Host {
            me: me.clone(),
            key,
            backend,
            generation,
            pid,
            runtime_pid,
            boundary: boundary.map(|b| b.tier).zip(wrapped),
            tree,
            writer,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            lost: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            lost_notify: Notify::new(),
            queue: Arc::new(Semaphore::new(QUEUE_LIMIT)),
            dropped: AtomicU64::new(0),
            loaded: Mutex::new(HashSet::new()),
            loading: Mutex::new(HashSet::new()),
            logs,
            upcalls: self.upcalls.clone(),
            upcall_slots: Mutex::new(HashMap::new()),
            budget: self.budget.clone(),
            compat: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&host);
        tokio::spawn(async move {
            loop {
                let frame = read_frame(&mut rd).await;
                let Some(host) = weak.upgrade() else { return };
                let why = match frame.map(|b| decode(&b)) {
                    Ok(Ok(msg)) => {
                        host.on_frame(msg);
                        continue;
                    }
                    // Garbage on the channel: it can no longer be trusted.
                    Ok(Err(e)) => format!("it sent a malformed frame ({e})"),
                    Err(berth_protocol::FrameError::TooLarge(n)) => {
                        format!("it sent a {n}-byte frame, over the 8 MiB limit")
                    }
                    Err(other) => format!("its channel closed ({other})"),
                };
                host.kill(&why);
                return;
            }
        });
        // The task owns the child: its exit marks the host lost; dropping it kills the child.
        let weak = Arc::downgrade(&host);
        tokio::spawn(async move {
            let status = child.wait().await;
            if let Some(host) = weak.upgrade() {
                host.kill(&format!(
                    "the process exited ({})",
                    status
                        .map(|s| s.to_string())
                        .unwrap_or_else(|e| e.to_string())
                ));
            }
        });
        Ok(host)
    }

    /// Stops every host and reclaims their trees.
    pub async fn shutdown(&self) {
        self.hosts.lock().await.clear();
        // Also those still finishing their calls after a recycle.
        let live: Vec<Arc<Host>> =
            std::mem::take(&mut *self.live.lock().unwrap_or_else(|p| p.into_inner()));
        for h in live.iter().filter(|h| !h.is_lost()) {
            h.retire("Berth is shutting down");
        }
    }
}

/// A restricted host that cannot start inside its boundary: its source is policy-limited.
fn restricted_unavailable(key: &HostKey, why: String) -> BerthError {
    let err = BerthError::new(
        code::POLICY_LIMITED,
        "restricted mode",
        format!("it must run restricted, and its OS boundary cannot be made here: {why}"),
        "run Berth where bubblewrap or Landlock works, or set this source to compatible mode (`berth policy set mode.<id> compatible`) if your policy allows",
    );
    match &key.own {
        Some(id) => err.for_plugin(id.clone()),
        None => err,
    }
}

async fn accept_hello(
    listener: &UnixListener,
    pid: u32,
    wrapped: bool,
    welcome: &str,
    secret: &str,
    generation: u64,
) -> Result<(UnixStream, u32), String> {
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let peer = match channel::check_peer(&stream, pid, wrapped) {
            Ok(p) => p,
            Err(why) => {
                tracing::warn!("refused a connection to the host socket: {why}");
                continue;
            }
        };
        let Ok(frame) = encode(&ToHost::Welcome {
            v: PROTOCOL_VERSION,
            secret: welcome.to_string(),
        }) else {
            return Err("cannot encode the welcome frame".into());
        };
        if stream.write_all(&frame).await.is_err() {
            continue;
        }
        let hello = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut stream)).await;
        match hello {
            Ok(Ok(bytes)) => match decode(&bytes) {
                Ok(FromHost::Hello {
                    v,
                    secret: s,
                    generation: g,
                    ..
                }) if v == PROTOCOL_VERSION
                    && g == generation
                    && berth_base::constant_time_eq(s.as_bytes(), secret.as_bytes()) =>
                {
                    return Ok((stream, peer))
                }
                Ok(FromHost::Hello { v, .. }) if v != PROTOCOL_VERSION => {
                    return Err(format!(
                        "it speaks protocol {v}, Berth speaks {PROTOCOL_VERSION}"
                    ))
                }
                _ => tracing::warn!("refused a connection without the host's secret"),
            },
            _ => tracing::warn!("refused a connection that sent no hello"),
        }
    }
}

async fn capture(
    mut stream: Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    logs: Arc<Mutex<VecDeque<u8>>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut l = logs.lock().unwrap_or_else(|p| p.into_inner());
        l.extend(&buf[..n]);
        while l.len() > LOG_KEEP {
            l.pop_front();
        }
    }
}
