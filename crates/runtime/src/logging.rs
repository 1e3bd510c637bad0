//! Logging: `tracing` to a size-bounded rotating file in the data dir (`logs/berth.log`, then
//! `.1` … `.N`) and to stderr. Owns the log files; must not log secret values (see `secret`).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
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
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
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
        self.file = Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?,
        );
        self.written = 0;
        Ok(())
    }
}

fn numbered(path: &Path, i: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if r.written + buf.len() as u64 > r.max && r.written > 0 {
            r.rotate()?;
        }
        let n = match r.file.as_mut() {
            Some(f) => f.write(buf)?,
            None => return Err(io::Error::other("log file closed")),
        };
        r.written += n as u64;
        Ok(n)
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
    let stderr_filter = EnvFilter::try_from_env("BERTH_LOG_STDERR")
        .unwrap_or_else(|_| EnvFilter::new(stderr_default));
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(file)
                .with_filter(file_filter),
        )
        .with(
            tracing_subscriber::fmt::layer()
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
}
