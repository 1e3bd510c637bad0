//! The catalog as an MCP server: `tools/list` is the catalog as it is now, `tools/call` is one
//! `Berth::invoke`, `notifications/cancelled` cancels it, `ctx.metadata()` reports become
//! progress notifications, and every change of the listed tools sends `tools/list_changed`.
//!
//! Owns: the `rmcp` server handler and its transports. Must not: call a plugin any other way
//! than `Berth::invoke`, or list a tool the catalog has not registered (pending, held,
//! denied and policy-limited sources contribute nothing here, as in the catalog).

use std::sync::{Arc, Mutex};

use berth_runtime::catalog::CallControl;
use berth_runtime::snapshot::ToolEntry;
use berth_runtime::{code, Berth, BerthError, Receipt, ReceiptStatus};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::names::mcp_names;

/// The key of Berth's receipt id in a result's `_meta` (and in its text, for models).
const RECEIPT_META: &str = "berth/receipt";
/// An idempotency key a client may give in a call's `_meta`.
const IDEMPOTENCY_META: &str = "berth/idempotencyKey";

/// The MCP server over one Berth: what it lists and calls is that Berth's catalog.
#[derive(Clone)]
pub struct CatalogServer {
    berth: Berth,
    /// The client to tell when the list changes (one server per connection or session).
    peer: Arc<Mutex<Option<Peer<RoleServer>>>>,
    /// The listing of the latest snapshot revision seen.
    listing: Arc<Mutex<Option<Arc<Listing>>>>,
    /// Berth's built-ins are listed too (where they serve their names).
    builtins: bool,
}

/// What a client is shown for one snapshot revision.
struct Listing {
    revision: u64,
    /// MCP name → the catalog entry it calls, by catalog name.
    tools: Vec<(String, ToolEntry)>,
    /// What a client sees of the list (names, descriptions, schemas): a change is a
    /// `list_changed`.
    fingerprint: String,
}

impl CatalogServer {
    pub fn new(berth: Berth) -> CatalogServer {
        CatalogServer {
            berth,
            peer: Arc::default(),
            listing: Arc::default(),
            builtins: false,
        }
    }

    /// Lists Berth's built-ins too, for the names they serve (the person turned them on).
    pub fn with_builtins(mut self, on: bool) -> CatalogServer {
        self.builtins = on;
        self
    }

    /// The tools as MCP lists them now: computed once per snapshot revision, so a call does
    /// not sort and name the whole catalog again, and a snapshot event that changed no tool
    /// costs a comparison.
    fn listing(&self) -> Arc<Listing> {
        let snapshot = self.berth.status();
        let mut cached = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = cached.as_ref().filter(|l| l.revision == snapshot.revision) {
            return l.clone();
        }
        let mut tools: Vec<ToolEntry> = snapshot.tools.iter().cloned().collect();
        if self.builtins {
            // A built-in serves its name unless a conflict gave the name to another candidate.
            let taken_elsewhere = |name: &str| {
                snapshot.conflicts.iter().any(|c| {
                    c.tool == name
                        && c.serving.as_deref() != Some(berth_runtime::catalog::conflicts::BUILTIN)
                })
            };
            tools.extend(
                snapshot
                    .builtins
                    .iter()
                    .filter(|b| !taken_elsewhere(&b.name))
                    .cloned(),
            );
        }
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let names = mcp_names(tools.iter().map(|t| t.name.as_str()));
        let tools: Vec<(String, ToolEntry)> = names.into_iter().zip(tools).collect();
        let listed: Vec<(&str, &str, &Value)> = tools
            .iter()
            .map(|(name, t)| (name.as_str(), t.description.as_str(), &t.parameters))
            .collect();
        let fingerprint = serde_json::to_string(&listed).unwrap_or_default();
        let l = Arc::new(Listing {
            revision: snapshot.revision,
            tools,
            fingerprint,
        });
        *cached = Some(l.clone());
        l
    }

    /// Sends `tools/list_changed` to the client whenever the listed tools change, for as long
    /// as the Berth publishes snapshots.
    pub fn announce_changes(&self) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        let mut events = self.berth.subscribe();
        tokio::spawn(async move {
            let mut last = me.listing().fingerprint.clone();
            loop {
                match events.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
                let now = me.listing().fingerprint.clone();
                if now == last {
                    continue;
                }
                last = now;
                let peer = me.peer.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(peer) = peer {
                    if peer.notify_tool_list_changed().await.is_err() {
                        return;
                    }
                    tracing::info!("the tool list changed; the client was told");
                }
            }
        })
    }

    fn remember(&self, peer: &Peer<RoleServer>) {
        let mut slot = self.peer.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(peer.clone());
        }
    }
}

fn mcp_tool(name: &str, t: &ToolEntry) -> Tool {
    let schema = match &t.parameters {
        Value::Object(o) => o.clone(),
        _ => serde_json::Map::from_iter([("type".to_string(), Value::from("object"))]),
    };
    Tool::new(name.to_string(), t.description.clone(), Arc::new(schema))
}

impl ServerHandler for CatalogServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("berth", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "The tools of the OpenCode plugins and tool files this person approved in Berth. \
             Each call runs under Berth's supervision and leaves a receipt.",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.remember(&context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.remember(&context.peer);
        let tools = self
            .listing()
            .tools
            .iter()
            .map(|(name, t)| mcp_tool(name, t))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let listing = self.listing();
        let Some((_, entry)) = listing
            .tools
            .iter()
            .find(|(name, _)| name.as_str() == request.name)
        else {
            return Err(McpError::invalid_params(
                format!(
                    "no approved tool is named `{}`; list the tools again",
                    request.name
                ),
                None,
            ));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let key = context
            .meta
            .get(IDEMPOTENCY_META)
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut control = CallControl::default();
        // Progress: what the tool reports with `metadata()`, numbered in order.
        let progress = context.meta.get_progress_token().map(|token| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Option<String>, Value)>();
            control.metadata = Some(tx);
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let mut n = 0.0;
                while let Some((title, _metadata)) = rx.recv().await {
                    n += 1.0;
                    let mut p = ProgressNotificationParam::new(token.clone(), n);
                    p.message = title.filter(|t| !t.is_empty());
                    let _ = peer.notify_progress(p).await;
                }
            })
        });
        // `notifications/cancelled` cancels the call in its host.
        let cancel = control.cancel.clone();
        let ct = context.ct.clone();
        let watching = tokio::spawn(async move {
            ct.cancelled().await;
            cancel.notify_one();
        });
        let result = self
            .berth
            .invoke(&entry.name, args, key.as_deref(), None, control)
            .await;
        watching.abort();
        if let Some(p) = progress {
            // The sender went with the call; the forwarder ends after the last report.
            let _ = p.await;
        }
        Ok(result_of(result).into())
    }
}

/// A receipt as an MCP result: the tool's output as text, Berth's receipt id in `_meta` and
/// in a second text block; a failure is a tool error (`isError`) with its code, what happened
/// and what to do.
fn result_of(result: Result<Receipt, BerthError>) -> CallToolResult {
    let mut meta = MetaObject::default();
    let mut out = match &result {
        Ok(r) if r.status == ReceiptStatus::Completed => {
            meta.0
                .insert(RECEIPT_META.into(), Value::from(r.receipt_id.clone()));
            if let Some(title) = r.title.as_ref().filter(|t| !t.is_empty()) {
                meta.0
                    .insert("berth/title".into(), Value::from(title.clone()));
            }
            if let Some(m) = &r.metadata {
                meta.0.insert("berth/metadata".into(), m.clone());
            }
            // The tool's output is the first block, exactly; the receipt follows in a block
            // of its own, so a transcript that keeps only the text still names it.
            CallToolResult::success(vec![
                ContentBlock::text(r.output.clone().unwrap_or_default()),
                ContentBlock::text(format!("[Berth receipt {}]", r.receipt_id)),
            ])
        }
        Ok(r) => {
            meta.0
                .insert(RECEIPT_META.into(), Value::from(r.receipt_id.clone()));
            let (c, m) = r
                .error
                .as_ref()
                .map(|e| (e.code.clone(), e.message.clone()))
                .unwrap_or_else(|| (code::INVALID_RESPONSE.to_string(), "the call failed".into()));
            CallToolResult::error(vec![ContentBlock::text(format!(
                "{c}: {m} (Berth receipt {})",
                r.receipt_id
            ))])
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
            "{}: {} — {}",
            e.code, e.message, e.recovery
        ))]),
    };
    if !meta.0.is_empty() {
        out.meta = Some(meta);
    }
    out
}

/// Serves the catalog over stdin/stdout until the client closes it (or `stop` completes).
/// Nothing but protocol frames is written to stdout.
pub async fn serve_stdio(
    berth: Berth,
    builtins: bool,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), BerthError> {
    let server = CatalogServer::new(berth).with_builtins(builtins);
    let announcing = server.announce_changes();
    let running = server
        .clone()
        // The non-blocking pipe driver when the agent launched us on pipes (as they do): no
        // blocking-pool hand-off per message; other stdio falls back to the blocking handles.
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| {
            BerthError::new(
                code::INVALID_RESPONSE,
                "mcp",
                format!("the MCP client's first messages could not be read: {e}"),
                "start `berth mcp` from an MCP client (see `berth mcp --help`)",
            )
        })?;
    server.remember(running.peer());
    let ended = tokio::select! {
        r = running.waiting() => r.map(|_| ()).map_err(|e| e.to_string()),
        _ = stop => Ok(()),
    };
    announcing.abort();
    ended.map_err(|e| {
        BerthError::new(
            code::TEMPORARILY_UNAVAILABLE,
            "mcp",
            format!("the MCP connection ended with an error: {e}"),
            "start the MCP client again",
        )
    })
}
