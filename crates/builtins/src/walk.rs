//! The files ripgrep would visit for `rg --files [--hidden] --glob=… --glob='!**/.git/**'` run in
//! a directory: .gitignore/.ignore rules (inside a repository), hidden entries skipped unless
//! asked for, symlinks not followed, `--glob` with ripgrep's override semantics. Sorted by name
//! within each directory (ripgrep's `--sort path`), so results are the same on every run.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;
use tokio_util::sync::CancellationToken;

use crate::BuiltinError;

pub(crate) struct FileWalk<'a> {
    pub root: &'a Path,
    pub hidden: bool,
    /// ripgrep `--glob` values, relative to `root`.
    pub globs: Vec<&'a str>,
}

impl FileWalk<'_> {
    /// Calls `each` with every file's path relative to the root, until it breaks.
    pub(crate) fn run(
        &self,
        cancel: &CancellationToken,
        mut each: impl FnMut(PathBuf) -> ControlFlow<()>,
    ) -> Result<(), BuiltinError> {
        let mut ov = OverrideBuilder::new(self.root);
        for g in self.globs.iter().copied().chain(["!**/.git/**"]) {
            ov.add(g).map_err(|e| BuiltinError::InvalidPattern {
                pattern: g.to_string(),
                message: e.to_string(),
            })?;
        }
        let overrides = ov.build().map_err(|e| BuiltinError::InvalidPattern {
            pattern: self.globs.join(" "),
            message: e.to_string(),
        })?;
        let walk = WalkBuilder::new(self.root)
            .hidden(!self.hidden)
            .overrides(overrides)
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        for entry in walk {
            if cancel.is_cancelled() {
                return Err(BuiltinError::Cancelled);
            }
            // An unreadable directory or file is skipped, as `rg --no-messages` does.
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let rel = entry
                .path()
                .strip_prefix(self.root)
                .unwrap_or(entry.path())
                .to_path_buf();
            if each(rel).is_break() {
                break;
            }
        }
        Ok(())
    }
}
