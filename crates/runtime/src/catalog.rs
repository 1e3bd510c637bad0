//! The active tool catalog and the invocation path: activation of approved sources in a plugin
//! host (behind the import gate), the contribution check, receipts, and one call end to end.
//!
//! Invariant: nothing is imported unless `approval::gate` passed for the bytes on disk at that
//! moment; a tool the approved summary did not show is not registered (`pending-activation`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use berth_discovery::{Scanner, SourceKind, SourceState};
use berth_protocol::CallKind;
use berth_store::{Accepted, NewReceipt, Receipt, ReceiptStatus};
use serde::Serialize;
use serde_json::Value;

use crate::approval;
use crate::engine::Berth;
use crate::error::{code, BerthError};
use crate::host::{CallOptions, HostSupervisor};
use crate::runtimes::RuntimeKind;

/// A tool as the catalog lists it (`berth tools`).
#[derive(Debug, Clone, Serialize)]
pub struct ToolEntry {
    pub name: String,
    pub description: String,
    /// The JSON Schema the model would get.
    pub parameters: Value,
    pub provider: Provider,
    pub state: SourceState,
}

#[derive(Debug, Clone, Serialize)]
pub struct Provider {
    pub source_id: String,
    pub kind: SourceKind,
    pub backend: RuntimeKind,
}

/// The outcome of activating the approved sources.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Activation {
    pub tools: Vec<ToolEntry>,
    /// Sources that could not be activated, each with its error.
    pub problems: Vec<BerthError>,
}

#[derive(Default)]
pub(crate) struct Catalog {
    /// By tool name; later registrations win, as in OpenCode.
    pub tools: BTreeMap<String, ToolEntry>,
}

impl Berth {
    pub(crate) async fn supervisor(&self) -> Result<Arc<HostSupervisor>, BerthError> {
        self.inner_supervisor().await
    }

    /// Imports every approved standalone tool source whose bytes still match its approval,
    /// and returns the catalog. Problems are per source; the others still load.
    pub async fn activate(&self) -> Activation {
        let mut act = Activation::default();
        // The gate reads the bytes as they are now, not a cached view.
        let fresh = Scanner::new().scan(&self.options().env, &self.options().project);
        let backend = approval::backend_for(&self.runtimes());
        let sup = match self.supervisor().await {
            Ok(s) => s,
            Err(e) => {
                act.problems.push(e);
                return act;
            }
        };
        for source in fresh
            .sources
            .iter()
            .filter(|s| s.kind == SourceKind::StandaloneTool)
        {
            let key = approval::key_for(source, self.domain(), backend);
            let row = self.with_store(|s| s.current_approval(&key)).ok().flatten();
            if row.is_none() {
                continue;
            }
            if let Err(why) = self.with_store(|s| approval::gate(s, source, self.domain(), backend))
            {
                if row
                    .as_ref()
                    .is_some_and(|r| r.decision == berth_store::Decision::Allow)
                {
                    act.problems.push(
                        BerthError::new(
                            code::ACTION_REQUIRED,
                            "approval",
                            why,
                            "review what grew and approve again",
                        )
                        .for_plugin(source.id.clone()),
                    );
                }
                continue;
            }
            let host = match sup.host(backend).await {
                Ok(h) => h,
                Err(e) => {
                    act.problems.push(e.for_plugin(source.id.clone()));
                    continue;
                }
            };
            let stem = std::path::Path::new(&source.entry)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let body = serde_json::json!({ "path": source.entry, "stem": stem });
            let opts = CallOptions {
                lost_code: code::WORKER_LOST,
                timeout: Duration::from_secs(30),
                ..CallOptions::default()
            };
            match host.call(&source.id, CallKind::LoadTools, body, opts).await {
                Ok(v) => {
                    let loaded: Vec<ToolEntry> = v["tools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|t| ToolEntry {
                            name: t["name"].as_str().unwrap_or_default().to_string(),
                            description: t["description"].as_str().unwrap_or_default().to_string(),
                            parameters: t["parameters"].clone(),
                            provider: Provider {
                                source_id: source.id.clone(),
                                kind: source.kind,
                                backend,
                            },
                            state: SourceState::Active,
                        })
                        .collect();
                    let approved: BTreeSet<String> = row
                        .as_ref()
                        .and_then(|r| {
                            r.shown.get("tools").and_then(|t| t.as_array()).map(|a| {
                                a.iter()
                                    .filter_map(|x| x.as_str().map(str::to_string))
                                    .collect()
                            })
                        })
                        .unwrap_or_default();
                    let extra: Vec<&str> = loaded
                        .iter()
                        .map(|t| t.name.as_str())
                        .filter(|n| !approved.contains(*n))
                        .collect();
                    if !extra.is_empty() {
                        act.problems.push(
                            BerthError::new(
                                code::ACTION_REQUIRED,
                                "activation",
                                format!("the loaded module offers tools the approval did not show: {}; none of its tools are registered (pending-activation)", extra.join(", ")),
                                "approve the source again to accept the new tools",
                            )
                            .for_plugin(source.id.clone()),
                        );
                        continue;
                    }
                    host.loaded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(source.id.clone());
                    let mut cat = self.catalog().lock().unwrap_or_else(|p| p.into_inner());
                    cat.tools.retain(|_, t| t.provider.source_id != source.id);
                    for t in loaded {
                        cat.tools.insert(t.name.clone(), t);
                    }
                }
                Err(e) => act.problems.push(
                    BerthError::new(
                        if e.code == code::WORKER_LOST {
                            code::WORKER_LOST
                        } else {
                            code::PLUGIN_FAILED
                        },
                        "activation",
                        format!("{} failed to load: {}", source.entry, e.message),
                        "fix the tool file; the other tools keep working",
                    )
                    .for_plugin(source.id.clone()),
                ),
            }
        }
        act.tools = self
            .catalog()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .tools
            .values()
            .cloned()
            .collect();
        act
    }

    /// One call through the full path: idempotency, receipt, host, result.
    pub async fn invoke(
        &self,
        tool: &str,
        args: Value,
        idempotency_key: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Receipt, BerthError> {
        if let Some(key) = idempotency_key {
            if let Some(existing) = self.with_store(|s| s.receipt_by_key(key))? {
                return Ok(existing);
            }
        }
        let known = self
            .catalog()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .tools
            .get(tool)
            .cloned();
        let entry = match known {
            Some(e) => e,
            None => {
                let act = self.activate().await;
                match act.tools.into_iter().find(|t| t.name == tool) {
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
        let receipt_id = format!("rcpt_{}", random_hex(10));
        let args_digest = berth_discovery::sha256_hex(args.to_string().as_bytes());
        let me = std::process::id();
        let accepted = self.with_store(|s| {
            s.accept_receipt(&NewReceipt {
                receipt_id: &receipt_id,
                idempotency_key,
                tool,
                source_id: &entry.provider.source_id,
                args_digest: &args_digest,
                owner_pid: me,
                owner_start: crate::host::procs::start_time(me).unwrap_or(0),
            })
        })?;
        if let Accepted::Existing(r) = accepted {
            return Ok(r);
        }
        let sup = self.supervisor().await?;
        let host = sup.host(entry.provider.backend).await?;
        if !host
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&entry.provider.source_id)
        {
            // The host was replaced since activation: load again (a load, not a replay).
            self.catalog()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .tools
                .clear();
            let act = self.activate().await;
            if !act.tools.iter().any(|t| t.name == tool) {
                let e = act.problems.into_iter().next().unwrap_or_else(|| {
                    BerthError::new(
                        code::WORKER_LOST,
                        "invoke",
                        "the tool could not be loaded again",
                        "retry",
                    )
                });
                self.with_store(|s| {
                    s.finish_receipt(
                        &receipt_id,
                        ReceiptStatus::Failed,
                        None,
                        None,
                        None,
                        Some((e.code, &e.message)),
                    )
                })?;
                return Err(e);
            }
        }
        self.with_store(|s| s.mark_receipt_running(&receipt_id))?;
        let opts = CallOptions {
            timeout: timeout.unwrap_or(crate::host::DEFAULT_TOOL_TIMEOUT),
            lost_code: code::WORKER_LOST,
            ..CallOptions::default()
        };
        let context = serde_json::json!({
            "directory": self.status().project.directory,
            "worktree": self.status().project.worktree,
            "callID": receipt_id,
        });
        let outcome = host
            .call(
                &entry.provider.source_id,
                CallKind::Invoke,
                serde_json::json!({ "tool": tool, "args": args, "context": context }),
                opts,
            )
            .await;
        self.with_store(|s| match &outcome {
            Ok(v) => s.finish_receipt(
                &receipt_id,
                ReceiptStatus::Completed,
                v["title"].as_str(),
                v["output"].as_str(),
                Some(&v["metadata"]),
                None,
            ),
            Err(e) => {
                let status = if e.code == code::CANCELLED || e.code == code::TIMEOUT {
                    ReceiptStatus::Cancelled
                } else {
                    ReceiptStatus::Failed
                };
                s.finish_receipt(
                    &receipt_id,
                    status,
                    None,
                    None,
                    None,
                    Some((e.code, &e.message)),
                )
            }
        })?;
        let receipt = self.with_store(|s| s.receipt(&receipt_id))?;
        receipt.ok_or_else(|| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "receipts",
                "the receipt vanished",
                "retry",
            )
        })
    }
}

fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    hex::encode(bytes)
}

/// The live host a source runs in (for the benchmark's raw round trips).
#[doc(hidden)]
pub async fn host_for_bench(berth: &Berth, backend: RuntimeKind) -> Arc<crate::host::Host> {
    berth
        .supervisor()
        .await
        .expect("supervisor")
        .host(backend)
        .await
        .expect("host")
}
