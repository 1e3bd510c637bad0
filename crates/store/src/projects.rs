//! The project folders the desktop app opened, newest first, for its project picker.
//!
//! Owns: the `recent_projects` rows. Must not: decide what a project is or read the folders
//! (the runtime does both).

use rusqlite::params;
use serde::Serialize;

use crate::{Store, StoreError};

/// One folder the app opened as its project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecentProject {
    pub path: String,
    pub opened_at_ms: i64,
}

/// How many folders the list keeps; older ones are forgotten as new ones are opened.
const KEPT: i64 = 20;

impl Store {
    /// Notes that `path` was opened now (it moves to the top), keeping the newest `KEPT`.
    pub fn remember_project(&self, path: &str) -> Result<(), StoreError> {
        let tx = self.conn.unchecked_transaction().map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO recent_projects (path, opened_at_ms) VALUES (?1, ?2)
             ON CONFLICT (path) DO UPDATE SET opened_at_ms = excluded.opened_at_ms",
            params![path, crate::open::now_ms()],
        )
        .map_err(|e| self.err(e))?;
        tx.execute(
            "DELETE FROM recent_projects WHERE path NOT IN
               (SELECT path FROM recent_projects ORDER BY opened_at_ms DESC, path LIMIT ?1)",
            params![KEPT],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// The folders opened, newest first.
    pub fn recent_projects(&self) -> Result<Vec<RecentProject>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT path, opened_at_ms FROM recent_projects ORDER BY opened_at_ms DESC, path",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(RecentProject {
                    path: r.get(0)?,
                    opened_at_ms: r.get(1)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// Takes `path` off the list (the picker's "Forget"); whether it was there.
    pub fn forget_project(&self, path: &str) -> Result<bool, StoreError> {
        self.conn
            .execute("DELETE FROM recent_projects WHERE path = ?1", params![path])
            .map(|n| n > 0)
            .map_err(|e| self.err(e))
    }
}
