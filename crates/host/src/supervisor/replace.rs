//! Taking a host out of service before different code is imported (seed 003 §9): every reload
//! — a new version, a changed file, a revoked sibling, a held plugin — goes through `replace`.
//! New calls for the host wait (they are sent nowhere) while its calls in flight finish within
//! a bounded grace; those still running then end `cancelled`; the host is stopped and its whole
//! process tree confirmed gone before `replace` returns. Only then may the caller import the
//! new module, so old and new code never run side by side.
//!
//! Must not: start a host, import anything, or repeat a call.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{HostKey, HostSupervisor};
use crate::procs;

/// How a replacement ended, for the log and the tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replaced {
    /// Calls that finished within the grace.
    pub drained: usize,
    /// Calls ended `cancelled` (the revoked ones at once, the rest when the grace ran out).
    pub cancelled: usize,
    /// Whether no process of the host's tree was left when it returned.
    pub tree_gone: bool,
}

impl HostSupervisor {
    /// Stops `key`'s host so that something else may be imported (see the module's note).
    /// `cancel_now`: sources whose calls end at once (revoked; their code must stop now);
    /// `grace`: how long the other calls in flight may run to their end. Returns `None` when
    /// no host ran for `key`.
    pub async fn replace(
        &self,
        key: &HostKey,
        cancel_now: &[String],
        grace: Duration,
        why: &str,
    ) -> Option<Replaced> {
        let (done, _) = watch::channel(false);
        let old = {
            let mut hosts = self.hosts.lock().await;
            let old = hosts.remove(key)?;
            // Under the hosts lock: `host_for` sees either the old host or the wait, never a
            // gap in which it would start a second one.
            self.draining
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key.clone(), done.clone());
            old
        };
        let mut out = Replaced {
            cancelled: old.stop_calls_of(cancel_now, why),
            ..Replaced::default()
        };
        let before = old.in_flight();
        let until = Instant::now() + grace;
        while old.in_flight() > 0 && !old.is_lost() && Instant::now() < until {
            tokio::select! {
                _ = old.lost_notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
        let left = old.in_flight();
        out.drained = before.saturating_sub(left);
        if left > 0 {
            let all: Vec<String> = old.instances_in_flight();
            out.cancelled += old.stop_calls_of(
                &all,
                &format!("{why}; it did not finish within {} ms", grace.as_millis()),
            );
        }
        old.retire(why);
        out.tree_gone = confirm_gone(&old.tree).await;
        if !out.tree_gone {
            tracing::warn!(
                pid = old.pid,
                why,
                "a process of the old plugin host is still there"
            );
        }
        self.draining
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        let _ = done.send(true);
        tracing::info!(
            pid = old.pid,
            generation = old.generation,
            drained = out.drained,
            cancelled = out.cancelled,
            why,
            "plugin host replaced"
        );
        Some(out)
    }

    /// While `key`'s host is being replaced: a receiver that turns `true` once it is gone.
    /// Read under the hosts lock (see `replace`).
    pub(super) fn replacement_of(&self, key: &HostKey) -> Option<watch::Receiver<bool>> {
        self.draining
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map(|tx| tx.subscribe())
    }

    /// Whether a host for `key` is being replaced now (the status shows its sources updating).
    pub fn is_replacing(&self, key: &HostKey) -> bool {
        self.draining
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(key)
    }
}

/// Kills what is left of host tree `tree` (a process that left the group and is not our
/// child) until none is left, for at most two seconds. Returns whether none is.
async fn confirm_gone(tree: &str) -> bool {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let left = procs::tree_members(tree);
        if left.is_empty() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        for pid in left {
            procs::kill_pid(pid);
        }
        procs::reclaim_orphans(tree);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
