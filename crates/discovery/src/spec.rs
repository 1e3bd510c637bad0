//! Plugin specs as OpenCode 1.18.4 reads them (spec §2.2): path specs become `file://` URLs
//! relative to the config file; everything else is an npm spec keyed by package name.

use std::path::{Component, Path, PathBuf};

/// Names OpenCode skips because it ships the feature built in (spec §2.2).
pub const OPENCODE_BUILTIN_SKIPS: &[&str] =
    &["opencode-openai-codex-auth", "opencode-copilot-auth"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSpec {
    /// A file or directory on disk.
    Path { url: String, path: PathBuf },
    /// An npm package: `name` is the dedupe key, `request` the version, range or tag.
    Npm { name: String, request: String },
    /// A spec Berth refuses before anything is installed.
    Invalid { reason: String, recovery: String },
}

impl PluginSpec {
    /// OpenCode's dedupe key: the URL for paths, the package name for npm.
    pub fn dedupe_key(&self, raw: &str) -> String {
        match self {
            PluginSpec::Path { url, .. } => url.clone(),
            PluginSpec::Npm { name, .. } => format!("npm:{name}"),
            PluginSpec::Invalid { .. } => format!("invalid:{raw}"),
        }
    }
}

pub fn is_path_spec(raw: &str) -> bool {
    raw.starts_with("file://")
        || raw.starts_with('.')
        || raw.starts_with('/')
        || (raw.len() > 2
            && raw.as_bytes()[1] == b':'
            && (raw.as_bytes()[2] == b'\\' || raw.as_bytes()[2] == b'/'))
}

/// Parses `raw`; relative paths resolve against `base` (the config file's folder).
pub fn parse(raw: &str, base: &Path) -> PluginSpec {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return invalid(
            "the plugin spec is empty",
            "remove the empty entry from the `plugin` list",
        );
    }
    if is_path_spec(trimmed) {
        let path = match trimmed.strip_prefix("file://") {
            Some(rest) => PathBuf::from(percent_decode(rest)),
            None => base.join(trimmed),
        };
        let path = normalize(&path);
        return PluginSpec::Path {
            url: file_url(&path),
            path,
        };
    }
    if trimmed.starts_with('-') {
        return invalid(
            format!("`{trimmed}` looks like a command-line option, not a package name"),
            "fix the entry in the `plugin` list; package names never start with `-`",
        );
    }
    parse_npm(trimmed, base)
}

fn invalid(reason: impl Into<String>, recovery: impl Into<String>) -> PluginSpec {
    PluginSpec::Invalid {
        reason: reason.into(),
        recovery: recovery.into(),
    }
}

fn parse_npm(raw: &str, base: &Path) -> PluginSpec {
    // Non-registry forms npm-package-arg accepts: local paths, git and tarball URLs.
    if let Some(rest) = raw.strip_prefix("file:") {
        let target = normalize(&base.join(rest));
        if !target.starts_with(normalize(base)) {
            return invalid(
                format!("`{raw}` points outside the folder of the config file that names it"),
                "use a path inside the config folder, or a `./relative` path spec",
            );
        }
        // npm runs elsewhere (Berth's data dir): hand it the absolute path.
        return PluginSpec::Npm {
            name: raw.to_string(),
            request: format!("file:{}", target.display()),
        };
    }
    let (name, request) = split_name(raw);
    if name.contains(':') || name.contains("://") || (!name.starts_with('@') && name.contains('/'))
    {
        // git/github/tarball specs: kept as their own key; preparation decides support.
        return PluginSpec::Npm {
            name: raw.to_string(),
            request: raw.to_string(),
        };
    }
    if let Err(reason) = validate_name(name) {
        return invalid(
            format!("`{raw}` is not a valid npm package name: {reason}"),
            "fix the name in the `plugin` list",
        );
    }
    PluginSpec::Npm {
        name: name.to_string(),
        request: if request.is_empty() {
            "latest".into()
        } else {
            request.to_string()
        },
    }
}

/// `@scope/name@range` → (`@scope/name`, `range`); `alias@npm:real@1` → (`alias`, `npm:real@1`).
fn split_name(raw: &str) -> (&str, &str) {
    let search_from = if raw.starts_with('@') { 1 } else { 0 };
    match raw[search_from..].find('@') {
        Some(i) => (&raw[..search_from + i], &raw[search_from + i + 1..]),
        None => (raw, ""),
    }
}

fn validate_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 214 {
        return Err("length must be 1 to 214");
    }
    let bare = name
        .strip_prefix('@')
        .and_then(|s| s.split_once('/'))
        .map(|(_, n)| n)
        .unwrap_or(name);
    if bare.is_empty() || bare.starts_with('.') || bare.starts_with('_') {
        return Err("it cannot start with `.` or `_`");
    }
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._~/@".contains(c);
    if !name.chars().all(ok) {
        return Err("only lowercase URL-safe characters are allowed");
    }
    Ok(())
}

/// Lexical normalisation (like Node's `path.resolve`): `.` and `..` are folded, no symlinks
/// are followed.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `file://` URL of an absolute path, percent-encoding what Node's `pathToFileURL` encodes.
pub fn file_url(path: &Path) -> String {
    let s = path.to_string_lossy();
    let mut out = String::from("file://");
    for ch in s.chars() {
        match ch {
            '%' => out.push_str("%25"),
            ' ' => out.push_str("%20"),
            '#' => out.push_str("%23"),
            '?' => out.push_str("%3F"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            '\t' => out.push_str("%09"),
            c => out.push(c),
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(raw: &str, expected: PluginSpec) {
        assert_eq!(parse(raw, Path::new("/cfg/dir")), expected, "{raw}");
    }

    fn npm(name: &str, request: &str) -> PluginSpec {
        PluginSpec::Npm {
            name: name.into(),
            request: request.into(),
        }
    }

    #[test]
    fn spec_forms_parse_as_opencode_reads_them() {
        check("opencode-wakatime", npm("opencode-wakatime", "latest"));
        check("opencode-wakatime@1.3.9", npm("opencode-wakatime", "1.3.9"));
        check("@scope/pkg@^1", npm("@scope/pkg", "^1"));
        check("alias@npm:real@1", npm("alias", "npm:real@1"));
        // No leading `./`: not a path spec. npm reads `user/repo` as a git spec; Berth keeps
        // it as an npm spec with its own key, and preparation decides.
        check("plugins/foo.ts", npm("plugins/foo.ts", "plugins/foo.ts"));
        check(
            "./plugins/p.ts",
            PluginSpec::Path {
                url: "file:///cfg/dir/plugins/p.ts".into(),
                path: "/cfg/dir/plugins/p.ts".into(),
            },
        );
        check(
            "../up/p.ts",
            PluginSpec::Path {
                url: "file:///cfg/up/p.ts".into(),
                path: "/cfg/up/p.ts".into(),
            },
        );
        check(
            "file:///abs/a%20b.ts",
            PluginSpec::Path {
                url: "file:///abs/a%20b.ts".into(),
                path: "/abs/a b.ts".into(),
            },
        );
    }

    #[test]
    fn flag_like_and_escaping_specs_are_refused() {
        assert!(matches!(
            parse("--foo", Path::new("/c")),
            PluginSpec::Invalid { .. }
        ));
        assert!(matches!(
            parse("file:../../etc/x", Path::new("/c/d")),
            PluginSpec::Invalid { .. }
        ));
        assert!(matches!(
            parse("file:./vendored", Path::new("/c/d")),
            PluginSpec::Npm { .. }
        ));
        assert!(matches!(
            parse("", Path::new("/c")),
            PluginSpec::Invalid { .. }
        ));
    }

    #[test]
    fn dedupe_keys_ignore_versions_for_npm() {
        let a = parse("foo@1", Path::new("/"));
        let b = parse("foo@2", Path::new("/"));
        assert_eq!(a.dedupe_key("foo@1"), b.dedupe_key("foo@2"));
    }
}
