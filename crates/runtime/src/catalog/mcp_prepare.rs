//! The catalog's side of preparing an MCP server's package (`mcp_servers::prepared`): the
//! person's request (`berth prepare`, the page) carried out off the async workers, recorded,
//! and the server connected again from what was prepared.
//!
//! Owns: `Catalog::prepare_mcp`. Must not: install anything itself (`deps` does, scripts off).

use crate::error::{code, BerthError};
use crate::mcp_servers::prepared;

use super::*;

impl Catalog {
    /// Prepares the package MCP source `id` fetches at every start, and connects it from there.
    pub(crate) async fn prepare_mcp(
        &self,
        id: &str,
    ) -> Result<berth_store::McpPrepared, BerthError> {
        let fresh = self.core.fresh_scan();
        let source = fresh
            .sources
            .iter()
            .find(|s| s.id == id && s.kind == SourceKind::Mcp)
            .cloned()
            .ok_or_else(|| {
                BerthError::new(
                    code::INVALID_ARGUMENTS,
                    "prepare",
                    format!("no MCP server source is named `{id}`"),
                    "list the sources with `berth sources`",
                )
            })?;
        let target = berth_discovery::mcp::target_of(&fresh.graph, &source).ok_or_else(|| {
            BerthError::new(
                code::ACTION_REQUIRED,
                "prepare",
                format!("MCP server `{}` has no command Berth can use", source.entry),
                "fix its entry in the config",
            )
            .for_plugin(id.to_string())
        })?;
        let packages = self.core.options.packages_dir();
        let node = self
            .core
            .runtimes()
            .into_iter()
            .find(|r| r.name == RuntimeKind::Node && r.problem.is_none())
            .and_then(|r| r.path);
        let budget = self.policy.current().budget("budget.prepare");
        let digest = source.digest.clone();
        let sid = id.to_string();
        let done = tokio::task::spawn_blocking(move || {
            prepared::prepare(&packages, node, &sid, &digest, &target, budget)
        })
        .await
        .map_err(|e| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "prepare",
                e.to_string(),
                "retry",
            )
        })??;
        self.core.with_store(|s| s.set_mcp_prepared(&done))?;
        // The next connection runs what was prepared.
        self.mcp.disconnect(&[id.to_string()]).await;
        self.activate().await;
        self.core.rescan();
        Ok(done)
    }
}
