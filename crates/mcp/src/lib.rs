//! Berth over MCP: the catalog the person governs — approved, conflict-resolved, receipted,
//! cancellable — served to any agent (OpenCode, Claude Code, Codex, an IDE) as an MCP server.
//!
//! Owns: the MCP face of the catalog (the names an agent sees, listing, calls, cancellation,
//! progress, `notifications/tools/list_changed`) and the MCP SDK (`rmcp`), which no other crate
//! sees: its API changed major versions three times in 2026, so it stays behind this crate's
//! few functions. Must not: run a tool any other way than `Berth::invoke` (receipts,
//! idempotency, deadlines, the hooks around the call), answer a permission a tool asks for
//! (only the person does), or write anything to stdout but protocol frames.

mod http;
mod names;
mod server;

pub use http::http_router;
pub use names::mcp_names;
pub use server::{serve_stdio, CatalogServer};
