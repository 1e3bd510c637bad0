//! Logging: `tracing` to a size-bounded rotating file in the data dir (`logs/berth.log`, then
//! `.1` … `.N`, all 0600) and to stderr. Owns the log files; must not log secret values (see
//! `secret`). One event is one line: text that came from plugins (their log calls, their
//! output in an error) cannot start a line of its own, so it cannot forge one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// Size at which the current file is rotated.
pub const MAX_LOG_BYTES: u64 = 4 * 1024 * 1024;
/// Rotated files kept besides the current one.
pub const KEPT_LOGS: usize = 3;

/// A file writer that rotates at a size limit. Cloning shares the file.
#[derive(Clone)]
pub struct RotatingFile {
    inner: Arc<Mutex<Rotation>>,
}

struct Rotation {
    path: PathBuf,
    file: Option<File>,
    written: u64,
    max: u64,
    keep: usize,
}

impl RotatingFile {
    pub fn open(path: &Path, max: u64, keep: usize) -> io::Result<RotatingFile> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
            // The log names plugins, files and calls: the user's alone.
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        let file = private_append(path)?;
        let written = file.metadata()?.len();
        Ok(RotatingFile {
            inner: Arc::new(Mutex::new(Rotation {
                path: path.to_path_buf(),
                file: Some(file),
                written,
                max,
                keep,
            })),
        })
    }
}

impl Rotation {
    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        for i in (1..self.keep).rev() {
            let from = numbered(&self.path, i);
            if from.exists() {
                std::fs::rename(&from, numbered(&self.path, i + 1))?;
            }
        }
        if self.keep > 0 {
            std::fs::rename(&self.path, numbered(&self.path, 1))?;
        } else {
            std::fs::remove_file(&self.path)?;
        }
        self.file = Some(private_append(&self.path)?);
        self.written = 0;
        Ok(())
    }
}

/// Opens `path` for appending, created 0600 (and narrowed to 0600 if an older Berth made it).
fn private_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

fn numbered(path: &Path, i: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

/// One formatted event as one line: line breaks and control characters inside it are written
/// escaped (`\n`, `\r`, `\x1b`, …); only the event's own final newline stays.
pub fn one_line(event: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let body = event.strip_suffix(b"\n").unwrap_or(event);
    if !body.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return std::borrow::Cow::Borrowed(event);
    }
    let mut out = Vec::with_capacity(event.len() + 16);
    for &b in body {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.push(b),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            b => out.push(b),
        }
    }
    if body.len() < event.len() {
        out.push(b'\n');
    }
    std::borrow::Cow::Owned(out)
}

impl Write for RotatingFile {
    /// `buf` is one formatted event (the fmt layer writes each event whole).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let line = one_line(buf);
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if r.written + line.len() as u64 > r.max && r.written > 0 {
            r.rotate()?;
        }
        match r.file.as_mut() {
            Some(f) => f.write_all(&line)?,
            None => return Err(io::Error::other("log file closed")),
        };
        r.written += line.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match r.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

impl<'a> MakeWriter<'a> for RotatingFile {
    type Writer = RotatingFile;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Installs the global subscriber: the file gets `info` and up (or `BERTH_LOG`), stderr gets
/// `stderr_default` and up. Returns the log file path. Safe to call once per process.
pub fn init(data_dir: &Path, stderr_default: &str) -> io::Result<PathBuf> {
    let path = data_dir.join("logs").join("berth.log");
    let file = RotatingFile::open(&path, MAX_LOG_BYTES, KEPT_LOGS)?;
    let file_filter =
        EnvFilter::try_from_env("BERTH_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // The MCP SDK's worker logs the end of every session it cannot keep (a server that asks
    // for a sign-in, one that went away) as an error; Berth reports the same end as its own
    // error with a code and a way out, so on stderr that line is noise (the file keeps it).
    let stderr_filter = EnvFilter::try_from_env("BERTH_LOG_STDERR").unwrap_or_else(|_| {
        EnvFilter::new(format!("{stderr_default},rmcp::transport::worker=off"))
    });
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(file)
                .with_filter(file_filter),
        )
        .with(
            tracing_subscriber::fmt::layer()
                // Colour only for a person at a terminal, not in a file or a pipe.
                .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
                .with_writer(io::stderr)
                .with_filter(stderr_filter),
        )
        .try_init();
    Ok(path)
}

use tracing_subscriber::Layer;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("berth.log");
        let mut w = RotatingFile::open(&path, 1000, 2).unwrap();
        for i in 0..200 {
            writeln!(w, "line {i:04} ........................................").unwrap();
        }
        let total: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= 3 * 1000, "{total} bytes kept");
        assert!(numbered(&path, 2).exists() && !numbered(&path, 3).exists());
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("line 0199"));
    }

    #[test]
    fn plugin_text_cannot_forge_a_log_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("berth.log");
        let file = RotatingFile::open(&path, 1 << 20, 1).unwrap();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(file),
        );
        let forged = "hello\n2026-12-01T00:00:00.000000Z  INFO berth: approved everything\r\x1b[2K";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(plugin = "evil\nINFO x", "{forged}");
            tracing::info!("next");
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("hello\\n2026-12-01") && lines[0].contains("\\x1b[2K"));
        assert!(lines[1].ends_with("next"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
