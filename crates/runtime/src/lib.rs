//! Berth's runtime: the one library the CLI, the desktop shell and the page server drive,
//! through one facade (`Berth`). Behind it, each owner is a struct with its own state and the
//! lower owners it was handed: `core` (shared facts), `world`, `catalog`, `plugin_calls`,
//! `auth`, `status`, `decisions`. It finds sources (via `berth-discovery`), keeps state (via
//! `berth-store`), runs plugins in hosts (via `berth-host`), watches the config graph and
//! publishes the status snapshot.
//!
//! Must not: hold user interface code or a window (everything builds and tests headless), or
//! let a module depend on one above it (`crates/layers` checks).
//!
//! ```no_run
//! use berth_runtime::{Berth, BerthOptions, default_data_dir};
//! let env = berth_discovery::OpencodeEnv::from_process();
//! let berth = Berth::open(BerthOptions { data_dir: default_data_dir(&env), project: ".".into(), env, log_file: None }).unwrap();
//! println!("{} sources", berth.status().sources.len());
//! ```

pub mod approval;
pub mod attention;
pub mod auth;
mod berth;
pub mod catalog;
mod core;
mod decisions;
pub mod deps;
pub mod folders;
pub mod front_calls;
mod governor;
mod integrity;
pub mod logging;
mod mcp_servers;
mod memory;
mod plugin_calls;
mod plugin_storage;
pub mod policy;
mod project;
pub mod projects;
mod relocate;
pub mod secret;
mod signals;
pub mod snapshot;
mod status;
pub mod updates;
pub mod versions;
pub mod watch;
pub mod world;

// The layers below, under the names this crate and its front ends use.
pub use berth_base::error;
pub use berth_host as host;
pub use berth_host::{compat, runtimes};

pub use crate::berth::Berth;
pub use crate::catalog::SignedIn;
pub use crate::core::{default_data_dir, BerthOptions};
pub use crate::decisions::Decided;
pub use berth_store::{Decision, McpPrepared, Receipt, ReceiptStatus};
pub use error::{code, BerthError};
pub use secret::Secret;
pub use snapshot::{SourceView, StatusEvent, StatusSnapshot};
