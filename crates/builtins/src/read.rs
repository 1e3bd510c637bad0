//! `read`: a file's lines numbered `<n>: `, or a directory's entries, in OpenCode 1.18.4's
//! wrappers, paging and caps (2000 lines, 2000 characters a line, 50 KB). Runs on a blocking
//! thread; reads nothing the project limit has not cleared.

use std::cmp::Ordering;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::OnceLock;

use serde_json::json;

use crate::args::Args;
use crate::scope::{as_given_or_resolved, relative, Roots};
use crate::text::utf16_prefix;
use crate::{BuiltinError, CallContext, Output};

const DEFAULT_LIMIT: u64 = 2000;
/// A longer line is cut to this many UTF-16 code units (JavaScript's `length`).
const MAX_LINE: usize = 2000;
const MAX_BYTES: usize = 51200;
const SAMPLE: usize = 4096;

/// Extensions OpenCode calls binary without looking inside.
const BINARY_EXTENSIONS: &[&str] = &[
    "zip", "tar", "gz", "exe", "dll", "so", "class", "jar", "war", "7z", "doc", "docx", "xls",
    "xlsx", "ppt", "pptx", "odt", "ods", "odp", "bin", "dat", "obj", "o", "a", "lib", "wasm",
    "pyc", "pyo",
];
/// What OpenCode returns as an attachment (images and PDFs).
const ATTACHMENT_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp", "pdf"];

pub(crate) fn run(args: &Args, ctx: &CallContext) -> Result<Output, BuiltinError> {
    let file_path = args.string("filePath")?;
    let offset = args.uint("offset")?;
    let limit = args.uint("limit")?.unwrap_or(DEFAULT_LIMIT);
    let path = as_given_or_resolved(&ctx.project, &file_path);
    let title = relative(&ctx.worktree, &path);
    let real = Roots::of(ctx)?.limit(&path)?;
    let meta = match std::fs::metadata(&real) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing(&path)),
        Err(e) => return Err(BuiltinError::io(&path, e)),
    };
    // `offset || 1`: 0 and absent both mean the first line.
    let offset = offset.filter(|o| *o > 0).unwrap_or(1);
    if meta.is_dir() {
        return directory(&path, &real, title, offset, limit);
    }
    let sample = read_sample(&real, meta.len())?;
    if is_attachment(&path, &sample) {
        return Err(BuiltinError::Attachment(path));
    }
    if is_binary(&path, &sample) {
        return Err(BuiltinError::BinaryFile(path));
    }
    let lines = read_lines(&real, &path, offset, limit, ctx)?;
    if lines.count < offset && !(lines.count == 0 && offset == 1) {
        return Err(BuiltinError::OffsetOutOfRange {
            offset,
            lines: lines.count,
        });
    }
    let last = offset + lines.raw.len() as u64 - 1;
    let mut out = format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n",
        path.display()
    );
    let numbered: Vec<String> = lines
        .raw
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{}: {l}", i as u64 + offset))
        .collect();
    out.push_str(&numbered.join("\n"));
    if lines.cut {
        out.push_str(&format!(
            "\n\n(Output capped at 50 KB. Showing lines {offset}-{last}. Use offset={} to continue.)",
            last + 1
        ));
    } else if lines.more {
        out.push_str(&format!(
            "\n\n(Showing lines {offset}-{last} of {}. Use offset={} to continue.)",
            lines.count,
            last + 1
        ));
    } else {
        out.push_str(&format!("\n\n(End of file - total {} lines)", lines.count));
    }
    out.push_str("\n</content>");
    let truncated = lines.more || lines.cut;
    let metadata = json!({
        "preview": lines.raw.iter().take(20).cloned().collect::<Vec<_>>().join("\n"),
        "truncated": truncated,
        "loaded": [],
        "display": {
            "type": "file",
            "path": path.display().to_string(),
            "text": lines.raw.join("\n"),
            "lineStart": offset,
            "lineEnd": last,
            "totalLines": lines.count,
            "truncated": truncated,
        },
    });
    Ok(Output {
        title,
        output: out,
        metadata,
    })
}

/// OpenCode's miss: up to three names of the parent directory (in its readdir order) that
/// contain the wanted name or are contained in it, case-insensitively.
fn missing(path: &Path) -> BuiltinError {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return BuiltinError::NotFound {
            path: path.to_path_buf(),
            suggestions: vec![],
        };
    };
    let want = name.to_string_lossy().to_lowercase();
    let suggestions = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let l = n.to_lowercase();
                    (l.contains(&want) || want.contains(&l)).then(|| dir.join(n))
                })
                .take(3)
                .collect()
        })
        .unwrap_or_default();
    BuiltinError::NotFound {
        path: path.to_path_buf(),
        suggestions,
    }
}

fn directory(
    path: &Path,
    real: &Path,
    title: String,
    offset: u64,
    limit: u64,
) -> Result<Output, BuiltinError> {
    let mut entries = Vec::new();
    for e in std::fs::read_dir(real).map_err(|e| BuiltinError::io(path, e))? {
        let e = e.map_err(|e| BuiltinError::io(path, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e
            .file_type()
            .map_err(|err| BuiltinError::io(e.path(), err))?;
        // A symlink to a directory is shown as one (its name is inside the project; nothing
        // behind it is read).
        let is_dir = ft.is_dir()
            || (ft.is_symlink()
                && std::fs::metadata(e.path())
                    .map(|m| m.is_dir())
                    .unwrap_or(false));
        entries.push(if is_dir { format!("{name}/") } else { name });
    }
    entries.sort_by(|a, b| locale_compare(a, b));
    let total = entries.len();
    let start = (offset - 1).min(total as u64) as usize;
    let end = start
        .saturating_add(limit.min(usize::MAX as u64) as usize)
        .min(total);
    let page = &entries[start..end];
    let truncated = end < total;
    let footer = if truncated {
        format!(
            "\n(Showing {} of {total} entries. Use 'offset' parameter to read beyond entry {})",
            page.len(),
            offset + page.len() as u64
        )
    } else {
        format!("\n({total} entries)")
    };
    let out = [
        format!("<path>{}</path>", path.display()),
        "<type>directory</type>".into(),
        "<entries>".into(),
        page.join("\n"),
        footer,
        "</entries>".into(),
    ]
    .join("\n");
    let metadata = json!({
        "preview": page.iter().take(20).cloned().collect::<Vec<_>>().join("\n"),
        "truncated": truncated,
        "loaded": [],
        "display": {
            "type": "directory",
            "path": path.display().to_string(),
            "entries": page,
            "offset": offset,
            "totalEntries": total,
            "truncated": truncated,
        },
    });
    Ok(Output {
        title,
        output: out,
        metadata,
    })
}

/// JavaScript's `a.localeCompare(b)` as Bun runs it: the Unicode (CLDR root) collation.
fn locale_compare(a: &str, b: &str) -> Ordering {
    static COLLATOR: OnceLock<icu_collator::CollatorBorrowed<'static>> = OnceLock::new();
    let c = COLLATOR.get_or_init(|| {
        icu_collator::Collator::try_new(Default::default(), Default::default())
            .expect("compiled collation data")
    });
    c.compare(a, b)
}

fn read_sample(path: &Path, size: u64) -> Result<Vec<u8>, BuiltinError> {
    let mut buf = Vec::with_capacity(SAMPLE);
    File::open(path)
        .and_then(|f| f.take(size.min(SAMPLE as u64)).read_to_end(&mut buf))
        .map_err(|e| BuiltinError::io(path, e))?;
    Ok(buf)
}

fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default()
}

fn is_attachment(path: &Path, sample: &[u8]) -> bool {
    ATTACHMENT_EXTENSIONS.contains(&extension(path).as_str())
        || sample.starts_with(b"\x89PNG\r\n\x1a\n")
        || sample.starts_with(b"\xff\xd8\xff")
        || sample.starts_with(b"GIF8")
        || (sample.starts_with(b"RIFF") && sample.get(8..12) == Some(b"WEBP"))
        || sample.starts_with(b"%PDF-")
}

/// OpenCode's test: a listed extension, a NUL in the first 4 KB, or more than 30% control bytes.
fn is_binary(path: &Path, sample: &[u8]) -> bool {
    if BINARY_EXTENSIONS.contains(&extension(path).as_str()) {
        return true;
    }
    if sample.is_empty() {
        return false;
    }
    if sample.contains(&0) {
        return true;
    }
    let control = sample
        .iter()
        .filter(|&&b| b < 9 || (b > 13 && b < 32))
        .count();
    control as f64 / sample.len() as f64 > 0.3
}

struct Lines {
    raw: Vec<String>,
    /// Lines seen: all of them, unless the byte cap stopped the reading early.
    count: u64,
    cut: bool,
    more: bool,
}

/// OpenCode's line loop: every line is counted (to report the total), lines from `offset` are
/// kept until `limit` lines or 50 KB; the line that would pass 50 KB stops the reading.
fn read_lines(
    real: &Path,
    shown: &Path,
    offset: u64,
    limit: u64,
    ctx: &CallContext,
) -> Result<Lines, BuiltinError> {
    let mut reader = BufReader::new(File::open(real).map_err(|e| BuiltinError::io(shown, e))?);
    let mut st = Lines {
        raw: Vec::new(),
        count: 0,
        cut: false,
        more: false,
    };
    let mut bytes = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| BuiltinError::io(shown, e))?;
        if n == 0 {
            break;
        }
        if st.count.is_multiple_of(4096) && ctx.cancel.is_cancelled() {
            return Err(BuiltinError::Cancelled);
        }
        if buf.ends_with(b"\n") {
            buf.pop();
            if buf.ends_with(b"\r") {
                buf.pop();
            }
        }
        let mut bytes_of_line: &[u8] = &buf;
        if st.count == 0 {
            // TextDecoder drops a leading byte-order mark.
            bytes_of_line = bytes_of_line
                .strip_prefix(b"\xef\xbb\xbf")
                .unwrap_or(bytes_of_line);
        }
        st.count += 1;
        if st.count < offset {
            continue;
        }
        if st.raw.len() as u64 >= limit {
            st.more = true;
            continue;
        }
        let line = cap_line(String::from_utf8_lossy(bytes_of_line).into_owned());
        let cost = line.len() + usize::from(!st.raw.is_empty());
        if bytes + cost <= MAX_BYTES {
            st.raw.push(line);
            bytes += cost;
            continue;
        }
        st.cut = true;
        st.more = true;
        break;
    }
    Ok(st)
}

/// `line.substring(0, 2000) + "... (line truncated to 2000 chars)"` when the line is longer than
/// 2000 UTF-16 code units (cut at a character boundary).
fn cap_line(line: String) -> String {
    match utf16_prefix(&line, MAX_LINE) {
        Some(head) => format!("{head}... (line truncated to {MAX_LINE} chars)"),
        None => line,
    }
}
