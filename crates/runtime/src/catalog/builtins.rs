//! Berth's own built-in tools in the catalog (`berth-builtins`: OpenCode 1.18.4's `read`, `glob`
//! and `grep`, native): always a candidate for their names, so that a plugin, tool file or MCP
//! server registering `read` makes a conflict the person sees (`conflicts`), and called like
//! every other tool — a receipt, the deadline, cancel, the plugins' tool hooks around it
//! (`around`), limited to the project.
//!
//! Owns: the built-ins' catalog entries and one call of one. Must not: decide who serves a name
//! (`conflicts::elect`) or read files itself (the `berth-builtins` crate does, and refuses any
//! path outside the project).

use std::time::Duration;

use berth_store::{Finish, Receipt, ReceiptStatus};
use serde_json::Value;

use crate::error::{code, BerthError};

use super::conflicts::BUILTIN;
use super::*;

/// The content version a built-in claims its name with: this build of Berth.
pub(super) fn builtin_digest() -> String {
    format!("berth-{}", env!("CARGO_PKG_VERSION"))
}

/// The built-ins as catalog entries (the backend is the domain's, for the record only).
pub(super) fn entries(backend: RuntimeKind) -> Vec<ToolEntry> {
    berth_builtins::definitions()
        .iter()
        .map(|b| ToolEntry {
            host: HostKey::shared(backend),
            order: 0,
            name: b.id.clone(),
            description: b.description.clone(),
            parameters: b.parameters.clone(),
            provider: Provider {
                source_id: BUILTIN.to_string(),
                kind: ProviderKind::Builtin,
                backend,
            },
            state: SourceState::Active,
        })
        .collect()
}

impl Catalog {
    /// One call of a built-in: receipt `accepted` → `running` → final.
    pub(super) async fn invoke_builtin(
        &self,
        tool: &str,
        args: Value,
        idempotency_key: Option<&str>,
        timeout: Option<Duration>,
        control: CallControl,
    ) -> Result<Receipt, BerthError> {
        let receipt_id = match self.open_receipt(tool, BUILTIN, &args, idempotency_key)? {
            receipting::Opened::Existing(r) => return Ok(*r),
            receipting::Opened::New(id) => id,
        };
        self.mark_running(&receipt_id)?;
        let deadline = timeout.unwrap_or_else(|| self.policy.current().budget("budget.tool"));
        let project = self.core.status().project.clone();
        let mut ctx = berth_builtins::CallContext::new(project.directory.clone());
        ctx.worktree = project.worktree.clone();
        let token = ctx.cancel.clone();
        let cancel = control.cancel.clone();
        // OpenCode runs the plugins' tool hooks around its built-ins too; the built-in checks
        // the arguments the before hooks left, and the after hooks get `{title, output,
        // metadata}`.
        let hooks = self.tool_hooks();
        let mut hooked = around::Hooked::default();
        let outcome = async {
            let args = self
                .run_before(&hooks, tool, &receipt_id, args, deadline, &mut hooked)
                .await?;
            let o = tokio::select! {
                r = berth_builtins::call(tool, args.clone(), &ctx) => r.map_err(|e| {
                    BerthError::new(e.code(), tool, e.to_string(), e.recovery()).for_plugin(BUILTIN.to_string())
                }),
                _ = cancel.notified() => {
                    token.cancel();
                    Err(BerthError::new(code::CANCELLED, tool, "the call was cancelled", "call it again if it is still needed"))
                }
                _ = tokio::time::sleep(deadline) => {
                    token.cancel();
                    Err(BerthError::new(code::TIMEOUT, tool, format!("no answer within {} ms", deadline.as_millis()), "narrow the call (a path, a pattern) or give it a longer timeout"))
                }
            }?;
            let result = serde_json::json!({ "title": o.title, "output": o.output, "metadata": o.metadata });
            let fin = self
                .run_after(&hooks, tool, &receipt_id, &args, result, deadline, &mut hooked)
                .await?;
            match (fin["title"].as_str(), fin["output"].as_str()) {
                (Some(title), Some(output)) => Ok((title.to_string(), output.to_string(), fin["metadata"].clone())),
                _ => Err(BerthError::new(
                    code::INVALID_RESPONSE,
                    tool,
                    "tool.execute.after left a result without a title and an output string",
                    "fix or disable the plugins named in the receipt",
                )),
            }
        }
        .await;
        let args_digest = hooked.args_digest();
        let end = match &outcome {
            Ok((title, output, metadata)) => Finish {
                title: Some(title),
                output: Some(output),
                metadata: Some(metadata),
                ..hooked.finish(args_digest.as_deref(), ReceiptStatus::Completed)
            },
            Err(e) => Finish {
                error: Some((e.code, &e.message)),
                raw: None,
                ..hooked.finish(args_digest.as_deref(), receipting::failed_status(e.code))
            },
        };
        self.close_receipt(&receipt_id, &end)
    }
}
