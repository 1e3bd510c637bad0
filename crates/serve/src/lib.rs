//! The loopback page and API behind `berth serve`, a front end beside the CLI and the desktop
//! shell (it drives the runtime's `Berth` facade, as they do): the same `ui/` the desktop app renders, the
//! status snapshot, and a server-sent event stream of snapshot changes.
//!
//! Every `/api/*` request needs the per-start token (header `Authorization: Bearer …` or
//! `?token=`), and the Host header must name the loopback address (no DNS rebinding). Must
//! not: bind anything but a loopback address.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::stream::Stream;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::StreamExt;

use berth_base::{code, constant_time_eq, BerthError};
use berth_runtime::Berth;

/// A row of `UI_FILES`: the file `ui/<file>` at the URL path `/<file>`.
macro_rules! ui_file {
    ($file:literal, $mime:expr) => {
        (
            concat!("/", $file),
            $mime,
            include_str!(concat!("../../../ui/", $file)),
        )
    };
}

/// The page, embedded so the binary is self-contained (the desktop shell embeds the same `ui/`
/// folder): every file's URL path, content type and contents. `/` is `index.html`.
const UI_FILES: &[(&str, &str, &str)] = &[
    ("/", HTML, include_str!("../../../ui/index.html")),
    ui_file!("index.html", HTML),
    ui_file!("style.css", CSS),
    ui_file!("main.js", JS),
    ui_file!("dom.js", JS),
    ui_file!("words.js", JS),
    ui_file!("page.js", JS),
    ui_file!("focus.js", JS),
    ui_file!("problems.js", JS),
    ui_file!("header.js", JS),
    ui_file!("transport.js", JS),
    ui_file!("panels/summary.js", JS),
    ui_file!("panels/sources.js", JS),
    ui_file!("panels/approvals.js", JS),
    ui_file!("panels/limits.js", JS),
    ui_file!("panels/versions.js", JS),
    ui_file!("panels/sign_in.js", JS),
    ui_file!("panels/policy.js", JS),
    ui_file!("panels/paused.js", JS),
    ui_file!("panels/prompts.js", JS),
    ui_file!("panels/messages.js", JS),
    ui_file!("panels/tools.js", JS),
    ui_file!("panels/try_tool.js", JS),
    ui_file!("panels/conflicts.js", JS),
    ui_file!("panels/calls.js", JS),
    ui_file!("panels/hosts.js", JS),
    ui_file!("panels/environment.js", JS),
    ui_file!("panels/folders.js", JS),
    ui_file!("panels/welcome.js", JS),
    ui_file!("panels/projects.js", JS),
];
const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

#[derive(Clone)]
struct AppState {
    berth: Berth,
    token: String,
    port: u16,
    /// The page's "Try it" calls in flight, by the page's ids (`/api/cancel`).
    calls: berth_runtime::front_calls::FrontCalls,
}

/// A bound, not yet running, server.
pub struct Server {
    listener: tokio::net::TcpListener,
    state: AppState,
    /// Routers mounted beside the page's API (an MCP endpoint, for one), under the same token
    /// and Host checks.
    mounted: Vec<(&'static str, Router)>,
}

impl Server {
    /// Binds `addr` (loopback only) with a fresh random token.
    pub async fn bind(berth: Berth, addr: SocketAddr) -> Result<Server, BerthError> {
        if !addr.ip().is_loopback() {
            return Err(BerthError::new(
                code::POLICY_LIMITED,
                "serve",
                format!("{addr} is not a loopback address; the page and API are served on loopback only"),
                "use --addr 127.0.0.1:PORT",
            ));
        }
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "serve",
                format!("cannot listen on {addr}: {e}"),
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    format!("port {} is in use: pick another with --addr 127.0.0.1:PORT, or stop the program using it", addr.port())
                } else {
                    "pick another address with --addr 127.0.0.1:PORT".to_string()
                },
            )
        })?;
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or(addr.port());
        Ok(Server {
            listener,
            state: AppState {
                berth,
                token: new_token(),
                port,
                calls: Default::default(),
            },
            mounted: Vec::new(),
        })
    }

    /// Serves `router` under `path` (`/mcp`, say) beside the page's API: a request reaches it
    /// only with the token and a loopback Host, like every `/api/*` request.
    pub fn mount(mut self, path: &'static str, router: Router) -> Server {
        self.mounted.push((path, router));
        self
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// The URL a person opens (carries the token).
    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.local_addr(), self.state.token)
    }

    /// Serves until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let api = Router::new()
            .route("/api/status", get(status))
            .route("/api/events", get(events))
            .route("/api/approve", axum::routing::post(approve))
            .route("/api/deny", axum::routing::post(deny))
            .route("/api/prompt", axum::routing::post(answer_prompt))
            .route("/api/resume", axum::routing::post(resume))
            .route("/api/policy", axum::routing::post(set_policy))
            .route("/api/policy/grant", axum::routing::post(grant))
            .route("/api/invoke", axum::routing::post(invoke))
            .route("/api/cancel", axum::routing::post(cancel))
            .route("/api/updates/check", axum::routing::post(check_updates))
            .route("/api/update", axum::routing::post(update))
            .route("/api/rollback", axum::routing::post(rollback))
            .route("/api/choose", axum::routing::post(choose))
            .route("/api/prepare", axum::routing::post(prepare))
            .route("/api/mcp-sign-in", axum::routing::post(mcp_sign_in))
            .route("/api/mcp-sign-out", axum::routing::post(mcp_sign_out))
            .route("/api/open-folder", axum::routing::post(open_folder))
            .route_layer(middleware::from_fn_with_state(
                self.state.clone(),
                require_token,
            ));
        // Each mounted router behind the token, whatever it routes (a fallback service too).
        let mut guarded = Router::new();
        for (path, router) in self.mounted {
            guarded = guarded.nest(
                path,
                router.layer(middleware::from_fn_with_state(
                    self.state.clone(),
                    require_token,
                )),
            );
        }
        let mut pages = Router::new();
        for &(path, mime, body) in UI_FILES {
            pages = pages.route(path, get(move || async move { page(body, mime) }));
        }
        let app = pages
            .merge(api)
            .with_state(self.state.clone())
            .merge(guarded)
            .layer(middleware::from_fn_with_state(
                self.state,
                require_loopback_host,
            ));
        axum::serve(self.listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    }
}

fn page(body: &'static str, mime: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, "no-store"),
            (header::HeaderName::from_static("content-security-policy"), "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"),
            (header::HeaderName::from_static("x-content-type-options"), "nosniff"),
        ],
        body,
    )
        .into_response()
}

fn new_token() -> String {
    berth_base::random_hex(24)
}

fn refuse(status: StatusCode, code: &'static str, message: &str, recovery: &str) -> Response {
    let err = BerthError::new(code, "serve", message, recovery);
    (status, Json(serde_json::json!({ "error": err }))).into_response()
}

async fn require_loopback_host(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let ok = [
        format!("127.0.0.1:{}", s.port),
        format!("localhost:{}", s.port),
        format!("[::1]:{}", s.port),
    ];
    if !ok.iter().any(|h| h == host) {
        return refuse(
            StatusCode::FORBIDDEN,
            code::POLICY_LIMITED,
            "the Host header does not name this loopback server",
            "open the URL printed by `berth serve`",
        );
    }
    next.run(req).await
}

async fn require_token(State(s): State<AppState>, req: Request, next: Next) -> Response {
    if token_of(req.headers(), req.uri().query())
        .is_some_and(|t| constant_time_eq(t.as_bytes(), s.token.as_bytes()))
    {
        next.run(req).await
    } else {
        refuse(
            StatusCode::UNAUTHORIZED,
            code::ACTION_REQUIRED,
            "missing or wrong token",
            "open the URL printed by `berth serve`; it carries the token",
        )
    }
}

fn token_of<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Option<&'a str> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        return v.strip_prefix("Bearer ");
    }
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

async fn status(State(s): State<AppState>) -> impl IntoResponse {
    Json(serde_json::to_value(&*s.berth.status()).unwrap_or_default())
}

async fn approve(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    decide(s, body, berth_store::Decision::Allow).await
}

async fn deny(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    decide(s, body, berth_store::Decision::Deny).await
}

/// A request body parsed here (not by an extractor), so a bad body gets the same error
/// document as the rest; `shape` and `example` say what was expected.
// The error is the response itself, built once on a cold path: boxing it buys nothing.
#[allow(clippy::result_large_err)]
fn parse_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
    shape: &str,
    example: &str,
) -> Result<T, Response> {
    serde_json::from_slice(body).map_err(|e| {
        refuse(
            StatusCode::BAD_REQUEST,
            code::INVALID_ARGUMENTS,
            &format!("the body is not {shape}: {e}"),
            &format!("send JSON like {example}"),
        )
    })
}

/// `value` as 200, or the error document as 422.
/// Runs `work` (a store write) off the async workers and answers with its outcome.
async fn off_workers(
    work: impl FnOnce() -> Result<serde_json::Value, BerthError> + Send + 'static,
) -> Response {
    match tokio::task::spawn_blocking(work).await {
        Ok(r) => answer(r),
        Err(e) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::TEMPORARILY_UNAVAILABLE,
            &e.to_string(),
            "retry",
        ),
    }
}

fn answer(outcome: Result<serde_json::Value, BerthError>) -> Response {
    match outcome {
        Ok(v) => Json(v).into_response(),
        Err(e) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(serde_json::json!({ "error": e })),
        )
            .into_response(),
    }
}

/// Records the page's decision (the same rules as `berth approve`/`deny`) off the async
/// workers: the page never waits on more than the store write.
async fn decide(s: AppState, body: axum::body::Bytes, decision: berth_store::Decision) -> Response {
    let body: berth_runtime::approval::DecisionRequest = match parse_body(
        &body,
        "{\"ids\": [..], \"digests\": {..}}",
        "{\"ids\": [\"plugin-a-1d7e648b\"], \"digests\": {\"plugin-a-1d7e648b\": \"sha256:…\"}}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    // An approval carries the digest of what the person saw; a moved source is refused.
    let choices = match body.choices(decision) {
        Ok(c) => c,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.code, &e.message, &e.recovery),
    };
    let berth = s.berth.clone();
    let with_fetch = body.including_fetch && decision == berth_store::Decision::Allow;
    off_workers(move || {
        let decided = if with_fetch {
            berth.approve_including_fetch(Some(&choices), "page", false)
        } else {
            berth.decide(Some(&choices), decision, "page", false)
        };
        decided.map(|decided| {
            let ids: Vec<&str> = decided.iter().map(|d| d.id.as_str()).collect();
            serde_json::json!({ "decided": ids })
        })
    })
    .await
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyChange {
    key: String,
    /// `null` takes the person's setting back.
    value: serde_json::Value,
}

/// The person's value of one policy key: `{"key": "cap.ui", "value": "review"}` (the same
/// rules as `berth policy set`: a value that loosens the organisation's is refused).
async fn set_policy(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let change: PolicyChange = match parse_body(
        &body,
        "{\"key\": .., \"value\": ..}",
        "{\"key\": \"cap.ui\", \"value\": \"review\"}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let berth = s.berth.clone();
    let value = Some(change.value).filter(|v| !v.is_null());
    off_workers(move || {
        berth
            .set_policy(&change.key, value, "page")
            .map(|entry| serde_json::json!({ "set": entry }))
    })
    .await
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Grant {
    source: String,
    item: String,
    granted: bool,
}

/// Lets one held contribution of a source through its `review` cap, or holds it again.
async fn grant(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let g: Grant = match parse_body(
        &body,
        "{\"source\": .., \"item\": .., \"granted\": ..}",
        "{\"source\": \"plugin-a-1d7e648b\", \"item\": \"hook:shell.env\", \"granted\": true}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let berth = s.berth.clone();
    off_workers(move || {
        berth.grant(&g.source, &g.item, g.granted).map(|()| {
            serde_json::json!({ "grant": { "source": g.source, "item": g.item, "granted": g.granted } })
        })
    })
    .await
}

#[derive(serde::Deserialize)]
struct Answer {
    id: String,
    reply: berth_runtime::world::PromptReply,
}

/// The person's answer to a tool's permission prompt: `{"id": "per_…", "reply": "once"}`.
async fn answer_prompt(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let body: Answer = match parse_body(
        &body,
        "{\"id\": .., \"reply\": \"once\"|\"always\"|\"reject\"}",
        "{\"id\": \"per_…\", \"reply\": \"once\"}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    answer(
        s.berth
            .answer_prompt(&body.id, body.reply)
            .map(|()| serde_json::json!({ "answered": body.id })),
    )
}

/// Manual resume of paused plugin hosts (restart budget spent): `{}`.
async fn resume(State(s): State<AppState>) -> Response {
    let resumed = s.berth.resume_hosts().await;
    Json(serde_json::json!({ "resumed": resumed })).into_response()
}

#[derive(serde::Deserialize)]
struct Check {
    #[serde(default)]
    sources: Option<Vec<String>>,
}

/// Asks the registry now what each npm plugin's spec allows: `{"sources"?: [ids]}` →
/// `{"offers": [...], "errors": [...]}` (also in the next snapshots).
async fn check_updates(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let body: Check = if body.is_empty() {
        Check { sources: None }
    } else {
        match parse_body(
            &body,
            "{\"sources\"?: [..]}",
            "{\"sources\": [\"npm-foo-1d7e648b\"]}",
        ) {
            Ok(b) => b,
            Err(r) => return r,
        }
    };
    Json(s.berth.check_updates(body.sources.as_deref()).await).into_response()
}

#[derive(serde::Deserialize)]
struct Change {
    source: String,
    #[serde(default)]
    approve_growth: bool,
    #[serde(default)]
    to: Option<i64>,
}

#[derive(serde::Deserialize)]
struct Choice {
    tool: String,
    candidate: String,
}

/// The person chooses who serves a contested tool name (as `berth choose`):
/// `{"tool": "read", "candidate": "plugin-a-1d7e648b"}` → `{"conflict": …}`.
async fn choose(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let c: Choice = match parse_body(
        &body,
        "{\"tool\": .., \"candidate\": ..}",
        "{\"tool\": \"read\", \"candidate\": \"builtin\"}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    answer(
        s.berth
            .choose(&c.tool, &c.candidate)
            .await
            .map(|conflict| serde_json::json!({ "conflict": conflict })),
    )
}

/// Prepares an MCP server's fetch-and-run package in Berth's data dir (as `berth prepare`):
/// `{"source": id}` → `{"prepared": …}`.
async fn prepare(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let body: Change = match parse_body(
        &body,
        "{\"source\": ..}",
        "{\"source\": \"mcp-fetched-1d7e648b\"}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    answer(
        s.berth
            .prepare_mcp(&body.source)
            .await
            .map(|p| serde_json::json!({ "prepared": p })),
    )
}

/// Starts a sign-in to a remote MCP server (as `berth mcp-login`, the browser opened on this
/// computer): `{"source": id}` → `{"signing_in": {"url": page}}` once the provider's page is
/// known; the source's `sign_in` in the snapshots shows how it ends.
async fn mcp_sign_in(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let body: Change = match parse_body(&body, "{\"source\": ..}", "{\"source\": \"mcp-1d7e648b\"}")
    {
        Ok(b) => b,
        Err(r) => return r,
    };
    answer(
        s.berth
            .start_mcp_sign_in(&body.source)
            .await
            .map(|url| serde_json::json!({ "signing_in": { "url": url } })),
    )
}

/// Forgets a remote MCP server's sign-in (as `berth mcp-logout`): `{"source": id}`.
async fn mcp_sign_out(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let body: Change = match parse_body(&body, "{\"source\": ..}", "{\"source\": \"mcp-1d7e648b\"}")
    {
        Ok(b) => b,
        Err(r) => return r,
    };
    answer(
        s.berth
            .mcp_sign_out(&body.source)
            .await
            .map(|d| serde_json::json!({ "signed_out": d })),
    )
}

/// Opens Berth's log folder or the global config folder in the file manager:
/// `{"folder": "logs"|"config"}` → `{"opened": path}` (a name, never a path, is accepted).
async fn open_folder(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    #[derive(serde::Deserialize)]
    struct Body {
        folder: String,
    }
    let body: Body = match parse_body(&body, "{\"folder\": ..}", "{\"folder\": \"logs\"}") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let berth = s.berth.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let folder = berth_runtime::folders::Folder::parse(&body.folder)?;
        berth_runtime::folders::open(&berth, folder)
    })
    .await
    .unwrap_or_else(|e| {
        Err(BerthError::new(
            berth_runtime::code::TEMPORARILY_UNAVAILABLE,
            "open folder",
            e.to_string(),
            "retry",
        ))
    });
    answer(opened.map(|p| serde_json::json!({ "opened": p })))
}

/// Updates one npm plugin (as `berth update`): `{"source": id, "approve_growth"?: bool}` →
/// `{"update": outcome}`. Its progress is in the snapshots meanwhile.
async fn update(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    change(s, body, false).await
}

/// Runs an exact earlier version again (as `berth rollback`): `{"source": id, "to"?: N}`.
async fn rollback(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    change(s, body, true).await
}

async fn change(s: AppState, body: axum::body::Bytes, rollback: bool) -> Response {
    let body: Change = match parse_body(
        &body,
        "{\"source\": ..}",
        "{\"source\": \"npm-foo-1d7e648b\"}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let outcome = if rollback {
        s.berth.rollback(&body.source, body.to).await
    } else {
        s.berth.update(&body.source, body.approve_growth).await
    };
    answer(outcome.map(|o| serde_json::json!({ "update": o })))
}

#[derive(serde::Deserialize)]
struct Invoke {
    tool: String,
    #[serde(default)]
    args: serde_json::Value,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    /// The page's id for the call, which `/api/cancel` cancels while it runs.
    #[serde(default)]
    call: Option<String>,
}

/// One tool call through the full path (receipt, idempotency), as `berth invoke`:
/// `{"tool": "…", "args": {…}, "idempotency_key"?: "…", "timeout_ms"?: N}` → the receipt.
async fn invoke(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let body: Invoke = match parse_body(
        &body,
        "{\"tool\": .., \"args\": {..}}",
        "{\"tool\": \"weather\", \"args\": {\"city\": \"Oslo\"}}",
    ) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let args = if body.args.is_null() {
        serde_json::json!({})
    } else {
        body.args
    };
    let (control, _running) = s.calls.start(body.call.as_deref());
    let receipt = s
        .berth
        .invoke(
            &body.tool,
            args,
            body.idempotency_key.as_deref(),
            body.timeout_ms.map(std::time::Duration::from_millis),
            control,
        )
        .await;
    answer(receipt.map(|r| serde_json::to_value(r).unwrap_or_default()))
}

/// Cancels a call the page started (`{"call": id}` as it gave `/api/invoke`) →
/// `{"cancelled": bool}` (false: it had ended). The call's receipt says how it ended.
async fn cancel(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    #[derive(serde::Deserialize)]
    struct Body {
        call: String,
    }
    let body: Body = match parse_body(&body, "{\"call\": ..}", "{\"call\": \"page-1\"}") {
        Ok(b) => b,
        Err(r) => return r,
    };
    Json(serde_json::json!({ "cancelled": s.calls.cancel(&body.call) })).into_response()
}

/// `status` events carry the whole snapshot; the first one is sent at once.
async fn events(State(s): State<AppState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let first = s.berth.status();
    let initial = tokio_stream::once(Ok(Event::default()
        .event("status")
        .data(serde_json::to_string(&*first).unwrap_or_default())));
    // A reader too slow for the bounded channel skips what it missed and gets the latest
    // snapshot (snapshots are whole; nothing is lost by skipping).
    let berth = s.berth.clone();
    let updates = BroadcastStream::new(s.berth.subscribe()).map(move |ev| {
        let snapshot = match ev {
            Ok(ev) => ev.snapshot,
            Err(_lagged) => berth.status(),
        };
        Ok(Event::default()
            .event("status")
            .data(serde_json::to_string(&*snapshot).unwrap_or_default()))
    });
    Sse::new(initial.chain(updates)).keep_alive(KeepAlive::new().interval(Duration::from_secs(30)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get_status(addr: SocketAddr, path: &str, host: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    /// A router mounted beside the API (the seam an MCP endpoint uses) answers only with the
    /// token and a loopback Host, like `/api/*`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_mounted_router_is_behind_the_token_and_the_host_check() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let env = berth_discovery::OpencodeEnv {
            home: dir.path().join("home"),
            cwd: project.clone(),
            managed_config_dir: dir.path().join("managed"),
            ..Default::default()
        };
        let berth = Berth::open(berth_runtime::BerthOptions {
            data_dir: dir.path().join("data"),
            project,
            env,
            log_file: None,
        })
        .unwrap();
        let server = Server::bind(berth, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap()
            .mount(
                "/extra",
                Router::new().route("/hello", get(|| async { "mounted" })),
            );
        let (addr, token) = (server.local_addr(), server.token().to_string());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        let host = addr.to_string();
        let ok = get_status(addr, &format!("/extra/hello?token={token}"), &host).await;
        assert!(
            ok.starts_with("HTTP/1.1 200") && ok.ends_with("mounted"),
            "{ok}"
        );
        let no_token = get_status(addr, "/extra/hello", &host).await;
        assert!(no_token.starts_with("HTTP/1.1 401"), "{no_token}");
        let rebound = get_status(
            addr,
            &format!("/extra/hello?token={token}"),
            "evil.example:80",
        )
        .await;
        assert!(!rebound.starts_with("HTTP/1.1 200"), "{rebound}");
        let _ = stop.send(());
        task.await.unwrap().unwrap();
    }
}
