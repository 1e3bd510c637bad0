//! Restart budgets: how many times hosts may be lost before something is paused, and who is
//! paused. A loss is blamed on the plugin whose call (or load) was in flight when it is clear
//! which one it was; that plugin spends its own budget and, once it is spent, is quarantined —
//! its contributions paused with the reason — while the host restarts for the others. Only a
//! loss no plugin can be blamed for spends the backend's budget. Each physical loss is counted
//! once; a spent budget stays spent until the person resumes (which opens a new one).
//!
//! Owns: the counts and the paused sets. Must not: hold processes or decide what a loss was
//! (the host reports it once, when it is lost).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::runtimes::RuntimeKind;

/// Losses within [`RESTART_WINDOW`] after which a plugin is quarantined or a backend paused.
pub const RESTART_BUDGET: usize = 3;
pub const RESTART_WINDOW: Duration = Duration::from_secs(300);

/// One host's end, as the host reports it (once).
#[derive(Debug, Clone)]
pub struct Loss {
    pub backend: RuntimeKind,
    pub why: String,
    /// The plugin it is blamed on, when exactly one plugin's work was in flight.
    pub culprit: Option<String>,
    /// False when Berth stopped the host on purpose (a revocation, a changed source, shutdown).
    pub crashed: bool,
}

#[derive(Debug, Default)]
pub struct RestartBudget {
    backend_losses: HashMap<RuntimeKind, Vec<Instant>>,
    paused: HashSet<RuntimeKind>,
    strikes: HashMap<String, Vec<Instant>>,
    /// Source id → why it is quarantined.
    quarantined: BTreeMap<String, String>,
}

impl RestartBudget {
    /// Counts one loss. Returns the source it quarantined, if this loss spent a plugin's budget.
    pub fn record(&mut self, loss: &Loss) -> Option<String> {
        if !loss.crashed {
            return None;
        }
        let now = Instant::now();
        let fresh = |list: &mut Vec<Instant>| {
            list.push(now);
            list.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
            list.len()
        };
        match &loss.culprit {
            Some(plugin) => {
                let n = fresh(self.strikes.entry(plugin.clone()).or_default());
                if n >= RESTART_BUDGET && !self.quarantined.contains_key(plugin) {
                    self.quarantined.insert(
                        plugin.clone(),
                        format!(
                            "its plugin host was lost {n} times within {} minutes while its code ran (last: {})",
                            RESTART_WINDOW.as_secs() / 60,
                            loss.why
                        ),
                    );
                    return Some(plugin.clone());
                }
                None
            }
            None => {
                if fresh(self.backend_losses.entry(loss.backend).or_default()) >= RESTART_BUDGET {
                    self.paused.insert(loss.backend);
                }
                None
            }
        }
    }

    /// Whether `backend` spent its budget (it stays paused until resumed).
    pub fn is_paused(&self, backend: RuntimeKind) -> bool {
        self.paused.contains(&backend)
    }

    /// Sources quarantined, with the reason.
    pub fn quarantined(&self) -> BTreeMap<String, String> {
        self.quarantined.clone()
    }

    /// The person resumes: `backend` gets a new budget, and every quarantined source too.
    /// Returns whether anything was paused.
    pub fn resume(&mut self, backend: RuntimeKind) -> bool {
        let was = self.paused.remove(&backend) || !self.quarantined.is_empty();
        self.backend_losses.remove(&backend);
        self.quarantined.clear();
        self.strikes.clear();
        was
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loss(culprit: Option<&str>) -> Loss {
        Loss {
            backend: RuntimeKind::Bun,
            why: "it exited".into(),
            culprit: culprit.map(str::to_string),
            crashed: true,
        }
    }

    #[test]
    fn a_plugin_that_keeps_crashing_is_quarantined_and_the_backend_keeps_its_budget() {
        let mut b = RestartBudget::default();
        assert_eq!(b.record(&loss(Some("evil"))), None);
        assert_eq!(b.record(&loss(Some("evil"))), None);
        assert_eq!(b.record(&loss(Some("evil"))).as_deref(), Some("evil"));
        assert!(b.quarantined().contains_key("evil"));
        assert!(
            !b.is_paused(RuntimeKind::Bun),
            "one plugin paused everything"
        );
        // Negative control: the same three losses with no one to blame pause the backend.
        for _ in 0..3 {
            b.record(&loss(None));
        }
        assert!(b.is_paused(RuntimeKind::Bun));
    }

    #[test]
    fn a_deliberate_stop_spends_nothing_and_a_resume_opens_a_new_budget() {
        let mut b = RestartBudget::default();
        for _ in 0..5 {
            b.record(&Loss {
                crashed: false,
                ..loss(None)
            });
        }
        assert!(!b.is_paused(RuntimeKind::Bun));
        for _ in 0..3 {
            b.record(&loss(None));
        }
        assert!(b.resume(RuntimeKind::Bun));
        assert!(!b.is_paused(RuntimeKind::Bun));
        b.record(&loss(None));
        assert!(
            !b.is_paused(RuntimeKind::Bun),
            "the old losses still counted"
        );
    }
}
