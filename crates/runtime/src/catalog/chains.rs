//! Hook chains in OpenCode's order: one shared output passed host by host (plugins with a
//! host of their own keep their place in the chain). A plugin's hook paused for failing again
//! and again (`streaks`) is left out of the chain; the others run as before.

use std::time::Duration;

use berth_protocol::CallKind;
use serde_json::Value;

use crate::error::BerthError;
use crate::host::{CallOptions, HostKey};

use super::*;

impl Catalog {
    /// Runs one hook chain as OpenCode would (active plugins in load order, one shared output)
    /// and returns the final output.
    pub async fn run_hook(
        &self,
        name: &str,
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        let act = self.activate().await;
        if let Some(p) = act.problems.first() {
            tracing::debug!(plugin = p.plugin.as_deref().unwrap_or(""), "{}", p.message);
        }
        self.run_chain(name, input, output, timeout).await
    }

    /// One chain over the plugins active now, without activating first (the hot path the
    /// benchmark measures); the final output.
    pub async fn run_active_hook(
        &self,
        name: &str,
        input: Value,
        output: Value,
    ) -> Result<Value, BerthError> {
        self.run_chain(name, input, output, None).await
    }

    /// One chain over the plugins active now (no activation first); the final output.
    pub(super) async fn run_chain(
        &self,
        name: &str,
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        Ok(self.run_chain_full(name, input, output, timeout).await?["output"].take())
    }

    /// One chain over the plugins active now: the host's whole answer (`output`, `steps`, and
    /// for `permission.ask` the plugin that set the status, `answeredBy`).
    pub(crate) async fn run_chain_full(
        &self,
        name: &str,
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        let owners = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .with_hook_in(name);
        self.run_segments(name, &owners, input, output, timeout)
            .await
    }

    /// One chain over `owners` in their order, on one shared output: consecutive plugins of
    /// one host run in one call there, and the output passes on to the next host's plugins
    /// (plugins with a host of their own sit in the chain where OpenCode's order puts them).
    /// The answer is the host's shape: `output`, every `steps`, and `answeredBy`.
    pub(super) async fn run_segments(
        &self,
        name: &str,
        owners: &[(String, HostKey)],
        input: Value,
        output: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, BerthError> {
        let mut output = output;
        let mut steps: Vec<Value> = Vec::new();
        let mut answered_by = Value::Null;
        let capability = format!("hook {name}");
        let kept: Vec<(String, HostKey)>;
        let owners = if self.streaks.any_paused() {
            kept = owners
                .iter()
                .filter(|(p, _)| !self.streaks.is_paused(p, &capability))
                .cloned()
                .collect();
            &kept[..]
        } else {
            owners
        };
        if owners.is_empty() {
            return Ok(serde_json::json!({ "output": output, "steps": [] }));
        }
        let sup = self.core.supervisor().await?;
        let mut i = 0;
        let mut first = true;
        while i < owners.len() {
            let key = &owners[i].1;
            let mut instances = Vec::new();
            while i < owners.len() && &owners[i].1 == key {
                instances.push(owners[i].0.clone());
                i += 1;
            }
            let host = sup.host_for(key).await?;
            // The policy's budgets: the whole chain (unless the caller gave one), and each
            // plugin's hook (`tool.execute.after` has its own).
            let policy = self.policy.current();
            let opts = CallOptions {
                timeout: timeout.unwrap_or_else(|| policy.budget("budget.chain")),
                ..CallOptions::default()
            };
            let per_hook = policy.budget(if name == "tool.execute.after" {
                "budget.tool-after"
            } else {
                "budget.hook"
            });
            let body = serde_json::json!({ "name": name, "instances": instances, "input": input, "output": output, "budgetMs": per_hook.as_millis() as u64 });
            let mut v = host
                .call("hooks", CallKind::HookChain, body, opts)
                .await
                .map_err(|e| {
                    let plugin = streaks::blamed(&instances, name, &e.message);
                    let mut err = BerthError::new(
                        e.code,
                        name,
                        e.message,
                        "fix or disable the plugin named; OpenCode fails this operation the same way",
                    );
                    if let Some(p) = plugin.as_ref().filter(|_| streaks::counts_for_a_hook(name, err.code)) {
                        self.note_failure(p, &capability, err.code, &err.message);
                    }
                    err.plugin = plugin;
                    err
                })?;
            for p in &instances {
                self.streaks.succeeded(p, &capability);
            }
            if i == owners.len() && first {
                // One host ran the whole chain (the usual case): its answer as it is.
                return Ok(v);
            }
            first = false;
            output = v["output"].take();
            if let Some(s) = v["steps"].as_array_mut() {
                steps.append(s);
            }
            if !v["answeredBy"].is_null() {
                answered_by = v["answeredBy"].take();
            }
        }
        Ok(serde_json::json!({ "output": output, "steps": steps, "answeredBy": answered_by }))
    }
}
