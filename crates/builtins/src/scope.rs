//! The project limit and OpenCode's path arithmetic. `resolve`, `join` and `relative` are Node's
//! `path` functions (lexical, no symlinks), so titles and paths in outputs come out as OpenCode's;
//! `limit` is Berth's wall: a path counts as inside only once its symlinks are resolved.

use std::path::{Component, Path, PathBuf};

use crate::{BuiltinError, CallContext};

/// Node's `path.normalize` for absolute paths: `.` dropped, `..` pops (never above `/`).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Node's `path.resolve(base, p)`.
pub(crate) fn resolve(base: &Path, p: &str) -> PathBuf {
    normalize(&base.join(p))
}

/// OpenCode's "absolute stays as written, relative is resolved against the project".
pub(crate) fn as_given_or_resolved(base: &Path, p: &str) -> PathBuf {
    if Path::new(p).is_absolute() {
        PathBuf::from(p)
    } else {
        resolve(base, p)
    }
}

/// Node's `path.relative(from, to)` ("" when equal).
pub(crate) fn relative(from: &Path, to: &Path) -> String {
    let from = normalize(from);
    let to = normalize(to);
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); f.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// The directories a call may reach, with their symlinks resolved.
pub(crate) struct Roots {
    project: PathBuf,
    real: Vec<PathBuf>,
}

impl Roots {
    pub(crate) fn of(ctx: &CallContext) -> Result<Roots, BuiltinError> {
        let mut real = vec![ctx
            .project
            .canonicalize()
            .map_err(|e| BuiltinError::io(&ctx.project, e))?];
        if ctx.worktree.parent().is_some() {
            if let Ok(w) = ctx.worktree.canonicalize() {
                real.push(w);
            }
        }
        Ok(Roots {
            project: ctx.project.clone(),
            real,
        })
    }

    /// `path` with its symlinks resolved, if that lies inside a root; the part of a missing path
    /// that does not exist yet is taken as written (after `..` are applied).
    pub(crate) fn limit(&self, path: &Path) -> Result<PathBuf, BuiltinError> {
        let lexical = normalize(path);
        let mut existing = lexical.as_path();
        let mut rest = Vec::new();
        let real = loop {
            match existing.canonicalize() {
                Ok(r) => break r,
                Err(_) => match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        rest.push(name.to_owned());
                        existing = parent;
                    }
                    _ => return Err(self.outside(path)),
                },
            }
        };
        let full = rest.iter().rev().fold(real, |acc, n| acc.join(n));
        if self.real.iter().any(|root| full.starts_with(root)) {
            Ok(full)
        } else {
            Err(self.outside(path))
        }
    }

    fn outside(&self, path: &Path) -> BuiltinError {
        BuiltinError::OutsideProject {
            path: path.to_path_buf(),
            project: self.project.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_path_arithmetic() {
        assert_eq!(
            resolve(Path::new("/p/q"), "../r/./s"),
            PathBuf::from("/p/r/s")
        );
        assert_eq!(resolve(Path::new("/p"), "/x/../y"), PathBuf::from("/y"));
        assert_eq!(
            as_given_or_resolved(Path::new("/p"), "/x/../y"),
            PathBuf::from("/x/../y")
        );
        assert_eq!(relative(Path::new("/p/q"), Path::new("/p/q")), "");
        assert_eq!(relative(Path::new("/p/q"), Path::new("/p/q/a/b")), "a/b");
        assert_eq!(relative(Path::new("/p/q"), Path::new("/p/r")), "../r");
    }
}
