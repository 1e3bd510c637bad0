//! Secret values (API keys, tokens, header values from `chat.headers`/`shell.env`).
//!
//! `Secret` cannot reach a log line or the store: its `Debug` prints a placeholder, it has no
//! `Display`, no `Serialize`, and the store has no method that accepts it. The only way out is
//! [`Secret::expose`], which call sites use to hand the value to the OS keyring or a child
//! process — grep for `expose(` to audit them.

use std::fmt;

pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The raw value. Never pass the result to `tracing`, `format!` for a message, or SQL.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Best effort: overwrite the bytes before the allocation is freed.
        // SAFETY: writing zeros keeps the String valid UTF-8.
        unsafe { self.0.as_bytes_mut().fill(0) };
    }
}
