//! What a call is given (the project it is limited to, its cancellation) and what it gives back.
//! Plain data; no filesystem access here.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

/// Where a call runs. Paths in the arguments are taken relative to `project`; every path a tool
/// touches must lie inside `project` or `worktree` (after symlinks are resolved).
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The project directory (OpenCode's `directory`).
    pub project: PathBuf,
    /// The version-control root holding the project (OpenCode's `worktree`); titles are relative
    /// to it. `/` (what OpenCode uses outside a repository) widens nothing.
    pub worktree: PathBuf,
    /// Cancelled when the caller gives up; the tools check it between files.
    pub cancel: CancellationToken,
}

impl CallContext {
    /// A context whose worktree is the project itself and that is never cancelled.
    pub fn new(project: impl Into<PathBuf>) -> Self {
        let project = project.into();
        CallContext {
            worktree: project.clone(),
            project,
            cancel: CancellationToken::new(),
        }
    }
}

/// A tool's answer, the three fields OpenCode's transcript keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub title: String,
    pub output: String,
    pub metadata: serde_json::Value,
}
