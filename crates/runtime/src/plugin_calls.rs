//! The answers to calls plugin code makes into Berth — over the host socket's `up` frames and
//! the loopback `serverUrl` alike: the `client` methods Berth serves (or a stable
//! `unsupported` answer naming the method, the OpenCode version and an alternative), and
//! `ctx.ask` (the `permission.ask` chain under the person's cap, standing answers, a prompt
//! that never blocks anything but its call). Deviations ledger D-016 permissions, D-017
//! client, D-019 events.
//!
//! Owns: those answers and the permission decisions they record. Must not: block a caller
//! without a deadline, let a credential reach a log line, the store or an error message, or
//! pretend a write succeeded.

use std::sync::{Arc, Weak};
use std::time::Duration;

use berth_base::now_ms;
use berth_protocol::WireError;
use berth_store::{PermissionDecision, PermissionLevel};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::auth::store_credential;
use crate::catalog::Catalog;
use crate::compat::OPENCODE_VERSION;
use crate::core::Core;
use crate::error::code;
use crate::host::Upcalls;
use crate::policy::Category;
use crate::secret::Secret;
use crate::world::*;

/// The owner: what it answers with comes from the shared core, the world and the catalog.
pub(crate) struct PluginCalls {
    pub(crate) core: Arc<Core>,
    pub(crate) world: Arc<World>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) policy: Arc<crate::governor::Governor>,
}

/// The supervisor's way into Berth; holds no strong reference.
pub(crate) struct Upcaller(pub Weak<PluginCalls>);

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

impl PluginCalls {
    /// A call through a capped category (what a plugin puts before the person, credentials),
    /// checked against the policy in force at the moment of the call: the refusal, `None`
    /// when it may go on. A refusal touches only this call, and the source shows it.
    fn capped(&self, instance: &str, method: &str) -> Option<Value> {
        let category = match method {
            m if m.starts_with("tui.") => Category::Ui,
            "auth.set" => Category::Credentials,
            _ => return None,
        };
        let limit = self
            .policy
            .current()
            .admits(instance, &format!("call:{method}"), category)
            .err()?;
        let message = format!(
            "client.{method} is limited by policy: {} is `{}` ({} layer){}",
            category.key(),
            limit.cap,
            serde_json::to_value(limit.layer)
                .ok()?
                .as_str()
                .unwrap_or_default(),
            if limit.cap == "review" {
                "; allow it for this plugin on the status page"
            } else {
                ""
            },
        );
        if self.catalog.state().note_limited(instance, limit) {
            self.core.rescan();
        }
        Some(client_error(
            403,
            json!({ "name": "PolicyLimited", "data": { "code": code::POLICY_LIMITED, "message": message } }),
        ))
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
            m if m.starts_with("storage.") => {
                crate::plugin_storage::answer(&self.core, instance, &m[8..], &body)
            }
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
        if let Some(refused) = self.capped(instance, method) {
            return refused;
        }
        match method {
            "app.log" => {
                let b = &opts["body"];
                let service = bounded(b["service"].as_str().unwrap_or_default(), NAME_CHARS);
                let message = bounded(b["message"].as_str().unwrap_or_default(), LOG_CHARS);
                // One plugin's flood cannot rotate Berth's own lines out of the log.
                let len = service.len() + message.len() + instance.len();
                if !self.world.state().log_budget.admit(instance, len) {
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
                if !self.world.state().push_notice(notice.clone()) {
                    return data(json!(true));
                }
                self.core.publish_world();
                self.catalog.emit_event(
                    "tui.toast.show",
                    json!({ "title": notice.title, "message": notice.message, "variant": notice.variant }),
                );
                data(json!(true))
            }
            "config.get" => data(
                self.catalog
                    .effective_config()
                    .unwrap_or_else(|| self.core.fresh_scan().graph.merged),
            ),
            "path.get" => {
                let st = self.core.status();
                data(json!({
                    "state": st.berth.data_dir,
                    "config": self.core.options().env.global_config_dir(),
                    "worktree": st.project.worktree,
                    "directory": st.project.directory,
                }))
            }
            // The same project the plugin's factory was given (OpenCode's id rules).
            "project.current" => {
                data(self.core.project.cached().unwrap_or_else(|| {
                    crate::project::opencode_project(&self.core.status().project)
                }))
            }
            "tool.ids" => data(json!(self
                .core
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
                match store_credential(self.core.domain(), &id, &secret) {
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
                if self.world.state().warned.first(instance, other) {
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
            .catalog
            .run_chain_full(
                "permission.ask",
                info,
                json!({ "status": "ask" }),
                Some(self.policy.current().budget("budget.client")),
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
            .core
            .with_store(|s| {
                Ok::<_, berth_store::StoreError>((
                    s.permission_cap(&permission)?,
                    s.permission_rules()?,
                ))
            })
            .map_err(|e| wire(code::TEMPORARILY_UNAVAILABLE, e.to_string()))?;
        // The organisation's cap bounds the person's (the effective policy has both).
        let entry = self
            .policy
            .current()
            .entry(&format!("permission.{permission}"))
            .cloned();
        let cap_by = match entry.as_ref().map(|e| e.layer) {
            Some(crate::policy::Layer::Organisation) => "your organisation's policy",
            _ => "your setting",
        };
        let cap = entry
            .and_then(|e| e.value.as_str().and_then(PermissionLevel::parse))
            .map_or(cap, |bound| bound.min(cap));
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
            let opened = self
                .world
                .state()
                .open_prompt(id.clone(), OpenPrompt { view, reply: tx });
            match opened {
                Err(why) => decided_by = why,
                Ok(()) => {
                    self.core.publish_world();
                    self.catalog.emit_event(
                        "permission.asked",
                        json!({ "id": id, "sessionID": session_id, "permission": permission, "patterns": patterns, "metadata": req["metadata"], "always": always, "tool": { "messageID": body["messageID"], "callID": call_id } }),
                    );
                    let reply = tokio::time::timeout(deadline, rx).await;
                    let removed = self.world.state().prompts.remove(&id).is_some();
                    if removed {
                        self.core.publish_world();
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
                            self.core.with_store(|s| {
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
                    self.catalog.emit_event(
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
        if let Err(e) = self
            .core
            .with_store(|s| s.record_permission_decision(&decision))
        {
            tracing::warn!("could not record a permission decision: {e}");
        }
        let by = answered_by
            .map(|p| format!(" (answered by {p})"))
            .unwrap_or_default();
        match (final_answer, decided_by) {
            (PermissionLevel::Allow, _) => Ok(json!({ "status": "allow", "requestID": id })),
            (PermissionLevel::Deny, DecidedBy::Cap) => Err(wire(
                code::POLICY_LIMITED,
                format!("{tool}: permission {permission} is limited to {} by {cap_by}; the plugin answered {}{by}", cap.as_str(), plugin_answer.as_str()),
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
}
