//! Large tool results by reference (seed 003 §8.2, D-015): the host truncates a tool's output as
//! OpenCode does (2,000 lines / 50 KiB, head first, the notice naming where the full text is),
//! and the full text is kept here, in `<data>/tool-output/<receipt id>`, beside the receipt that
//! names it (`metadata.outputPath`). An output over the frame budget (1 MiB) never travels in a
//! frame: the host writes it to the spill file this side named, and it is moved into place.
//!
//! Owns: where full outputs live, what a host may hand over, and their clean-up (after seven
//! days, as OpenCode). Must not: truncate (the host does, before `tool.execute.after` sees the
//! result, where OpenCode does) or decide what a call returns.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::code;
use crate::host::{CallError, HostKey};

/// OpenCode 1.18.4's limits (`Truncate.MAX_LINES`, `Truncate.MAX_BYTES`).
pub const MAX_LINES: usize = 2000;
pub const MAX_BYTES: usize = 50 * 1024;
/// The largest output Berth keeps; a larger one fails the call `invalid-response`.
pub const KEEP_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// How long full outputs are kept (OpenCode: seven days).
const KEEP_FOR: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// The folder full outputs are kept in.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("tool-output")
}

/// What the host needs to truncate one call's result: where the full text will be, and where it
/// may write an output too large for a frame (a folder its boundary lets it write).
pub fn spec(data_dir: &Path, receipt_id: &str, host: &HostKey, source_id: &str) -> Value {
    let kept = dir(data_dir);
    let _ = std::fs::create_dir_all(&kept);
    let spill = spill_dir(data_dir, host, source_id).join(format!("{receipt_id}.spill"));
    json!({
        "path": kept.join(receipt_id),
        "spill": spill,
        "maxLines": MAX_LINES,
        "maxBytes": MAX_BYTES,
        "keepMax": KEEP_MAX_BYTES,
    })
}

/// A restricted host may write only its own folder; the others write beside the kept outputs.
fn spill_dir(data_dir: &Path, host: &HostKey, source_id: &str) -> PathBuf {
    if host.restricted {
        data_dir.join("restricted").join(source_id)
    } else {
        dir(data_dir)
    }
}

/// Takes the full text out of the host's answer `v` (`full`, or the `spilled` file) and keeps it
/// where `spec` said; the answer then holds only what the caller gets.
pub fn keep_full(spec: &Value, v: &mut Value) -> Result<(), CallError> {
    let path = PathBuf::from(spec["path"].as_str().unwrap_or_default());
    let fail = |what: String| CallError {
        code: code::INVALID_RESPONSE,
        message: what,
    };
    if let Some(full) = v.as_object_mut().and_then(|o| o.remove("full")) {
        let text = full.as_str().unwrap_or_default();
        write_private(&path, text.as_bytes())
            .map_err(|e| fail(format!("the full output could not be kept: {e}")))?;
    }
    if let Some(spilled) = v.as_object_mut().and_then(|o| o.remove("spilled")) {
        // Only the file this side named, a regular file (not a link), within the cap.
        let expected = spec["spill"].as_str().unwrap_or_default();
        if spilled.as_str() != Some(expected) {
            return Err(fail(
                "the host handed over a file Berth did not name".into(),
            ));
        }
        let meta = std::fs::symlink_metadata(expected)
            .map_err(|e| fail(format!("the spilled output is missing: {e}")))?;
        if !meta.file_type().is_file() || meta.len() > KEEP_MAX_BYTES {
            let _ = std::fs::remove_file(expected);
            return Err(fail(format!(
                "the spilled output is not a regular file within {KEEP_MAX_BYTES} bytes"
            )));
        }
        std::fs::rename(expected, &path)
            .or_else(|_| std::fs::copy(expected, &path).map(drop))
            .map_err(|e| fail(format!("the full output could not be kept: {e}")))?;
        let _ = std::fs::remove_file(expected);
    }
    Ok(())
}

/// Removes a spill file a failed call left behind.
pub fn discard_spill(spec: &Value) {
    if let Some(p) = spec["spill"].as_str() {
        let _ = std::fs::remove_file(p);
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// Removes full outputs older than seven days (once per process: `Catalog::invoke`).
pub fn sweep(data_dir: &Path) {
    berth_base::remove_older_than(&dir(data_dir), KEEP_FOR);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_text_is_kept_and_only_a_named_spill_file_is_taken() {
        let d = tempfile::tempdir().unwrap();
        let host = HostKey::shared(crate::runtimes::RuntimeKind::Bun);
        let spec = spec(d.path(), "rcpt_1", &host, "tool-x");
        let mut v = json!({ "output": "head", "full": "head and the rest" });
        keep_full(&spec, &mut v).unwrap();
        assert_eq!(v, json!({ "output": "head" }));
        assert_eq!(
            std::fs::read_to_string(dir(d.path()).join("rcpt_1")).unwrap(),
            "head and the rest"
        );
        // A spill file: moved into place.
        let spec2 = super::spec(d.path(), "rcpt_2", &host, "tool-x");
        std::fs::write(spec2["spill"].as_str().unwrap(), "big").unwrap();
        let mut v = json!({ "output": "h", "spilled": spec2["spill"] });
        keep_full(&spec2, &mut v).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir(d.path()).join("rcpt_2")).unwrap(),
            "big"
        );
        assert!(!Path::new(spec2["spill"].as_str().unwrap()).exists());
        // Negative control: a file Berth did not name is refused.
        let spec3 = super::spec(d.path(), "rcpt_3", &host, "tool-x");
        let mut v = json!({ "output": "h", "spilled": "/etc/passwd" });
        assert_eq!(
            keep_full(&spec3, &mut v).unwrap_err().code,
            code::INVALID_RESPONSE
        );
        assert!(!dir(d.path()).join("rcpt_3").exists());
        // A link in place of the spill file is refused too.
        std::os::unix::fs::symlink("/etc/hostname", spec3["spill"].as_str().unwrap()).unwrap();
        let mut v = json!({ "output": "h", "spilled": spec3["spill"] });
        assert!(keep_full(&spec3, &mut v).is_err());
    }
}
