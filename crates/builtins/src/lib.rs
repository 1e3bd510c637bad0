//! OpenCode's built-in file tools, natively: `read`, `glob` and `grep` as OpenCode 1.18.4 gives
//! them to the model (the same ids, descriptions and JSON Schemas, recorded from the real
//! binary) and as they answer (the same `title`, `output` and `metadata` for the same call,
//! checked against recordings in `tests/oracle/builtins/`). 1.18.4 has no `list` tool (its
//! `read` lists directories), so neither does this crate.
//!
//! Must not: reach anything outside the project root (and worktree) it is given — every path is
//! checked after its symlinks are resolved, and a path outside is refused `policy-limited`;
//! spawn processes (grep is ripgrep's library crates, not `rg`); know about the catalog, the
//! approvals or the policy that decide whether a call happens.
//!
//! ```no_run
//! # async fn demo() -> Result<(), berth_builtins::BuiltinError> {
//! use berth_builtins::{call, CallContext};
//! let ctx = CallContext::new("/path/to/project");
//! let out = call("grep", serde_json::json!({ "pattern": "fn main" }), &ctx).await?;
//! println!("{}\n{}", out.title, out.output);
//! # Ok(()) }
//! ```

mod args;
mod context;
mod error;
mod glob;
mod grep;
mod read;
mod scope;
mod text;
mod walk;

use std::sync::OnceLock;

pub use context::{CallContext, Output};
pub use error::BuiltinError;

/// One built-in as the model is offered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Builtin {
    pub id: String,
    pub description: String,
    /// JSON Schema (draft 2020-12) of the arguments.
    pub parameters: serde_json::Value,
}

/// The built-ins, in OpenCode's registry order (read, glob, grep).
pub fn definitions() -> &'static [Builtin] {
    static DEFINITIONS: OnceLock<Vec<Builtin>> = OnceLock::new();
    DEFINITIONS.get_or_init(|| {
        let raw: Vec<serde_json::Value> = serde_json::from_str(include_str!("definitions.json"))
            .expect("definitions.json is valid JSON");
        raw.into_iter()
            .map(|d| Builtin {
                id: d["id"].as_str().expect("id").to_string(),
                description: d["description"].as_str().expect("description").to_string(),
                parameters: d["parameters"].clone(),
            })
            .collect()
    })
}

/// Calls built-in `id` with `args` on a blocking thread. Cancelling `ctx.cancel`, or dropping
/// the returned future, stops the work at the next file (or the next few thousand lines).
pub async fn call(
    id: &str,
    args: serde_json::Value,
    ctx: &CallContext,
) -> Result<Output, BuiltinError> {
    let token = ctx.cancel.child_token();
    // Dropping this future cancels the blocking work too.
    let _stop_on_drop = token.clone().drop_guard();
    let inner = CallContext {
        cancel: token.clone(),
        ..ctx.clone()
    };
    let id = id.to_string();
    let work = tokio::task::spawn_blocking(move || call_blocking(&id, args, &inner));
    tokio::select! {
        joined = work => joined.unwrap_or_else(|e| Err(BuiltinError::io(&ctx.project, std::io::Error::other(e)))),
        _ = token.cancelled() => Err(BuiltinError::Cancelled),
    }
}

/// The same call on the current thread (it blocks): for benchmarks and for callers that are
/// already on a blocking thread.
pub fn call_blocking(
    id: &str,
    args: serde_json::Value,
    ctx: &CallContext,
) -> Result<Output, BuiltinError> {
    if ctx.cancel.is_cancelled() {
        return Err(BuiltinError::Cancelled);
    }
    match id {
        "read" => read::run(&args::Args::new("read", args)?, ctx),
        "glob" => glob::run(&args::Args::new("glob", args)?, ctx),
        "grep" => grep::run(&args::Args::new("grep", args)?, ctx),
        other => Err(BuiltinError::UnknownTool(other.to_string())),
    }
}
