//! The project the window has open: one `Berth` with its file watcher, its activation loops
//! and the thread that forwards its snapshots to the window. Opening another project replaces
//! all of them in place — the first project's hosts are shut down before the next one opens —
//! without restarting the app.
//!
//! Owns: which `Berth` the window's commands reach, and the switch. Must not: decide what a
//! project is or which folders are remembered (`berth_runtime::projects` does), or hold a
//! business rule.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use berth_discovery::OpencodeEnv;
use berth_runtime::catalog::KeepActive;
use berth_runtime::projects::{self, Projects};
use berth_runtime::watch::WatchHandle;
use berth_runtime::{Berth, BerthError};
use tauri::{AppHandle, Emitter};

/// What every project of this window shares: the data dir, the environment, the log file.
pub struct Base {
    pub data_dir: PathBuf,
    pub env: OpencodeEnv,
    pub log_file: Option<PathBuf>,
}

/// The open project's running parts; dropping them stops the watcher and the loops.
struct Running {
    _watch: Option<WatchHandle>,
    _active: KeepActive,
}

pub struct Session {
    base: Base,
    berth: RwLock<Berth>,
    running: Mutex<Option<Running>>,
    /// Which `Berth` the forwarding thread of each generation serves; an older one stops.
    generation: Arc<AtomicU64>,
    /// One switch at a time.
    switching: tokio::sync::Mutex<()>,
}

impl Session {
    /// Opens `project` (`None`: no project, only what applies to every project). Nothing runs
    /// until `start`.
    pub fn open(base: Base, project: Option<&Path>) -> Result<Session, BerthError> {
        let berth = open_berth(&base, project)?;
        Ok(Session {
            base,
            berth: RwLock::new(berth),
            running: Mutex::new(None),
            generation: Arc::new(AtomicU64::new(0)),
            switching: tokio::sync::Mutex::new(()),
        })
    }

    /// The `Berth` of the open project (cheap: a shared handle).
    pub fn berth(&self) -> Berth {
        self.berth.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Starts the open project's watcher, activation and event forwarding (from the app's
    /// async runtime), and notes it among the recent projects.
    pub fn start(&self, app: &AppHandle) -> Result<(), BerthError> {
        let berth = self.berth();
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        forward_events(app.clone(), &berth, self.generation.clone(), generation)?;
        let watch = berth_runtime::watch::watch(berth.clone())
            .map_err(|e| {
                tracing::warn!(error = %e, "cannot watch the config folders; changes show after a restart");
            })
            .ok();
        // A person is here: a tool's permission prompt waits for them (non-blocking).
        berth.enable_prompts();
        // Approved sources are activated (and revoked ones withdrawn) in the background; the
        // window never waits on it.
        let active = berth.keep_active();
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = Some(Running {
            _watch: watch,
            _active: active,
        });
        if let Err(e) = projects::remember(&berth) {
            tracing::warn!(error = %e.message, "cannot note the project among the recent ones");
        }
        Ok(())
    }

    /// Opens `project` in place of the open one (`None`: no project). The folder is checked
    /// first, so a wrong one changes nothing; then the open project's loops stop, its hosts
    /// shut down, and the new one starts. The window hears `project-changed`.
    pub async fn switch(
        &self,
        app: &AppHandle,
        project: Option<PathBuf>,
    ) -> Result<Projects, BerthError> {
        let _one = self.switching.lock().await;
        let options = projects::options(
            self.base.data_dir.clone(),
            project.as_deref(),
            self.base.env.clone(),
            self.base.log_file.clone(),
        )?;
        let old = self.berth();
        if old.options().project == options.project {
            return projects::list(&old);
        }
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        old.shutdown_hosts().await;
        let opened = tauri::async_runtime::spawn_blocking(move || Berth::open(options))
            .await
            .map_err(|e| crate::failed("project", e))?;
        let berth = match opened {
            Ok(b) => b,
            Err(e) => {
                // The first project comes back as it was, so the window is never left empty.
                self.start(app)?;
                return Err(e);
            }
        };
        *self.berth.write().unwrap_or_else(|p| p.into_inner()) = berth.clone();
        drop(old);
        self.start(app)?;
        let now = projects::list(&berth)?;
        if let Err(e) = app.emit("project-changed", &now) {
            tracing::warn!(error = %e, "cannot tell the window its project changed");
        }
        Ok(now)
    }
}

fn open_berth(base: &Base, project: Option<&Path>) -> Result<Berth, BerthError> {
    Berth::open(projects::options(
        base.data_dir.clone(),
        project,
        base.env.clone(),
        base.log_file.clone(),
    )?)
}

/// Forwards `berth`'s snapshot changes to the window as `status-changed`, until another
/// project's generation starts or the channel closes.
fn forward_events(
    app: AppHandle,
    berth: &Berth,
    current: Arc<AtomicU64>,
    generation: u64,
) -> Result<(), BerthError> {
    let mut events = berth.subscribe();
    // What waited when the project opened is on screen; only what starts waiting later is
    // news for a notification.
    let mut attention = berth_runtime::attention::Attention::default();
    attention.news(&berth.status());
    std::thread::Builder::new()
        .name("berth-events".into())
        .spawn(move || {
            while let Ok(ev) = events.blocking_recv() {
                if current.load(Ordering::SeqCst) != generation {
                    return;
                }
                if let Err(e) = app.emit("status-changed", &ev) {
                    tracing::warn!(error = %e, "cannot forward a status event to the window");
                }
                let news = attention.news(&ev.snapshot);
                if !news.is_empty() && !crate::notify::window_in_front(&app) {
                    for notice in news {
                        crate::notify::send(&app, notice);
                    }
                }
            }
        })
        .map(drop)
        .map_err(|e| crate::failed("window", e))
}
