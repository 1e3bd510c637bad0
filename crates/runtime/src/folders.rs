//! The folders a person opens from the window or the page ("Open log folder", "Open config
//! folder"): Berth's log folder in its data dir, and their global OpenCode config folder (where
//! plugins and tools for every project go), handed to the desktop's file manager.
//!
//! Owns: which folder each name means, and handing it to the desktop (the `open` crate: the
//! freedesktop opener here). Must not: write into either folder, or open anything but these
//! two (a name from a page is never a path); the only thing it creates is a missing folder.

use std::path::PathBuf;

use crate::error::{code, BerthError};
use crate::Berth;

/// A folder a front end may ask to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Folder {
    /// Berth's log files (`<data dir>/logs`).
    Logs,
    /// The global OpenCode config folder (`~/.config/opencode` by default).
    Config,
}

impl Folder {
    /// `logs` or `config`, as the page and the window send it.
    pub fn parse(name: &str) -> Result<Folder, BerthError> {
        match name {
            "logs" => Ok(Folder::Logs),
            "config" => Ok(Folder::Config),
            other => Err(BerthError::new(
                code::INVALID_ARGUMENTS,
                "open folder",
                format!("there is no folder named `{other}` to open"),
                "ask for `logs` or `config`",
            )),
        }
    }

    /// Where it is for `berth`.
    pub fn path(self, berth: &Berth) -> PathBuf {
        match self {
            Folder::Logs => berth
                .options()
                .log_file
                .as_ref()
                .and_then(|f| f.parent().map(PathBuf::from))
                .unwrap_or_else(|| berth.options().data_dir.join("logs")),
            Folder::Config => berth
                .status()
                .config_dirs
                .iter()
                .find(|d| d.role == berth_discovery::DirRole::Global)
                .map(|d| d.path.clone())
                .unwrap_or_else(|| berth.options().env.home.join(".config").join("opencode")),
        }
    }
}

/// Opens `which` in the person's file manager (created first when it does not exist yet: an
/// empty config folder is where their first plugin goes). Returns the folder opened.
pub fn open(berth: &Berth, which: Folder) -> Result<PathBuf, BerthError> {
    let path = which.path(berth);
    let failed = |what: String| {
        BerthError::new(
            code::TEMPORARILY_UNAVAILABLE,
            "open folder",
            what,
            format!("open {} yourself", path.display()),
        )
    };
    std::fs::create_dir_all(&path)
        .map_err(|e| failed(format!("cannot create {}: {e}", path.display())))?;
    open::that_detached(&path).map_err(|e| {
        failed(format!(
            "no file manager could be started for {}: {e}",
            path.display()
        ))
    })?;
    tracing::info!(folder = %path.display(), "opened in the file manager");
    Ok(path)
}
