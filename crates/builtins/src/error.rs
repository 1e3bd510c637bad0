//! What a built-in call can end in besides an output: one variant per outcome, each with a
//! stable code of DESIGN.md and a recovery. The `Display` text is the one OpenCode 1.18.4 gives
//! the model for the same failure, where OpenCode has one.

use std::path::PathBuf;

/// A built-in call that did not produce an output.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinError {
    /// No built-in has this id.
    #[error("no built-in tool named `{0}`")]
    UnknownTool(String),
    /// The arguments do not fit the tool's JSON Schema.
    #[error("The {tool} tool was called with invalid arguments: {reason}")]
    InvalidArguments { tool: &'static str, reason: String },
    /// The path leaves the project (directly, through `..`, or through a symlink).
    #[error("{} is outside the project {}; Berth's built-in tools only reach files inside it", path.display(), project.display())]
    OutsideProject { path: PathBuf, project: PathBuf },
    #[error("File not found: {}{}", path.display(), suggestion_text(suggestions))]
    NotFound {
        path: PathBuf,
        suggestions: Vec<PathBuf>,
    },
    #[error("Cannot read binary file: {}", .0.display())]
    BinaryFile(PathBuf),
    /// Images and PDFs: OpenCode attaches them to the message; a text output cannot.
    #[error("{} is an image or PDF; Berth's read returns text only", .0.display())]
    Attachment(PathBuf),
    #[error("Offset {offset} is out of range for this file ({lines} lines)")]
    OffsetOutOfRange { offset: u64, lines: u64 },
    #[error("glob path must be a directory: {}", .0.display())]
    NotADirectory(PathBuf),
    /// A regex (grep) or glob (glob, include) that does not parse; the parser's own message.
    #[error("{message}")]
    InvalidPattern { pattern: String, message: String },
    #[error("the call was cancelled")]
    Cancelled,
    /// The filesystem refused (permissions, a vanished file, …).
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn suggestion_text(suggestions: &[PathBuf]) -> String {
    if suggestions.is_empty() {
        return String::new();
    }
    let list: Vec<String> = suggestions
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    format!("\n\nDid you mean one of these?\n{}", list.join("\n"))
}

impl BuiltinError {
    /// The stable code of DESIGN.md.
    pub fn code(&self) -> &'static str {
        match self {
            BuiltinError::OutsideProject { .. } => "policy-limited",
            BuiltinError::Attachment(_) => "unsupported",
            BuiltinError::Cancelled => "cancelled",
            // The tool itself failed; for a built-in the "plugin" is Berth.
            BuiltinError::Io { .. } => "plugin-failed",
            BuiltinError::UnknownTool(_)
            | BuiltinError::InvalidArguments { .. }
            | BuiltinError::NotFound { .. }
            | BuiltinError::BinaryFile(_)
            | BuiltinError::OffsetOutOfRange { .. }
            | BuiltinError::NotADirectory(_)
            | BuiltinError::InvalidPattern { .. } => "invalid-arguments",
        }
    }

    /// What the caller (a person or a model) can do about it.
    pub fn recovery(&self) -> String {
        match self {
            BuiltinError::UnknownTool(_) => "Call one of the ids of berth_builtins::definitions().".into(),
            BuiltinError::InvalidArguments { .. } => "Call again with arguments that fit the tool's parameters schema.".into(),
            BuiltinError::OutsideProject { project, .. } => format!(
                "Use a path inside {}; to work on files elsewhere, open that directory as its own project.",
                project.display()
            ),
            BuiltinError::NotFound { .. } => "Check the path; the glob tool finds files by name.".into(),
            BuiltinError::BinaryFile(_) => "Binary files cannot be read as text; grep or glob can still find them.".into(),
            BuiltinError::Attachment(_) => "Open the file in an agent that reads attachments.".into(),
            BuiltinError::OffsetOutOfRange { lines, .. } => format!("Use an offset between 1 and {lines}."),
            BuiltinError::NotADirectory(_) => "Give the directory that contains the file as `path`.".into(),
            BuiltinError::InvalidPattern { .. } => "Fix the pattern's syntax (escape special characters to match them literally).".into(),
            BuiltinError::Cancelled => "Call again if the result is still wanted.".into(),
            BuiltinError::Io { .. } => "Check the file's permissions and that it still exists, then call again.".into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BuiltinError::Io {
            path: path.into(),
            source,
        }
    }
}
