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
    // 3: receipts, written before a call starts (seed 002). `owner_*` identify the process
    // that ran the call, so another process can tell a crashed owner from a live one.
    "CREATE TABLE receipts (
        receipt_id      TEXT PRIMARY KEY NOT NULL,
        idempotency_key TEXT UNIQUE,
        tool            TEXT NOT NULL,
        source_id       TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('accepted', 'running', 'completed', 'failed', 'cancelled', 'unknown')),
        args_digest     TEXT NOT NULL,
        title           TEXT,
        output          TEXT,
        metadata_json   TEXT,
        error_code      TEXT,
        error_message   TEXT,
        owner_pid       INTEGER NOT NULL,
        owner_start     INTEGER NOT NULL,
        created_at_ms   INTEGER NOT NULL,
        updated_at_ms   INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX receipts_by_time ON receipts (created_at_ms DESC);
    CREATE INDEX receipts_open ON receipts (status) WHERE status IN ('accepted', 'running');",
    // 4: what a loaded module really contributed (tools, hooks, auth/provider), per digest and
    // backend: checkpoint two of the approval plane compares it with what was approved.
    "CREATE TABLE contributions (
        source_id      TEXT NOT NULL,
        digest         TEXT NOT NULL,
        backend        TEXT NOT NULL,
        tools_json     TEXT NOT NULL,
        hooks_json     TEXT NOT NULL,
        observed_at_ms INTEGER NOT NULL,
        PRIMARY KEY (source_id, digest, backend)
    ) STRICT;",
    // 5: a decision may be limited to one project (a project overriding a global source).
    "ALTER TABLE approvals ADD COLUMN project TEXT;",
    // 6: permissions asked by tools (`ctx.ask`): the person's cap per permission (the most a
    // plugin's `permission.ask` answer may grant), the person's standing answers, and every
    // decision with the plugin's answer beside the final one.
    "CREATE TABLE permission_caps (
        permission    TEXT PRIMARY KEY NOT NULL,
        cap           TEXT NOT NULL CHECK (cap IN ('allow', 'ask', 'deny')),
        set_at_ms     INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE permission_rules (
        permission    TEXT NOT NULL,
        pattern       TEXT NOT NULL,
        action        TEXT NOT NULL CHECK (action IN ('allow', 'deny')),
        set_at_ms     INTEGER NOT NULL,
        PRIMARY KEY (permission, pattern)
    ) STRICT;
    CREATE TABLE permission_decisions (
        id             INTEGER PRIMARY KEY,
        request_id     TEXT NOT NULL,
        source_id      TEXT NOT NULL,
        tool           TEXT NOT NULL,
        call_id        TEXT NOT NULL,
        permission     TEXT NOT NULL,
        patterns_json  TEXT NOT NULL,
        plugin_answer  TEXT NOT NULL,
        answered_by    TEXT,
        cap            TEXT NOT NULL,
        final          TEXT NOT NULL CHECK (final IN ('allow', 'deny', 'ask')),
        decided_by     TEXT NOT NULL,
        policy_limited INTEGER NOT NULL,
        decided_at_ms  INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX permission_decisions_by_time ON permission_decisions (decided_at_ms DESC);",
    // 7: a receipt keeps the tool's own result beside what `tool.execute.after` hooks made of
    // it, and which plugins' hooks ran on it (the audit reference).
    "ALTER TABLE receipts ADD COLUMN raw_json TEXT;
    ALTER TABLE receipts ADD COLUMN transformed_by_json TEXT;",
    // 8: standing answers belong to a plugin: one plugin's \"always\" answers only its own asks.
    // `*` is the person's own rule for every plugin (what earlier rows were).
    "CREATE TABLE permission_rules_by_plugin (
        source_id     TEXT NOT NULL,
        permission    TEXT NOT NULL,
        pattern       TEXT NOT NULL,
        action        TEXT NOT NULL CHECK (action IN ('allow', 'deny')),
        set_at_ms     INTEGER NOT NULL,
        PRIMARY KEY (source_id, permission, pattern)
    ) STRICT;
    INSERT INTO permission_rules_by_plugin (source_id, permission, pattern, action, set_at_ms)
        SELECT '*', permission, pattern, action, set_at_ms FROM permission_rules;
    DROP TABLE permission_rules;
    ALTER TABLE permission_rules_by_plugin RENAME TO permission_rules;",
    // 9: sources the person gave a host of their own (no other plugin shares its process).
    "CREATE TABLE own_hosts (
        source_id     TEXT PRIMARY KEY NOT NULL,
        set_at_ms     INTEGER NOT NULL
    ) STRICT;",
    // 10: the person's policy settings (a log: the newest row per key is in force, a NULL value
    // puts the key back to the layer above), the contributions the person let through a
    // `review` cap per source, and what each source contributed when it was last active (the
    // baseline a later load is compared with).
    "CREATE TABLE policy_settings (
        id            INTEGER PRIMARY KEY,
        key           TEXT NOT NULL,
        value_json    TEXT,
        set_by        TEXT NOT NULL,
        set_at_ms     INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX policy_settings_by_key ON policy_settings (key, id DESC);
    CREATE TABLE contribution_grants (
        id            INTEGER PRIMARY KEY,
        source_id     TEXT NOT NULL,
        item          TEXT NOT NULL,
        granted       INTEGER NOT NULL,
        set_at_ms     INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE active_contributions (
        source_id     TEXT NOT NULL,
        backend       TEXT NOT NULL,
        digest        TEXT NOT NULL,
        tools_json    TEXT NOT NULL,
        hooks_json    TEXT NOT NULL,
        active_at_ms  INTEGER NOT NULL,
        PRIMARY KEY (source_id, backend)
    ) STRICT;",
    // 11: execution versions (seed 003 §4): every version of a source that ran, its recorded
    // facts, when it first and last ran and why; the answer of the last update check. (The
    // person's update policy per source is a policy setting, `updates.<source>`.)
    "CREATE TABLE execution_versions (
        id            INTEGER PRIMARY KEY,
        source_id     TEXT NOT NULL,
        backend       TEXT NOT NULL,
        digest        TEXT NOT NULL,
        version       TEXT,
        record_json   TEXT NOT NULL,
        why           TEXT NOT NULL,
        first_at_ms   INTEGER NOT NULL,
        last_at_ms    INTEGER NOT NULL,
        activations   INTEGER NOT NULL,
        UNIQUE (source_id, backend, digest)
    ) STRICT;
    CREATE INDEX execution_versions_by_source ON execution_versions (source_id, backend, last_at_ms DESC);
    CREATE TABLE update_checks (
        source_id     TEXT PRIMARY KEY NOT NULL,
        answer_json   TEXT NOT NULL,
        checked_at_ms INTEGER NOT NULL
    ) STRICT;",
    // 12: sources rolled back to an earlier version of local files: the version that runs (its
    // bytes from Berth's copies) while the files on disk are the ones seen at the rollback.
    "CREATE TABLE pins (
        source_id     TEXT PRIMARY KEY NOT NULL,
        version_id    INTEGER NOT NULL,
        disk_digest   TEXT NOT NULL,
        pinned_at_ms  INTEGER NOT NULL
    ) STRICT;",
    // 13: tool-name conflicts (seed 003 §5.3): for each contested name, which candidate serves
    // it and for which set of candidates (`digest` over their identities and content versions);
    // `by_person` 0 is the implementation Berth kept until the person chooses.
    "CREATE TABLE tool_choices (
        id            INTEGER PRIMARY KEY,
        tool          TEXT NOT NULL,
        digest        TEXT NOT NULL,
        candidate     TEXT NOT NULL,
        by_person     INTEGER NOT NULL,
        set_at_ms     INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX tool_choices_by_tool ON tool_choices (tool, id DESC);",
    // 14: MCP servers started by a fetch-and-run launcher (`npx -y pkg`) that the person had
    // Berth prepare instead: the exact version and integrity installed (scripts off) and the
    // program that runs, for the entry as it was (`config_digest`).
    "CREATE TABLE mcp_prepared (
        source_id     TEXT PRIMARY KEY NOT NULL,
        config_digest TEXT NOT NULL,
        package       TEXT NOT NULL,
        version       TEXT NOT NULL,
        integrity     TEXT NOT NULL,
        install       TEXT NOT NULL,
        list_digest   TEXT NOT NULL,
        program_json  TEXT NOT NULL,
        prepared_at_ms INTEGER NOT NULL
    ) STRICT;",
    // 15: the project folders the desktop app opened, for its project picker.
    "CREATE TABLE recent_projects (
        path          TEXT PRIMARY KEY NOT NULL,
        opened_at_ms  INTEGER NOT NULL
    ) STRICT;",
    // 16: OpenCode V2 plugins' `ctx.storage`, one space per plugin ID.
    "CREATE TABLE plugin_storage (
        plugin_id     TEXT NOT NULL,
        key           TEXT NOT NULL,
        value_json    TEXT NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (plugin_id, key)
    ) STRICT;",
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
