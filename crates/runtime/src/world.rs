//! The plugin's world: everything plugin code can reach in Berth — the `client` methods Berth
//! serves (over the host socket's `up` frames and the loopback `serverUrl` alike), `ctx.ask`
//! (the `permission.ask` chain under the person's cap), login flows of `auth` hooks with the
//! credentials in the OS keyring, toasts, and the event fan-out in OpenCode's shapes
//! (deviations ledger D-016 permissions, D-017 client, D-019 events, D-020 credentials).
//!
//! Owns: the client inventory decisions (served, or a stable `unsupported` answer), permission
//! decisions, open prompts, notices, credential storage. Must not: block a caller without a
//! deadline, let a credential reach a log line, the store or an error message, or pretend a
//! write succeeded.

use berth_base::now_ms;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use berth_protocol::{CallKind, WireError};
use berth_store::{PermissionDecision, PermissionLevel};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::engine::{Berth, WeakBerth};
use crate::error::{code, BerthError};
use crate::host::{CallOptions, Upcalls};
use crate::secret::Secret;

pub use crate::compat::OPENCODE_VERSION;

/// Toasts kept for the page.
const NOTICES_KEPT: usize = 20;
/// Open permission prompts at most; more asks are refused with `overloaded`.
const PROMPTS_OPEN: usize = 32;
/// The keyring service credentials are filed under.
const KEYRING_SERVICE: &str = "berth";

/// A message a plugin addressed to the person (`client.tui.showToast`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Notice {
    pub at_ms: u64,
    pub plugin: String,
    pub title: Option<String>,
    pub message: String,
    /// `info`, `success`, `warning` or `error`.
    pub variant: String,
}

/// A permission a tool is waiting on, as the app and page show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PromptView {
    pub id: String,
    pub plugin: String,
    pub tool: String,
    pub call_id: String,
    pub permission: String,
    pub patterns: Vec<String>,
    pub always: Vec<String>,
    pub title: String,
    /// What the `permission.ask` chain answered (`ask` when no plugin answered).
    pub plugin_answer: PermissionLevel,
    pub cap: PermissionLevel,
    pub asked_at_ms: u64,
}

/// Who settled a permission (stored as its `as_str` in the decision record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecidedBy {
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
    fn as_str(self) -> &'static str {
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

struct OpenPrompt {
    view: PromptView,
    reply: oneshot::Sender<PromptReply>,
}

#[derive(Default)]
pub struct WorldState {
    notices: VecDeque<Notice>,
    prompts: BTreeMap<String, OpenPrompt>,
    /// Whether a person can answer prompts here (the app, `berth serve`); else `ask` ends the
    /// call with `action-required`.
    prompts_enabled: bool,
    /// (plugin, method) pairs already reported as unsupported: one diagnostic each.
    warned: ReportedOnce,
    /// Log lines plugins may still write now, per plugin.
    log_budget: LogBudget,
}

/// Text a plugin sends, cut to a size the page and the log can carry (D-029).
fn bounded(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    let mut out: String = text.chars().take(chars).collect();
    out.push('…');
    out
}

/// The longest toast title, toast message, log line, and name (method, service, permission)
/// a plugin can send; more is cut.
const TITLE_CHARS: usize = 200;
const MESSAGE_CHARS: usize = 500;
const LOG_CHARS: usize = 2000;
const NAME_CHARS: usize = 128;
const PATTERN_CHARS: usize = 512;
const PATTERNS_KEPT: usize = 32;
const METADATA_BYTES: usize = 16 * 1024;
/// The longest a permission prompt waits for a person (the longest tool deadline Berth sets).
const PROMPT_WAIT_MAX: Duration = Duration::from_secs(600);

/// "Reported once" pairs, bounded: past [`ReportedOnce::MAX`] distinct pairs, further ones are
/// counted together and reported once more, so no plugin can grow Berth's memory through it.
#[derive(Default)]
struct ReportedOnce {
    seen: HashSet<(String, String)>,
    overflow: u64,
}

impl ReportedOnce {
    const MAX: usize = 256;

    /// Whether this is the first report of (plugin, what).
    fn first(&mut self, plugin: &str, what: &str) -> bool {
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
struct LogBudget {
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
    fn admit(&mut self, plugin: &str, len: usize) -> bool {
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

    pub(crate) fn notices(&self) -> Vec<Notice> {
        self.notices.iter().cloned().collect()
    }
    pub(crate) fn prompt_views(&self) -> Vec<PromptView> {
        self.prompts.values().map(|p| p.view.clone()).collect()
    }
}

/// The supervisor's way into Berth; holds no strong reference.
pub(crate) struct Upcaller(pub WeakBerth);

impl Upcalls for Upcaller {
    fn call(
        &self,
        instance: String,
        method: String,
        body: Value,
    ) -> futures_util::future::BoxFuture<'static, Result<Value, WireError>> {
        let berth = self.0.upgrade();
        Box::pin(async move {
            match berth {
                Some(b) => b.upcall(&instance, &method, body).await,
                None => Err(wire(
                    code::TEMPORARILY_UNAVAILABLE,
                    "Berth is shutting down",
                )),
            }
        })
    }
}

fn wire(code: &str, message: impl Into<String>) -> WireError {
    WireError {
        code: code.to_string(),
        message: message.into(),
    }
}

fn random_id(prefix: &str) -> String {
    format!("{prefix}_{}", berth_base::random_hex(10))
}

/// What to use instead, for client groups Berth does not serve.
fn alternative(method: &str) -> &'static str {
    match method.split('.').next().unwrap_or_default() {
        "tui" => "show messages with client.tui.showToast or client.app.log; Berth's app shows both",
        "session" => "Berth runs no OpenCode sessions; inside a tool use its context (ctx.sessionID, ctx.messages)",
        "config" => "read the config with client.config.get; Berth never writes the user's OpenCode config",
        "auth" => "store credentials with client.auth.set; they go to the OS keyring",
        "provider" => "Berth runs no models; provider lists are OpenCode's",
        _ => "none yet; the plugin should treat this call as unavailable",
    }
}

/// A `client` answer in the SDK's shape: `{data}` or `{status, error}`.
fn data(v: Value) -> Value {
    json!({ "data": v })
}

fn client_error(status: u16, error: Value) -> Value {
    json!({ "status": status, "error": error })
}

impl Berth {
    /// Lets plugin permission prompts wait for a person (the app and `berth serve` call it).
    /// Without it, a tool whose permission resolves to `ask` ends with `action-required`.
    pub fn enable_prompts(&self) {
        self.world().prompts_enabled = true;
    }

    /// Answers an open permission prompt (from the app, the page or the CLI).
    pub fn answer_prompt(&self, id: &str, reply: PromptReply) -> Result<(), BerthError> {
        let open = self.world().prompts.remove(id);
        let Some(open) = open else {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "permission",
                format!("no permission prompt {id} is open (it was answered, or its call ended)"),
                "refresh the list of prompts",
            ));
        };
        let _ = open.reply.send(reply);
        self.publish_world();
        Ok(())
    }

    /// One call from plugin code (an `up` frame, or a `serverUrl` request).
    pub(crate) async fn upcall(
        &self,
        instance: &str,
        method: &str,
        body: Value,
    ) -> Result<Value, WireError> {
        match method {
            "permission.ask" => self.permission_ask(instance, body).await,
            m if m.starts_with("client.") => Ok(self.client_call(instance, &m[7..], body)),
            other => Err(wire(
                code::UNSUPPORTED,
                format!("{other} is not a call Berth knows"),
            )),
        }
    }

    /// A `client.<method>(options)` call: served, or a stable `unsupported` answer naming the
    /// method, the OpenCode version, the plugin and an alternative. Never throws, hangs or
    /// fakes a write.
    fn client_call(&self, instance: &str, method: &str, opts: Value) -> Value {
        let path_id = opts["path"]["id"].as_str().map(str::to_string);
        let not_found = |what: &str, id: &str| {
            client_error(
                404,
                json!({ "name": "NotFoundError", "data": { "message": format!("{what} not found: {id} (Berth runs no OpenCode sessions)") } }),
            )
        };
        match method {
            "app.log" => {
                let b = &opts["body"];
                let service = bounded(b["service"].as_str().unwrap_or_default(), NAME_CHARS);
                let message = bounded(b["message"].as_str().unwrap_or_default(), LOG_CHARS);
                // One plugin's flood cannot rotate Berth's own lines out of the log.
                let len = service.len() + message.len() + instance.len();
                if !self.world().log_budget.admit(instance, len) {
                    return data(json!(true));
                }
                let message = if service.is_empty() {
                    message
                } else {
                    format!("[{service}] {message}")
                };
                match b["level"].as_str().unwrap_or("info") {
                    "error" => tracing::error!(plugin = %instance, "{message}"),
                    "warn" => tracing::warn!(plugin = %instance, "{message}"),
                    "debug" => tracing::debug!(plugin = %instance, "{message}"),
                    _ => tracing::info!(plugin = %instance, "{message}"),
                }
                data(json!(true))
            }
            "tui.showToast" => {
                let b = &opts["body"];
                let Some(message) = b["message"].as_str() else {
                    return client_error(
                        400,
                        json!({ "name": "BadRequest", "data": { "message": "body.message is required" } }),
                    );
                };
                let variant = b["variant"]
                    .as_str()
                    .filter(|v| ["info", "success", "warning", "error"].contains(v))
                    .unwrap_or("info");
                let notice = Notice {
                    at_ms: now_ms(),
                    plugin: instance.to_string(),
                    title: b["title"].as_str().map(|t| bounded(t, TITLE_CHARS)),
                    message: bounded(message, MESSAGE_CHARS),
                    variant: variant.to_string(),
                };
                {
                    let mut w = self.world();
                    w.notices.push_back(notice.clone());
                    while w.notices.len() > NOTICES_KEPT {
                        w.notices.pop_front();
                    }
                }
                self.publish_world();
                self.emit_event(
                    "tui.toast.show",
                    json!({ "title": notice.title, "message": notice.message, "variant": notice.variant }),
                );
                data(json!(true))
            }
            "config.get" => data(
                self.effective_config()
                    .unwrap_or_else(|| self.fresh_scan().graph.merged),
            ),
            "path.get" => {
                let st = self.status();
                data(json!({
                    "state": st.berth.data_dir,
                    "config": self.options().env.global_config_dir(),
                    "worktree": st.project.worktree,
                    "directory": st.project.directory,
                }))
            }
            // The same project the plugin's factory was given (OpenCode's id rules).
            "project.current" => data(
                self.catalog()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .project
                    .as_ref()
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| crate::catalog::opencode_project(&self.status().project)),
            ),
            "tool.ids" => data(json!(self
                .status()
                .tools
                .iter()
                .map(|t| t.name.clone())
                .collect::<Vec<_>>())),
            "auth.set" => {
                let Some(id) = path_id else {
                    return client_error(
                        400,
                        json!({ "name": "BadRequest", "data": { "message": "path.id (the provider) is required" } }),
                    );
                };
                let auth = &opts["body"];
                if !matches!(auth["type"].as_str(), Some("oauth" | "api" | "wellknown")) {
                    return client_error(
                        400,
                        json!({ "name": "BadRequest", "data": { "message": "body must be an Auth object: {type: \"oauth\"|\"api\"|\"wellknown\", …}" } }),
                    );
                }
                let secret = Secret::new(auth.to_string());
                match store_credential(self.domain(), &id, &secret) {
                    Ok(()) => {
                        tracing::info!(plugin = %instance, provider = %id, "a plugin stored a credential in the OS keyring");
                        data(json!(true))
                    }
                    Err(e) => client_error(
                        500,
                        json!({ "name": "UnknownError", "data": { "code": e.code, "message": e.message } }),
                    ),
                }
            }
            // Berth runs no OpenCode sessions: the lists are empty, a named session is unknown.
            "session.list" => data(json!([])),
            "session.status" => data(json!({})),
            "session.get" | "session.messages" | "session.todo" | "session.children" => {
                not_found("Session", path_id.as_deref().unwrap_or("?"))
            }
            other => {
                let other = &bounded(other, NAME_CHARS);
                if self.world().warned.first(instance, other) {
                    tracing::warn!(plugin = %instance, method = %other, "a plugin called a client method Berth does not support");
                }
                client_error(
                    501,
                    json!({
                        "name": "UnsupportedError",
                        "code": code::UNSUPPORTED,
                        "method": other,
                        "opencodeVersion": OPENCODE_VERSION,
                        "plugin": instance,
                        "message": format!("client.{other} (OpenCode {OPENCODE_VERSION} API) is not supported by Berth; plugin {instance}"),
                        "alternative": alternative(other),
                    }),
                )
            }
        }
    }

    /// `ctx.ask()` from a running tool: the `permission.ask` chain answers (no answer = `ask`),
    /// the person's cap limits it, a standing rule or the person decides what is left. Every
    /// decision is recorded with the plugin's answer beside the final one.
    async fn permission_ask(&self, instance: &str, body: Value) -> Result<Value, WireError> {
        let req = &body["request"];
        let permission = req["permission"]
            .as_str()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                wire(
                    code::INVALID_ARGUMENTS,
                    "ctx.ask needs { permission, patterns }",
                )
            })?;
        let permission = bounded(permission, NAME_CHARS);
        // What a prompt shows is bounded: a few dozen patterns of a readable length.
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(|s| bounded(s, PATTERN_CHARS)))
                .take(PATTERNS_KEPT)
                .collect()
        };
        let patterns = strings(&req["patterns"]);
        let always = strings(&req["always"]);
        let tool = bounded(body["tool"].as_str().unwrap_or_default(), NAME_CHARS);
        let mut req = req.clone();
        if req["metadata"].to_string().len() > METADATA_BYTES {
            req["metadata"] = json!({ "truncated": "the plugin's metadata was over 16 KiB" });
        }
        let req = &req;
        let call_id = bounded(body["callID"].as_str().unwrap_or_default(), NAME_CHARS);
        let session_id = bounded(body["sessionID"].as_str().unwrap_or("berth"), NAME_CHARS);
        // However long a plugin says its call may wait, a person is asked for at most this long.
        let deadline = Duration::from_millis(
            body["deadlineMs"]
                .as_u64()
                .unwrap_or(30_000)
                .min(PROMPT_WAIT_MAX.as_millis() as u64),
        );
        let id = random_id("per");
        let title = format!(
            "{tool} asks for {permission}{}",
            if patterns.is_empty() {
                String::new()
            } else {
                format!(": {}", patterns.join(", "))
            }
        );
        // The v1 `Permission` the hook's type promises.
        let info = json!({
            "id": id,
            "type": permission,
            "pattern": patterns,
            "sessionID": session_id,
            "messageID": body["messageID"],
            "callID": call_id,
            "title": title,
            "metadata": req["metadata"].clone(),
            "time": { "created": now_ms() },
        });
        let chain = self
            .run_chain_full(
                "permission.ask",
                info,
                json!({ "status": "ask" }),
                Some(Duration::from_secs(10)),
            )
            .await;
        let (plugin_answer, answered_by) = match chain {
            Ok(v) => {
                let answer = v["output"]["status"]
                    .as_str()
                    .and_then(PermissionLevel::parse)
                    .unwrap_or_else(|| {
                        tracing::warn!("a permission.ask hook left a status that is not allow/ask/deny; treated as ask");
                        PermissionLevel::Ask
                    });
                (answer, v["answeredBy"].as_str().map(str::to_string))
            }
            // A broken hook cannot grant anything: its failure is logged and the answer is `ask`.
            Err(e) => {
                tracing::warn!(
                    plugin = e.plugin.as_deref().unwrap_or(""),
                    "permission.ask hook failed: {}",
                    e.message
                );
                (PermissionLevel::Ask, None)
            }
        };
        let (cap, rules) = self
            .with_store(|s| {
                Ok::<_, berth_store::StoreError>((
                    s.permission_cap(&permission)?,
                    s.permission_rules()?,
                ))
            })
            .map_err(|e| wire(code::TEMPORARILY_UNAVAILABLE, e.to_string()))?;
        let limited = plugin_answer.min(cap);
        let policy_limited = limited < plugin_answer;
        // The person's own rules, and those this plugin earned with "Always": never another
        // plugin's.
        let rule_for = |p: &String, action: PermissionLevel| {
            rules.iter().any(|r| {
                (r.source_id == berth_store::EVERY_PLUGIN || r.source_id == instance)
                    && r.permission == permission
                    && r.action == action
                    && (r.pattern == "*" || &r.pattern == p)
            })
        };
        let rule_allows =
            !patterns.is_empty() && patterns.iter().all(|p| rule_for(p, PermissionLevel::Allow));
        // The person's standing refusal wins over any plugin answer.
        let rule_denies = patterns.iter().any(|p| rule_for(p, PermissionLevel::Deny))
            || rule_for(&"*".to_string(), PermissionLevel::Deny);
        let (mut final_answer, mut decided_by) = match limited {
            _ if rule_denies => (PermissionLevel::Deny, DecidedBy::Rule),
            // A deny below the plugin's own answer is the cap's.
            PermissionLevel::Deny if policy_limited => (PermissionLevel::Deny, DecidedBy::Cap),
            PermissionLevel::Deny => (PermissionLevel::Deny, DecidedBy::Plugin),
            PermissionLevel::Allow => (PermissionLevel::Allow, DecidedBy::Plugin),
            PermissionLevel::Ask if rule_allows => (PermissionLevel::Allow, DecidedBy::Rule),
            PermissionLevel::Ask => (PermissionLevel::Ask, DecidedBy::Person),
        };
        if final_answer == PermissionLevel::Ask {
            let view = PromptView {
                id: id.clone(),
                plugin: instance.to_string(),
                tool: tool.clone(),
                call_id: call_id.clone(),
                permission: permission.clone(),
                patterns: patterns.clone(),
                always: always.clone(),
                title: title.clone(),
                plugin_answer,
                cap,
                asked_at_ms: now_ms(),
            };
            let (tx, rx) = oneshot::channel();
            let opened = {
                let mut w = self.world();
                if !w.prompts_enabled {
                    Err(DecidedBy::NoPrompt)
                } else if w.prompts.len() >= PROMPTS_OPEN {
                    Err(DecidedBy::Overloaded)
                } else {
                    w.prompts.insert(id.clone(), OpenPrompt { view, reply: tx });
                    Ok(())
                }
            };
            match opened {
                Err(why) => decided_by = why,
                Ok(()) => {
                    self.publish_world();
                    self.emit_event(
                        "permission.asked",
                        json!({ "id": id, "sessionID": session_id, "permission": permission, "patterns": patterns, "metadata": req["metadata"], "always": always, "tool": { "messageID": body["messageID"], "callID": call_id } }),
                    );
                    let reply = tokio::time::timeout(deadline, rx).await;
                    let removed = self.world().prompts.remove(&id).is_some();
                    if removed {
                        self.publish_world();
                    }
                    let reply = match reply {
                        Ok(Ok(r)) => Some(r),
                        _ => None,
                    };
                    match reply {
                        Some(PromptReply::Once) => final_answer = PermissionLevel::Allow,
                        Some(PromptReply::Always) => {
                            final_answer = PermissionLevel::Allow;
                            let targets = if always.is_empty() {
                                &patterns
                            } else {
                                &always
                            };
                            self.with_store(|s| {
                                for p in targets {
                                    let _ = s.set_permission_rule(
                                        instance,
                                        &permission,
                                        p,
                                        PermissionLevel::Allow,
                                    );
                                }
                            });
                        }
                        Some(PromptReply::Reject) => final_answer = PermissionLevel::Deny,
                        None => decided_by = DecidedBy::Timeout,
                    }
                    self.emit_event(
                        "permission.replied",
                        json!({ "sessionID": session_id, "requestID": id, "reply": match reply { Some(PromptReply::Once) => "once", Some(PromptReply::Always) => "always", _ => "reject" } }),
                    );
                }
            }
        }
        let decision = PermissionDecision {
            request_id: id.clone(),
            source_id: instance.to_string(),
            tool: tool.clone(),
            call_id,
            permission: permission.clone(),
            patterns,
            plugin_answer,
            answered_by: answered_by.clone(),
            cap,
            final_answer,
            decided_by: decided_by.as_str().to_string(),
            policy_limited,
            decided_at_ms: now_ms() as i64,
        };
        if let Err(e) = self.with_store(|s| s.record_permission_decision(&decision)) {
            tracing::warn!("could not record a permission decision: {e}");
        }
        let by = answered_by
            .map(|p| format!(" (answered by {p})"))
            .unwrap_or_default();
        match (final_answer, decided_by) {
            (PermissionLevel::Allow, _) => Ok(json!({ "status": "allow", "requestID": id })),
            (PermissionLevel::Deny, DecidedBy::Cap) => Err(wire(
                code::POLICY_LIMITED,
                format!("{tool}: permission {permission} is limited to {} by your setting; the plugin answered {}{by}", cap.as_str(), plugin_answer.as_str()),
            )),
            (PermissionLevel::Deny, DecidedBy::Rule) => Err(wire(
                code::CANCELLED,
                format!("{tool}: permission {permission} is refused by your standing answer (`berth permissions`)"),
            )),
            (PermissionLevel::Deny, DecidedBy::Plugin) => Err(wire(
                code::CANCELLED,
                format!("{tool}: permission {permission} was denied by a permission.ask hook{by}"),
            )),
            (PermissionLevel::Deny, _) => Err(wire(
                code::CANCELLED,
                format!("{tool}: permission {permission} was rejected by the person"),
            )),
            (_, DecidedBy::Overloaded) => Err(wire(
                code::OVERLOADED,
                format!("{tool}: too many permission prompts are open; {permission} was not asked"),
            )),
            (_, DecidedBy::Timeout) => Err(wire(
                code::ACTION_REQUIRED,
                format!("{tool}: permission {permission} was not answered before the call's deadline"),
            )),
            _ => Err(wire(
                code::ACTION_REQUIRED,
                format!(
                    "{tool} needs permission {permission}{}{}; answer it in the Berth app, or allow it with `berth permissions allow {permission} <pattern>`{}",
                    if decision.patterns.is_empty() { String::new() } else { format!(" for {}", decision.patterns.join(", ")) },
                    by,
                    if policy_limited { format!(" (the plugin answered allow; your cap for {permission} is ask)") } else { String::new() },
                ),
            )),
        }
    }

    /// Sends one Berth event to the plugins' `event` hooks in OpenCode's shape
    /// (`{event: {id, type, properties}}`), not awaited; failures are isolated in the host.
    pub fn emit_event(&self, kind: &str, properties: Value) {
        let wanted = self
            .catalog()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .with_hook("event");
        if wanted.is_empty() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let berth = self.clone();
        let input =
            json!({ "event": { "id": random_id("evt"), "type": kind, "properties": properties } });
        rt.spawn(async move {
            if let Err(e) = berth
                .run_chain_full("event", input, Value::Null, Some(Duration::from_secs(5)))
                .await
            {
                tracing::debug!("event delivery failed: {}", e.message);
            }
        });
    }

    /// The login methods of every active plugin's `auth` hook, by provider (the last plugin
    /// registering a provider wins, as `opencode auth login` picks it).
    pub fn auth_providers(&self) -> Vec<AuthProvider> {
        let cat = self.catalog().lock().unwrap_or_else(|p| p.into_inner());
        let mut by: BTreeMap<String, AuthProvider> = BTreeMap::new();
        for owner in &cat.hooks {
            for a in &owner.auth {
                let Some(provider) = a["provider"].as_str() else {
                    continue;
                };
                by.insert(
                    provider.to_string(),
                    AuthProvider {
                        provider: provider.to_string(),
                        plugin: owner.source_id.clone(),
                        methods: a["methods"].as_array().cloned().unwrap_or_default(),
                        stored: false,
                    },
                );
            }
        }
        let mut out: Vec<AuthProvider> = by.into_values().collect();
        for p in &mut out {
            p.stored = credential_stored(self.domain(), &p.provider);
        }
        out
    }

    /// Runs one login method of a plugin's `auth` hook and files the credential in the OS
    /// keyring. `inputs` answer the method's prompts; `ask_secret` is called when the person
    /// must type an API key or paste an OAuth code (with the URL and instructions to show).
    /// The result never contains the credential.
    pub async fn auth_login(
        &self,
        provider: &str,
        method: usize,
        inputs: serde_json::Map<String, Value>,
        ask_secret: impl FnOnce(&AuthPrompt) -> Option<Secret>,
    ) -> Result<AuthOutcome, BerthError> {
        self.activate().await;
        let Some(p) = self
            .auth_providers()
            .into_iter()
            .find(|p| p.provider == provider)
        else {
            return Err(BerthError::new(
                code::UNSUPPORTED,
                "auth",
                format!("no active plugin registers a login for provider `{provider}`"),
                "list providers with `berth auth`; the plugin must be approved and active",
            ));
        };
        let Some(m) = p.methods.get(method) else {
            return Err(BerthError::new(
                code::INVALID_ARGUMENTS,
                "auth",
                format!(
                    "provider `{provider}` has {} login methods; there is no method {method}",
                    p.methods.len()
                ),
                "pick one of the methods `berth auth` lists",
            )
            .for_plugin(p.plugin.clone()));
        };
        let backend = crate::approval::backend_for(&self.runtimes());
        // The login runs in a host of its own with only this plugin loaded: the code the
        // person pastes and the tokens it turns into cross no other plugin's process (D-028).
        let fresh = self.fresh_scan();
        let source = fresh
            .sources
            .iter()
            .find(|s| s.id == p.plugin)
            .filter(|s| {
                self.with_store(|st| {
                    crate::approval::gate(st, s, self.domain(), backend, &self.project_key())
                })
                .is_ok()
            })
            .ok_or_else(|| {
                BerthError::new(
                    code::ACTION_REQUIRED,
                    "auth",
                    format!("{} is no longer approved as it is now", p.plugin),
                    "review it and approve it again, then log in",
                )
                .for_plugin(p.plugin.clone())
            })?;
        let host = RetireWhenDone(
            self.supervisor()
                .await?
                .dedicated(backend, &p.plugin)
                .await?,
        );
        self.load_plugin(&host.0, source, backend)
            .await
            .map_err(|e| e.for_plugin(p.plugin.clone()))?;
        host.0
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(p.plugin.clone());
        let host = &host.0;
        let long = CallOptions {
            timeout: Duration::from_secs(300),
            ..CallOptions::default()
        };
        let fail = |e: crate::host::CallError| {
            BerthError::new(
                e.code,
                "auth",
                e.message,
                "try the login again; if it keeps failing, report it to the plugin's author",
            )
            .for_plugin(p.plugin.clone())
        };
        let started = host
            .call(
                &p.plugin,
                CallKind::AuthAuthorize,
                json!({ "provider": provider, "method": method, "inputs": inputs }),
                long.clone(),
            )
            .await
            .map_err(fail)?;
        let label = m["label"].as_str().unwrap_or_default().to_string();
        let result = match started["kind"].as_str() {
            Some("key-needed") => {
                let prompt = AuthPrompt {
                    provider: provider.to_string(),
                    label: label.clone(),
                    url: None,
                    instructions: "enter the API key".into(),
                    wants: "key",
                };
                let key = ask_secret(&prompt).ok_or_else(|| {
                    BerthError::new(
                        code::ACTION_REQUIRED,
                        "auth",
                        "no API key was given",
                        "run the login again and type the key",
                    )
                })?;
                Ok(Secret::new(
                    json!({ "type": "api", "key": key.expose() }).to_string(),
                ))
            }
            Some("result") => auth_result_to_secret(&started["result"]),
            Some("oauth") => {
                let flow = started["flow"].as_str().unwrap_or_default().to_string();
                let code_input = if started["method"] == "code" {
                    let prompt = AuthPrompt {
                        provider: provider.to_string(),
                        label: label.clone(),
                        url: started["url"].as_str().map(str::to_string),
                        instructions: started["instructions"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        wants: "code",
                    };
                    Some(ask_secret(&prompt).ok_or_else(|| {
                        BerthError::new(
                            code::ACTION_REQUIRED,
                            "auth",
                            "no authorization code was given",
                            "open the URL, then run the login again and paste the code",
                        )
                    })?)
                } else {
                    None
                };
                let done = host
                    .call(
                        &p.plugin,
                        CallKind::AuthCallback,
                        json!({ "flow": flow, "code": code_input.as_ref().map(|c| c.expose()) }),
                        long,
                    )
                    .await
                    .map_err(fail)?;
                auth_result_to_secret(&done["result"])
            }
            _ => Err(
                "the plugin's login method answered something Berth does not understand"
                    .to_string(),
            ),
        };
        let (secret, target) = match result {
            Ok(s) => (
                s,
                started["result"]["provider"]
                    .as_str()
                    .unwrap_or(provider)
                    .to_string(),
            ),
            Err(why) => {
                return Err(BerthError::new(
                    code::ACTION_REQUIRED,
                    "auth",
                    format!("the login for `{provider}` did not succeed: {why}"),
                    "try again",
                )
                .for_plugin(p.plugin.clone()))
            }
        };
        store_credential(self.domain(), &target, &secret)?;
        tracing::info!(plugin = %p.plugin, provider = %target, "credential stored in the OS keyring");
        Ok(AuthOutcome {
            provider: target,
            plugin: p.plugin,
            method: label,
            stored_in: "os-keyring",
        })
    }

    /// Removes the stored credential of `provider`. Returns whether there was one.
    pub fn auth_logout(&self, provider: &str) -> Result<bool, BerthError> {
        match credential_entry(self.domain(), provider)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(keyring_error(e)),
        }
    }
}

/// An OpenCode auth result (`{type:"success", key|access…}`) as the stored `Auth` JSON.
/// A host started for one login, retired however the login ends.
struct RetireWhenDone(std::sync::Arc<crate::host::Host>);

impl Drop for RetireWhenDone {
    fn drop(&mut self) {
        self.0.retire("the login it was started for ended");
    }
}

fn auth_result_to_secret(r: &Value) -> Result<Secret, String> {
    if r["type"] != "success" {
        return Err("the plugin reported the login as failed".into());
    }
    let auth = if let Some(key) = r["key"].as_str() {
        json!({ "type": "api", "key": key, "metadata": r["metadata"] })
    } else if r["access"].is_string() {
        json!({ "type": "oauth", "access": r["access"], "refresh": r["refresh"], "expires": r["expires"], "accountId": r["accountId"], "enterpriseUrl": r["enterpriseUrl"] })
    } else {
        return Err("the plugin's success carried neither a key nor tokens".into());
    };
    Ok(Secret::new(auth.to_string()))
}

/// What the person is asked during a login.
#[derive(Debug, Clone, Serialize)]
pub struct AuthPrompt {
    pub provider: String,
    pub label: String,
    pub url: Option<String>,
    pub instructions: String,
    /// `key` or `code`.
    pub wants: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuthProvider {
    pub provider: String,
    pub plugin: String,
    /// `{type, label, prompts?}` as the plugin declared them.
    pub methods: Vec<Value>,
    /// A credential for it is in the OS keyring.
    pub stored: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuthOutcome {
    pub provider: String,
    pub plugin: String,
    pub method: String,
    pub stored_in: &'static str,
}

fn credential_entry(domain: &str, provider: &str) -> Result<keyring::Entry, BerthError> {
    keyring::Entry::new(KEYRING_SERVICE, &format!("{domain}/auth/{provider}"))
        .map_err(keyring_error)
}

fn keyring_error(e: keyring::Error) -> BerthError {
    BerthError::new(
        code::TEMPORARILY_UNAVAILABLE,
        "keyring",
        format!("the OS keyring refused the operation: {e}"),
        "unlock the OS keyring (on Linux without a desktop session: run Berth under `keyctl session -`) and try again",
    )
}

fn store_credential(domain: &str, provider: &str, secret: &Secret) -> Result<(), BerthError> {
    credential_entry(domain, provider)?
        .set_password(secret.expose())
        .map_err(keyring_error)
}

fn credential_stored(domain: &str, provider: &str) -> bool {
    credential_entry(domain, provider)
        .ok()
        .is_some_and(|e| e.get_password().map(Secret::new).is_ok())
}

impl Berth {
    /// The stored credential of `provider` (the `Auth` JSON), for the plugin's `auth.loader`
    /// and for tests. Never log it.
    pub fn stored_credential(&self, provider: &str) -> Result<Option<Secret>, BerthError> {
        match credential_entry(self.domain(), provider)?.get_password() {
            Ok(p) => Ok(Some(Secret::new(p))),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(keyring_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LogBudget;
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
}
