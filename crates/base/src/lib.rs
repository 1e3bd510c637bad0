//! The bottom of Berth's stack, under the plugin host and the runtime: the stable error
//! (`BerthError`, the codes of DESIGN.md) and the small helpers every layer shares.
//!
//! Owns: the error type and its codes, constant-time comparison, OS randomness as hex, the
//! wall clock in milliseconds, the sweep of a folder's old files. Must not: depend on anything of Berth above the store, or hold
//! state.

pub mod error;

pub use error::{code, BerthError};

/// Whether two secrets are equal, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `n` random bytes from the OS, as hex (tokens, secrets, ids).
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    hex::encode(bytes)
}

/// Milliseconds since the Unix epoch (0 on a clock before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Removes the files directly in `dir` not modified for longer than `age` (best effort: a
/// file that cannot be read or removed stays).
pub fn remove_older_than(dir: &std::path::Path, age: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|a| a > age);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn equal_secrets_compare_equal_and_others_do_not() {
        assert!(super::constant_time_eq(b"abc", b"abc"));
        assert!(!super::constant_time_eq(b"abc", b"abd"));
        assert!(!super::constant_time_eq(b"abc", b"abcd"));
        assert_eq!(super::random_hex(8).len(), 16);
    }
}
