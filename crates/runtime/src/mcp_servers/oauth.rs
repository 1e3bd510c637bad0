//! Sign-ins to remote MCP servers (OpenCode's `oauth`, on by default): where a server's tokens
//! live (one OS keyring entry per domain and server URL), the one-shot loopback listener the
//! provider sends the person's browser back to, and opening that browser.
//!
//! Owns: the keyring entries `{domain}/mcp-oauth/{sha256(url)}` and the sign-in's listener
//! (127.0.0.1, an ephemeral port, one redirect, then closed). Must not: write a token anywhere
//! but the keyring (not the store, the data dir, a log line or an error), or connect a server
//! (the catalog does, after the approval gate). Invariant: an entry is keyed by the server's
//! exact URL, so a changed URL finds no token and nothing is sent to it unasked.

use std::sync::Arc;
use std::time::Duration;

use berth_discovery::McpOAuth;
use berth_mcp_client::{OAuth, SignIn, TokenVault};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{code, BerthError};
use crate::secret::{keyring_delete, keyring_read, keyring_write};

/// How long a sign-in waits for the browser to come back.
pub(crate) const SIGN_IN_WAIT: Duration = Duration::from_secs(300);
/// Where the provider sends the browser back (OpenCode's path).
const CALLBACK_PATH: &str = "/mcp/oauth/callback";
/// OpenCode's fixed callback port: a client registered with the provider (`oauth.clientId`)
/// names its redirect URI in that registration, so Berth uses the same one; a client Berth
/// registers itself gets an ephemeral port (nothing else can be waiting on it).
const OPENCODE_CALLBACK_PORT: u16 = 19876;

/// One server's tokens in the OS keyring.
struct KeyringVault {
    account: String,
}

fn account(domain: &str, url: &str) -> String {
    let digest = berth_discovery::sha256_hex(url.as_bytes());
    format!("{domain}/mcp-oauth/{}", &digest[..32])
}

impl TokenVault for KeyringVault {
    fn load(&self) -> Result<Option<String>, String> {
        keyring_read(&self.account)
            .map(|v| v.map(|s| s.expose().to_string()))
            .map_err(|e| e.message)
    }

    fn save(&self, value: &str) -> Result<(), String> {
        keyring_write(&self.account, value).map_err(|e| e.message)
    }

    fn clear(&self) -> Result<(), String> {
        keyring_delete(&self.account)
            .map(|_| ())
            .map_err(|e| e.message)
    }
}

/// How the client signs in to the server at `url` (nothing when the entry says
/// `"oauth": false`).
pub(crate) fn oauth_for(domain: &str, url: &str, config: &McpOAuth) -> Option<OAuth> {
    let (client, scopes) = match config {
        McpOAuth::Off => return None,
        McpOAuth::Auto => (None, Vec::new()),
        McpOAuth::Client {
            client_id,
            client_secret,
            scope,
        } => (
            Some((client_id.clone(), client_secret.clone())),
            scope
                .iter()
                .flat_map(|s| s.split_whitespace())
                .map(String::from)
                .collect(),
        ),
    };
    Some(OAuth {
        vault: Arc::new(KeyringVault {
            account: account(domain, url),
        }),
        client,
        scopes,
    })
}

/// Whether the keyring holds a sign-in for the server at `url`.
pub(crate) fn signed_in(domain: &str, url: &str) -> bool {
    keyring_read(&account(domain, url)).is_ok_and(|v| v.is_some())
}

/// Forgets the sign-in for the server at `url`. Returns whether there was one.
pub(crate) fn sign_out(domain: &str, url: &str) -> Result<bool, BerthError> {
    keyring_delete(&account(domain, url))
}

/// Signs in to MCP server `server` at `url`: a loopback listener is opened, the provider's
/// page is opened in the person's browser (`$BROWSER`, else the desktop's default) and handed
/// to `on_url` (to show it, in case no browser opens), and the first redirect back to the
/// listener completes the sign-in. Ends with the tokens in the keyring, or an error.
pub(crate) async fn sign_in(
    server: &str,
    url: &str,
    oauth: &OAuth,
    wait: Duration,
    on_url: impl FnOnce(&str),
) -> Result<(), BerthError> {
    let fixed = oauth.client.is_some();
    let want = if fixed { OPENCODE_CALLBACK_PORT } else { 0 };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", want))
        .await
        .map_err(|e| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                &format!("mcp:{server}"),
                if fixed {
                    format!("the sign-in's redirect address 127.0.0.1:{want} (the one `oauth.clientId`'s registration names, as OpenCode's) is taken: {e}")
                } else {
                    format!("no loopback port for the sign-in's redirect: {e}")
                },
                if fixed {
                    "finish or stop the other sign-in that holds it (OpenCode's `mcp auth`, another Berth), then try again"
                } else {
                    "try again"
                },
            )
        })?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let redirect = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let flow = SignIn::start(server, url, oauth, &redirect).await?;
    // The page comes from the server's metadata: only a web page is opened, never a file or
    // another program's scheme.
    if !(flow.url().starts_with("https://") || flow.url().starts_with("http://")) {
        return Err(BerthError::new(
            code::INVALID_RESPONSE,
            &format!("mcp:{server}"),
            format!("MCP server `{server}`'s provider names a sign-in page that is not a web page"),
            "ask the server's operator to fix its OAuth metadata",
        ));
    }
    open_browser(flow.url());
    on_url(flow.url());
    let waited = tokio::time::timeout(wait, async {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                // Out of descriptors, say: not a reason to give up, nor to spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Some(target) = request_target(&mut stream).await else {
                continue;
            };
            if !target.starts_with(&format!("{CALLBACK_PATH}?")) {
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            break (stream, format!("http://127.0.0.1:{port}{target}"));
        }
    })
    .await;
    let Ok((mut stream, callback)) = waited else {
        return Err(BerthError::new(
            code::TIMEOUT,
            &format!("mcp:{server}"),
            format!(
                "the sign-in to MCP server `{server}` was not completed within {} minutes",
                wait.as_secs() / 60
            ),
            "sign in again, and finish it in the browser page that opens",
        ));
    };
    let done = flow.finish(&callback).await;
    let page = match &done {
        Ok(()) => format!(
            "Signed in to MCP server “{}”. You can close this tab; Berth connects it now.",
            html(server)
        ),
        Err(e) => format!(
            "The sign-in to MCP server “{}” did not complete: {}. Start it again from Berth.",
            html(server),
            html(&e.message)
        ),
    };
    let body = format!("<!doctype html><meta charset=utf-8><title>Berth</title><p>{page}</p>");
    let _ = stream
        .write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await;
    done
}

/// The request target of the first request on `stream` (`/callback?code=…`), if it is a GET.
async fn request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 16 * 1024 {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&seen);
    let mut line = head.lines().next()?.split(' ');
    match (line.next(), line.next()) {
        (Some("GET"), Some(target)) => Some(target.to_string()),
        _ => None,
    }
}

fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Opens `url` in the person's browser: the first command of `$BROWSER` (`%s` replaced by
/// the URL, else the URL appended), else the desktop's default. Failing is not an error: the
/// URL is also shown.
fn open_browser(url: &str) {
    let browser = std::env::var("BROWSER").unwrap_or_default();
    let first = browser.split(':').next().unwrap_or_default().trim();
    if first.is_empty() {
        if let Err(e) = open::that_detached(url) {
            tracing::warn!(error = %e, "no browser could be opened for the sign-in");
        }
        return;
    }
    let mut words: Vec<String> = first.split_whitespace().map(String::from).collect();
    if words.iter().any(|w| w.contains("%s")) {
        for w in &mut words {
            *w = w.replace("%s", url);
        }
    } else {
        words.push(url.to_string());
    }
    let program = words.remove(0);
    let spawned = std::process::Command::new(&program)
        .args(&words)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped in the background: a browser launcher usually returns at once.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => {
            tracing::warn!(program = %program, error = %e, "$BROWSER could not be started for the sign-in")
        }
    }
}
