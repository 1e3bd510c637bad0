//! Watches the config graph with `notify` and rescans on change (debounced). A change in a
//! folder that does not exist yet is seen through its nearest existing ancestor. Of the data
//! dir only its signal folder is watched (`signals`), and this process's own signal is
//! dropped in the callback: its own commits publish themselves (`Core::with_store`).
//!
//! Owns: the watcher thread. Must not: poll — an idle Berth does no work.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use crate::berth::Berth;

/// Quiet time after the last file event before a rescan.
pub const DEBOUNCE: Duration = Duration::from_millis(60);

/// The longest a burst of file events holds a rescan back.
pub const DEBOUNCE_MAX: Duration = Duration::from_millis(500);

/// Stops the watcher when dropped.
pub struct WatchHandle {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

enum Msg {
    /// Changed paths with OpenCode's event name (`add`, `change`, `unlink`).
    Fs(Vec<(PathBuf, &'static str)>),
    Stop,
}

/// Starts watching `berth`'s graph.
pub fn watch(berth: Berth) -> notify::Result<WatchHandle> {
    let (tx, rx) = mpsc::channel::<Msg>();
    let fs_tx = tx.clone();
    let own_signal = crate::signals::own(&berth.options().data_dir);
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(mut ev) = res {
            // This process's own signal is no news to it (`signals`).
            ev.paths.retain(|p| p != &own_signal);
            if ev.paths.is_empty() {
                return;
            }
            let kind = match ev.kind {
                notify::EventKind::Access(_) => return,
                notify::EventKind::Create(_) => "add",
                notify::EventKind::Remove(_) => "unlink",
                _ => "change",
            };
            let _ = fs_tx.send(Msg::Fs(ev.paths.into_iter().map(|p| (p, kind)).collect()));
        }
    })?;
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let stop_fwd = tx;
    // The stop channel closing (handle dropped) wakes the loop.
    std::thread::spawn(move || {
        let _ = stop_rx.recv();
        let _ = stop_fwd.send(Msg::Stop);
    });
    // Watch before returning, so nothing the caller does next is missed.
    let mut watched: BTreeSet<PathBuf> = BTreeSet::new();
    rewatch(&mut watcher, &mut watched, &berth);
    // Plugins' `event` hooks run on the caller's async runtime, when there is one.
    let runtime = tokio::runtime::Handle::try_current().ok();
    let thread = std::thread::Builder::new()
        .name("berth-watch".into())
        .spawn(move || {
            let _entered = runtime.as_ref().map(|h| h.enter());
            while let Ok(msg) = rx.recv() {
                let Msg::Fs(first) = msg else { break };
                let mut changed: Vec<(PathBuf, &'static str)> = first;
                // Debounce: wait until the burst is over — but never longer than
                // `DEBOUNCE_MAX`, or a file written without pause (a plugin's log, a ticker)
                // would hold back every rescan, decisions from other processes included.
                let burst_started = std::time::Instant::now();
                loop {
                    let left = DEBOUNCE_MAX.saturating_sub(burst_started.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    match rx.recv_timeout(DEBOUNCE.min(left)) {
                        Ok(Msg::Fs(more)) => {
                            changed.extend(more);
                            continue;
                        }
                        Ok(Msg::Stop) => return,
                        Err(mpsc::RecvTimeoutError::Timeout) => break,
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
                // OpenCode's `file.watcher.updated`, once per path and burst (the last kind wins).
                let mut last: std::collections::BTreeMap<PathBuf, &'static str> =
                    Default::default();
                for (p, k) in changed {
                    last.insert(p, k);
                }
                // Only files in the folders Berth watches for the graph: not the ancestors watched
                // for a folder's creation (a plugin writing there would feed itself events), and
                // not Berth's own data dir (its signal folder is watched for other processes').
                let data_dir = berth.options().data_dir.clone();
                let roots = berth.watch_roots();
                let ours = |p: &Path| {
                    !p.starts_with(&data_dir)
                        && roots
                            .iter()
                            .any(|r| p.parent() == Some(r.as_path()) || p == r)
                };
                for (file, event) in last.into_iter().filter(|(p, _)| ours(p)) {
                    berth.emit_event(
                        "file.watcher.updated",
                        serde_json::json!({ "file": file, "event": event }),
                    );
                }
                // Watch new folders first, so a file created right after its folder is not missed,
                // then rescan, then follow whatever the new graph names.
                rewatch(&mut watcher, &mut watched, &berth);
                if berth.rescan().is_some() {
                    rewatch(&mut watcher, &mut watched, &berth);
                }
            }
        })?;
    Ok(WatchHandle {
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

/// Watches every root that exists, and the nearest existing ancestor of every root that does
/// not (so that its creation is noticed). Non-recursive: OpenCode reads these folders flat.
fn rewatch(watcher: &mut impl Watcher, watched: &mut BTreeSet<PathBuf>, berth: &Berth) {
    let mut wanted = BTreeSet::new();
    for root in berth.watch_roots() {
        wanted.insert(nearest_existing(&root));
    }
    for gone in watched.difference(&wanted).cloned().collect::<Vec<_>>() {
        let _ = watcher.unwatch(&gone);
        watched.remove(&gone);
    }
    for new in wanted
        .difference(&watched.clone())
        .cloned()
        .collect::<Vec<_>>()
    {
        match watcher.watch(&new, RecursiveMode::NonRecursive) {
            Ok(()) => {
                watched.insert(new);
            }
            Err(e) => tracing::warn!(path = %new.display(), error = %e, "cannot watch folder"),
        }
    }
}

fn nearest_existing(p: &Path) -> PathBuf {
    p.ancestors()
        .find(|a| a.is_dir())
        .unwrap_or(Path::new("/"))
        .to_path_buf()
}
