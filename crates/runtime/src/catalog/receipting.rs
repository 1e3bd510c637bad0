//! The receipt of one call, whatever runs it (a plugin host, an MCP server, a built-in): opened
//! `accepted` before anything runs (an idempotency key seen before answers with that receipt),
//! marked `running`, closed with how the call ended and read back as stored.
//!
//! Owns: the receipt's life around a call. Must not: run the call or decide what it returned.

use berth_store::{Accepted, Finish, NewReceipt, Receipt, ReceiptStatus};
use serde_json::Value;

use crate::error::{code, BerthError};

use super::*;

/// A receipt just opened: a new one, or the one an idempotency key names already.
pub(super) enum Opened {
    New(String),
    Existing(Box<Receipt>),
}

/// How a call that failed with `code` ends: `cancelled` when cancelled or past its deadline.
pub(super) fn failed_status(c: &str) -> ReceiptStatus {
    if c == code::CANCELLED || c == code::TIMEOUT {
        ReceiptStatus::Cancelled
    } else {
        ReceiptStatus::Failed
    }
}

impl Catalog {
    /// Writes the receipt of a call of `tool` (of `source_id`) with `args` before it runs.
    pub(super) fn open_receipt(
        &self,
        tool: &str,
        source_id: &str,
        args: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Opened, BerthError> {
        let receipt_id = format!("rcpt_{}", berth_base::random_hex(10));
        let args_digest = berth_discovery::sha256_hex(args.to_string().as_bytes());
        let accepted = self.core.with_store(|s| {
            s.accept_receipt(&NewReceipt {
                receipt_id: &receipt_id,
                idempotency_key,
                tool,
                source_id,
                args_digest: &args_digest,
                owner_pid: std::process::id(),
                owner_start: crate::host::procs::own_start_time(),
            })
        })?;
        Ok(match accepted {
            Accepted::Existing(r) => Opened::Existing(r),
            _ => Opened::New(receipt_id),
        })
    }

    /// The call runs now.
    pub(super) fn mark_running(&self, receipt_id: &str) -> Result<(), BerthError> {
        self.core
            .with_store(|s| s.mark_receipt_running(receipt_id))?;
        self.core.publish_calls();
        Ok(())
    }

    /// Closes the receipt with `end` and returns the row as stored (read again only if
    /// something else ended it first).
    pub(super) fn close_receipt(
        &self,
        receipt_id: &str,
        end: &Finish,
    ) -> Result<Receipt, BerthError> {
        let finished = self
            .core
            .with_store(|s| s.finish_receipt(receipt_id, end))?;
        let receipt = match finished {
            Some(r) => Some(r),
            None => self.core.with_store(|s| s.receipt(receipt_id))?,
        };
        self.core.publish_calls();
        receipt.ok_or_else(|| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "receipts",
                "the receipt vanished",
                "retry",
            )
        })
    }
}
