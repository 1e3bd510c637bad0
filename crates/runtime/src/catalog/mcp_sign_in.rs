//! The catalog's side of signing in to a remote MCP server (`mcp_servers::oauth`): the person's
//! request (`berth mcp-login`, the page, the window) for an approved source, then the server
//! connected again with its token; and signing out.
//!
//! Owns: `Catalog::mcp_sign_in`, `Catalog::mcp_sign_out`. Must not: touch a token (the
//! `oauth` room does), or sign in to a server the person has not approved.

use serde::Serialize;

use crate::error::{code, BerthError};
use crate::mcp_servers::oauth;
use crate::snapshot::SignInProgress;

use super::*;

/// A finished sign-in (or sign-out).
#[derive(Debug, Clone, Serialize)]
pub struct SignedIn {
    pub source: String,
    pub server: String,
    /// The server's host (never its path, which may carry a token).
    pub host: String,
    /// Where the tokens are (`os-keyring`).
    pub stored_in: &'static str,
}

impl Catalog {
    /// The remote MCP source `which` (its id or its server's name), its URL and how it signs in.
    fn remote_source(
        &self,
        which: &str,
        what: &str,
    ) -> Result<(berth_discovery::Source, String, berth_mcp_client::OAuth), BerthError> {
        let fresh = self.core.fresh_scan();
        let mut found = fresh
            .sources
            .iter()
            .filter(|s| s.kind == SourceKind::Mcp && (s.id == which || s.entry == which));
        let (Some(source), None) = (found.next(), found.next()) else {
            return Err(BerthError::new(
                code::INVALID_ARGUMENTS,
                what,
                format!("no single MCP server source is named `{which}`"),
                "name it by its id (`berth sources`)",
            ));
        };
        let not_remote = |why: &str| {
            BerthError::new(
                code::INVALID_ARGUMENTS,
                what,
                format!("MCP server `{}` {why}", source.entry),
                "sign-in is for remote servers that ask for it; give others their token in `environment` or `headers`",
            )
            .for_plugin(source.id.clone())
        };
        match berth_discovery::mcp::target_of(&fresh.graph, source) {
            Some(berth_discovery::McpTarget::Remote { url, oauth, .. }) => {
                match oauth::oauth_for(self.core.domain(), &url, &oauth) {
                    Some(o) => Ok((source.clone(), url, o)),
                    None => Err(not_remote("has `\"oauth\": false` in its entry")),
                }
            }
            _ => Err(not_remote("is not a remote server")),
        }
    }

    /// Signs in to remote MCP source `which` (see `oauth::sign_in`; `on_url` gets the page the
    /// person signs in on) and connects it with the token.
    pub(crate) async fn mcp_sign_in(
        &self,
        which: &str,
        on_url: impl FnOnce(&str) + Send,
    ) -> Result<SignedIn, BerthError> {
        let (source, url, o) = self.remote_source(which, "mcp-login")?;
        let approved = self
            .core
            .status()
            .sources
            .iter()
            .find(|s| s.id == source.id)
            .is_some_and(|s| {
                s.approval.decision == Some(berth_store::Decision::Allow)
                    && s.approval.grew.is_empty()
            });
        if !approved {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                "mcp-login",
                format!(
                    "MCP server `{}` is not approved: Berth signs in only to servers you allowed",
                    source.entry
                ),
                "approve it first (`berth approve`, or Allow on its card), then sign in",
            )
            .for_plugin(source.id.clone()));
        }
        // The card shows the sign-in waiting for the browser, then how it ended.
        let id = source.id.clone();
        self.sign_in_progress(&id, Default::default());
        let done = oauth::sign_in(&source.entry, &url, &o, oauth::SIGN_IN_WAIT, |page| {
            self.sign_in_progress(
                &id,
                SignInProgress {
                    waiting_at: Some(page.to_string()),
                    failed: None,
                },
            );
            on_url(page)
        })
        .await
        .map_err(|e| e.for_plugin(id.clone()));
        if let Err(e) = done {
            self.sign_in_progress(
                &id,
                SignInProgress {
                    waiting_at: None,
                    failed: Some(e.clone()),
                },
            );
            return Err(e);
        }
        self.state().sign_ins.remove(&id);
        tracing::info!(source = %id, "MCP sign-in stored in the OS keyring");
        self.reconnect(&id).await;
        Ok(signed(&source, &url))
    }

    /// A sign-in (as [`Catalog::mcp_sign_in`]) that goes on in the background, for the page
    /// and the window: the provider's page once it is known, or why it could not start. How
    /// it ends shows on the source's card (`sign_in`).
    pub(crate) async fn start_mcp_sign_in(
        self: &Arc<Self>,
        which: &str,
    ) -> Result<String, BerthError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (me, which) = (self.clone(), which.to_string());
        let task = tokio::spawn(async move {
            me.mcp_sign_in(&which, |page| {
                let _ = tx.send(page.to_string());
            })
            .await
        });
        match rx.await {
            Ok(page) => Ok(page),
            // It ended before it had a page to show: that is its answer.
            Err(_) => Err(match task.await {
                Ok(Err(e)) => e,
                _ => BerthError::new(
                    code::TEMPORARILY_UNAVAILABLE,
                    "mcp-login",
                    "the sign-in ended unexpectedly",
                    "try again",
                ),
            }),
        }
    }

    /// Forgets the sign-in of remote MCP source `which`; its connection ends (it asks again).
    pub(crate) async fn mcp_sign_out(&self, which: &str) -> Result<SignedIn, BerthError> {
        let (source, url, _) = self.remote_source(which, "mcp-logout")?;
        oauth::sign_out(self.core.domain(), &url).map_err(|e| e.for_plugin(source.id.clone()))?;
        self.reconnect(&source.id).await;
        Ok(signed(&source, &url))
    }

    fn sign_in_progress(&self, id: &str, p: SignInProgress) {
        self.state().sign_ins.insert(id.to_string(), p);
        self.core.rescan();
    }

    async fn reconnect(&self, id: &str) {
        self.mcp.disconnect(&[id.to_string()]).await;
        self.activate().await;
        self.core.rescan();
    }
}

fn signed(source: &berth_discovery::Source, url: &str) -> SignedIn {
    SignedIn {
        source: source.id.clone(),
        server: source.entry.clone(),
        host: berth_discovery::mcp::url_host(url).unwrap_or_default(),
        stored_in: "os-keyring",
    }
}
