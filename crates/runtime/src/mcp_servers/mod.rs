//! Connections to the MCP servers the person approved: one per source, made when the catalog
//! activates it (the tools listed under OpenCode's keys, `opencode_tool_key`), used by every
//! call of its tools, closed (its process tree stopped) when it is revoked or changes. A local
//! server lost mid-call ends that call `process-lost` and is started again on the next call,
//! within a restart budget (`RESTART_BUDGET` losses per `RESTART_WINDOW`, then `paused`, as
//! plugin hosts); a remote one is dialled again with backoff.
//!
//! Owns: the connections and their loss counts. Must not: decide what may connect (the
//! catalog asks only for sources the approval gate cleared), register tools itself (it hands
//! them to the catalog), replay a call, or let a variable's or header's value out.
//! Invariant: only this room holds MCP connections.

pub(crate) mod oauth;
pub(crate) mod prepared;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_discovery::{opencode_tool_key, McpTarget, Source};
use berth_mcp_client::{Connection, McpCallResult, McpTool, Target};
use serde_json::Value;

use crate::error::{code, BerthError};
use crate::host::{RESTART_BUDGET, RESTART_WINDOW};

/// How long connecting and listing may take when the entry sets no `timeout` (OpenCode's
/// default for `listTools`, `mcp/index.ts`).
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5000);
/// The longest wait between two attempts to reach a remote server that went away.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One live connection with what it listed.
struct Live {
    digest: String,
    server: String,
    target: Target,
    timeout: Duration,
    conn: Connection,
    /// OpenCode's key → the tool's own name on the server.
    names: BTreeMap<String, String>,
    tools: Vec<(String, McpTool)>,
    /// Its loss was counted (once per connection).
    counted: std::sync::atomic::AtomicBool,
}

/// What one server's tool is offered as.
pub(crate) struct Offered {
    /// OpenCode's key for it.
    pub key: String,
    pub tool: McpTool,
}

#[derive(Default)]
struct Losses {
    at: HashMap<String, Vec<Instant>>,
    /// Source id → why it is paused.
    paused: HashMap<String, String>,
    /// Remote sources: when the next attempt may be made, and the wait after it.
    retry: HashMap<String, (Instant, Duration)>,
}

pub(crate) struct McpServers {
    /// The execution domain (remote servers' sign-ins are kept per domain).
    domain: String,
    live: tokio::sync::Mutex<HashMap<String, Arc<Live>>>,
    losses: Mutex<Losses>,
}

fn target_of(t: McpTarget, cwd: PathBuf, domain: &str) -> Target {
    match t {
        McpTarget::Local {
            program,
            args,
            environment,
        } => Target::Local {
            program,
            args,
            environment,
            cwd,
        },
        McpTarget::Remote {
            url,
            headers,
            oauth,
        } => Target::Remote {
            oauth: oauth::oauth_for(domain, &url, &oauth),
            url,
            headers,
        },
    }
}

impl McpServers {
    pub(crate) fn new(domain: &str) -> McpServers {
        McpServers {
            domain: domain.to_string(),
            live: tokio::sync::Mutex::new(HashMap::new()),
            losses: Mutex::new(Losses::default()),
        }
    }

    fn losses(&self) -> std::sync::MutexGuard<'_, Losses> {
        self.losses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Why `id` is paused, if its restart budget is spent.
    pub(crate) fn paused(&self, id: &str) -> Option<String> {
        self.losses().paused.get(id).cloned()
    }

    /// The refusal a paused `id` (MCP server `server`) answers with, if it is paused.
    pub(crate) fn pause_problem(&self, id: &str, server: &str) -> Option<BerthError> {
        self.paused(id)
            .map(|why| paused_error(server, &why).for_plugin(id))
    }

    /// Connects approved source `source` (again only when it changed or was lost) and returns
    /// its tools under OpenCode's keys. `cwd` is the project folder (where OpenCode starts
    /// local servers).
    pub(crate) async fn connect(
        &self,
        source: &Source,
        target: McpTarget,
        timeout: Option<Duration>,
        cwd: PathBuf,
    ) -> Result<Vec<Offered>, BerthError> {
        let mut live = self.live.lock().await;
        if let Some(l) = live.get(&source.id) {
            if l.digest == source.digest && !l.conn.is_lost() {
                return Ok(offered(&l.tools));
            }
        }
        if let Some(old) = live.remove(&source.id) {
            self.count_loss(&source.id, &old);
            old.conn.close().await;
        }
        let target = target_of(target, cwd, &self.domain);
        let l = self
            .dial(
                &source.id,
                &source.entry,
                &source.digest,
                target,
                timeout.unwrap_or(DEFAULT_TIMEOUT),
            )
            .await?;
        let tools = offered(&l.tools);
        live.insert(source.id.clone(), Arc::new(l));
        Ok(tools)
    }

    async fn dial(
        &self,
        id: &str,
        server: &str,
        digest: &str,
        target: Target,
        timeout: Duration,
    ) -> Result<Live, BerthError> {
        if let Some(why) = self.paused(id) {
            return Err(paused_error(server, &why).for_plugin(id));
        }
        let remote = matches!(target, Target::Remote { .. });
        if remote {
            if let Some((next, _)) = self.losses().retry.get(id) {
                let now = Instant::now();
                if *next > now {
                    return Err(BerthError::new(
                        code::TEMPORARILY_UNAVAILABLE,
                        &format!("mcp:{server}"),
                        format!("MCP server `{server}` could not be reached a moment ago; the next attempt is in {} ms", (*next - now).as_millis()),
                        "wait a moment and call again",
                    )
                    .for_plugin(id));
                }
            }
        }
        let connected = Connection::connect(server, &target, timeout).await;
        let conn = match connected {
            Ok(c) => {
                self.losses().retry.remove(id);
                c
            }
            Err(e) => {
                if remote && e.code == code::TEMPORARILY_UNAVAILABLE {
                    let mut l = self.losses();
                    let wait = l
                        .retry
                        .get(id)
                        .map(|(_, w)| (*w * 2).min(MAX_BACKOFF))
                        .unwrap_or(Duration::from_secs(1));
                    l.retry
                        .insert(id.to_string(), (Instant::now() + wait, wait));
                }
                return Err(e.for_plugin(id));
            }
        };
        let listed = match conn.list_tools().await {
            Ok(t) => t,
            Err(e) => {
                conn.close().await;
                return Err(e.for_plugin(id));
            }
        };
        let tools: Vec<(String, McpTool)> = listed
            .into_iter()
            .map(|t| (opencode_tool_key(server, &t.name), t))
            .collect();
        Ok(Live {
            digest: digest.to_string(),
            server: server.to_string(),
            target,
            timeout,
            names: tools
                .iter()
                .map(|(k, t)| (k.clone(), t.name.clone()))
                .collect(),
            tools,
            conn,
            counted: Default::default(),
        })
    }

    /// Counts the loss of a local server once; the budget spent pauses the source.
    fn count_loss(&self, id: &str, l: &Live) {
        let local = matches!(l.target, Target::Local { .. });
        if !local
            || !l.conn.is_lost()
            || l.conn.stopped_by_berth()
            || l.counted.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let now = Instant::now();
        let mut losses = self.losses();
        let list = losses.at.entry(id.to_string()).or_default();
        list.push(now);
        list.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        let n = list.len();
        if n >= RESTART_BUDGET {
            losses.paused.insert(
                id.to_string(),
                format!(
                    "MCP server `{}` was lost {n} times within {} minutes",
                    l.server,
                    RESTART_WINDOW.as_secs() / 60
                ),
            );
        }
    }

    /// Forgets every loss (the person resumed): true when a server was paused.
    pub(crate) fn resume_all(&self) -> bool {
        let mut l = self.losses();
        l.at.clear();
        l.retry.clear();
        let any = !l.paused.is_empty();
        l.paused.clear();
        any
    }

    /// Closes the connections of `ids` (revoked, changed, gone) and stops their processes.
    pub(crate) async fn disconnect(&self, ids: &[String]) {
        let mut live = self.live.lock().await;
        for id in ids {
            if let Some(l) = live.remove(id) {
                l.conn.close().await;
            }
        }
    }

    /// Closes every connection (shutdown).
    pub(crate) async fn close_all(&self) {
        let ids: Vec<String> = self.live.lock().await.keys().cloned().collect();
        self.disconnect(&ids).await;
    }

    /// One call of the tool OpenCode names `key`, from source `id`. A server lost since its
    /// last call is started (or dialled) again first, within its budget; the call itself is
    /// sent once.
    pub(crate) async fn call(
        &self,
        id: &str,
        key: &str,
        args: Value,
        deadline: Duration,
        cancel: Arc<tokio::sync::Notify>,
    ) -> Result<McpCallResult, BerthError> {
        let l = {
            let mut live = self.live.lock().await;
            let Some(l) = live.get(id).cloned() else {
                return Err(BerthError::new(
                    code::TEMPORARILY_UNAVAILABLE,
                    "mcp",
                    format!("{id} is not connected"),
                    "list the tools again (`berth tools`) to connect it",
                )
                .for_plugin(id));
            };
            if l.conn.is_lost() {
                self.count_loss(id, &l);
                live.remove(id);
                let again = self
                    .dial(id, &l.server, &l.digest, l.target.clone(), l.timeout)
                    .await?;
                let again = Arc::new(again);
                live.insert(id.to_string(), again.clone());
                again
            } else {
                l
            }
        };
        let Some(name) = l.names.get(key) else {
            return Err(BerthError::new(
                code::UNSUPPORTED,
                &format!("mcp:{}", l.server),
                format!("MCP server `{}` no longer lists `{key}`", l.server),
                "list the tools again (`berth tools`)",
            )
            .for_plugin(id));
        };
        let r = l.conn.call(name, args, deadline, cancel).await;
        if let Err(e) = &r {
            if e.code == code::PROCESS_LOST {
                self.count_loss(id, &l);
            }
        }
        r.map_err(|e| e.for_plugin(id))
    }
}

fn offered(tools: &[(String, McpTool)]) -> Vec<Offered> {
    tools
        .iter()
        .map(|(k, t)| Offered {
            key: k.clone(),
            tool: t.clone(),
        })
        .collect()
}

fn paused_error(server: &str, why: &str) -> BerthError {
    BerthError::new(
        code::TEMPORARILY_UNAVAILABLE,
        &format!("mcp:{server}"),
        format!("{why}; it is paused and not started again"),
        "look at the server (run its command by hand), then resume it (`berth resume`) or restart Berth",
    )
}
