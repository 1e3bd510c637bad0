//! `grep`: lines matching a regex in the files under a directory, grouped by file, at most 100
//! (OpenCode 1.18.4's `rg --json --hidden`, with ripgrep's own regex and searcher crates).
//! The file list is walked in order, the files are searched on a few threads, the result keeps
//! the walk's order, and the search stops once the first 100 matches are known.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{sinks, BinaryDetection, Searcher, SearcherBuilder};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::scope::{as_given_or_resolved, normalize, Roots};
use crate::text::utf16_prefix;
use crate::walk::FileWalk;
use crate::{BuiltinError, CallContext, Output};

const LIMIT: usize = 100;
/// A longer matched line is cut to this many UTF-16 code units, then `...`.
const MAX_LINE: usize = 2000;
/// Threads searching files at once (the walk itself is one thread).
const MAX_THREADS: usize = 8;

struct Hit {
    line: u64,
    /// The line as ripgrep's JSON gives it: with its line terminator.
    text: String,
}

pub(crate) fn run(args: &Args, ctx: &CallContext) -> Result<Output, BuiltinError> {
    let pattern = args.string("pattern")?;
    if pattern.is_empty() {
        return Err(BuiltinError::InvalidArguments {
            tool: "grep",
            reason: "pattern is required".into(),
        });
    }
    let path = args.optional_string("path")?;
    let include = args.optional_string("include")?;
    let given = match &path {
        Some(p) => as_given_or_resolved(&ctx.project, p),
        None => ctx.project.clone(),
    };
    // OpenCode searches the real path, and a file's whole directory.
    let real = Roots::of(ctx)?.limit(&given)?;
    let dir = if real.is_dir() {
        real
    } else {
        real.parent().map(Path::to_path_buf).unwrap_or(real)
    };
    // ripgrep's own message for a pattern that does not parse (grep-regex would quote the
    // pattern as it wraps it internally).
    if let Err(e) = regex_syntax::Parser::new().parse(&pattern) {
        return Err(BuiltinError::InvalidPattern {
            pattern,
            message: e.to_string(),
        });
    }
    let matcher = RegexMatcherBuilder::new()
        .multi_line(true)
        .line_terminator(Some(b'\n'))
        .build(&pattern)
        .map_err(|e| BuiltinError::InvalidPattern {
            pattern: pattern.clone(),
            message: e.to_string(),
        })?;
    let mut files = Vec::new();
    FileWalk {
        root: &dir,
        hidden: true,
        globs: include.iter().map(String::as_str).collect(),
    }
    .run(&ctx.cancel, |rel| {
        files.push(rel);
        ControlFlow::Continue(())
    })?;
    let hits = search(&dir, &files, &matcher, &ctx.cancel)?;
    Ok(render(&pattern, &dir, &files, hits))
}

/// The first `LIMIT` hits in file order, as (file index, hit).
fn search(
    dir: &Path,
    files: &[PathBuf],
    matcher: &RegexMatcher,
    cancel: &CancellationToken,
) -> Result<Vec<(usize, Hit)>, BuiltinError> {
    struct Progress {
        slots: Vec<Option<Vec<Hit>>>,
        /// Files 0..done all searched, holding `hits` matches together.
        done: usize,
        hits: usize,
    }
    let progress = Mutex::new(Progress {
        slots: (0..files.len()).map(|_| None).collect(),
        done: 0,
        hits: 0,
    });
    let next = AtomicUsize::new(0);
    let enough = AtomicBool::new(false);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_THREADS)
        .min(files.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut searcher = SearcherBuilder::new()
                    .binary_detection(BinaryDetection::quit(b'\x00'))
                    .line_number(true)
                    .build();
                while !enough.load(Ordering::Relaxed) && !cancel.is_cancelled() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(rel) = files.get(i) else { break };
                    let found = search_file(&mut searcher, matcher, &dir.join(rel));
                    let mut p = progress.lock().unwrap_or_else(|e| e.into_inner());
                    p.slots[i] = Some(found);
                    while p.done < p.slots.len() {
                        let Some(n) = p.slots[p.done].as_ref().map(Vec::len) else {
                            break;
                        };
                        p.hits += n;
                        p.done += 1;
                    }
                    if p.hits >= LIMIT {
                        enough.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    if cancel.is_cancelled() {
        return Err(BuiltinError::Cancelled);
    }
    let p = progress.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::new();
    for (i, slot) in p.slots.into_iter().enumerate().take(p.done) {
        for hit in slot.unwrap_or_default() {
            if out.len() == LIMIT {
                return Ok(out);
            }
            out.push((i, hit));
        }
    }
    Ok(out)
}

/// At most `LIMIT + 1` hits of one file (more are never shown); an unreadable file has none,
/// as with `rg --no-messages`.
fn search_file(searcher: &mut Searcher, matcher: &RegexMatcher, path: &Path) -> Vec<Hit> {
    let mut hits = Vec::new();
    let _ = searcher.search_path(
        matcher,
        path,
        sinks::Lossy(|line, text| {
            let text = match utf16_prefix(text, MAX_LINE) {
                Some(head) => format!("{head}..."),
                None => text.to_string(),
            };
            hits.push(Hit { line, text });
            Ok(hits.len() <= LIMIT)
        }),
    );
    hits
}

fn render(pattern: &str, dir: &Path, files: &[PathBuf], hits: Vec<(usize, Hit)>) -> Output {
    if hits.is_empty() {
        return Output {
            title: pattern.to_string(),
            output: "No files found".into(),
            metadata: json!({ "matches": 0, "truncated": false }),
        };
    }
    let truncated = hits.len() == LIMIT;
    let mut lines = vec![format!(
        "Found {} matches{}",
        hits.len(),
        if truncated {
            " (more matches available)"
        } else {
            ""
        }
    )];
    let mut current = None;
    for (i, hit) in &hits {
        if current != Some(*i) {
            if current.is_some() {
                lines.push(String::new());
            }
            current = Some(*i);
            lines.push(format!("{}:", normalize(&dir.join(&files[*i])).display()));
        }
        lines.push(format!("  Line {}: {}", hit.line, hit.text));
    }
    if truncated {
        lines.push(String::new());
        lines.push("(Results truncated. Consider using a more specific path or pattern.)".into());
    }
    Output {
        title: pattern.to_string(),
        output: lines.join("\n"),
        metadata: json!({ "matches": hits.len(), "truncated": truncated }),
    }
}
