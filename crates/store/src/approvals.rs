//! Approval rows: what the person decided about one source, for one execution domain and
//! script backend, and exactly what they were shown.

use rusqlite::{params, OptionalExtension, Row};
use serde::Serialize;

use crate::{Store, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

/// The key a decision applies to (the capability digest is stored with it and compared).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalKey {
    pub source_id: String,
    pub domain: String,
    pub backend: String,
    /// The project the decision is looked up for: a decision recorded for this project wins
    /// over one recorded for every project.
    pub project: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRow {
    pub id: i64,
    pub source_id: String,
    pub plugin_identity: String,
    pub domain: String,
    pub backend: String,
    pub decision: Decision,
    pub digest: String,
    pub capability_digest: String,
    /// The capability summary as shown when deciding (JSON).
    pub shown: serde_json::Value,
    pub decided_by: String,
    pub decided_at_ms: i64,
    /// Set when the decision applies to one project only.
    pub project: Option<String>,
}

/// A decision to record.
pub struct NewApproval<'a> {
    pub key: &'a ApprovalKey,
    pub plugin_identity: &'a str,
    pub decision: Decision,
    pub digest: &'a str,
    pub capability_digest: &'a str,
    pub shown: &'a serde_json::Value,
    pub decided_by: &'a str,
    /// Record it for `key.project` only (otherwise for every project).
    pub this_project_only: bool,
}

const COLUMNS: &str = "id, source_id, plugin_identity, domain, backend, decision, digest, capability_digest, shown_json, decided_by, decided_at_ms, project";

fn row(r: &Row<'_>) -> rusqlite::Result<ApprovalRow> {
    let decision: String = r.get(5)?;
    let shown: String = r.get(8)?;
    Ok(ApprovalRow {
        id: r.get(0)?,
        source_id: r.get(1)?,
        plugin_identity: r.get(2)?,
        domain: r.get(3)?,
        backend: r.get(4)?,
        decision: if decision == "allow" {
            Decision::Allow
        } else {
            Decision::Deny
        },
        digest: r.get(6)?,
        capability_digest: r.get(7)?,
        shown: serde_json::from_str(&shown).unwrap_or(serde_json::Value::Null),
        decided_by: r.get(9)?,
        decided_at_ms: r.get(10)?,
        project: r.get(11)?,
    })
}

impl Store {
    /// Appends a decision; it becomes the one in force for its key.
    pub fn record_approval(&self, a: &NewApproval<'_>) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "INSERT INTO approvals (source_id, plugin_identity, domain, backend, decision, digest, capability_digest, shown_json, decided_by, decided_at_ms, project)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    a.key.source_id,
                    a.plugin_identity,
                    a.key.domain,
                    a.key.backend,
                    a.decision.as_str(),
                    a.digest,
                    a.capability_digest,
                    a.shown.to_string(),
                    a.decided_by,
                    crate::open::now_ms(),
                    a.this_project_only.then_some(a.key.project.as_str()),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The decision in force for `key`, if any.
    pub fn current_approval(&self, key: &ApprovalKey) -> Result<Option<ApprovalRow>, StoreError> {
        self.conn
            .query_row(
                // This project's own decision first, then the newest decision for every project.
                &format!("SELECT {COLUMNS} FROM approvals WHERE source_id = ?1 AND domain = ?2 AND backend = ?3 AND (project IS NULL OR project = ?4) ORDER BY project IS NULL, id DESC LIMIT 1"),
                params![key.source_id, key.domain, key.backend, key.project],
                row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Moves whenever any process records a decision, a policy setting, a contribution grant or
    /// a conflict choice by the person (the sum of the logs' newest ids; each only grows). Cheap enough to read before
    /// every call: a decision made elsewhere takes effect before the
    /// next call runs anything.
    pub fn decisions_marker(&self) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT (SELECT coalesce(max(id), 0) FROM approvals)
                      + (SELECT coalesce(max(id), 0) FROM policy_settings)
                      + (SELECT coalesce(max(id), 0) FROM contribution_grants)
                      + (SELECT coalesce(max(id), 0) FROM tool_choices WHERE by_person = 1)",
            )
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(|e| self.err(e))
    }

    /// Every decision, newest first (the audit trail).
    pub fn approvals(&self) -> Result<Vec<ApprovalRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {COLUMNS} FROM approvals ORDER BY id DESC"))
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], row).map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }
}

/// What a loaded module contributed (observed after import).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Contributions {
    pub tools: Vec<String>,
    pub hooks: Vec<String>,
}

impl Store {
    pub fn record_contributions(
        &self,
        source_id: &str,
        digest: &str,
        backend: &str,
        c: &Contributions,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO contributions (source_id, digest, backend, tools_json, hooks_json, observed_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(source_id, digest, backend) DO UPDATE SET tools_json = excluded.tools_json, hooks_json = excluded.hooks_json, observed_at_ms = excluded.observed_at_ms",
                params![source_id, digest, backend, serde_json::to_string(&c.tools).unwrap_or_default(), serde_json::to_string(&c.hooks).unwrap_or_default(), crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The newest observation for these bytes on this backend.
    pub fn contributions(
        &self,
        source_id: &str,
        digest: &str,
        backend: &str,
    ) -> Result<Option<Contributions>, StoreError> {
        self.conn
            .query_row(
                "SELECT tools_json, hooks_json FROM contributions WHERE source_id = ?1 AND digest = ?2 AND backend = ?3",
                params![source_id, digest, backend],
                |r| {
                    let t: String = r.get(0)?;
                    let h: String = r.get(1)?;
                    Ok(Contributions { tools: serde_json::from_str(&t).unwrap_or_default(), hooks: serde_json::from_str(&h).unwrap_or_default() })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}

impl Store {
    /// Gives `source_id` a host of its own (`own`), or puts it back in the shared one.
    pub fn set_own_host(&self, source_id: &str, own: bool) -> Result<(), StoreError> {
        let r = if own {
            self.conn.execute(
                "INSERT INTO own_hosts (source_id, set_at_ms) VALUES (?1, ?2) ON CONFLICT(source_id) DO NOTHING",
                params![source_id, crate::open::now_ms()],
            )
        } else {
            self.conn
                .execute("DELETE FROM own_hosts WHERE source_id = ?1", [source_id])
        };
        r.map(|_| ()).map_err(|e| self.err(e))
    }

    /// The sources that run in a host of their own.
    pub fn own_hosts(&self) -> Result<std::collections::BTreeSet<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT source_id FROM own_hosts")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?;
        rows.map(|r| r.map_err(|e| self.err(e))).collect()
    }
}
