//! Receipts: one row per invocation, written as `accepted` before the call starts, then moved
//! to `running` and to exactly one final status. A repeated idempotency key finds the stored
//! row instead of a new call.

use rusqlite::{params, OptionalExtension, Row};
use serde::Serialize;

use crate::{Store, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptStatus {
    Accepted,
    Running,
    Completed,
    Failed,
    Cancelled,
    /// The owner died mid-call: the effect may or may not have happened. Never replayed.
    Unknown,
}

impl ReceiptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptStatus::Accepted => "accepted",
            ReceiptStatus::Running => "running",
            ReceiptStatus::Completed => "completed",
            ReceiptStatus::Failed => "failed",
            ReceiptStatus::Cancelled => "cancelled",
            ReceiptStatus::Unknown => "unknown",
        }
    }
    fn parse(s: &str) -> ReceiptStatus {
        match s {
            "accepted" => ReceiptStatus::Accepted,
            "running" => ReceiptStatus::Running,
            "completed" => ReceiptStatus::Completed,
            "failed" => ReceiptStatus::Failed,
            "cancelled" => ReceiptStatus::Cancelled,
            _ => ReceiptStatus::Unknown,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiptError {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Receipt {
    pub receipt_id: String,
    pub idempotency_key: Option<String>,
    pub tool: String,
    pub source_id: String,
    pub status: ReceiptStatus,
    pub args_digest: String,
    pub title: Option<String>,
    pub output: Option<String>,
    pub metadata: Option<serde_json::Value>,
    pub error: Option<ReceiptError>,
    /// The tool's own result (`{title, output, metadata}`) when `tool.execute.after` hooks
    /// changed it; `title`/`output`/`metadata` above are what the hooks made of it.
    pub raw: Option<serde_json::Value>,
    /// Plugins whose `tool.execute.after` hook ran on the result, in chain order.
    pub transformed_by: Vec<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A call about to start.
pub struct NewReceipt<'a> {
    pub receipt_id: &'a str,
    pub idempotency_key: Option<&'a str>,
    pub tool: &'a str,
    pub source_id: &'a str,
    pub args_digest: &'a str,
    pub owner_pid: u32,
    pub owner_start: u64,
}

/// How an open call ended.
pub struct Finish<'a> {
    pub status: ReceiptStatus,
    pub title: Option<&'a str>,
    pub output: Option<&'a str>,
    pub metadata: Option<&'a serde_json::Value>,
    pub error: Option<(&'a str, &'a str)>,
    /// The tool's own result, when `tool.execute.after` hooks changed it.
    pub raw: Option<&'a serde_json::Value>,
    /// Plugins whose `tool.execute.before` hooks changed the arguments and whose
    /// `tool.execute.after` hooks ran on the result, in chain order.
    pub transformed_by: &'a [String],
    /// The digest of the arguments the tool really ran with, when hooks changed them (the
    /// receipt's `args_digest` then says what ran, not what was asked).
    pub args_digest: Option<&'a str>,
}

impl Finish<'_> {
    /// An end with nothing but its status.
    pub fn new(status: ReceiptStatus) -> Self {
        Finish {
            status,
            title: None,
            output: None,
            metadata: None,
            error: None,
            raw: None,
            transformed_by: &[],
            args_digest: None,
        }
    }
}

/// The result of trying to accept a call.
pub enum Accepted {
    New,
    /// The idempotency key was used before: this is that call's receipt; do not run again.
    Existing(Box<Receipt>),
}

const COLUMNS: &str = "receipt_id, idempotency_key, tool, source_id, status, args_digest, title, output, metadata_json, error_code, error_message, created_at_ms, updated_at_ms, raw_json, transformed_by_json";

fn row(r: &Row<'_>) -> rusqlite::Result<Receipt> {
    let status: String = r.get(4)?;
    let metadata: Option<String> = r.get(8)?;
    let code: Option<String> = r.get(9)?;
    let message: Option<String> = r.get(10)?;
    Ok(Receipt {
        receipt_id: r.get(0)?,
        idempotency_key: r.get(1)?,
        tool: r.get(2)?,
        source_id: r.get(3)?,
        status: ReceiptStatus::parse(&status),
        args_digest: r.get(5)?,
        title: r.get(6)?,
        output: r.get(7)?,
        metadata: metadata.and_then(|m| serde_json::from_str(&m).ok()),
        error: code.map(|code| ReceiptError {
            code,
            message: message.unwrap_or_default(),
        }),
        created_at_ms: r.get(11)?,
        updated_at_ms: r.get(12)?,
        raw: r
            .get::<_, Option<String>>(13)?
            .and_then(|m| serde_json::from_str(&m).ok()),
        transformed_by: r
            .get::<_, Option<String>>(14)?
            .and_then(|m| serde_json::from_str(&m).ok())
            .unwrap_or_default(),
    })
}

impl Store {
    /// Writes the `accepted` receipt, or returns the stored one for a repeated key.
    pub fn accept_receipt(&self, n: &NewReceipt<'_>) -> Result<Accepted, StoreError> {
        let now = crate::open::now_ms();
        // The call path's statements are prepared once per connection (cached).
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO receipts (receipt_id, idempotency_key, tool, source_id, status, args_digest, owner_pid, owner_start, created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, 'accepted', ?5, ?6, ?7, ?8, ?8)
                 ON CONFLICT(idempotency_key) DO NOTHING",
            )
            .and_then(|mut st| st.execute(params![n.receipt_id, n.idempotency_key, n.tool, n.source_id, n.args_digest, n.owner_pid, n.owner_start as i64, now]))
            .map_err(|e| self.err(e))?;
        self.wrote();
        if inserted == 1 {
            return Ok(Accepted::New);
        }
        let key = n.idempotency_key.unwrap_or_default();
        let existing = self
            .receipt_by_key(key)?
            .ok_or_else(|| self.err(rusqlite::Error::QueryReturnedNoRows))?;
        Ok(Accepted::Existing(Box::new(existing)))
    }

    pub fn receipt_by_key(&self, key: &str) -> Result<Option<Receipt>, StoreError> {
        self.conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM receipts WHERE idempotency_key = ?1"),
                [key],
                row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    pub fn receipt(&self, id: &str) -> Result<Option<Receipt>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM receipts WHERE receipt_id = ?1"
            ))
            .and_then(|mut st| st.query_row([id], row).optional())
            .map_err(|e| self.err(e))
    }

    pub fn mark_receipt_running(&self, id: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE receipts SET status = 'running', updated_at_ms = ?2 WHERE receipt_id = ?1 AND status = 'accepted'")
            .and_then(|mut st| st.execute(params![id, crate::open::now_ms()]))
            .map(|_| self.wrote())
            .map_err(|e| self.err(e))
    }

    /// Moves an open receipt to its final status (a receipt is finished once) and returns it as
    /// stored, in the same statement; `None` when it was not open (already finished).
    pub fn finish_receipt(
        &self,
        id: &str,
        end: &Finish<'_>,
    ) -> Result<Option<Receipt>, StoreError> {
        let transformed_by = (!end.transformed_by.is_empty())
            .then(|| serde_json::to_string(end.transformed_by).unwrap_or_default());
        let finished = self
            .conn
            .prepare_cached(&format!(
                "UPDATE receipts SET status = ?2, title = ?3, output = ?4, metadata_json = ?5, error_code = ?6, error_message = ?7, updated_at_ms = ?8, raw_json = ?9, transformed_by_json = ?10, args_digest = coalesce(?11, args_digest)
                 WHERE receipt_id = ?1 AND status IN ('accepted', 'running')
                 RETURNING {COLUMNS}"
            ))
            .and_then(|mut st| {
                st.query_row(
                    params![
                        id,
                        end.status.as_str(),
                        end.title,
                        end.output,
                        end.metadata.map(|m| m.to_string()),
                        end.error.map(|e| e.0),
                        end.error.map(|e| e.1),
                        crate::open::now_ms(),
                        end.raw.map(|r| r.to_string()),
                        transformed_by,
                        end.args_digest,
                    ],
                    row,
                )
                .optional()
            })
            .map_err(|e| self.err(e))?;
        self.wrote();
        Ok(finished)
    }

    /// Newest first.
    pub fn receipts(&self, limit: usize) -> Result<Vec<Receipt>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM receipts ORDER BY created_at_ms DESC, rowid DESC LIMIT ?1"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([limit as i64], row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// Open receipts whose owning process is gone become `unknown`: the effect may have
    /// happened, and the call is not repeated. `alive(pid, start)` says whether an owner lives.
    pub fn settle_orphaned_receipts(
        &self,
        alive: impl Fn(u32, u64) -> bool,
    ) -> Result<usize, StoreError> {
        let mut stmt = self.conn.prepare("SELECT receipt_id, owner_pid, owner_start FROM receipts WHERE status IN ('accepted', 'running')").map_err(|e| self.err(e))?;
        let open: Vec<(String, u32, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(|e| self.err(e))?
            .collect::<Result<_, _>>()
            .map_err(|e| self.err(e))?;
        let mut settled = 0;
        for (id, pid, start) in open {
            if !alive(pid, start as u64) {
                self.finish_receipt(
                    &id,
                    &Finish {
                        error: Some(("process-lost", "Berth stopped while this call was running; it may or may not have taken effect, and it was not repeated")),
                        ..Finish::new(ReceiptStatus::Unknown)
                    },
                )?;
                settled += 1;
            }
        }
        Ok(settled)
    }
}
