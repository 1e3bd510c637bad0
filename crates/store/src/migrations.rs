//! The schema, as an append-only list of migrations. Migration `i` (0-based) brings the file
//! from `user_version = i` to `i + 1`. Never edit a published step; add a new one.

use rusqlite::Connection;

/// Each step runs in its own transaction together with the `user_version` bump.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: instance facts (creation time, the store's own id for backups).
    "CREATE TABLE meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    ) STRICT;",
    // 2: the approval plane. Append-only: the newest row per (source, domain, backend) is the
    // decision in force; older rows are the audit trail.
    "CREATE TABLE approvals (
        id                INTEGER PRIMARY KEY,
        source_id         TEXT NOT NULL,
        plugin_identity   TEXT NOT NULL,
        domain            TEXT NOT NULL,
        backend           TEXT NOT NULL,
        decision          TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
        digest            TEXT NOT NULL,
        capability_digest TEXT NOT NULL,
        shown_json        TEXT NOT NULL,
        decided_by        TEXT NOT NULL,
        decided_at_ms     INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX approvals_by_key ON approvals (source_id, domain, backend, id);",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Applies every step above the file's version. `upto` limits it (tests build old files).
pub(crate) fn migrate(conn: &mut Connection, upto: i64) -> rusqlite::Result<()> {
    let from = user_version(conn)?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
        let target = index as i64 + 1;
        if target > upto {
            break;
        }
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", target)?;
        tx.commit()?;
    }
    Ok(())
}
