//! The catalog over MCP's streamable HTTP, for `berth serve` to mount (at `/mcp`, behind the
//! page's token and loopback Host check): one `CatalogServer` per MCP session, so each client
//! hears its own `tools/list_changed`.
//!
//! Owns: the HTTP face of `CatalogServer` (rmcp's `StreamableHttpService`). Must not: check
//! tokens or hosts itself beyond the SDK's loopback default (the page server guards the mount).

use std::sync::Arc;

use berth_runtime::Berth;
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};

use crate::CatalogServer;

/// A router serving the catalog of `berth` over streamable HTTP (with Berth's built-ins when
/// `builtins`). Every session gets its own server and change announcements.
pub fn http_router(berth: Berth, builtins: bool) -> axum::Router {
    // Sessions: a client gets `tools/list_changed` on the stream it keeps open.
    let config = StreamableHttpServerConfig::default().with_legacy_session_mode(true);
    let service = StreamableHttpService::new(
        move || {
            let server = CatalogServer::new(berth.clone()).with_builtins(builtins);
            server.announce_changes();
            Ok(server)
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().route_service("/", service)
}
