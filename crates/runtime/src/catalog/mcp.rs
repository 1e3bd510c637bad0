//! MCP servers in the catalog: an approved MCP source is connected when activation clears it
//! (`mcp_servers` holds the connection) and its tools are offered like every other source's
//! (`offer` → `register_tools`, under OpenCode's keys); a call of one is a receipted
//! `tools/call` with the deadline and cancel of every call, the plugins' tool hooks around it
//! (`around`).

use std::time::Duration;

use berth_store::{Finish, Receipt, ReceiptStatus};

use crate::error::{code, BerthError};
use crate::host::HostKey;

use super::*;

impl Catalog {
    /// Connects cleared MCP source `source` and offers its tools; on failure the source shows
    /// why (`unsupported` for a transport Berth lacks, `paused` past its restart budget).
    pub(super) async fn activate_mcp(
        &self,
        graph: &berth_discovery::ConfigGraph,
        source: &berth_discovery::Source,
        backend: RuntimeKind,
        act: &mut Activation,
    ) {
        let id = source.id.clone();
        // Prepared by the person in place of its fetch-and-run launcher: what was prepared
        // runs, for the entry as it was then.
        let prepared = self
            .core
            .with_store(|s| s.mcp_prepared(&id))
            .ok()
            .flatten()
            .filter(|p| p.config_digest == source.digest);
        let connected = match berth_discovery::mcp::target_of(graph, source) {
            None => Err(BerthError::new(
                code::ACTION_REQUIRED,
                &format!("mcp:{}", source.entry),
                format!(
                    "MCP server `{}` has no command or URL Berth can use",
                    source.entry
                ),
                "fix its entry in the config",
            )),
            Some(target) => {
                let checked = match &prepared {
                    Some(p) => {
                        let p = p.clone();
                        tokio::task::spawn_blocking(move || {
                            crate::mcp_servers::prepared::verify(&p)
                        })
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()))
                    }
                    None => Ok(()),
                };
                let timeout = graph
                    .mcp
                    .iter()
                    .find(|m| m.name == source.entry && m.origin == source.origin)
                    .and_then(|m| m.config.get("timeout"))
                    .and_then(Value::as_u64)
                    .map(Duration::from_millis);
                match checked {
                    Err(why) => {
                        // A server started from it before is stopped too.
                        self.mcp.disconnect(std::slice::from_ref(&id)).await;
                        Err(BerthError::new(
                        code::ACTION_REQUIRED,
                        &format!("mcp:{}", source.entry),
                        format!("MCP server `{}`: its prepared package changed since Berth prepared it ({why}); nothing of it runs", source.entry),
                        "prepare it again (`berth prepare`, or Prepare on its card)",
                    ))
                    }
                    Ok(()) => {
                        let target = match &prepared {
                            Some(p) => crate::mcp_servers::prepared::substitute(target, p),
                            None => target,
                        };
                        self.mcp
                            .connect(source, target, timeout, graph.directory.clone())
                            .await
                    }
                }
            }
        };
        if let (Ok(_), Some(p)) = (&connected, &prepared) {
            self.record_prepared_run(p);
        }
        let host = HostKey::shared(backend);
        let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match connected {
            Ok(offered) => {
                let tools: Vec<ToolEntry> = offered
                    .into_iter()
                    .map(|o| ToolEntry {
                        host: host.clone(),
                        order: source.order,
                        name: o.key,
                        description: o.tool.description,
                        parameters: o.tool.input_schema,
                        provider: Provider {
                            source_id: id.clone(),
                            kind: ProviderKind::Mcp,
                            backend,
                        },
                        state: SourceState::Active,
                    })
                    .collect();
                cat.loaded.insert(id.clone(), source.digest.clone());
                cat.activity.insert(id.clone(), SourceState::Active);
                cat.failures.remove(&id);
                let policy = self.policy.current();
                cat.offer(
                    &id,
                    Offered {
                        host,
                        order: source.order,
                        plugin: false,
                        tools,
                        hooks: Vec::new(),
                        auth: Vec::new(),
                    },
                    &policy,
                );
            }
            Err(e) => {
                let e = e.for_plugin(id.clone());
                let state = if self.mcp.paused(&id).is_some() {
                    SourceState::Paused
                } else if e.code == code::UNSUPPORTED {
                    SourceState::Unsupported
                } else {
                    SourceState::LoadFailed
                };
                down(&mut cat, &id, state, e.clone());
                act.problems.push(e);
            }
        }
    }

    /// One call of an MCP tool: receipt `accepted` → `running` → final, one `tools/call`.
    pub(super) async fn invoke_mcp(
        &self,
        entry: &ToolEntry,
        tool: &str,
        args: Value,
        idempotency_key: Option<&str>,
        timeout: Option<Duration>,
        control: CallControl,
    ) -> Result<Receipt, BerthError> {
        let source_id = &entry.provider.source_id;
        let receipt_id = match self.open_receipt(tool, source_id, &args, idempotency_key)? {
            receipting::Opened::Existing(r) => return Ok(*r),
            receipting::Opened::New(id) => id,
        };
        self.mark_running(&receipt_id)?;
        let deadline = timeout.unwrap_or_else(|| self.policy.current().budget("budget.tool"));
        // OpenCode runs the plugins' tool hooks around MCP tools too; `tool.execute.after`
        // gets the server's result as OpenCode passes it (`{content, …}`, recorded in
        // tests/oracle/mcp/names.json), and the output is the text blocks it leaves.
        let hooks = self.tool_hooks();
        let mut hooked = around::Hooked::default();
        let outcome = async {
            let args = self
                .run_before(&hooks, tool, &receipt_id, args, deadline, &mut hooked)
                .await?;
            let r = self
                .mcp
                .call(source_id, tool, args.clone(), deadline, control.cancel)
                .await?;
            let mut result = serde_json::json!({ "content": r.content });
            if let Some(s) = &r.structured {
                result["structuredContent"] = s.clone();
            }
            if r.is_error {
                result["isError"] = Value::Bool(true);
            }
            let fin = self
                .run_after(&hooks, tool, &receipt_id, &args, result, deadline, &mut hooked)
                .await?;
            let Some(blocks) = fin["content"].as_array() else {
                return Err(BerthError::new(
                    code::INVALID_RESPONSE,
                    tool,
                    "tool.execute.after left an MCP result without a content list",
                    "fix or disable the plugins named in the receipt",
                ));
            };
            let text = blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            // The server's word on failure stands: a hook cannot turn a failed call into a
            // completed one.
            let metadata = serde_json::json!({ "content": fin["content"], "structuredContent": fin["structuredContent"], "isError": r.is_error });
            Ok((text, metadata, r.is_error))
        }
        .await;
        let args_digest = hooked.args_digest();
        let failed_text;
        let end = match &outcome {
            Ok((text, metadata, true)) => {
                failed_text = format!("the tool answered with an error: {text}");
                Finish {
                    output: Some(text),
                    metadata: Some(metadata),
                    error: Some((code::PLUGIN_FAILED, &failed_text)),
                    ..hooked.finish(args_digest.as_deref(), ReceiptStatus::Failed)
                }
            }
            Ok((text, metadata, false)) => Finish {
                output: Some(text),
                metadata: Some(metadata),
                ..hooked.finish(args_digest.as_deref(), ReceiptStatus::Completed)
            },
            Err(e) => Finish {
                error: Some((e.code, &e.message)),
                raw: None,
                ..hooked.finish(args_digest.as_deref(), receipting::failed_status(e.code))
            },
        };
        // The loss that spent the restart budget pauses the source now (not at the next
        // activation): the status says so, and its tools are withdrawn until it is resumed.
        if outcome.is_err() {
            let server = self
                .core
                .status()
                .sources
                .iter()
                .find(|s| &s.id == source_id)
                .map(|s| s.entry.clone());
            if let Some(e) = server.and_then(|name| self.mcp.pause_problem(source_id, &name)) {
                {
                    let mut cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    down(&mut cat, source_id, SourceState::Paused, e);
                }
                self.core.rescan();
            }
        }
        self.close_receipt(&receipt_id, &end)
    }
}

/// Source `id` cannot serve (`state`, because of `e`): it keeps its claims, so its conflicts
/// stay shown, and its tools are withdrawn.
fn down(cat: &mut CatalogState, id: &str, state: SourceState, e: BerthError) {
    cat.activity.insert(id.to_string(), state);
    cat.failures.insert(id.to_string(), e);
    cat.suspend(id);
    cat.loaded.remove(id);
}
