//! Failure streaks of one plugin's contributions (seed 003 §8.3, degrade without flooding):
//! an error that repeats — the same plugin, capability and cause — is logged once and then
//! counted, with one summary line at most every [`LOG_EVERY`]; and a contribution that fails
//! [`STREAK`] times in a row is paused on its own — that hook or tool only, the source stays
//! active (partially limited) and its other hooks and tools keep working — until the person
//! resumes it. Which failures count: a hook's every failure (a hook has no caller input to
//! blame) but a `tool.execute.before` that throws — that is the plugin refusing the call, as
//! OpenCode's own guards do, and pausing it would switch the guard off; a tool's time-outs and
//! malformed answers only (a tool that throws usually rejects its arguments, which is the
//! caller's to fix; a host a tool crashes is the restart budget's). The tool hooks a plugin
//! tool's host runs inside the call count as hooks, blamed on the plugin the host names.
//!
//! Owns: the counts, the paused contributions and the log's rate limit. Must not: run or skip
//! anything itself (the chains and the calls ask [`Streaks::is_paused`]), or pause a source.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use crate::snapshot::PausedPart;

/// Failures in a row after which a contribution is paused.
pub const STREAK: u32 = 5;
/// Identical errors are summed up in the log at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// What one failure means for the log and the contribution.
#[derive(Debug, PartialEq, Eq)]
pub struct Noted {
    /// A line to log now (`None`: counted towards the next summary).
    pub log: Option<String>,
    /// This failure paused the contribution.
    pub paused: bool,
}

/// Plugin → capability → its streak (looked up by `&str`, without building a key).
#[derive(Default)]
pub struct Streaks {
    by_part: Mutex<HashMap<String, HashMap<String, Streak>>>,
}

struct Streak {
    in_a_row: u32,
    cause: String,
    /// Identical failures since the last line logged about this cause.
    unlogged: u64,
    logged_at: Instant,
    paused: Option<PausedPart>,
}

/// The cause as compared: the code and the message with its numbers blanked (a duration or an
/// id in the message does not make it another error).
fn cause(code: &str, message: &str) -> String {
    let mut out = String::with_capacity(code.len() + message.len() + 1);
    out.push_str(code);
    out.push(' ');
    let mut in_digits = false;
    for c in message.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

impl Streaks {
    fn parts(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, Streak>>> {
        self.by_part.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One failure of `capability` (`hook <name>` / `tool <name>`) of `plugin`.
    pub fn failed(&self, plugin: &str, capability: &str, code: &str, message: &str) -> Noted {
        let now = Instant::now();
        let cause = cause(code, message);
        let mut parts = self.parts();
        let s = parts
            .entry(plugin.to_string())
            .or_default()
            .entry(capability.to_string())
            .or_insert_with(|| Streak {
                in_a_row: 0,
                cause: String::new(),
                unlogged: 0,
                logged_at: now,
                paused: None,
            });
        s.in_a_row += 1;
        let first = s.cause != cause;
        let log = if first || now.duration_since(s.logged_at) >= LOG_EVERY {
            let again = if !first && s.unlogged > 0 {
                format!(" ({} more times since the last line)", s.unlogged)
            } else {
                String::new()
            };
            s.cause = cause;
            s.unlogged = 0;
            s.logged_at = now;
            Some(format!(
                "{plugin}: {capability} failed: {code}: {message}{again}"
            ))
        } else {
            s.unlogged += 1;
            None
        };
        let paused = s.paused.is_none() && s.in_a_row >= STREAK;
        if paused {
            s.paused = Some(PausedPart {
                capability: capability.to_string(),
                reason: format!(
                    "it failed {} times in a row (last: {message}); Berth paused it, and the plugin's other hooks and tools keep working",
                    s.in_a_row
                ),
                code: code.to_string(),
                since_ms: berth_base::now_ms(),
            });
        }
        Noted { log, paused }
    }

    /// `capability` of `plugin` worked: its streak ends (a paused one stays paused).
    pub fn succeeded(&self, plugin: &str, capability: &str) {
        let mut parts = self.parts();
        if let Some(s) = parts.get_mut(plugin).and_then(|p| p.get_mut(capability)) {
            if s.paused.is_none() {
                s.in_a_row = 0;
            }
        }
    }

    pub fn is_paused(&self, plugin: &str, capability: &str) -> bool {
        self.parts()
            .get(plugin)
            .and_then(|p| p.get(capability))
            .is_some_and(|s| s.paused.is_some())
    }

    /// Whether anything at all is paused (the chains' fast path asks this first).
    pub fn any_paused(&self) -> bool {
        self.parts()
            .values()
            .any(|p| p.values().any(|s| s.paused.is_some()))
    }

    /// What of `plugin` is paused, in the order of its capabilities' names.
    pub fn paused_of(&self, plugin: &str) -> Vec<PausedPart> {
        let mut out: Vec<PausedPart> = self
            .parts()
            .get(plugin)
            .map(|p| p.values().filter_map(|s| s.paused.clone()).collect())
            .unwrap_or_default();
        out.sort_by(|a, b| a.capability.cmp(&b.capability));
        out
    }

    /// The person resumes: every paused contribution runs again, every streak starts over.
    /// Returns how many were paused.
    pub fn resume_all(&self) -> usize {
        let mut parts = self.parts();
        let n = parts
            .values()
            .flat_map(|p| p.values())
            .filter(|s| s.paused.is_some())
            .count();
        parts.clear();
        n
    }
}

/// Whether a tool's failure with `code` counts towards its streak (`timed_out_by_berth`: the
/// deadline was Berth's budget, not one the caller chose).
pub fn counts_for_a_tool(code: &str, timed_out_by_berth: bool) -> bool {
    code == crate::error::code::INVALID_RESPONSE
        || (code == crate::error::code::TIMEOUT && timed_out_by_berth)
}

/// Whether a failure of hook `name` with `code` counts towards its streak: a
/// `tool.execute.before` that throws refuses that call on purpose (OpenCode's `.env` guard
/// does exactly this), every other failure counts.
pub fn counts_for_a_hook(name: &str, code: &str) -> bool {
    !(name == "tool.execute.before" && code == crate::error::code::PLUGIN_FAILED)
}

/// The plugin of `instances` a hook failure's message blames: the host names the failing
/// plugin first (`hook <name> of <instance> …`, berth-host.mjs) and what the plugin threw
/// after, so a plugin cannot put the blame (and a pause) on another by naming it.
pub fn blamed<'a>(
    instances: impl IntoIterator<Item = &'a String>,
    name: &str,
    message: &str,
) -> Option<String> {
    let rest = message
        .strip_prefix("hook ")?
        .strip_prefix(name)?
        .strip_prefix(" of ")?;
    instances
        .into_iter()
        .find(|i| {
            rest.strip_prefix(i.as_str())
                .is_some_and(|r| r.starts_with(' '))
        })
        .cloned()
}

impl super::Catalog {
    /// A failure of a plugin's hook or tool: logged as its streak allows; a new pause is shown
    /// at once (a rescan, off the async workers).
    pub(super) fn note_failure(&self, plugin: &str, capability: &str, code: &str, message: &str) {
        let noted = self.streaks.failed(plugin, capability, code, message);
        if let Some(line) = noted.log {
            tracing::warn!(plugin, "{line}");
        }
        if noted.paused {
            tracing::warn!(
                plugin,
                capability,
                "paused on its own after {STREAK} failures in a row; Resume on the status page runs it again"
            );
            let core = self.core.clone();
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(move || core.rescan())),
                Err(_) => core.rescan(),
            }
        }
    }

    /// The refusal of a call to a tool paused on its own.
    pub(super) fn refuse_paused_tool(
        &self,
        plugin: &str,
        tool: &str,
    ) -> Option<crate::error::BerthError> {
        let capability = format!("tool {tool}");
        if !self.streaks.is_paused(plugin, &capability) {
            return None;
        }
        let why = self
            .streaks
            .paused_of(plugin)
            .into_iter()
            .find(|p| p.capability == capability)
            .map(|p| p.reason)
            .unwrap_or_default();
        Some(
            crate::error::BerthError::new(
                crate::error::code::TEMPORARILY_UNAVAILABLE,
                tool,
                format!("`{tool}` is paused: {why}"),
                "fix the plugin, then press Resume on its card on the status page",
            )
            .for_plugin(plugin.to_string()),
        )
    }

    /// The tool hooks around one call without those paused on their own.
    pub(super) fn unpaused(&self, hooks: super::around::ToolHooks) -> super::around::ToolHooks {
        if !self.streaks.any_paused() {
            return hooks;
        }
        let keep = |list: Vec<(String, crate::host::HostKey)>, name: &str| {
            let capability = format!("hook {name}");
            list.into_iter()
                .filter(|(p, _)| !self.streaks.is_paused(p, &capability))
                .collect()
        };
        super::around::ToolHooks {
            before: keep(hooks.before, "tool.execute.before"),
            after: keep(hooks.after, "tool.execute.after"),
        }
    }

    /// What the tool hooks a plugin tool's host ran inside one call did to their streaks: all
    /// of them worked when the call did; a failure the host blames on one of them is its.
    pub(super) fn note_tool_hooks(
        &self,
        hooks: &super::around::ToolHooks,
        outcome: &Result<serde_json::Value, crate::host::CallError>,
    ) {
        match outcome {
            Ok(_) => {
                for (p, _) in &hooks.before {
                    self.streaks.succeeded(p, "hook tool.execute.before");
                }
                for (p, _) in &hooks.after {
                    self.streaks.succeeded(p, "hook tool.execute.after");
                }
            }
            Err(e) => {
                for (name, list) in [
                    ("tool.execute.before", &hooks.before),
                    ("tool.execute.after", &hooks.after),
                ] {
                    if let Some(p) = blamed(list.iter().map(|(p, _)| p), name, &e.message) {
                        if counts_for_a_hook(name, e.code) {
                            self.note_failure(&p, &format!("hook {name}"), e.code, &e.message);
                        }
                        return;
                    }
                }
            }
        }
    }

    /// What of `plugin` is paused on its own.
    pub(crate) fn paused_parts(&self, plugin: &str) -> Vec<PausedPart> {
        self.streaks.paused_of(plugin)
    }

    /// The person resumes the paused hooks and tools; how many there were.
    pub(super) fn resume_parts(&self) -> usize {
        self.streaks.resume_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_failures_log_once_then_pause_the_part_alone_until_resumed() {
        let s = Streaks::default();
        let mut logged = 0;
        let mut paused_at = None;
        for i in 1..=200 {
            let n = s.failed(
                "p",
                "hook chat.params",
                "plugin-failed",
                &format!("boom after {i} ms"),
            );
            logged += usize::from(n.log.is_some());
            if n.paused {
                assert!(paused_at.is_none(), "paused once");
                paused_at = Some(i);
            }
        }
        assert_eq!(logged, 1, "200 identical failures, one line");
        assert_eq!(paused_at, Some(STREAK as usize));
        assert!(s.is_paused("p", "hook chat.params"));
        assert!(
            !s.is_paused("p", "hook chat.message"),
            "its other hooks run"
        );
        assert!(!s.is_paused("q", "hook chat.params"), "other plugins run");
        // Another cause is a line of its own.
        assert!(s
            .failed("p", "hook chat.params", "timeout", "slow")
            .log
            .is_some());
        assert_eq!(s.paused_of("p").len(), 1);
        assert_eq!(s.resume_all(), 1);
        assert!(!s.is_paused("p", "hook chat.params"));
    }

    #[test]
    fn a_success_ends_the_streak() {
        let s = Streaks::default();
        for _ in 0..10 {
            for _ in 0..STREAK - 1 {
                s.failed("p", "tool t", "timeout", "slow");
            }
            s.succeeded("p", "tool t");
        }
        assert!(!s.is_paused("p", "tool t"));
    }
}
