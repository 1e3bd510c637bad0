//! The data dir's signal folder: how one Berth process tells the others on the same data dir
//! that it committed something they show (a decision, a choice, a policy setting, a receipt).
//! Each process touches its own file, `signals/<pid>`, after such a commit; every process
//! watches the folder and rescans when *another* process's file changes. The store's own
//! files are not watched: they change at every write of every call, and a process woken by
//! its own receipts would rescan for nothing.
//!
//! Owns: the folder and this process's file in it. Must not: carry data (a signal only says
//! "look again"; the store is the truth), or wake this process for its own commits.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Signal files untouched for this long belong to processes long gone.
const STALE: Duration = Duration::from_secs(24 * 3600);

/// The folder every process on `data_dir` watches.
pub(crate) fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("signals")
}

/// This process's signal file (its change is no news to this process's watcher).
pub(crate) fn own(data_dir: &Path) -> PathBuf {
    dir(data_dir).join(std::process::id().to_string())
}

/// Creates the folder (so that watchers watch it, not the data dir) and removes the files of
/// processes gone for a day.
pub(crate) fn prepare(data_dir: &Path) {
    let d = dir(data_dir);
    let _ = std::fs::create_dir_all(&d);
    berth_base::remove_older_than(&d, STALE);
}

/// This process's signal: its file, kept open, so a signal is one `futimens`.
pub(crate) struct Signal {
    file: Option<std::fs::File>,
    /// When it was last touched (ms since the epoch).
    last_ms: AtomicU64,
    /// A throttled touch was skipped and is still owed (`settle`).
    owed: AtomicBool,
}

impl Signal {
    pub(crate) fn open(data_dir: &Path) -> Signal {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(own(data_dir));
        if let Err(e) = &f {
            tracing::warn!(error = %e, "no signal file: other Berth processes on this data dir see this one's changes late");
        }
        Signal {
            file: f.ok(),
            last_ms: AtomicU64::new(0),
            owed: AtomicBool::new(false),
        }
    }

    /// Tells the other processes on the data dir to look again.
    pub(crate) fn touch(&self) {
        self.owed.store(false, Ordering::SeqCst);
        self.last_ms.store(berth_base::now_ms(), Ordering::SeqCst);
        if let Some(f) = &self.file {
            let _ = f.set_modified(SystemTime::now());
        }
    }

    /// [`Signal::touch`], at most once per `every` (each touch wakes every watcher, this
    /// process's notify thread included): one skipped is owed until [`Signal::settle`].
    pub(crate) fn touch_at_most_every(&self, every: Duration) {
        let since = berth_base::now_ms().saturating_sub(self.last_ms.load(Ordering::SeqCst));
        if since >= every.as_millis() as u64 {
            self.touch();
        } else {
            self.owed.store(true, Ordering::SeqCst);
        }
    }

    /// Makes the touch the throttle skipped, if one is owed.
    pub(crate) fn settle(&self) {
        if self.owed.swap(false, Ordering::SeqCst) {
            self.touch();
        }
    }
}
