//! Who serves each tool name (seed 003 §5.3): the person's choices for contested names, and
//! what Berth keeps serving otherwise (so the one serving before a conflict stays).
//!
//! Owns: the `tool_choices` log, and the `mcp_prepared` rows (an MCP server's package prepared
//! in place of its fetch-and-run launcher). Must not: decide which candidate wins (the catalog
//! does) or what runs (the runtime does).

use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::{Store, StoreError};

/// The newest word on one contested name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolChoice {
    pub tool: String,
    /// Over the candidates' identities and content versions when the word was given: a choice
    /// holds only for that exact set.
    pub digest: String,
    /// The candidate that serves the name (a source id, or `builtin`).
    pub candidate: String,
    /// The person chose it; otherwise Berth kept it while the conflict asks.
    pub by_person: bool,
    pub set_at_ms: i64,
}

/// One `tool_choices` row read as `SELECT tool, digest, candidate, by_person, set_at_ms`.
fn choice_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToolChoice> {
    Ok(ToolChoice {
        tool: r.get(0)?,
        digest: r.get(1)?,
        candidate: r.get(2)?,
        by_person: r.get::<_, i64>(3)? != 0,
        set_at_ms: r.get(4)?,
    })
}

impl Store {
    /// Records who serves `tool` for the candidate set `digest`.
    pub fn set_tool_choice(
        &self,
        tool: &str,
        digest: &str,
        candidate: &str,
        by_person: bool,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO tool_choices (tool, digest, candidate, by_person, set_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![tool, digest, candidate, by_person as i64, crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Records what Berth keeps serving (`by_person` false), many names in one transaction.
    pub fn record_tool_choices(&self, kept: &[ToolChoice]) -> Result<(), StoreError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT INTO tool_choices (tool, digest, candidate, by_person, set_at_ms) VALUES (?1, ?2, ?3, 0, ?4)")
                .map_err(|e| self.err(e))?;
            let now = crate::open::now_ms();
            for k in kept {
                stmt.execute(params![k.tool, k.digest, k.candidate, now])
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// The newest word on every name (the person's, or what Berth kept).
    pub fn tool_choices(&self) -> Result<Vec<ToolChoice>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT tool, digest, candidate, by_person, set_at_ms FROM tool_choices c
                 WHERE id = (SELECT max(id) FROM tool_choices d WHERE d.tool = c.tool)
                 ORDER BY tool",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], choice_row).map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// The person's own last choice for every name they chose for, whatever Berth kept after
    /// it (a changed candidate asks again, and the page says what was chosen before).
    pub fn person_tool_choices(&self) -> Result<Vec<ToolChoice>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT tool, digest, candidate, by_person, set_at_ms FROM tool_choices c
                 WHERE id = (SELECT max(id) FROM tool_choices d WHERE d.tool = c.tool AND d.by_person = 1)
                 ORDER BY tool",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], choice_row).map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }
}

/// An MCP server's package Berth prepared in place of its fetch-and-run launcher (kept in its
/// execution version's record too, so that a rollback can run it again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPrepared {
    pub source_id: String,
    /// The entry's digest when it was prepared: another entry runs as written.
    pub config_digest: String,
    pub package: String,
    pub version: String,
    pub integrity: String,
    /// The prepared install, and the digest of its file list when it was prepared: checked
    /// before every start, so bytes changed since then never run.
    pub install: String,
    pub list_digest: String,
    /// What runs instead of the launcher: the program and its arguments.
    pub program: Vec<String>,
    pub prepared_at_ms: i64,
}

impl Store {
    /// Records (or replaces) the preparation of `p.source_id`.
    pub fn set_mcp_prepared(&self, p: &McpPrepared) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO mcp_prepared (source_id, config_digest, package, version, integrity, install, list_digest, program_json, prepared_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT(source_id) DO UPDATE SET config_digest = excluded.config_digest, package = excluded.package, version = excluded.version, integrity = excluded.integrity, install = excluded.install, list_digest = excluded.list_digest, program_json = excluded.program_json, prepared_at_ms = excluded.prepared_at_ms",
                params![p.source_id, p.config_digest, p.package, p.version, p.integrity, p.install, p.list_digest, serde_json::to_string(&p.program).unwrap_or_default(), crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The preparation of `source_id`, if any.
    pub fn mcp_prepared(&self, source_id: &str) -> Result<Option<McpPrepared>, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn
            .query_row(
                "SELECT source_id, config_digest, package, version, integrity, install, list_digest, program_json, prepared_at_ms FROM mcp_prepared WHERE source_id = ?1",
                params![source_id],
                |r| {
                    let program: String = r.get(7)?;
                    Ok(McpPrepared {
                        source_id: r.get(0)?,
                        config_digest: r.get(1)?,
                        package: r.get(2)?,
                        version: r.get(3)?,
                        integrity: r.get(4)?,
                        install: r.get(5)?,
                        list_digest: r.get(6)?,
                        program: serde_json::from_str(&program).unwrap_or_default(),
                        prepared_at_ms: r.get(8)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}
