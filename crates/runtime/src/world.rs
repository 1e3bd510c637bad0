//! What plugins put before the person: their toasts (notices), the permission prompts their
//! tools wait on, and the bounds on everything a plugin sends (D-029: text sizes, one report
//! per unsupported call, the shared log budget). The answers to plugin calls that fill it are
//! `plugin_calls`; logins are `auth`.
//!
//! Owns: that state and answering a prompt. Must not: run plugin code, read the store, or
//! keep anything of a plugin once it is withdrawn.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::error::{code, BerthError};
pub use crate::snapshot::{Notice, PromptView};

/// Toasts kept for the page.
pub(crate) const NOTICES_KEPT: usize = 20;
/// Open permission prompts at most; more asks are refused with `overloaded`.
pub(crate) const PROMPTS_OPEN: usize = 32;

/// Who settled a permission (stored as its `as_str` in the decision record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecidedBy {
    /// The `permission.ask` chain's answer stood.
    Plugin,
    /// The person's cap limited the plugin's answer.
    Cap,
    /// A standing answer of the person (`berth permissions allow|deny`, "Always").
    Rule,
    /// The person answered the prompt.
    Person,
    /// Nobody can be asked here (headless): the call ends with `action-required`.
    NoPrompt,
    /// Too many prompts are open.
    Overloaded,
    /// The prompt was not answered before the call's deadline.
    Timeout,
}

impl DecidedBy {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Plugin => "plugin",
            DecidedBy::Cap => "cap",
            DecidedBy::Rule => "rule",
            DecidedBy::Person => "person",
            DecidedBy::NoPrompt => "no-prompt",
            DecidedBy::Overloaded => "overloaded",
            DecidedBy::Timeout => "timeout",
        }
    }
}

/// The person's answer to a prompt (OpenCode's `once` / `always` / `reject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptReply {
    Once,
    Always,
    Reject,
}

pub(crate) struct OpenPrompt {
    pub(crate) view: PromptView,
    pub(crate) reply: oneshot::Sender<PromptReply>,
}

#[derive(Default)]
pub struct WorldState {
    pub(crate) notices: VecDeque<Notice>,
    pub(crate) prompts: BTreeMap<String, OpenPrompt>,
    /// Whether a person can answer prompts here (the app, `berth serve`); else `ask` ends the
    /// call with `action-required`.
    pub(crate) prompts_enabled: bool,
    /// (plugin, method) pairs already reported as unsupported: one diagnostic each.
    pub(crate) warned: ReportedOnce,
    /// Log lines plugins may still write now, per plugin.
    pub(crate) log_budget: LogBudget,
    /// Plugins withdrawn since they last loaded: a toast or prompt still on its way from one
    /// (sent just before its host stopped) is not put before the person.
    withdrawn: HashSet<String>,
}

/// Text a plugin sends, cut to a size the page and the log can carry (D-029).
pub(crate) fn bounded(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    let mut out: String = text.chars().take(chars).collect();
    out.push('…');
    out
}

/// The longest toast title, toast message, log line, and name (method, service, permission)
/// a plugin can send; more is cut.
pub(crate) const TITLE_CHARS: usize = 200;
pub(crate) const MESSAGE_CHARS: usize = 500;
pub(crate) const LOG_CHARS: usize = 2000;
pub(crate) const NAME_CHARS: usize = 128;
pub(crate) const PATTERN_CHARS: usize = 512;
pub(crate) const PATTERNS_KEPT: usize = 32;
pub(crate) const METADATA_BYTES: usize = 16 * 1024;
/// The longest a permission prompt waits for a person (the longest tool deadline Berth sets).
pub(crate) const PROMPT_WAIT_MAX: Duration = Duration::from_secs(600);

/// "Reported once" pairs, bounded: past [`ReportedOnce::MAX`] distinct pairs, further ones are
/// counted together and reported once more, so no plugin can grow Berth's memory through it.
#[derive(Default)]
pub(crate) struct ReportedOnce {
    seen: HashSet<(String, String)>,
    overflow: u64,
}

impl ReportedOnce {
    const MAX: usize = 256;

    /// Whether this is the first report of (plugin, what).
    pub(crate) fn first(&mut self, plugin: &str, what: &str) -> bool {
        let key = (plugin.to_string(), what.to_string());
        if self.seen.contains(&key) {
            return false;
        }
        if self.seen.len() < Self::MAX {
            self.seen.insert(key);
            return true;
        }
        self.overflow += 1;
        self.overflow == 1
    }
}

/// Log lines per plugin: a burst of [`LogBudget::BURST`], then [`LogBudget::PER_SECOND`] a
/// second; and all plugins together at most [`LogBudget::BYTES_PER_SECOND`] (after a burst of
/// [`LogBudget::BURST_BYTES`]). What is over is dropped and counted (reported in the next line
/// that gets through). Plugins then write at most ~7.6 MB an hour, however many are noisy, and
/// the log keeps 16 MiB: Berth's own lines of at least the last hour stay.
pub(crate) struct LogBudget {
    plugins: std::collections::HashMap<String, (f64, std::time::Instant, u64)>,
    /// Bytes all plugins may still write now, and when that was computed.
    bytes: (f64, std::time::Instant),
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget {
            plugins: Default::default(),
            bytes: (Self::BURST_BYTES, std::time::Instant::now()),
        }
    }
}

impl LogBudget {
    const BURST: f64 = 30.0;
    const PER_SECOND: f64 = 1.0;
    const BURST_BYTES: f64 = 256.0 * 1024.0;
    const BYTES_PER_SECOND: f64 = 2048.0;

    /// Whether `plugin` may write a line of `len` bytes now.
    pub(crate) fn admit(&mut self, plugin: &str, len: usize) -> bool {
        self.admit_at(plugin, len, std::time::Instant::now())
    }

    fn admit_at(&mut self, plugin: &str, len: usize, now: std::time::Instant) -> bool {
        if self.plugins.len() > 1024 {
            self.plugins.clear();
        }
        let (total, total_at) = &mut self.bytes;
        *total = (*total + now.duration_since(*total_at).as_secs_f64() * Self::BYTES_PER_SECOND)
            .min(Self::BURST_BYTES);
        *total_at = now;
        let (tokens, at, dropped) =
            self.plugins
                .entry(plugin.to_string())
                .or_insert((Self::BURST, now, 0));
        *tokens =
            (*tokens + now.duration_since(*at).as_secs_f64() * Self::PER_SECOND).min(Self::BURST);
        *at = now;
        if *tokens < 1.0 || *total < len as f64 {
            *dropped += 1;
            return false;
        }
        *tokens -= 1.0;
        *total -= len as f64;
        if *dropped > 0 {
            tracing::warn!(plugin = %plugin, dropped = *dropped, "a plugin wrote more log lines than its budget; these were dropped");
            *dropped = 0;
        }
        true
    }
}

impl WorldState {
    /// Takes back what `plugins` put before the person (their toasts; their open prompts are
    /// rejected, ending the calls that wait on them). Returns whether anything went.
    pub(crate) fn withdraw(&mut self, plugins: &[String]) -> bool {
        self.withdrawn.extend(plugins.iter().cloned());
        let before = (self.notices.len(), self.prompts.len());
        self.notices.retain(|n| !plugins.contains(&n.plugin));
        let gone: Vec<String> = self
            .prompts
            .iter()
            .filter(|(_, p)| plugins.contains(&p.view.plugin))
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            if let Some(p) = self.prompts.remove(&id) {
                let _ = p.reply.send(PromptReply::Reject);
            }
        }
        before != (self.notices.len(), self.prompts.len())
    }

    /// `plugin` loads again: what it sends is put before the person again.
    pub(crate) fn readmit(&mut self, plugin: &str) {
        self.withdrawn.remove(plugin);
    }

    /// Puts a toast before the person (the newest [`NOTICES_KEPT`]); false, and nothing
    /// shown, when its plugin was withdrawn.
    pub(crate) fn push_notice(&mut self, notice: Notice) -> bool {
        if self.withdrawn.contains(&notice.plugin) {
            return false;
        }
        self.notices.push_back(notice);
        while self.notices.len() > NOTICES_KEPT {
            self.notices.pop_front();
        }
        true
    }

    /// Opens a permission prompt, or says why it cannot be: nobody can answer here, too many
    /// are open, or its plugin was withdrawn (then nobody is asked: the call ends as headless).
    pub(crate) fn open_prompt(&mut self, id: String, prompt: OpenPrompt) -> Result<(), DecidedBy> {
        if !self.prompts_enabled || self.withdrawn.contains(&prompt.view.plugin) {
            Err(DecidedBy::NoPrompt)
        } else if self.prompts.len() >= PROMPTS_OPEN {
            Err(DecidedBy::Overloaded)
        } else {
            self.prompts.insert(id, prompt);
            Ok(())
        }
    }

    pub(crate) fn notices(&self) -> Vec<Notice> {
        self.notices.iter().cloned().collect()
    }
    pub(crate) fn prompt_views(&self) -> Vec<PromptView> {
        self.prompts.values().map(|p| p.view.clone()).collect()
    }
}

/// The owner of that state.
#[derive(Default)]
pub(crate) struct World {
    state: Mutex<WorldState>,
}

impl World {
    pub(crate) fn state(&self) -> MutexGuard<'_, WorldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets plugin permission prompts wait for a person (the app and `berth serve` call it).
    /// Without it, a tool whose permission resolves to `ask` ends with `action-required`.
    pub fn enable_prompts(&self) {
        self.state().prompts_enabled = true;
    }

    /// Answers an open permission prompt (from the app, the page or the CLI); the caller
    /// publishes the change.
    pub fn answer_prompt(&self, id: &str, reply: PromptReply) -> Result<(), BerthError> {
        let open = self.state().prompts.remove(id);
        let Some(open) = open else {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "permission",
                format!("no permission prompt {id} is open (it was answered, or its call ended)"),
                "refresh the list of prompts",
            ));
        };
        let _ = open.reply.send(reply);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Ten plugins each trying a 2 KB line ten times a second for an hour write at most what
    /// the log can hold beside Berth's own hour; one quiet plugin's lines still get through.
    #[test]
    fn noisy_plugins_together_stay_within_the_hourly_log_budget() {
        let start = Instant::now();
        let mut budget = LogBudget {
            bytes: (LogBudget::BURST_BYTES, start),
            ..LogBudget::default()
        };
        let (mut written, mut quiet) = (0usize, 0usize);
        for tick in 0..36_000u64 {
            let now = start + Duration::from_millis(tick * 100);
            for p in 0..10 {
                if budget.admit_at(&format!("noisy-{p}"), 2_100, now) {
                    written += 2_100;
                }
            }
            // A plugin logging a short line once a minute.
            if tick % 600 == 0 && budget.admit_at("quiet", 80, now) {
                quiet += 1;
            }
        }
        let cap = LogBudget::BURST_BYTES + 3600.0 * LogBudget::BYTES_PER_SECOND;
        assert!(written as f64 <= cap, "{written} bytes in an hour");
        // Without the shared budget each noisy plugin alone would write ~7.6 MB; the shared
        // one is spent, not starved.
        assert!(written > 6_000_000, "{written}");
        let per_plugin_only = 10 * (30 + 3600) * 2_100;
        assert!(per_plugin_only as f64 > 4.0 * cap);
        assert!(
            quiet >= 50,
            "the quiet plugin got through {quiet} of 60 times"
        );
    }

    fn notice(plugin: &str) -> Notice {
        Notice {
            at_ms: 0,
            plugin: plugin.into(),
            title: None,
            message: "hello".into(),
            variant: "info".into(),
        }
    }

    #[test]
    fn a_toast_or_prompt_still_on_its_way_from_a_withdrawn_plugin_is_not_shown() {
        let mut w = WorldState {
            prompts_enabled: true,
            ..WorldState::default()
        };
        assert!(w.push_notice(notice("p")));
        assert!(w.withdraw(&["p".to_string()]));
        assert!(w.notices().is_empty());
        // Sent just before its host stopped, arriving after the withdrawal.
        assert!(!w.push_notice(notice("p")));
        assert!(w.push_notice(notice("q")), "a neighbour's toast is shown");
        let (tx, _rx) = oneshot::channel();
        let view = PromptView {
            id: "x".into(),
            plugin: "p".into(),
            tool: "t".into(),
            call_id: "c".into(),
            permission: "edit".into(),
            patterns: vec![],
            always: vec![],
            title: String::new(),
            plugin_answer: berth_store::PermissionLevel::Ask,
            cap: berth_store::PermissionLevel::Ask,
            asked_at_ms: 0,
        };
        assert!(matches!(
            w.open_prompt(
                "x".into(),
                OpenPrompt {
                    view: view.clone(),
                    reply: tx
                }
            ),
            Err(DecidedBy::NoPrompt)
        ));
        // Loaded again: what it sends is shown again.
        w.readmit("p");
        assert!(w.push_notice(notice("p")));
        let (tx, _rx) = oneshot::channel();
        assert!(w
            .open_prompt("x".into(), OpenPrompt { view, reply: tx })
            .is_ok());
        assert_eq!(w.prompt_views().len(), 1);
    }
}
