//! Calls a front end started on the person's behalf ("Try it" on the page or in the window),
//! under the front end's own id for each, so that its Cancel reaches the call: the same cancel an
//! MCP client's `notifications/cancelled` sends (the tool's AbortSignal fires; its tree is
//! killed after the grace; the receipt ends `cancelled`, never replayed).
//!
//! Owns: the ids of the calls in flight and their cancel handles. Must not: run, retry or
//! answer a call (`Berth::invoke` does), or keep an id after its call ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::catalog::CallControl;

/// The calls one front end has in flight, by its ids.
#[derive(Clone, Default)]
pub struct FrontCalls {
    running: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

/// A call in flight: its id is forgotten when this is dropped (hold it until the call ends).
pub struct Started {
    id: Option<String>,
    calls: FrontCalls,
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            self.calls.lock().remove(id);
        }
    }
}

impl FrontCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Notify>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A call starts under `id` (none: it cannot be cancelled from the front end): the control
    /// to give `Berth::invoke`, and the guard that holds the id. An id still in use keeps its
    /// call; the new one is not registered under it.
    pub fn start(&self, id: Option<&str>) -> (CallControl, Started) {
        let control = CallControl::default();
        let id = id.filter(|id| !id.is_empty()).and_then(|id| {
            let mut running = self.lock();
            if running.contains_key(id) {
                return None;
            }
            running.insert(id.to_string(), control.cancel.clone());
            Some(id.to_string())
        });
        (
            control,
            Started {
                id,
                calls: self.clone(),
            },
        )
    }

    /// Cancels the call running under `id`; false when none runs under it (it ended already).
    pub fn cancel(&self, id: &str) -> bool {
        match self.lock().get(id) {
            Some(cancel) => {
                cancel.notify_one();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_cancelled_by_its_id_and_forgotten_when_it_ends() {
        let calls = FrontCalls::default();
        let (_, started) = calls.start(Some("page-1"));
        assert!(!calls.cancel("page-2"), "another id cancels nothing");
        assert!(calls.cancel("page-1"));
        drop(started);
        assert!(!calls.cancel("page-1"), "an ended call's id is forgotten");
        let (_, again) = calls.start(Some("page-1"));
        let (_, twin) = calls.start(Some("page-1"));
        assert!(calls.cancel("page-1"));
        drop(twin);
        assert!(
            calls.cancel("page-1"),
            "a second start under a used id does not take it"
        );
        drop(again);
    }
}
