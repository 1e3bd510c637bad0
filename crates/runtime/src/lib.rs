//! Berth's runtime: the one library the CLI, the desktop shell and the page server drive.
//! It finds sources (via `berth-discovery`), keeps state (via `berth-store`), watches the
//! config graph, and publishes the status snapshot.
//!
//! Invariant: no user interface code and no window here; everything builds and tests headless.
//!
//! ```no_run
//! use berth_runtime::{Berth, BerthOptions, default_data_dir};
//! let env = berth_discovery::OpencodeEnv::from_process();
//! let berth = Berth::open(BerthOptions { data_dir: default_data_dir(&env), project: ".".into(), env, log_file: None }).unwrap();
//! println!("{} sources", berth.status().sources.len());
//! ```

pub mod approval;
pub mod catalog;
pub mod compat;
pub mod deps;
mod engine;
pub mod error;
pub mod host;
mod integrity;
pub mod logging;
pub mod relocate;
pub mod runtimes;
pub mod secret;
pub mod serve;
pub mod snapshot;
pub mod watch;
pub mod world;

pub use berth_store::Decision;
pub use engine::{default_data_dir, Berth, BerthOptions};
pub use error::{code, BerthError};
pub use secret::Secret;
pub use snapshot::{SourceView, StatusEvent, StatusSnapshot};
