//! `glob`: the files under a directory whose path matches a ripgrep glob, as absolute paths,
//! at most 100 (OpenCode 1.18.4's `rg --files --glob`). Reads names only.

use std::ops::ControlFlow;

use serde_json::json;

use crate::args::Args;
use crate::scope::{as_given_or_resolved, normalize, relative, Roots};
use crate::walk::FileWalk;
use crate::{BuiltinError, CallContext, Output};

const LIMIT: usize = 100;

pub(crate) fn run(args: &Args, ctx: &CallContext) -> Result<Output, BuiltinError> {
    let pattern = args.string("pattern")?;
    let dir = match args.optional_string("path")? {
        Some(p) => as_given_or_resolved(&ctx.project, &p),
        None => ctx.project.clone(),
    };
    let real = Roots::of(ctx)?.limit(&dir)?;
    let meta = std::fs::metadata(&real).map_err(|e| BuiltinError::io(&dir, e))?;
    if meta.is_file() {
        return Err(BuiltinError::NotADirectory(dir));
    }
    let mut found = Vec::new();
    FileWalk {
        root: &real,
        hidden: false,
        globs: vec![&pattern],
    }
    .run(&ctx.cancel, |rel| {
        found.push(normalize(&dir.join(rel)).display().to_string());
        if found.len() >= LIMIT {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    let truncated = found.len() == LIMIT;
    let count = found.len();
    let mut lines = found;
    if lines.is_empty() {
        lines.push("No files found".into());
    } else if truncated {
        lines.push(String::new());
        lines.push(format!(
            "(Results are truncated: showing first {LIMIT} results. Consider using a more specific path or pattern.)"
        ));
    }
    Ok(Output {
        title: relative(&ctx.worktree, &dir),
        output: lines.join("\n"),
        metadata: json!({ "count": count, "truncated": truncated }),
    })
}
