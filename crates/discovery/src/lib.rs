//! Discovery: the plugins, tools and MCP servers OpenCode 1.18.4 would use for a project, in
//! OpenCode's order, each described statically — entry, digest, capability summary,
//! diagnostics — before any of it may run.
//!
//! Invariant: nothing in this crate executes, imports or installs third-party code, and it
//! never writes into OpenCode's folders. A bad file is a diagnostic, never an early return.
//!
//! ```no_run
//! let env = berth_discovery::OpencodeEnv::from_process();
//! let found = berth_discovery::Scanner::new().scan(&env, std::path::Path::new("."));
//! for s in &found.sources { println!("{} {:?} {}", s.id, s.kind, s.entry); }
//! ```

pub mod digest;
pub mod env;
pub mod facts;
pub mod graph;
pub mod mcp;
pub mod prepared;
pub mod resolve;
pub mod scan;
pub mod source;
pub mod spec;
pub mod v2ids;

pub use digest::{sha256_hex, sha256_parts};
pub use env::{OpencodeEnv, Switch};
pub use graph::{ConfigDir, ConfigFile, ConfigGraph, ConfigRole, DirRole};
pub use mcp::{opencode_tool_key, McpOAuth, McpTarget};
pub use resolve::Runtime;
pub use scan::{
    config_dir_of, npm_current_version, npm_entry, npm_install_dir, npm_pointer, npm_slot_dir,
    npm_versions_dir, prepared_package_dir, resolved_in, Discovery, Scanner, OPENCODE_VERSION,
};
pub use source::{
    Capabilities, Diagnostic, Generation, Manifest, NpmRef, Resolved, Scope, Source, SourceKind,
    SourceState, V2_API, V2_EFFECT,
};
