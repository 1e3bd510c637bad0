//! Secret values (API keys, tokens, header values from `chat.headers`/`shell.env`), and the
//! OS keyring entries they are kept in.
//!
//! `Secret` cannot reach a log line or the store: its `Debug` prints a placeholder, it has no
//! `Display`, no `Serialize`, and the store has no method that accepts it. The only way out is
//! [`Secret::expose`], which call sites use to hand the value to the OS keyring or a child
//! process — grep for `expose(` to audit them.

use std::fmt;

use crate::error::{code, BerthError};

/// The keyring service Berth's entries are filed under.
const KEYRING_SERVICE: &str = "berth";

/// Berth's OS keyring entry `account` (e.g. `{domain}/auth/{provider}`).
fn keyring_entry(account: &str) -> Result<keyring::Entry, BerthError> {
    keyring::Entry::new(KEYRING_SERVICE, account).map_err(keyring_error)
}

/// The value kept under `account`, if any.
pub(crate) fn keyring_read(account: &str) -> Result<Option<Secret>, BerthError> {
    match keyring_entry(account)?.get_password() {
        Ok(v) => Ok(Some(Secret::new(v))),
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(keyring_error(e)),
    }
}

/// Keeps `value` under `account`.
pub(crate) fn keyring_write(account: &str, value: &str) -> Result<(), BerthError> {
    keyring_entry(account)?
        .set_password(value)
        .map_err(keyring_error)
}

/// Forgets what is kept under `account`; whether there was something.
pub(crate) fn keyring_delete(account: &str) -> Result<bool, BerthError> {
    match keyring_entry(account)?.delete_credential() {
        Ok(()) => Ok(true),
        Err(keyring::Error::NoEntry) => Ok(false),
        Err(e) => Err(keyring_error(e)),
    }
}

/// A keyring refusal as Berth's error (never with the value).
fn keyring_error(e: keyring::Error) -> BerthError {
    BerthError::new(
        code::TEMPORARILY_UNAVAILABLE,
        "keyring",
        format!("the OS keyring refused the operation: {e}"),
        "unlock the OS keyring (on Linux without a desktop session: run Berth under `keyctl session -`) and try again",
    )
}

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

/// Parts of a key that mark its value as secret wherever they appear (`clientsecret`,
/// `accesstoken`, `dbPassword`).
const SECRET_FRAGMENTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "credential",
    "privatekey",
];
/// Words that mark it secret when they are a whole word of the key (`apiKey`, `x-auth`,
/// `auth_header`; not `keyboard` or `author`).
const SECRET_WORDS: &[&str] = &[
    "key",
    "keys",
    "auth",
    "authorization",
    "bearer",
    "cookie",
    "cookies",
    "pat",
    "pwd",
    "signature",
    "session",
];

/// What every status view shows in place of a secret-looking option value.
pub const REDACTED: &str = "[redacted]";

/// Whether an option key names a secret (`apiKey`, `access_token`, `Authorization`, …).
pub fn is_secret_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    if SECRET_FRAGMENTS.iter().any(|f| lower.contains(f)) {
        return true;
    }
    // Words of camelCase, snake_case, kebab-case and dotted keys.
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && prev_lower);
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    if !word.is_empty() {
        words.push(word);
    }
    words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
}

/// `options` as status views may show them: values under secret-looking keys (at any depth,
/// whatever their type) replaced by [`REDACTED`]. The plugin still gets the real values.
pub fn redact_options(options: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match options {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let shown = if is_secret_key(k) && !v.is_null() {
                        Value::String(REDACTED.into())
                    } else {
                        redact_options(v)
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact_options).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_are_told_by_their_words() {
        for k in [
            "apiKey",
            "api_key",
            "API-KEY",
            "accessToken",
            "clientsecret",
            "Authorization",
            "x-auth",
            "dbPassword",
            "privateKey",
            "sessionCookie",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "model",
            "keyboard",
            "author",
            "baseURL",
            "timeout",
            "monkeyPatch",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    #[test]
    fn secret_looking_option_values_are_redacted_at_any_depth() {
        let v = serde_json::json!({
            "apiKey": "sk-1", "model": "m", "nested": { "access_token": { "v": 1 }, "url": "u" },
            "list": [{ "Authorization": "Bearer x" }], "keyboard": "ok?", "empty": null
        });
        let r = redact_options(&v);
        assert_eq!(r["apiKey"], REDACTED);
        assert_eq!(r["model"], "m");
        assert_eq!(r["nested"]["access_token"], REDACTED);
        assert_eq!(r["nested"]["url"], "u");
        assert_eq!(r["list"][0]["Authorization"], REDACTED);
        assert_eq!(r["keyboard"], "ok?");
        assert!(r["empty"].is_null());
    }
}
