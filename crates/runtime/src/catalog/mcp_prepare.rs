//! The catalog's side of preparing an MCP server's package (`mcp_servers::prepared`): the
//! person's request (`berth prepare`, `berth update`, the page) carried out off the async
//! workers, recorded, and the server connected again from what was prepared; and each prepared
//! install that runs recorded as an execution version (so it can be rolled back to).
//!
//! Owns: `Catalog::prepare_mcp`, `Catalog::switch_mcp` and the record of what ran. Must not:
//! install anything itself (`deps` does, scripts off) or decide which version should run.

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
        let before = self.core.with_store(|s| s.mcp_prepared(id))?;
        let same = |b: &berth_store::McpPrepared| {
            (&b.config_digest, &b.install, &b.list_digest, &b.program)
                == (
                    &done.config_digest,
                    &done.install,
                    &done.list_digest,
                    &done.program,
                )
        };
        if before.as_ref().is_some_and(same) {
            // The newest version is the one prepared already: nothing to change or restart.
            return Ok(before.unwrap_or(done));
        }
        let why = match before.filter(|b| b.config_digest == done.config_digest) {
            Some(b) => format!(
                "updated from {} to {} (you asked for it)",
                b.version, done.version
            ),
            None => "prepared by Berth in place of its launcher (you asked for it)".to_string(),
        };
        self.switch_mcp(&done, why).await?;
        Ok(done)
    }

    /// Runs `prepared` for its source from now on, because of `why`: recorded, the server
    /// stopped and connected again from it (checked against its file list first).
    pub(crate) async fn switch_mcp(
        &self,
        prepared: &berth_store::McpPrepared,
        why: String,
    ) -> Result<(), BerthError> {
        let id = prepared.source_id.clone();
        self.core.with_store(|s| s.set_mcp_prepared(prepared))?;
        self.state().reasons.insert(id.clone(), why);
        self.mcp.disconnect(std::slice::from_ref(&id)).await;
        // The activation ends with the rescan that shows it.
        self.activate().await;
        Ok(())
    }

    /// Notes that the prepared install of `p` runs now (a new execution version for an install
    /// never run here, its record read from the install; else the known one's time and count,
    /// and nothing read again).
    pub(super) fn record_prepared_run(&self, p: &berth_store::McpPrepared) {
        let reason = self.state().reasons.remove(&p.source_id);
        let backend = crate::versions::MCP_BACKEND;
        let _ = self.core.with_store(|store| {
            let current = store
                .execution_versions(&p.source_id, backend, 1)?
                .into_iter()
                .next();
            let why = reason.unwrap_or_else(|| match &current {
                Some(c) if c.digest == p.list_digest => c.why.clone(),
                _ => "prepared by Berth in place of its launcher".to_string(),
            });
            // Recorded when it first ran; never rewritten.
            let record = if store.ran_before(&p.source_id, backend, &p.list_digest)? {
                serde_json::Value::Null
            } else {
                crate::versions::record_prepared_mcp(p)
            };
            store.record_execution(
                &p.source_id,
                backend,
                &p.list_digest,
                Some(&p.version),
                &record,
                &why,
            )
        });
    }
}
