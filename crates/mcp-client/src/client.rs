//! One connection: connect (spawn or dial), list the tools, call one with a deadline and a
//! cancel, close. Every failure is a `BerthError` naming the server, the capability and a way
//! out.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_base::error::{code, BerthError};
use berth_host::{launch::Launch, procs};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, RunningService, ServiceError};
use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::sync::{watch, Notify};

/// After `notifications/cancelled`, how long a local server has to answer before its process
/// tree is killed (the plugin hosts' grace, DESIGN.md).
pub const CANCEL_GRACE: Duration = Duration::from_millis(500);
/// The last bytes of a local server's stderr kept in memory (never logged: it may echo secrets).
const STDERR_TAIL: usize = 8 * 1024;

/// Where the server is.
#[derive(Clone)]
pub enum Target {
    /// A program Berth starts, with the entry's `environment` over a minimal one.
    Local {
        program: String,
        args: Vec<String>,
        environment: Vec<(String, String)>,
        cwd: PathBuf,
    },
    /// A streamable HTTP endpoint, with the entry's `headers`; with `oauth`, the bearer
    /// token of the person's sign-in (refreshed when it expires) on every request.
    Remote {
        url: String,
        headers: Vec<(String, String)>,
        oauth: Option<crate::OAuth>,
    },
}

/// One tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    /// The JSON Schema the server gave (`inputSchema`), as it gave it.
    pub input_schema: Value,
}

/// What one `tools/call` answered.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    /// The text blocks joined by newlines (what OpenCode puts in the tool's output).
    pub text: String,
    /// Every content block as the server sent it.
    pub content: Value,
    pub structured: Option<Value>,
    /// The tool said it failed (`isError`): an answer, not a broken server.
    pub is_error: bool,
}

/// How a call ended when it did not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Answered,
    /// Cancelled by the caller: the server was told, and killed after the grace if local.
    Cancelled,
    TimedOut,
}

/// The variables a local server gets besides its entry's `environment`: enough to find programs
/// and write temporary files, nothing of Berth's or the person's other secrets (D-037; OpenCode
/// passes its whole environment).
pub fn minimal_environment() -> Vec<(String, String)> {
    const KEEP: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TERM",
        "TMPDIR",
        "TZ",
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
    ];
    KEEP.iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// A local server's process: its group and tree mark, killed with the connection.
struct Child {
    pgid: i32,
    tree: String,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// Berth stopped it (a cancel's grace ran out, a close): not a crash.
    stopped: std::sync::atomic::AtomicBool,
}

impl Child {
    fn kill(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        procs::kill_group(self.pgid);
        procs::reclaim_orphans(&self.tree);
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A live session with one server.
pub struct Connection {
    server: String,
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ()>>>,
    child: Option<Child>,
    /// Set once the server is gone (its process exited, its transport closed), with why.
    lost: watch::Receiver<Option<String>>,
    /// A remote server has no process to watch: its sender lives here (dropping it would read
    /// as lost).
    _remote_lost: Option<watch::Sender<Option<String>>>,
}

fn err(server: &str, code: &'static str, message: String, recovery: &str) -> BerthError {
    BerthError::new(code, &format!("mcp:{server}"), message, recovery)
}

impl Connection {
    /// Starts or dials the server and runs the MCP handshake, within `timeout`.
    pub async fn connect(
        server: &str,
        target: &Target,
        timeout: Duration,
    ) -> Result<Connection, BerthError> {
        match target {
            Target::Local {
                program,
                args,
                environment,
                cwd,
            } => Self::connect_local(server, program, args, environment, cwd, timeout).await,
            Target::Remote {
                url,
                headers,
                oauth,
            } => Self::connect_remote(server, url, headers, oauth.as_ref(), timeout).await,
        }
    }

    async fn connect_local(
        server: &str,
        program: &str,
        args: &[String],
        environment: &[(String, String)],
        cwd: &std::path::Path,
        timeout: Duration,
    ) -> Result<Connection, BerthError> {
        procs::become_subreaper();
        let tree = format!("mcp-{}", berth_base::random_hex(8));
        let launch = Launch {
            program: program.into(),
            args: args.iter().map(Into::into).collect(),
            tree: tree.clone(),
            boundary: None,
        };
        let mut ready = launch.command().map_err(|e| {
            err(
                server,
                code::PLUGIN_FAILED,
                format!("MCP server `{server}` cannot be started: {e}"),
                "check its `command` in the config",
            )
        })?;
        let cmd = &mut ready.command;
        cmd.env_clear();
        for (k, v) in minimal_environment().iter().chain(environment) {
            cmd.env(k, v);
        }
        cmd.env(procs::TREE_VAR, &tree);
        if cwd.is_dir() {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().map_err(|e| {
            err(
                server,
                code::PLUGIN_FAILED,
                format!("MCP server `{server}` cannot be started: `{program}`: {e}"),
                "check that its program is installed and on PATH (Berth gives it a minimal environment), or fix `command` in the config",
            )
        })?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(mut stderr) = child.stderr.take() {
            let tail = stderr_tail.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    t.extend(&buf[..n]);
                    let over = t.len().saturating_sub(STDERR_TAIL);
                    t.drain(..over);
                }
            });
        }
        let (lost_tx, lost) = watch::channel(None);
        tokio::spawn(async move {
            let why = match child.wait().await {
                Ok(status) => format!("its process exited ({status})"),
                Err(e) => format!("its process could not be watched: {e}"),
            };
            let _ = lost_tx.send(Some(why));
        });
        let child = Child {
            pgid,
            tree,
            stderr: stderr_tail,
            stopped: Default::default(),
        };
        let mut lost_early = lost.clone();
        let served = tokio::select! {
            r = tokio::time::timeout(timeout, ().serve((stdout, stdin))) => r,
            w = lost_early.wait_for(Option::is_some) => {
                let why = w.ok().and_then(|v| v.clone()).unwrap_or_default();
                return Err(err(server, code::PLUGIN_FAILED, format!("MCP server `{server}` ended before its handshake: {why}"), "run its command by hand to see why it stops"));
            }
        };
        let service = match served {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(err(
                    server,
                    code::INVALID_RESPONSE,
                    format!("MCP server `{server}` failed the MCP handshake: {e}"),
                    "check that its command starts an MCP server on stdio",
                ))
            }
            Err(_) => return Err(err(
                server,
                code::TIMEOUT,
                format!(
                    "MCP server `{server}` did not finish the MCP handshake within {} ms",
                    timeout.as_millis()
                ),
                "raise its `timeout` in the config, or run its command by hand to see why it hangs",
            )),
        };
        Ok(Connection {
            server: server.to_string(),
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            child: Some(child),
            lost,
            _remote_lost: None,
        })
    }

    async fn connect_remote(
        server: &str,
        url: &str,
        headers: &[(String, String)],
        oauth: Option<&crate::OAuth>,
        timeout: Duration,
    ) -> Result<Connection, BerthError> {
        use rmcp::transport::auth::AuthClient;
        use rmcp::transport::streamable_http_client::{
            StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
        };
        let mut map = std::collections::HashMap::new();
        for (k, v) in headers {
            // The header's name may be shown; its value never is.
            let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                err(
                    server,
                    code::ACTION_REQUIRED,
                    format!("MCP server `{server}`: `{k}` is not a valid header name"),
                    "fix `headers` in the config",
                )
            })?;
            let value = http::HeaderValue::from_str(v).map_err(|_| {
                err(
                    server,
                    code::ACTION_REQUIRED,
                    format!(
                        "MCP server `{server}`: the value of header `{k}` is not valid in HTTP"
                    ),
                    "fix `headers` in the config",
                )
            })?;
            map.insert(name, value);
        }
        let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(map);
        let served = match oauth {
            Some(oauth) => {
                let manager = crate::oauth::manager(server, url, oauth).await?;
                let client = AuthClient::new(reqwest::Client::new(), manager);
                let transport = StreamableHttpClientTransport::with_client(client, config);
                tokio::time::timeout(timeout, ().serve(transport)).await
            }
            None => {
                let transport =
                    StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
                tokio::time::timeout(timeout, ().serve(transport)).await
            }
        };
        let service = match served {
            Ok(Ok(s)) => s,
            Ok(Err(e)) if asks_for_sign_in(&e) => {
                return Err(match oauth {
                    Some(_) => err(
                        server,
                        code::ACTION_REQUIRED,
                        format!("MCP server `{server}` at {} asks you to sign in", host_of(url)),
                        &format!("sign in: `berth mcp-login {server}`, or Sign in on its card"),
                    ),
                    None => err(
                        server,
                        code::ACTION_REQUIRED,
                        format!("MCP server `{server}` at {} asks for a sign-in, and its entry says `\"oauth\": false`", host_of(url)),
                        "give it a token in `headers` (e.g. `Authorization`), or remove `\"oauth\": false` to sign in through Berth",
                    ),
                });
            }
            Ok(Err(e)) => {
                if legacy_sse(url).await {
                    return Err(err(
                        server,
                        code::UNSUPPORTED,
                        format!("MCP server `{server}` speaks only the legacy HTTP+SSE transport (its URL is an event stream that names a POST endpoint); OpenCode falls back to it, Berth's MCP SDK no longer has it"),
                        "use the server's streamable HTTP endpoint if it has one, or use it from OpenCode",
                    ));
                }
                return Err(err(
                    server,
                    code::TEMPORARILY_UNAVAILABLE,
                    format!("MCP server `{server}` at {} cannot be reached over streamable HTTP: {e}", host_of(url)),
                    "check that the server is running and its `url`; Berth tries again on the next call",
                ));
            }
            Err(_) => {
                return Err(err(
                    server,
                    code::TIMEOUT,
                    format!(
                        "MCP server `{server}` at {} did not finish the MCP handshake within {} ms",
                        host_of(url),
                        timeout.as_millis()
                    ),
                    "check the server, or raise its `timeout` in the config",
                ))
            }
        };
        let (tx, lost) = watch::channel(None);
        Ok(Connection {
            server: server.to_string(),
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            child: None,
            lost,
            _remote_lost: Some(tx),
        })
    }

    /// Whether Berth stopped the server itself (after a cancel's grace, or a close): gone, but
    /// not a crash.
    pub fn stopped_by_berth(&self) -> bool {
        self.child
            .as_ref()
            .is_some_and(|c| c.stopped.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Whether the server is gone (process exited, transport closed).
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some() || self.peer.is_transport_closed()
    }

    /// The last bytes the local server wrote to stderr (for a person to read on request; never
    /// logged, since it may echo a secret).
    pub fn stderr_tail(&self) -> String {
        self.child
            .as_ref()
            .map(|c| {
                let t = c.stderr.lock().unwrap_or_else(|p| p.into_inner());
                String::from_utf8_lossy(&t.iter().copied().collect::<Vec<_>>()).into_owned()
            })
            .unwrap_or_default()
    }

    /// Every tool the server lists (all pages).
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, BerthError> {
        let tools = self
            .peer
            .list_all_tools()
            .await
            .map_err(|e| self.service_error(e, "tools/list"))?;
        Ok(tools
            .into_iter()
            .map(|t| McpTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    fn service_error(&self, e: ServiceError, what: &str) -> BerthError {
        let server = &self.server;
        match e {
            ServiceError::McpError(m) => err(
                server,
                code::PLUGIN_FAILED,
                format!("MCP server `{server}` refused {what}: {}", m.message),
                "check the arguments against the tool's schema (`berth tools`)",
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => self.lost_error(what),
            other => err(
                server,
                code::INVALID_RESPONSE,
                format!("MCP server `{server}` gave no usable answer to {what}: {other}"),
                "retry; if it persists, look at the server",
            ),
        }
    }

    fn lost_error(&self, what: &str) -> BerthError {
        let server = &self.server;
        let why = self.lost.borrow().clone();
        match (&self.child, why) {
            (Some(_), why) => err(
                server,
                code::PROCESS_LOST,
                format!(
                    "MCP server `{server}` was lost during {what}: {}; the call is not sent again (it may have had an effect)",
                    why.unwrap_or_else(|| "its transport closed".into())
                ),
                "call again to restart the server (within its restart budget)",
            ),
            (None, _) => err(
                server,
                code::TEMPORARILY_UNAVAILABLE,
                format!("the connection to MCP server `{server}` was lost during {what}; the call is not sent again"),
                "call again: Berth reconnects (with backoff)",
            ),
        }
    }

    /// One `tools/call`. It ends at `deadline` (`timeout`) or when `cancel` is notified (then
    /// `cancelled`): the server gets `notifications/cancelled`, and a local server that has
    /// not answered within [`CANCEL_GRACE`] is killed with its tree. A server lost mid-call
    /// ends it `process-lost`. Never sent twice.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        deadline: Duration,
        cancel: Arc<Notify>,
    ) -> Result<McpCallResult, BerthError> {
        let server = &self.server;
        let arguments = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            _ => {
                return Err(err(
                    server,
                    code::INVALID_ARGUMENTS,
                    format!("the arguments of `{tool}` must be a JSON object"),
                    "pass --args '{…}'",
                ))
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.service_error(e, &format!("`{tool}`")))?;
        let id = handle.id.clone();
        let mut lost = self.lost.clone();
        let answer = handle.await_response();
        tokio::pin!(answer);
        let ended = tokio::select! {
            r = &mut answer => return self.answer(tool, r),
            _ = cancel.notified() => CallOutcome::Cancelled,
            _ = tokio::time::sleep(deadline) => CallOutcome::TimedOut,
            _ = lost.wait_for(Option::is_some) => {
                return Err(self.lost_error(&format!("`{tool}`")));
            }
        };
        let reason = match ended {
            CallOutcome::TimedOut => "deadline exceeded",
            _ => "cancelled by the caller",
        };
        let _ = self
            .peer
            .notify_cancelled(CancelledNotificationParam::new(
                Some(id),
                Some(reason.into()),
            ))
            .await;
        // Nothing tells whether the server really stopped the call (it owes no answer to a
        // cancelled request), so a local one gets the grace and is then stopped with its tree:
        // nothing of the call keeps running. It starts again on the next call, and this stop
        // does not count against its restart budget.
        if let Some(child) = &self.child {
            let _ = tokio::time::timeout(CANCEL_GRACE, lost.wait_for(Option::is_some)).await;
            child.kill();
        }
        Err(match ended {
            CallOutcome::TimedOut => err(
                server,
                code::TIMEOUT,
                format!("`{tool}` of MCP server `{server}` did not answer within {} ms; it was cancelled", deadline.as_millis()),
                "call again with a longer --timeout-ms, or raise the policy's budget.tool",
            ),
            _ => err(
                server,
                code::CANCELLED,
                format!("`{tool}` of MCP server `{server}` was cancelled; the server was told"),
                "call again if you still want the result",
            ),
        })
    }

    fn answer(
        &self,
        tool: &str,
        r: Result<ServerResult, ServiceError>,
    ) -> Result<McpCallResult, BerthError> {
        match r {
            Ok(ServerResult::CallToolResult(res)) => {
                let content = serde_json::to_value(&res.content).unwrap_or(Value::Null);
                let text = content
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                Ok(McpCallResult {
                    text,
                    content,
                    structured: res.structured_content.clone(),
                    is_error: res.is_error.unwrap_or(false),
                })
            }
            Ok(_) => Err(err(
                &self.server,
                code::INVALID_RESPONSE,
                format!(
                    "MCP server `{}` answered `{tool}` with something that is not a tool result",
                    self.server
                ),
                "look at the server",
            )),
            Err(e) => Err(self.service_error(e, &format!("`{tool}`"))),
        }
    }

    /// Ends the session and stops a local server's whole tree.
    pub async fn close(&self) {
        if let Some(s) = self.service.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_millis(200), s.cancel()).await;
        }
        if let Some(c) = &self.child {
            c.kill();
        }
    }
}

/// Whether the handshake ended because the server wants a bearer token (HTTP 401, or a 403
/// asking for more scope).
fn asks_for_sign_in(e: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::service::ClientInitializeError as E;
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut next: Option<&(dyn std::error::Error + 'static)> = match e {
        E::TransportError { error, .. } => Some(error),
        E::LegacyFallbackFailed { discover, fallback } => {
            return asks_for_sign_in(discover) || asks_for_sign_in(fallback)
        }
        _ => None,
    };
    while let Some(e) = next {
        if e.is::<AuthRequiredError>() || e.is::<InsufficientScopeError>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// The host of a URL, for messages (never its path or query, which may carry a token).
fn host_of(url: &str) -> String {
    url.split_once("://")
        .map(|(_, r)| r.split(['/', '?', '#']).next().unwrap_or(r))
        .map(|a| a.rsplit('@').next().unwrap_or(a).to_string())
        .unwrap_or_default()
}

/// Whether `url` is a legacy HTTP+SSE endpoint: a GET answers with an event stream whose first
/// event is `endpoint`.
async fn legacy_sse(url: &str) -> bool {
    let probe = async {
        let resp = reqwest::Client::new()
            .get(url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .ok()?;
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !sse {
            return Some(false);
        }
        let mut resp = resp;
        let mut seen = Vec::new();
        while seen.len() < 4096 {
            let chunk = resp.chunk().await.ok()??;
            seen.extend_from_slice(&chunk);
            if String::from_utf8_lossy(&seen).contains("\n\n") {
                break;
            }
        }
        Some(String::from_utf8_lossy(&seen).contains("event: endpoint"))
    };
    tokio::time::timeout(Duration::from_secs(2), probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}
