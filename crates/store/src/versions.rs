//! Execution versions (seed 003 §4): one row per version of a source that really ran here —
//! the facts that explain and reproduce it (`record_json`, written by the runtime's versions
//! owner), when it first and last ran, and why it runs; the last update check's answer; and
//! the pins of local sources rolled back to a kept version.
//!
//! Owns: those three tables. Must not: decide what a version is or whether it may run (the
//! runtime does), or rewrite a version's recorded facts after the fact — a later activation
//! of the same bytes only moves `last_at_ms`, `activations` and `why`.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::{Store, StoreError};

/// One version of a source that ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionVersion {
    pub id: i64,
    pub source_id: String,
    pub backend: String,
    /// The source's content digest when it ran.
    pub digest: String,
    /// The package version, for an npm plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The recorded facts (scope, entries, digests, packages, backend, natives, contributions,
    /// where the exact bytes are kept).
    pub record: serde_json::Value,
    /// Why it runs (first load, a changed file, an update, a rollback).
    pub why: String,
    pub first_at_ms: i64,
    pub last_at_ms: i64,
    pub activations: i64,
}

/// A local source rolled back to an earlier version: that version runs (from Berth's copies of
/// its bytes) as long as the files on disk are still `disk_digest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    pub source_id: String,
    pub version_id: i64,
    pub disk_digest: String,
    pub pinned_at_ms: i64,
}

impl Store {
    /// Runs `f` in one transaction (one write to the log for all it records); rolled back if
    /// `f` fails.
    pub fn in_one_transaction<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        let out = f(self)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(out)
    }

    /// Pins `source_id` to execution version `version_id` while its files on disk are
    /// `disk_digest` (replacing an earlier pin).
    pub fn pin(
        &self,
        source_id: &str,
        version_id: i64,
        disk_digest: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO pins (source_id, version_id, disk_digest, pinned_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (source_id) DO UPDATE SET version_id = excluded.version_id, disk_digest = excluded.disk_digest, pinned_at_ms = excluded.pinned_at_ms",
                params![source_id, version_id, disk_digest, crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Takes `source_id`'s pin back (its files on disk run again, as the rules allow).
    pub fn unpin(&self, source_id: &str) -> Result<(), StoreError> {
        self.conn
            .execute("DELETE FROM pins WHERE source_id = ?1", params![source_id])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Every pin.
    pub fn pins(&self) -> Result<Vec<Pin>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT source_id, version_id, disk_digest, pinned_at_ms FROM pins")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Pin {
                    source_id: r.get(0)?,
                    version_id: r.get(1)?,
                    disk_digest: r.get(2)?,
                    pinned_at_ms: r.get(3)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Notes that `digest` of `source_id` runs now: a new row for bytes never run here, else
    /// the existing one's last time, count and reason. Returns the row's id.
    pub fn record_execution(
        &self,
        source_id: &str,
        backend: &str,
        digest: &str,
        version: Option<&str>,
        record: &serde_json::Value,
        why: &str,
    ) -> Result<i64, StoreError> {
        let now = crate::open::now_ms();
        self.conn
            .query_row(
                "INSERT INTO execution_versions
                   (source_id, backend, digest, version, record_json, why, first_at_ms, last_at_ms, activations)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, 1)
                 ON CONFLICT (source_id, backend, digest) DO UPDATE SET
                   last_at_ms = max(excluded.last_at_ms, last_at_ms + 1),
                   activations = activations + 1,
                   why = excluded.why
                 RETURNING id",
                params![source_id, backend, digest, version, record.to_string(), why, now],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }

    /// The versions of `source_id` that ran on `backend`, the current one (the last to run)
    /// first, at most `limit`.
    pub fn execution_versions(
        &self,
        source_id: &str,
        backend: &str,
        limit: usize,
    ) -> Result<Vec<ExecutionVersion>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, source_id, backend, digest, version, record_json, why, first_at_ms, last_at_ms, activations
                 FROM execution_versions WHERE source_id = ?1 AND backend = ?2
                 ORDER BY last_at_ms DESC, id DESC LIMIT ?3",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![source_id, backend, limit as i64], |r| {
                Ok(ExecutionVersion {
                    id: r.get(0)?,
                    source_id: r.get(1)?,
                    backend: r.get(2)?,
                    digest: r.get(3)?,
                    version: r.get(4)?,
                    record: serde_json::from_str(&r.get::<_, String>(5)?)
                        .unwrap_or(serde_json::Value::Null),
                    why: r.get(6)?,
                    first_at_ms: r.get(7)?,
                    last_at_ms: r.get(8)?,
                    activations: r.get(9)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Whether `digest` of `source_id` ever ran on `backend` (its facts are recorded then).
    pub fn ran_before(
        &self,
        source_id: &str,
        backend: &str,
        digest: &str,
    ) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT 1 FROM execution_versions WHERE source_id = ?1 AND backend = ?2 AND digest = ?3",
                params![source_id, backend, digest],
                |_| Ok(()),
            )
            .optional()
            .map(|r| r.is_some())
            .map_err(|e| self.err(e))
    }

    /// One recorded version by id.
    pub fn execution_version(&self, id: i64) -> Result<Option<ExecutionVersion>, StoreError> {
        let row: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT source_id, backend FROM execution_versions WHERE id = ?1",
                params![id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((source, backend)) = row else {
            return Ok(None);
        };
        Ok(self
            .execution_versions(&source, &backend, usize::MAX >> 1)?
            .into_iter()
            .find(|v| v.id == id))
    }

    /// Keeps the answer of the last update check for `source_id` (what is available).
    pub fn record_update_check(
        &self,
        source_id: &str,
        answer: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO update_checks (source_id, answer_json, checked_at_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (source_id) DO UPDATE SET answer_json = excluded.answer_json, checked_at_ms = excluded.checked_at_ms",
                params![source_id, answer.to_string(), crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The last update check's answer for `source_id` and when it was made.
    pub fn update_check(
        &self,
        source_id: &str,
    ) -> Result<Option<(serde_json::Value, i64)>, StoreError> {
        self.conn
            .query_row(
                "SELECT answer_json, checked_at_ms FROM update_checks WHERE source_id = ?1",
                params![source_id],
                |r| {
                    Ok((
                        serde_json::from_str(&r.get::<_, String>(0)?)
                            .unwrap_or(serde_json::Value::Null),
                        r.get(1)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}
