//! The one error this crate returns: what was being done and why it failed, in plain words.
//!
//! Owns: `SandboxError` and its constructors. Must not: carry OS handles or decide policy.

use std::fmt;
use std::path::Path;

/// A sandbox step that failed: `what` was being done, `why` it did not work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxError {
    pub what: String,
    pub why: String,
}

impl SandboxError {
    pub fn new(what: impl Into<String>, why: impl Into<String>) -> Self {
        SandboxError {
            what: what.into(),
            why: why.into(),
        }
    }

    /// The error of an OS call, from `errno` right after it failed.
    pub fn last_os(what: impl Into<String>) -> Self {
        SandboxError::new(what, std::io::Error::last_os_error().to_string())
    }

    /// An error about one path.
    pub fn at(what: &str, path: &Path, why: impl fmt::Display) -> Self {
        SandboxError::new(format!("{what} {}", path.display()), why.to_string())
    }
}

impl fmt::Display for SandboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.why)
    }
}

impl std::error::Error for SandboxError {}
