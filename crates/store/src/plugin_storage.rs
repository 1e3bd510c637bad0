//! OpenCode V2 plugins' `ctx.storage` (ledger D-044): JSON values under string keys, one space
//! per plugin ID (OpenCode 2 isolates storage by the plugin's `id`).
//!
//! Writes count as the call path's (like receipts): they change nothing the status shows.
//!
//! Owns: the `plugin_storage` rows. Must not: read or write another plugin's space (every
//! statement is keyed by the ID it is given), or show values anywhere: they are the plugin's
//! data, returned only to it.

use rusqlite::{params, OptionalExtension};

use crate::{Store, StoreError};

/// The most keys one `scan` answers.
pub const SCAN_LIMIT: i64 = 1000;

impl Store {
    /// The JSON text stored under `key` for `plugin`.
    pub fn plugin_value(&self, plugin: &str, key: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT value_json FROM plugin_storage WHERE plugin_id = ?1 AND key = ?2",
                params![plugin, key],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    pub fn set_plugin_value(&self, plugin: &str, key: &str, json: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO plugin_storage (plugin_id, key, value_json, updated_at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (plugin_id, key) DO UPDATE SET value_json = excluded.value_json, updated_at_ms = excluded.updated_at_ms",
                params![plugin, key, json, crate::open::now_ms()],
            )
            .map(|_| self.wrote())
            .map_err(|e| self.err(e))
    }

    pub fn remove_plugin_value(&self, plugin: &str, key: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "DELETE FROM plugin_storage WHERE plugin_id = ?1 AND key = ?2",
                params![plugin, key],
            )
            .map(|_| self.wrote())
            .map_err(|e| self.err(e))
    }

    /// Keys of `plugin` starting with `prefix`, after `after`, in key order, at most `limit`
    /// (and [`SCAN_LIMIT`]): `(key, json)` pairs.
    pub fn scan_plugin_values(
        &self,
        plugin: &str,
        prefix: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT key, value_json FROM plugin_storage
                 WHERE plugin_id = ?1 AND substr(key, 1, length(?2)) = ?2 AND key > ?3
                 ORDER BY key LIMIT ?4",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                params![
                    plugin,
                    prefix,
                    after.unwrap_or(""),
                    limit.clamp(1, SCAN_LIMIT)
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}
