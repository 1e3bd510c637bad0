//! The `serverUrl` a plugin is given: one loopback HTTP service per plugin instance that speaks
//! the routes of OpenCode 1.18.4's server the SDK client and plugins use, and answers only its
//! host (a token the host got in the load request and adds to its own requests; other local
//! processes get 401). Every request is attributed to the plugin whose service it reached.
//! Deviations ledger D-018.
//!
//! Owns: the route table (OpenCode path → the `client.*` method it serves), the token and Host
//! checks, and OpenCode-shaped HTTP answers. Must not: decide anything itself — every answer
//! comes from the same [`Upcalls`] the socket's `up` frames use (`crate::world`), so a plugin
//! gets the same result whether it calls `client.config.get()` or fetches `${serverUrl}config`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::Upcalls;
use berth_discovery::spec::percent_decode;

/// The OpenCode version whose routes are served.
pub const OPENCODE_VERSION: &str = "1.18.4";
/// Header the host adds to its requests to its own `serverUrl`.
pub const TOKEN_HEADER: &str = "x-berth-token";

/// `(HTTP method, OpenCode route, client method)`: the routes Berth serves. `{x}` matches one
/// path segment, passed on as `path.x`.
const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/config", "config.get"),
    ("GET", "/path", "path.get"),
    ("GET", "/project/current", "project.current"),
    ("GET", "/experimental/tool/ids", "tool.ids"),
    ("POST", "/log", "app.log"),
    ("POST", "/tui/show-toast", "tui.showToast"),
    ("PUT", "/auth/{id}", "auth.set"),
    ("GET", "/session", "session.list"),
    ("GET", "/session/status", "session.status"),
    ("GET", "/session/{id}", "session.get"),
    ("GET", "/session/{id}/message", "session.messages"),
    ("GET", "/session/{id}/todo", "session.todo"),
    ("GET", "/session/{id}/children", "session.children"),
];

/// The client method a request maps to, with its path parameters.
pub fn route(method: &str, path: &str) -> Option<(&'static str, serde_json::Map<String, Value>)> {
    let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    'routes: for (m, pattern, target) in ROUTES {
        if *m != method {
            continue;
        }
        let pat: Vec<&str> = pattern.split('/').skip(1).collect();
        if pat.len() != segs.len() {
            continue;
        }
        let mut params = serde_json::Map::new();
        for (p, s) in pat.iter().zip(&segs) {
            if let Some(name) = p.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                if s.is_empty() {
                    continue 'routes;
                }
                params.insert(name.to_string(), Value::String(percent_decode(s)));
            } else if p != s {
                continue 'routes;
            }
        }
        return Some((target, params));
    }
    None
}

struct Service {
    upcalls: Arc<dyn Upcalls>,
    /// The plugin this service belongs to: every request is attributed to it.
    instance: String,
    token: String,
    port: u16,
}

/// Starts the service of plugin `instance` on 127.0.0.1 (a free port). Returns its URL
/// (`http://127.0.0.1:<port>/`) and a handle that stops it.
pub async fn start(
    upcalls: Arc<dyn Upcalls>,
    instance: String,
    token: String,
) -> std::io::Result<(String, tokio::task::AbortHandle)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let port = listener.local_addr()?.port();
    let service = Arc::new(Service {
        upcalls,
        instance,
        token,
        port,
    });
    let app = axum::Router::new().fallback(handle).with_state(service);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("http://127.0.0.1:{port}/"), task.abort_handle()))
}

async fn handle(State(svc): State<Arc<Service>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if !host_is_ours(&parts.headers, svc.port) {
        return plain(StatusCode::FORBIDDEN, "unexpected Host header");
    }
    let presented = parts
        .headers
        .get(TOKEN_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !berth_base::constant_time_eq(presented, svc.token.as_bytes()) {
        return plain(
            StatusCode::UNAUTHORIZED,
            "this service answers only the plugin host it belongs to",
        );
    }
    let body = match axum::body::to_bytes(body, 1024 * 1024).await {
        Ok(b) => b,
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "the body is over 1 MiB"),
    };
    let body = parse_body(&parts.method, &body);
    let (status, body) = respond(
        &svc.upcalls,
        &svc.instance,
        parts.method.as_str(),
        parts.uri.path(),
        parts.uri.query().unwrap_or_default(),
        body,
    )
    .await;
    versioned(status, body)
}

/// A `serverUrl` request that came on the channel (a restricted host, whose loopback service
/// is out of its reach): `{method, path, query, body}` → `{status, body, opencodeVersion}`,
/// the same answer the service gives. `instance` is the plugin the request is attributed to.
pub async fn on_channel(upcalls: &Arc<dyn Upcalls>, instance: &str, request: Value) -> Value {
    let method = request["method"]
        .as_str()
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let text = request["body"].as_str().unwrap_or_default();
    let body = if text.len() > 1024 * 1024 {
        return json!({ "status": 413, "body": { "name": "PayloadTooLarge", "data": { "message": "the body is over 1 MiB" } }, "opencodeVersion": OPENCODE_VERSION });
    } else {
        serde_json::from_str(text).unwrap_or(Value::Null)
    };
    let (status, body) = respond(
        upcalls,
        instance,
        &method,
        request["path"].as_str().unwrap_or("/"),
        request["query"].as_str().unwrap_or_default(),
        body,
    )
    .await;
    json!({ "status": status.as_u16(), "body": body, "opencodeVersion": OPENCODE_VERSION })
}

/// Routes one request to the `client.*` method it serves and shapes the answer.
async fn respond(
    upcalls: &Arc<dyn Upcalls>,
    instance: &str,
    method: &str,
    path: &str,
    query: &str,
    body: Value,
) -> (StatusCode, Value) {
    let Some((target, params)) = route(method, path) else {
        let route = format!("{method} {path}");
        tracing::debug!(%route, "a plugin asked serverUrl for a route Berth does not serve");
        return (
            StatusCode::NOT_IMPLEMENTED,
            json!({
                "name": "UnsupportedError",
                "data": {
                    "code": berth_base::code::UNSUPPORTED,
                    "route": route,
                    "opencodeVersion": OPENCODE_VERSION,
                    "message": format!("{route} (OpenCode {OPENCODE_VERSION} API) is not served by Berth's loopback service"),
                    "alternative": "see Berth's compatibility notes; the plugin should treat this route as unavailable",
                }
            }),
        );
    };
    let query: serde_json::Map<String, Value> = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), Value::String(percent_decode(v)))
        })
        .collect();
    let input = json!({ "path": params, "query": query, "body": body });
    // One service per plugin: the request is that plugin's.
    let outcome = upcalls
        .call(instance.to_string(), format!("client.{target}"), input)
        .await;
    // A client answer is `{data}` or `{status, error}` (crate::world).
    match outcome {
        Ok(mut v) if v.get("error").is_some() => {
            let status = v["status"]
                .as_u64()
                .and_then(|s| StatusCode::from_u16(s as u16).ok());
            (
                status.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                v["error"].take(),
            )
        }
        Ok(mut v) => (StatusCode::OK, v["data"].take()),
        Err(e) => (
            match e.code.as_str() {
                berth_base::code::OVERLOADED => StatusCode::TOO_MANY_REQUESTS,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            },
            json!({ "name": "UnknownError", "data": { "code": e.code, "message": e.message, "opencodeVersion": OPENCODE_VERSION } }),
        ),
    }
}

fn parse_body(method: &Method, body: &Bytes) -> Value {
    if *method == Method::GET || body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

fn host_is_ours(headers: &HeaderMap, port: u16) -> bool {
    let Some(host) = headers.get("host").and_then(|h| h.to_str().ok()) else {
        return false;
    };
    host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
}

fn plain(status: StatusCode, msg: &'static str) -> Response {
    (status, msg).into_response()
}

fn versioned(status: StatusCode, body: Value) -> Response {
    let mut r = (status, axum::Json(body)).into_response();
    r.headers_mut().insert(
        "x-opencode-compat",
        HeaderValue::from_static(OPENCODE_VERSION),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_protocol::WireError;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct Echo;
    impl Upcalls for Echo {
        fn call(
            &self,
            instance: String,
            method: String,
            body: Value,
        ) -> futures_util::future::BoxFuture<'static, Result<Value, WireError>> {
            Box::pin(async move {
                Ok(json!({ "data": { "instance": instance, "method": method, "body": body } }))
            })
        }
    }

    async fn get(url: &str, path: &str, headers: &str) -> (u16, String) {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{headers}\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let status = out[9..12].parse().unwrap();
        (status, out)
    }

    #[tokio::test]
    async fn only_the_hosts_token_opens_the_service() {
        let (url, stop) = start(Arc::new(Echo), "plugin-a".into(), "t0ken".into())
            .await
            .unwrap();
        assert_eq!(get(&url, "/config", "").await.0, 401, "no token");
        assert_eq!(
            get(&url, "/config", "x-berth-token: wrong\r\n").await.0,
            401
        );
        let (status, body) = get(&url, "/config", "x-berth-token: t0ken\r\n").await;
        assert_eq!(status, 200);
        assert!(body.contains("\"method\":\"client.config.get\""), "{body}");
        assert!(body.contains("\"instance\":\"plugin-a\""), "{body}");
        assert!(body.contains("x-opencode-compat: 1.18.4"), "{body}");
        let (status, body) = get(&url, "/session/x/share", "x-berth-token: t0ken\r\n").await;
        assert_eq!(status, 501);
        assert!(body.contains("\"opencodeVersion\":\"1.18.4\""), "{body}");
        stop.abort();
    }

    #[test]
    fn routes_match_opencode_paths_with_parameters() {
        assert_eq!(route("GET", "/config").unwrap().0, "config.get");
        assert_eq!(route("GET", "/session/status").unwrap().0, "session.status");
        let (m, p) = route("GET", "/session/ses_1/message").unwrap();
        assert_eq!((m, p["id"].as_str()), ("session.messages", Some("ses_1")));
        let (m, p) = route("PUT", "/auth/my%20prov").unwrap();
        assert_eq!((m, p["id"].as_str()), ("auth.set", Some("my prov")));
        assert!(route("POST", "/config").is_none());
        assert!(route("GET", "/session/a/b/c").is_none());
    }
}
