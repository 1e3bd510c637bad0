//! Updates and rollbacks of MCP servers Berth prepared in place of their fetch-and-run
//! launcher (`berth prepare`): an update prepares the newest version the launcher's package
//! spec allows now (install scripts off, integrity checked) and connects the server from it; a
//! rollback runs an exact earlier prepared install again, if its files are still as they were.
//! Each prepared install that ran is an execution version under the `mcp` backend.
//!
//! Owns: choosing the version for those two steps. Must not: install or connect anything
//! itself (`Catalog::prepare_mcp` and `Catalog::switch_mcp` do), or run a version whose entry
//! (its command and arguments) is not the one that runs now.

use berth_discovery::{Source, SourceKind};

use super::{pick_target, Outcome, Updates};
use crate::error::{code, BerthError};
use crate::versions::MCP_BACKEND;

impl Updates {
    /// `id` as an MCP server source of the current scan, if it is one.
    pub(super) fn mcp_source(&self, id: &str) -> Option<Source> {
        self.core
            .fresh_scan()
            .sources
            .into_iter()
            .find(|s| s.id == id && s.kind == SourceKind::Mcp)
    }

    /// The prepared MCP server `source` to the newest version its launcher's spec allows.
    pub(super) async fn update_mcp(&self, source: &Source) -> Result<Outcome, BerthError> {
        let before = self.prepared_approved(source, "update")?;
        let done = self.catalog.prepare_mcp(&source.id).await?;
        if done.version == before.version && done.list_digest == before.list_digest {
            return Ok(Outcome::UpToDate {
                version: Some(done.version),
            });
        }
        self.outcome_after(&source.id, Some(before.version), &done.version, false)
    }

    /// Runs the exact earlier prepared install `to` (the one before the current with `None`).
    pub(super) async fn rollback_mcp(
        &self,
        source: &Source,
        to: Option<i64>,
    ) -> Result<Outcome, BerthError> {
        let id = source.id.as_str();
        let before = self.prepared_approved(source, "rollback")?;
        let versions = self
            .core
            .with_store(|s| s.execution_versions(id, MCP_BACKEND, 100))?;
        let target = pick_target(&versions, to, &before.list_digest, id)?;
        let refuse = |why: String| {
            BerthError::new(
                code::ACTION_REQUIRED,
                "rollback",
                format!("{why}; nothing was changed"),
                "update to a version the registry offers instead (berth update)",
            )
            .for_plugin(id.to_string())
        };
        crate::versions::recoverable(&self.core.options().data_dir, &target.record)
            .map_err(refuse)?;
        let prepared: berth_store::McpPrepared =
            serde_json::from_value(target.record["prepared"].clone()).map_err(|_| {
                refuse(
                    "previous version not recoverable: its record names no prepared install".into(),
                )
            })?;
        if prepared.config_digest != source.digest {
            return Err(refuse(format!(
                "previous version not recoverable here: it ran for another entry of `{}` (its command or arguments changed since)",
                source.entry
            )));
        }
        // Every file against the list it had when prepared, before anything is switched.
        let check = prepared.clone();
        tokio::task::spawn_blocking(move || crate::mcp_servers::prepared::verify(&check))
            .await
            .unwrap_or_else(|e| Err(e.to_string()))
            .map_err(|why| {
                refuse(format!(
                    "previous version not recoverable: the files of {} changed since it ran ({why})",
                    prepared.install
                ))
            })?;
        let why = format!(
            "rolled back from {} to {} (you asked for it)",
            before.version, prepared.version
        );
        self.catalog.switch_mcp(&prepared, why).await?;
        self.outcome_after(id, Some(before.version), &prepared.version, true)
    }

    /// What `source` runs now as prepared, when the person approved it (updates and rollbacks
    /// replace a version they approved).
    fn prepared_approved(
        &self,
        source: &Source,
        step: &str,
    ) -> Result<berth_store::McpPrepared, BerthError> {
        let id = source.id.as_str();
        let prepared = self
            .core
            .with_store(|s| s.mcp_prepared(id))?
            .filter(|p| p.config_digest == source.digest)
            .ok_or_else(|| {
                BerthError::new(
                    code::ACTION_REQUIRED,
                    step,
                    format!(
                        "MCP server `{}` runs through its launcher, not from a version Berth prepared",
                        source.entry
                    ),
                    "prepare it first (berth prepare, or Prepare on its card)",
                )
                .for_plugin(id.to_string())
            })?;
        let decided = self
            .approval_row(source)
            .is_some_and(|r| r.decision == berth_store::Decision::Allow);
        if !decided {
            return Err(BerthError::new(
                code::ACTION_REQUIRED,
                step,
                format!("MCP server `{}` is not approved", source.entry),
                "approve it first; updates and rollbacks replace a version you approved",
            )
            .for_plugin(id.to_string()));
        }
        Ok(prepared)
    }
}
