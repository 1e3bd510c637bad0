//! The error every user-visible failure becomes: a stable code (DESIGN.md), what happened,
//! which plugin and capability it concerns, and what to do.

use serde::Serialize;

/// Stable codes of DESIGN.md.
pub mod code {
    pub const ACTION_REQUIRED: &str = "action-required";
    pub const UNSUPPORTED: &str = "unsupported";
    pub const INCOMPATIBLE_VERSION: &str = "incompatible-version";
    pub const DEPENDENCY_FAILED: &str = "dependency-failed";
    pub const PLUGIN_FAILED: &str = "plugin-failed";
    pub const TIMEOUT: &str = "timeout";
    pub const CANCELLED: &str = "cancelled";
    pub const OVERLOADED: &str = "overloaded";
    pub const POLICY_LIMITED: &str = "policy-limited";
    pub const PROCESS_LOST: &str = "process-lost";
    pub const TEMPORARILY_UNAVAILABLE: &str = "temporarily-unavailable";
    pub const INVALID_RESPONSE: &str = "invalid-response";
    pub const INVALID_ARGUMENTS: &str = "invalid-arguments";
    pub const WORKER_LOST: &str = "worker-lost";
}

#[derive(Debug, Clone, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct BerthError {
    pub code: &'static str,
    pub message: String,
    /// The plugin (source id) concerned, or null for Berth itself.
    pub plugin: Option<String>,
    /// The capability concerned (`store`, `serve`, `discovery`, a tool or hook name, …).
    pub capability: Option<String>,
    pub recovery: String,
}

impl BerthError {
    pub fn new(
        code: &'static str,
        capability: &str,
        message: impl Into<String>,
        recovery: impl Into<String>,
    ) -> Self {
        BerthError {
            code,
            message: message.into(),
            plugin: None,
            capability: Some(capability.to_string()),
            recovery: recovery.into(),
        }
    }

    pub fn for_plugin(mut self, plugin: impl Into<String>) -> Self {
        self.plugin = Some(plugin.into());
        self
    }
}

impl From<berth_store::StoreError> for BerthError {
    fn from(e: berth_store::StoreError) -> Self {
        BerthError::new(e.code(), "store", e.to_string(), e.recovery())
    }
}
