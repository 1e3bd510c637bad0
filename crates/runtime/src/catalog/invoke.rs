//! One tool call end to end: idempotency, the receipt before the call, the host, the hooks
//! around it (across hosts when they live elsewhere), the final receipt.

use std::time::Duration;

use berth_protocol::CallKind;
use berth_store::{Finish, Receipt, ReceiptStatus};
use serde_json::Value;

use crate::error::{code, BerthError};
use crate::host::{CallOptions, HostKey};
use berth_base::now_ms;

use super::*;

/// What the caller of one tool call holds on to (`Catalog::invoke`).
#[derive(Default)]
pub struct CallControl {
    /// Notified once: the call is cancelled (an MCP `notifications/cancelled`, Ctrl-C).
    pub cancel: std::sync::Arc<tokio::sync::Notify>,
    /// Receives the tool's `ctx.metadata()` reports (title, metadata) while it runs.
    pub metadata: Option<tokio::sync::mpsc::UnboundedSender<(Option<String>, Value)>>,
}

impl Catalog {
    /// One call through the full path: idempotency, receipt, host, result. `control` lets the
    /// caller cancel it (its AbortSignal fires, its tree is killed after the grace, its receipt
    /// ends `cancelled`; never replayed) and follow what the tool reports with `metadata()`.
    pub async fn invoke(
        &self,
        tool: &str,
        args: Value,
        idempotency_key: Option<&str>,
        timeout: Option<Duration>,
        control: CallControl,
    ) -> Result<Receipt, BerthError> {
        if let Some(key) = idempotency_key {
            if let Some(existing) = self.core.with_store(|s| s.receipt_by_key(key))? {
                return Ok(existing);
            }
        }
        // A decision made a moment ago (here or by another process) holds for this call.
        self.apply_new_decisions().await;
        // A tool is called with the definition its file has now: when the source's bytes moved
        // since its load (or the file is gone), activation runs first (and reloads or withdraws).
        let known = {
            let status = self.core.status();
            let cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
            cat.tools.get(tool).cloned().filter(|e| {
                if e.provider.kind == ProviderKind::Builtin {
                    return true;
                }
                let id = &e.provider.source_id;
                let now = status.sources.iter().find(|s| &s.id == id);
                now.is_some_and(|s| cat.loaded.get(id) == Some(&s.digest))
            })
        };
        let entry = match known {
            Some(e) => e,
            None => {
                let act = self.activate().await;
                let serving = self.state().tools.get(tool).cloned();
                match serving {
                    Some(e) => e,
                    None => {
                        let problem = act.problems.into_iter().next();
                        return Err(problem.unwrap_or_else(|| {
                            BerthError::new(code::UNSUPPORTED, "invoke", format!("no active tool is named `{tool}`"), "list the tools with `berth tools`; a source must be approved first")
                        }));
                    }
                }
            }
        };
        if entry.provider.kind == ProviderKind::Builtin {
            return self
                .invoke_builtin(tool, args, idempotency_key, timeout, control)
                .await;
        }
        if entry.provider.kind == ProviderKind::Mcp {
            return self
                .invoke_mcp(&entry, tool, args, idempotency_key, timeout, control)
                .await;
        }
        if let Some(refused) = self.refuse_paused_tool(&entry.provider.source_id, tool) {
            return Err(refused);
        }
        let receipt_id =
            match self.open_receipt(tool, &entry.provider.source_id, &args, idempotency_key)? {
                receipting::Opened::Existing(r) => return Ok(*r),
                receipting::Opened::New(id) => id,
            };
        // The receipt is open: whatever stops the call before it runs closes it as failed
        // (a paused host, a load that failed), never left `accepted`.
        let ready = async {
            let sup = self.core.supervisor().await?;
            let host = sup.host_for(&entry.host).await?;
            if !host
                .loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&entry.provider.source_id)
            {
                // The host was replaced since activation: load again (a load, not a replay).
                let act = self.activate().await;
                if !act.tools.iter().any(|t| t.name == tool) {
                    return Err(act.problems.into_iter().next().unwrap_or_else(|| {
                        BerthError::new(
                            code::WORKER_LOST,
                            "invoke",
                            "the tool could not be loaded again",
                            "retry",
                        )
                    }));
                }
            }
            Ok(host)
        };
        let tool_host = &entry.host;
        let host = match ready.await {
            Ok(ready) => ready,
            Err(e) => {
                self.close_receipt(
                    &receipt_id,
                    &Finish {
                        error: Some((e.code, &e.message)),
                        ..Finish::new(ReceiptStatus::Failed)
                    },
                )?;
                return Err(e);
            }
        };
        self.mark_running(&receipt_id)?;
        let opts = CallOptions {
            // The policy's `budget.tool` when the caller gives no timeout.
            timeout: timeout.unwrap_or_else(|| self.policy.current().budget("budget.tool")),
            lost_code: code::WORKER_LOST,
            cancel: control.cancel,
            metadata: control.metadata,
        };
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| outputs::sweep(&self.core.options.data_dir));
        // Where the full text of a truncated output is kept (the host truncates, D-015).
        let truncate = outputs::spec(
            &self.core.options.data_dir,
            &receipt_id,
            tool_host,
            &entry.provider.source_id,
        );
        let project = &self.core.status().project;
        let context = serde_json::json!({
            "directory": project.directory,
            "worktree": project.worktree,
            "callID": receipt_id,
        });
        // OpenCode's tool part events, for plugins' `event` hooks.
        let started_ms = now_ms();
        let part = |state: Value| {
            serde_json::json!({ "part": {
                "id": format!("prt_{}", &receipt_id[5..]),
                "sessionID": "berth",
                "messageID": format!("msg_{}", &receipt_id[5..]),
                "type": "tool",
                "callID": receipt_id,
                "tool": tool,
                "state": state,
            }})
        };
        self.emit_event(
            "message.part.updated",
            part(serde_json::json!({ "status": "running", "input": args, "time": { "start": started_ms } })),
        );
        // The plugins whose `tool.execute.before/after` hooks run around the call, in order.
        let hooks = self.unpaused(self.tool_hooks());
        let outcome = if hooks
            .before
            .iter()
            .chain(hooks.after.iter())
            .all(|(_, k)| k == tool_host)
        {
            // One host runs the hooks and the tool in one call (the usual case).
            let ids = |o: &[(String, HostKey)]| -> Vec<String> {
                o.iter().map(|(i, _)| i.clone()).collect()
            };
            // Each plugin's tool hook has the policy's budget, as in a chain of its own.
            let policy = self.policy.current();
            let ms = |key: &str| policy.budget(key).as_millis() as u64;
            let outcome = host.call(
                &entry.provider.source_id,
                CallKind::Invoke,
                serde_json::json!({ "tool": tool, "args": args, "context": context, "before": ids(&hooks.before), "after": ids(&hooks.after), "budgetMs": ms("budget.hook"), "afterBudgetMs": ms("budget.tool-after"), "truncate": truncate }),
                opts,
            )
            .await;
            self.note_tool_hooks(&hooks, &outcome);
            outcome
        } else {
            self.invoke_across_hosts(
                &host,
                &entry.provider.source_id,
                tool,
                &args,
                context,
                &truncate,
                &hooks,
                opts,
            )
            .await
        };
        // The full text of a truncated output is kept beside the receipt; the caller gets the
        // head and the notice, as OpenCode's model does.
        let outcome = outcome.and_then(|mut v| {
            outputs::keep_full(&truncate, &mut v)?;
            Ok(v)
        });
        if outcome.is_err() {
            outputs::discard_spill(&truncate);
        }
        // The output budget holds on this side too, whatever the host let through.
        let outcome = outcome.and_then(|v| {
            let size = v["output"].as_str().map_or(0, str::len);
            if size > berth_protocol::MAX_TOOL_OUTPUT_BYTES {
                Err(crate::host::CallError {
                    code: code::INVALID_RESPONSE,
                    message: format!(
                        "the tool's output is {size} bytes, over the {}-byte limit",
                        berth_protocol::MAX_TOOL_OUTPUT_BYTES
                    ),
                })
            } else {
                Ok(v)
            }
        });
        let by: Vec<String> = outcome
            .as_ref()
            .ok()
            .and_then(|v| v["transformedBy"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect();
        // When `tool.execute.before` hooks changed the arguments, the receipt names what ran.
        let ran_with = outcome
            .as_ref()
            .ok()
            .filter(|v| !v["finalArgs"].is_null())
            .map(|v| berth_discovery::sha256_hex(v["finalArgs"].to_string().as_bytes()));
        let capability = format!("tool {tool}");
        match &outcome {
            Ok(_) => self
                .streaks
                .succeeded(&entry.provider.source_id, &capability),
            // A tool hook's failure is the hook's (its streak is counted where it ran).
            Err(e)
                if streaks::counts_for_a_tool(e.code, timeout.is_none())
                    && !e.message.starts_with("hook tool.execute.")
                    && !e.message.starts_with("tool.execute.") =>
            {
                self.note_failure(&entry.provider.source_id, &capability, e.code, &e.message)
            }
            Err(_) => {}
        }
        let end = match &outcome {
            Ok(v) => Finish {
                title: v["title"].as_str(),
                output: v["output"].as_str(),
                metadata: Some(&v["metadata"]),
                raw: Some(&v["raw"]).filter(|r| !by.is_empty() && !r.is_null()),
                transformed_by: &by,
                args_digest: ran_with.as_deref(),
                ..Finish::new(ReceiptStatus::Completed)
            },
            Err(e) => Finish {
                error: Some((e.code, &e.message)),
                ..Finish::new(receipting::failed_status(e.code))
            },
        };
        let receipt = self.close_receipt(&receipt_id, &end)?;
        let ended = match &outcome {
            Ok(v) => {
                serde_json::json!({ "status": "completed", "input": args, "output": v["output"], "title": v["title"], "metadata": v["metadata"], "time": { "start": started_ms, "end": now_ms() } })
            }
            Err(e) => {
                serde_json::json!({ "status": "error", "input": args, "error": e.message, "time": { "start": started_ms, "end": now_ms() } })
            }
        };
        self.emit_event("message.part.updated", part(ended));
        Ok(receipt)
    }
}

impl Catalog {
    /// One call whose `tool.execute.before/after` hooks live in other hosts than the tool (a
    /// plugin with a host of its own): the chains run host by host in OpenCode's order
    /// (`around`) and the tool runs on the arguments they left (its host checks them against
    /// its schema again). The answer has the shape the one-host call gives.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn invoke_across_hosts(
        &self,
        host: &crate::host::Host,
        source_id: &str,
        tool: &str,
        args: &Value,
        context: Value,
        truncate: &Value,
        hooks: &around::ToolHooks,
        opts: CallOptions,
    ) -> Result<Value, crate::host::CallError> {
        let lost = |e: BerthError| crate::host::CallError {
            code: e.code,
            message: e.message,
        };
        let call_id = context["callID"].as_str().unwrap_or_default().to_string();
        let mut hooked = around::Hooked::default();
        let args = self
            .run_before(
                hooks,
                tool,
                &call_id,
                args.clone(),
                opts.timeout,
                &mut hooked,
            )
            .await
            .map_err(lost)?;
        let mut v = host
            .call(
                source_id,
                CallKind::Invoke,
                serde_json::json!({ "tool": tool, "args": args, "context": context, "before": [], "after": [], "truncate": truncate }),
                opts.clone(),
            )
            .await?;
        if let Some(a) = &hooked.final_args {
            v["finalArgs"] = a.clone();
        }
        if hooks.after.is_empty() {
            v["transformedBy"] = serde_json::json!(hooked.by);
            return Ok(v);
        }
        // The full text is Berth's, not the hooks'.
        let kept: serde_json::Map<String, Value> = ["full", "spilled"]
            .into_iter()
            .filter_map(|k| v.as_object_mut()?.remove(k).map(|x| (k.to_string(), x)))
            .collect();
        let raw = serde_json::json!({ "title": v["title"], "output": v["output"], "metadata": v["metadata"] });
        let fin = self
            .run_after(hooks, tool, &call_id, &args, raw, opts.timeout, &mut hooked)
            .await
            .map_err(lost)?;
        if !fin["output"].is_string() {
            return Err(crate::host::CallError {
                code: code::INVALID_RESPONSE,
                message: "tool.execute.after left a result without an output string".into(),
            });
        }
        let mut answer = serde_json::json!({
            "title": fin["title"], "output": fin["output"], "metadata": fin["metadata"],
            "raw": hooked.raw,
            "transformedBy": hooked.by,
            "finalArgs": v["finalArgs"],
        });
        if let Some(o) = answer.as_object_mut() {
            o.extend(kept);
        }
        Ok(answer)
    }
}
