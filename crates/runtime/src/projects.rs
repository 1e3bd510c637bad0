//! The project a desktop window has open, and the folders it opened before (its project
//! picker). A window may have no project open — started from a menu, in the home folder — and
//! then shows what applies to every project (`BerthOptions::scan_target`).
//!
//! Owns: turning "open this folder" into the options Berth opens with (a folder that exists,
//! by its real path), and the recent list kept in the store. Must not: scan, start or stop
//! anything (`Berth::open` and the front end do), or keep a folder the person did not open.

use std::path::{Path, PathBuf};

use berth_discovery::OpencodeEnv;
use serde::Serialize;

use crate::error::{code, BerthError};
use crate::{Berth, BerthOptions};

/// The options for `project` (`None`: no project open). A relative folder is taken from the
/// process's working directory, as `--project` is.
pub fn options(
    data_dir: PathBuf,
    project: Option<&Path>,
    env: OpencodeEnv,
    log_file: Option<PathBuf>,
) -> Result<BerthOptions, BerthError> {
    let project = match project {
        Some(p) => folder(&env.cwd.join(p))?,
        None => PathBuf::new(),
    };
    Ok(BerthOptions {
        data_dir,
        project,
        env,
        log_file,
    })
}

/// The real path of a folder to open, or why it cannot be opened.
fn folder(path: &Path) -> Result<PathBuf, BerthError> {
    let refuse = |why: String| {
        BerthError::new(
            code::INVALID_ARGUMENTS,
            "project",
            format!("{} cannot be opened as a project: {why}", path.display()),
            "choose a folder that exists (Open folder…), or one of the recent projects",
        )
    };
    let real = std::fs::canonicalize(path).map_err(|e| refuse(e.to_string()))?;
    if !real.is_dir() {
        return Err(refuse("it is not a folder".into()));
    }
    Ok(real)
}

/// One folder the window opened before.
#[derive(Debug, Clone, Serialize)]
pub struct Recent {
    pub path: PathBuf,
    pub opened_at_ms: i64,
    /// Still a folder (a moved or deleted one stays listed, marked, until forgotten).
    pub exists: bool,
}

/// What the project picker shows: the open project (none: only what applies to every
/// project) and the folders opened before, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct Projects {
    pub current: Option<PathBuf>,
    pub recent: Vec<Recent>,
}

/// The picker's contents for `berth`.
pub fn list(berth: &Berth) -> Result<Projects, BerthError> {
    let rows = berth.with_store(|s| s.recent_projects())?;
    let o = berth.options();
    Ok(Projects {
        current: o.has_project().then(|| o.project.clone()),
        recent: rows
            .into_iter()
            .map(|r| {
                let path = PathBuf::from(r.path);
                Recent {
                    exists: path.is_dir(),
                    path,
                    opened_at_ms: r.opened_at_ms,
                }
            })
            .collect(),
    })
}

/// Puts the project `berth` has open at the top of the recent list (nothing without one).
pub fn remember(berth: &Berth) -> Result<(), BerthError> {
    let o = berth.options();
    if !o.has_project() {
        return Ok(());
    }
    let path = o.project.display().to_string();
    berth
        .with_store(|s| s.remember_project(&path))
        .map_err(Into::into)
}

/// Takes `path` off the recent list; whether it was there.
pub fn forget(berth: &Berth, path: &Path) -> Result<bool, BerthError> {
    let path = path.display().to_string();
    berth
        .with_store(|s| s.forget_project(&path))
        .map_err(Into::into)
}
