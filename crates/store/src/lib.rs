//! Berth's durable state: one SQLite file per data dir, in WAL mode, with numbered migrations
//! (`PRAGMA user_version`) and a consistent online backup/restore.
//!
//! Owns: every SQL statement Berth runs. Other crates call typed methods and never see SQL.
//! Must not: store secret values (there is no method that takes one), run plugin code, or
//! delete a database it cannot read — a corrupt file is moved aside, never removed.
//!
//! ```no_run
//! let opened = berth_store::Store::open(std::path::Path::new("/tmp/berth/berth.db")).unwrap();
//! assert_eq!(opened.store.schema_version().unwrap(), berth_store::SCHEMA_VERSION);
//! ```

mod approvals;
mod choices;
mod error;
mod migrations;
mod open;
mod permissions;
mod plugin_storage;
mod policy;
mod projects;
mod receipts;
mod versions;

pub use approvals::{ApprovalKey, ApprovalRow, Contributions, Decision, NewApproval};
pub use choices::{McpPrepared, ToolChoice};
pub use error::StoreError;
pub use migrations::SCHEMA_VERSION;
pub use open::{Opened, Recovery, Store};
pub use permissions::{PermissionDecision, PermissionLevel, PermissionRule, EVERY_PLUGIN};
pub use plugin_storage::SCAN_LIMIT as PLUGIN_SCAN_LIMIT;
pub use policy::{ActiveContributions, PolicySetting};
pub use projects::RecentProject;
pub use receipts::{Accepted, Finish, NewReceipt, Receipt, ReceiptError, ReceiptStatus};
pub use versions::{ExecutionVersion, Pin};

#[cfg(test)]
mod tests;
