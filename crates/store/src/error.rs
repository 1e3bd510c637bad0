//! Store failures, each naming the file involved and what the person can do about it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot use the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the database {path} was written by a newer Berth (schema {found}, this build knows up to {supported})")]
    FutureVersion {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("{path} is not a Berth database that can be restored: {reason}")]
    NotRestorable { path: PathBuf, reason: String },
    #[error("database {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

impl StoreError {
    /// The stable error code of DESIGN.md for this failure.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::DataDir { .. } => "action-required",
            StoreError::FutureVersion { .. } => "incompatible-version",
            StoreError::NotRestorable { .. } => "action-required",
            StoreError::Sqlite { .. } => "temporarily-unavailable",
        }
    }

    /// What the person can do next.
    pub fn recovery(&self) -> String {
        match self {
            StoreError::DataDir { path, .. } => format!(
                "make {} writable for this user, or pass another folder with --data-dir",
                path.display()
            ),
            StoreError::FutureVersion { path, .. } => format!(
                "update Berth, or pass a different --data-dir; {} was left untouched",
                path.display()
            ),
            StoreError::NotRestorable { path, .. } => format!(
                "choose a file made by `berth backup`; {} was not used and the current store is unchanged",
                path.display()
            ),
            StoreError::Sqlite { .. } => {
                "retry; if it persists, run `berth backup FILE` and report the message".to_string()
            }
        }
    }

    /// The file or folder the failure concerns.
    pub fn path(&self) -> &std::path::Path {
        match self {
            StoreError::DataDir { path, .. }
            | StoreError::FutureVersion { path, .. }
            | StoreError::NotRestorable { path, .. }
            | StoreError::Sqlite { path, .. } => path,
        }
    }
}
