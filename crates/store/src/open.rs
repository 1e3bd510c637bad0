//! Opening the store: WAL, busy timeout, migrations, the corrupt-file path, backup and restore.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::error::StoreError;
use crate::migrations::{migrate, user_version, SCHEMA_VERSION};

/// How long a writer waits for another process (the app and the CLI share one file).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to one Berth database file.
pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    /// Writes on the call path since the last checkpoint was started.
    writes: std::cell::Cell<u32>,
    /// Rows the call path's statements changed (receipts), of this connection's total.
    call_changes: std::cell::Cell<u64>,
    /// A checkpoint is running on its own connection.
    checkpointing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The last checkpoint found the WAL past [`WAL_RESTART_FRAMES`]: the next write restarts it.
    restart_wal: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Hot-path writes between two background WAL checkpoints.
const CHECKPOINT_EVERY: u32 = 200;

/// WAL frames (pages; 16 MiB at SQLite's 4 KiB) past which a checkpoint also restarts the WAL.
/// A passive checkpoint copies pages back but never restarts the log: under writes that never
/// pause it is never caught up at the moment a writer begins, so SQLite never wraps the WAL and
/// the `-wal` file (and the `-shm` index mapped into every connection) grow without end — 800 MB
/// a minute in the chaos soak. Past this size the next write checkpoints on its own connection
/// and truncates the WAL (the rest of a passive checkpoint and an fsync, once per 16 MiB).
pub(crate) const WAL_RESTART_FRAMES: i64 = 4096;

/// Something the person must be told about after opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// The file could not be read as a database; it was renamed to `moved_to` and a fresh
    /// store was created in its place.
    MovedAsideCorrupt { moved_to: PathBuf },
}

pub struct Opened {
    pub store: Store,
    pub recovery: Option<Recovery>,
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings it to [`SCHEMA_VERSION`].
    ///
    /// A file that is not a readable SQLite database is moved aside (never deleted) and a fresh
    /// store is created; the returned [`Recovery`] says where the old file went. A file from a
    /// newer Berth is left untouched and refused.
    pub fn open(path: &Path) -> Result<Opened, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        match Self::open_checked(path) {
            Ok(store) => Ok(Opened {
                store,
                recovery: None,
            }),
            Err(OpenFailure::Corrupt) => {
                let moved_to = move_aside(path)?;
                tracing::warn!(from = %path.display(), to = %moved_to.display(), "database unreadable; moved aside");
                let store = Self::open_checked(path).map_err(|f| f.into_error(path))?;
                Ok(Opened {
                    store,
                    recovery: Some(Recovery::MovedAsideCorrupt { moved_to }),
                })
            }
            Err(other) => Err(other.into_error(path)),
        }
    }

    fn open_checked(path: &Path) -> Result<Store, OpenFailure> {
        // Receipts hold tool outputs: the file is the user's alone. SQLite gives its `-wal` and
        // `-shm` companions the database file's mode.
        make_private(path);
        let mut conn = Connection::open(path).map_err(|e| OpenFailure::classify(e, path))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| OpenFailure::classify(e, path))?;
        // Reading the schema is the first real read of the file: a corrupt file fails here.
        let found = user_version(&conn).map_err(|e| OpenFailure::classify(e, path))?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|e| OpenFailure::classify(e, path))?;
        if found > SCHEMA_VERSION {
            return Err(OpenFailure::Future(found));
        }
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .map_err(|e| OpenFailure::classify(e, path))?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| OpenFailure::classify(e, path))?;
        // No checkpoint (and its fsync) inside a committing call: `wrote` starts one on its own
        // connection every CHECKPOINT_EVERY writes; SQLite folds the WAL back when the last
        // connection closes.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|e| OpenFailure::classify(e, path))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(|e| OpenFailure::classify(e, path))?;
        migrate(&mut conn, SCHEMA_VERSION).map_err(|e| OpenFailure::classify(e, path))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
            writes: std::cell::Cell::new(0),
            call_changes: std::cell::Cell::new(0),
            checkpointing: Default::default(),
            restart_wal: Default::default(),
        };
        store
            .ensure_meta()
            .map_err(|e| OpenFailure::classify(e, path))?;
        Ok(store)
    }

    fn ensure_meta(&self) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('created_at_ms', ?1)",
            [now_ms().to_string()],
        )?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Counts a write on the call path; every [`CHECKPOINT_EVERY`] writes a passive WAL
    /// checkpoint runs on a thread and connection of its own, so no call waits for its fsync.
    pub(crate) fn wrote(&self) {
        use std::sync::atomic::Ordering;
        self.call_changes
            .set(self.call_changes.get() + self.conn.changes());
        let n = self.writes.get() + 1;
        if n < CHECKPOINT_EVERY {
            self.writes.set(n);
            return;
        }
        self.writes.set(0);
        if self.restart_wal.swap(false, Ordering::SeqCst) {
            // Here, between two of this connection's own transactions, no writer of this
            // process holds the lock (a checkpoint on another connection waits for one forever
            // under writes that never pause); the passive checkpoints already copied most pages.
            let _ = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
        if self.checkpointing.swap(true, Ordering::SeqCst) {
            return;
        }
        let (path, flag) = (self.path.clone(), self.checkpointing.clone());
        let restart = self.restart_wal.clone();
        let spawned = std::thread::Builder::new()
            .name("berth-checkpoint".into())
            .spawn(move || {
                if let Ok(c) = Connection::open(&path) {
                    let _ = c.busy_timeout(BUSY_TIMEOUT);
                    // (busy, frames in the WAL, frames copied back)
                    let checkpoint = |mode: &str| {
                        c.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
                            r.get::<_, i64>(1)
                        })
                    };
                    if checkpoint("PASSIVE").is_ok_and(|frames| frames > WAL_RESTART_FRAMES) {
                        restart.store(true, Ordering::SeqCst);
                    }
                }
                flag.store(false, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.checkpointing.store(false, Ordering::SeqCst);
        }
    }

    pub fn schema_version(&self) -> Result<i64, StoreError> {
        user_version(&self.conn).map_err(|e| self.err(e))
    }

    pub(crate) fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Writes a consistent copy of the whole store to `dest` (atomically: a temporary file in
    /// the same folder, then a rename). Other writers may keep writing meanwhile; the copy is
    /// the state of one transaction.
    pub fn backup_to(&self, dest: &Path) -> Result<(), StoreError> {
        let dir = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let tmp = dir.join(format!(
            ".{}.partial-{}",
            dest.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "berth-backup".into()),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp);
        let tmp_str = tmp.to_str().ok_or_else(|| StoreError::DataDir {
            path: tmp.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path is not UTF-8"),
        })?;
        // VACUUM INTO reads inside one read transaction: a consistent snapshot, compacted.
        self.conn
            .execute("VACUUM INTO ?1", [tmp_str])
            .map_err(|e| self.err(e))?;
        make_private(&tmp);
        std::fs::rename(&tmp, dest).map_err(|source| StoreError::DataDir {
            path: dest.to_path_buf(),
            source,
        })?;
        Ok(())
    }

    /// Replaces the store's contents with those of `src` (a file made by [`Store::backup_to`]),
    /// in one step under the database lock, then migrates it up to this build's schema.
    /// The current contents are unchanged if `src` is not a usable Berth backup.
    pub fn restore_from(&mut self, src: &Path) -> Result<(), StoreError> {
        let not = |reason: String| StoreError::NotRestorable {
            path: src.to_path_buf(),
            reason,
        };
        if !src.is_file() {
            return Err(not("no such file".into()));
        }
        let source = Connection::open_with_flags(src, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| not(e.to_string()))?;
        let check: String = source
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| not(e.to_string()))?;
        if check != "ok" {
            return Err(not(format!("integrity check: {check}")));
        }
        let version = user_version(&source).map_err(|e| not(e.to_string()))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::FutureVersion {
                path: src.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let has_meta: Option<String> = source
            .query_row(
                "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| not(e.to_string()))?;
        if version < 1 || has_meta.is_none() {
            return Err(not("it holds no Berth schema".into()));
        }
        let path = self.path.clone();
        let copied = rusqlite::backup::Backup::new(&source, &mut self.conn)
            .and_then(|b| b.run_to_completion(i32::MAX, Duration::from_millis(10), None));
        copied.map_err(|source| StoreError::Sqlite { path, source })?;
        self.conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?;
        // Statements prepared for the old contents are not reused.
        self.conn.flush_prepared_statement_cache();
        migrate(&mut self.conn, SCHEMA_VERSION).map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Rows this connection changed other than on the call path (receipts, which the status
    /// publishes on its own): when it moved, this process changed something a rescan shows.
    pub fn changes_beyond_calls(&self) -> u64 {
        self.conn
            .total_changes()
            .saturating_sub(self.call_changes.get())
    }

    /// A change counter that moves when *another* connection (another process) commits.
    /// Cheap: it reads no table.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [key, value],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }
}

enum OpenFailure {
    Corrupt,
    Future(i64),
    Other(rusqlite::Error),
    Io(std::io::Error),
}

impl OpenFailure {
    fn classify(e: rusqlite::Error, path: &Path) -> Self {
        use rusqlite::ErrorCode::*;
        match e.sqlite_error_code() {
            Some(NotADatabase) | Some(DatabaseCorrupt) => OpenFailure::Corrupt,
            Some(ReadOnly) | Some(CannotOpen) | Some(PermissionDenied) => {
                OpenFailure::Io(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{e} ({})", path.display()),
                ))
            }
            _ => OpenFailure::Other(e),
        }
    }

    fn into_error(self, path: &Path) -> StoreError {
        match self {
            OpenFailure::Corrupt => StoreError::Sqlite {
                path: path.to_path_buf(),
                source: rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                    Some("still unreadable after moving the old file aside".into()),
                ),
            },
            OpenFailure::Future(found) => StoreError::FutureVersion {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            },
            OpenFailure::Other(source) => StoreError::Sqlite {
                path: path.to_path_buf(),
                source,
            },
            OpenFailure::Io(source) => StoreError::DataDir {
                path: path.parent().unwrap_or(path).to_path_buf(),
                source,
            },
        }
    }
}

/// Renames the unreadable file (and its WAL/SHM companions) to `<name>.corrupt-<ms>`.
/// Creates `path` readable and writable by its owner only (0600), or narrows it to that and
/// its `-wal`/`-shm` companions when they exist (a store made by an older Berth was 0644).
fn make_private(path: &Path) {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    for p in [
        path.to_path_buf(),
        path.with_file_name(format!("{name}-wal")),
        path.with_file_name(format!("{name}-shm")),
    ] {
        if p.exists() {
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
        }
    }
}

fn move_aside(path: &Path) -> Result<PathBuf, StoreError> {
    let stamp = now_ms();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "berth.db".into());
    let target = path.with_file_name(format!("{name}.corrupt-{stamp}"));
    std::fs::rename(path, &target).map_err(|source| StoreError::DataDir {
        path: path.to_path_buf(),
        source,
    })?;
    for suffix in ["-wal", "-shm"] {
        let companion = path.with_file_name(format!("{name}{suffix}"));
        if companion.exists() {
            let _ = std::fs::rename(
                &companion,
                target.with_file_name(format!("{name}.corrupt-{stamp}{suffix}")),
            );
        }
    }
    Ok(target)
}

#[cfg(test)]
pub(crate) fn open_at_version(path: &Path, version: i64) -> Connection {
    let mut conn = Connection::open(path).unwrap();
    migrate(&mut conn, version).unwrap();
    conn
}
