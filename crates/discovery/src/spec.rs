//! Plugin specs as OpenCode 1.18.4 reads them (spec §2.2): path specs become `file://` URLs
//! relative to the config file; everything else is an npm spec keyed by package name.
//!
//! Owns: what npm will do with an npm spec ([`classify`], after npm-package-arg and
//! hosted-git-info), and which of those Berth installs. Must not: touch the network or run npm;
//! the only filesystem access is resolving symlinks of local paths, to keep them inside their
//! config folder.

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

/// An npm spec by what npm will do with it (npm-package-arg's reading): registry packages
/// and aliases of them install; local folders and tarballs only from inside `base`; git and
/// remote tarballs never (npm would clone, build or download code nobody has seen).
fn parse_npm(raw: &str, base: &Path) -> PluginSpec {
    let class = match classify(raw, base) {
        Ok(class) => class,
        Err(reason) => {
            return invalid(
                format!("`{raw}` is not a spec Berth can install: {reason}"),
                "fix the entry in the `plugin` list: `name`, `name@version`, or `file:./path`",
            )
        }
    };
    match class {
        NpmSpecClass::Registry { name, request } => {
            if let Err(reason) = validate_name(&name) {
                return invalid(
                    format!("`{raw}` is not a valid npm package name: {reason}"),
                    "fix the name in the `plugin` list",
                );
            }
            PluginSpec::Npm {
                name,
                request: if request.is_empty() {
                    "latest".into()
                } else {
                    request
                },
            }
        }
        NpmSpecClass::Alias {
            name,
            target_name,
            target_request,
        } => {
            for n in [&name, &target_name] {
                if let Err(reason) = validate_name(n) {
                    return invalid(
                        format!("`{raw}` names `{n}`, not a valid npm package name: {reason}"),
                        "fix the name in the `plugin` list",
                    );
                }
            }
            let request = if target_request.is_empty() {
                format!("npm:{target_name}")
            } else {
                format!("npm:{target_name}@{target_request}")
            };
            PluginSpec::Npm { name, request }
        }
        NpmSpecClass::Directory { path } | NpmSpecClass::File { path } => {
            match real_path_inside(&path, base) {
                // npm runs elsewhere (Berth's data dir): hand it the absolute, real path.
                Some(real) => PluginSpec::Npm {
                    name: raw.to_string(),
                    request: format!("file:{}", real.display()),
                },
                None => invalid(
                    format!(
                        "`{raw}` points outside the folder of the config file that names it ({})",
                        path.display()
                    ),
                    "use a path inside the config folder, or a `./relative` path spec",
                ),
            }
        }
        // D-026: by class, whatever the prefix; D-009 for local paths above.
        NpmSpecClass::Git { .. } => invalid(
            format!(
                "`{raw}` is a git spec: npm would clone and build it; Berth installs registry and local packages only"
            ),
            "install the published package by name, or check the repository out inside the config folder and name it with `file:./…`",
        ),
        NpmSpecClass::Remote { .. } => invalid(
            format!(
                "`{raw}` is a tarball URL: npm would download and install it; Berth installs registry and local packages only"
            ),
            "install the published package by name, or download the tarball into the config folder and name it with `file:./…`",
        ),
    }
}

/// `target`'s real path when it lies inside `base`'s real path. Existing prefixes are
/// resolved through symlinks (a link inside the folder that points outside is outside); a part
/// that does not exist yet is compared as written, after normalisation. A dangling symlink on
/// the way is refused: what it will point to is not known.
fn real_path_inside(target: &Path, base: &Path) -> Option<PathBuf> {
    let real_base = real_path(base)?;
    let real = real_path(target)?;
    real.starts_with(&real_base).then_some(real)
}

fn real_path(p: &Path) -> Option<PathBuf> {
    let p = normalize(&std::path::absolute(p).ok()?);
    let mut missing = Vec::new();
    let mut existing = p.as_path();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(missing.iter().rev());
            return Some(out);
        }
        if existing.symlink_metadata().is_ok() {
            return None;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return Some(p),
        }
    }
}

/// What npm will do with a spec (npm-package-arg's `type`), whatever its prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NpmSpecClass {
    /// A version, range or tag of a registry package (npa's `version`, `range`, `tag`).
    /// `request` is empty when the spec names none (npm reads `*`: the `latest` tag).
    Registry { name: String, request: String },
    /// `name@npm:target@request`: the registry package `target_name` installed as `name`.
    Alias {
        name: String,
        target_name: String,
        target_request: String,
    },
    /// A folder on disk, absolute, as npm resolves it (npa's `fetchSpec`).
    Directory { path: PathBuf },
    /// A tarball on disk (`.tgz`, `.tar.gz`, `.tar`), absolute.
    File { path: PathBuf },
    /// A git repository: a `git…:` URL, `github:u/r`, `u/r`, `git@host:path`, a hosted https URL.
    Git { spec: String },
    /// A tarball downloaded over http(s).
    Remote { url: String },
}

/// Classifies a plugin spec as `npm install <raw>` reads it (`npa(raw, base)`): `name`,
/// `name@x`, `@s/n@x`, or a bare `x`. Local paths resolve against `base` as npm's `where`,
/// `~/` against the home directory. `Err` where npm would refuse the spec, and where Berth
/// cannot be sure how npm reads it (a path-looking spec with `:` or `@` that could be a URL).
pub fn classify(raw: &str, base: &Path) -> Result<NpmSpecClass, String> {
    // `raw.indexOf("@", 1)`: a leading `@` is a scope.
    let first = raw.chars().next().map_or(0, char::len_utf8);
    let name_end = raw[first..].find('@').map(|i| i + first);
    let name_part = name_end.map_or(raw, |i| &raw[..i]);
    if is_url(raw) {
        resolve(None, raw, base)
    } else if is_scp_git(raw) {
        // `user@host.tld:path` is a git ssh URL however it looks.
        Ok(NpmSpecClass::Git {
            spec: format!("git+ssh://{raw}"),
        })
    } else if !name_part.starts_with('@') && (name_part.contains('/') || is_tarball_name(name_part))
    {
        resolve(None, raw, base)
    } else if let Some(i) = name_end {
        resolve(Some(name_part), &raw[i + 1..], base)
    } else if valid_for_old_packages(raw).is_ok() {
        resolve(Some(raw), "", base)
    } else {
        resolve(None, raw, base)
    }
}

/// Why Berth does not install the dependency `"name": "spec"` of a package.json in `base`,
/// by what npm would do with it: a git repository or a downloaded tarball (npm would fetch
/// and, for git, build code nobody was shown), a folder or tarball outside `base` (real paths),
/// an alias of anything but a registry package, or a spec npm cannot read. None: allowed.
pub fn dependency_refusal(name: &str, spec: &str, base: &Path) -> Option<String> {
    let inside = |p: &Path| {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| normalize(p));
        real(p).starts_with(real(base))
    };
    match classify_dependency(name, spec, base) {
        Err(e) => Some(e),
        Ok(NpmSpecClass::Git { .. }) => Some(format!(
            "`{name}: {spec}` is a git repository: npm would clone and build it; Berth installs registry and local packages only"
        )),
        Ok(NpmSpecClass::Remote { .. }) => Some(format!(
            "`{name}: {spec}` is a tarball downloaded from a URL; Berth installs registry and local packages only"
        )),
        Ok(NpmSpecClass::Directory { path } | NpmSpecClass::File { path }) if !inside(&path) => {
            Some(format!(
                "`{name}: {spec}` points outside {} ({})",
                base.display(),
                path.display()
            ))
        }
        Ok(_) => None,
    }
}

/// Classifies a package.json dependency entry `"name": "spec"` as npm does
/// (`npa.resolve(name, spec, base)`).
pub fn classify_dependency(name: &str, spec: &str, base: &Path) -> Result<NpmSpecClass, String> {
    resolve(Some(name), spec, base)
}

/// npm-package-arg's `resolve`: the checks in its order, first match wins.
fn resolve(name: Option<&str>, spec: &str, base: &Path) -> Result<NpmSpecClass, String> {
    if let Some(n) = name {
        valid_for_old_packages(n).map_err(|e| format!("`{n}` is not a package name: {e}"))?;
    }
    if is_file_spec(spec) {
        return local(spec, base);
    }
    if spec
        .get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("npm:"))
    {
        return alias(name, &spec[4..], base);
    }
    if is_hosted_git(spec) {
        return Ok(NpmSpecClass::Git { spec: spec.into() });
    }
    if is_url(spec) {
        return from_url(spec);
    }
    if spec.contains('/') || is_tarball_name(spec) {
        // No `./` in front, yet npm reads a path: unless it could also be a URL npm
        // corrects into a git host (`user@host:path`, ` https://…`), which Berth cannot
        // decide as surely as npm does.
        if spec.contains(':') || spec.contains('@') {
            return Err(format!(
                "Berth cannot tell whether npm reads `{spec}` as a path or a URL"
            ));
        }
        return local(spec, base);
    }
    let request = js_trim(spec);
    let version_or_range = request
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".+-^~<>=|* \t".contains(c))
        && (nodejs_semver::Version::parse(request).is_ok()
            || nodejs_semver::Range::parse(request).is_ok());
    if !request.is_empty() && !version_or_range && !is_uri_component(request) {
        return Err(format!("`{request}` is not a version, range or tag"));
    }
    // npa accepts a bare `^1.2.3` as a range of no package; nothing can be installed from it.
    let Some(name) = name else {
        return Err(format!("`{spec}` names no package"));
    };
    Ok(NpmSpecClass::Registry {
        name: name.into(),
        request: request.into(),
    })
}

fn alias(name: Option<&str>, target: &str, base: &Path) -> Result<NpmSpecClass, String> {
    match classify(target, base)? {
        NpmSpecClass::Registry {
            name: target_name,
            request,
        } => match name {
            Some(name) => Ok(NpmSpecClass::Alias {
                name: name.into(),
                target_name,
                target_request: request,
            }),
            None => Err("an alias needs a name (`name@npm:target`)".into()),
        },
        NpmSpecClass::Alias { .. } => Err("nested aliases are not supported".into()),
        _ => Err("aliases only work for registry packages".into()),
    }
}

/// `fromFile`: a tarball when the spec ends like one, else a directory.
fn local(spec: &str, base: &Path) -> Result<NpmSpecClass, String> {
    let path = local_path(spec, base)?;
    Ok(if is_tarball_name(spec) {
        NpmSpecClass::File { path }
    } else {
        NpmSpecClass::Directory { path }
    })
}

/// `git…:` URLs are git, `http(s):` a remote tarball; npm refuses every other scheme.
fn from_url(spec: &str) -> Result<NpmSpecClass, String> {
    let scheme = spec[..spec.find(':').unwrap_or(0)].to_ascii_lowercase();
    if spec.starts_with("git+ssh:") && is_scp_in_ssh_url(spec) {
        return Ok(NpmSpecClass::Git { spec: spec.into() });
    }
    let parsed = if scheme == "git+file" {
        parse_url(&spec.replace('\\', "/")).is_some()
    } else {
        parse_url(spec).is_some()
    };
    match scheme.as_str() {
        "git" | "git+http" | "git+https" | "git+rsync" | "git+ftp" | "git+file" | "git+ssh"
            if parsed =>
        {
            Ok(NpmSpecClass::Git { spec: spec.into() })
        }
        "http" | "https" if parsed => Ok(NpmSpecClass::Remote { url: spec.into() }),
        _ if !parsed => Err(format!("`{spec}` is not a valid URL")),
        other => Err(format!("npm does not install `{other}:` URLs")),
    }
}

/// `isURL`: `^(?:git[+])?[a-z]+:` (case-insensitive).
fn is_url(s: &str) -> bool {
    let s = match s.get(..4) {
        Some(p) if p.eq_ignore_ascii_case("git+") => &s[4..],
        _ => s,
    };
    let letters = s.bytes().take_while(u8::is_ascii_alphabetic).count();
    letters > 0 && s.as_bytes().get(letters) == Some(&b':')
}

/// `isGit`: `^[^@]+@[^:.]+\.[^:]+:.+$`, scp-style `user@host.tld:path`.
fn is_scp_git(s: &str) -> bool {
    let Some(at) = s.find('@').filter(|&i| i > 0) else {
        return false;
    };
    let rest = &s[at + 1..];
    let Some(dot) = rest
        .find([':', '.'])
        .filter(|&i| i > 0 && rest.as_bytes()[i] == b'.')
    else {
        return false;
    };
    let after_dot = &rest[dot + 1..];
    let Some(colon) = after_dot.find(':').filter(|&i| i > 0) else {
        return false;
    };
    let tail = &after_dot[colon + 1..];
    !tail.is_empty() && !tail.contains(is_js_line_terminator)
}

/// The `git+ssh://user@host:path` form npa reads without a URL parser (not `host:port`).
fn is_scp_in_ssh_url(spec: &str) -> bool {
    let Some(rest) = spec.strip_prefix("git+ssh://") else {
        return false;
    };
    let (body, hash) = match rest.find('#') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let Some(colon) = body.find(':').filter(|&i| i > 0) else {
        return false;
    };
    if colon + 1 >= body.len() || hash.is_some_and(|h| h.contains(is_js_line_terminator)) {
        return false;
    }
    // `:[0-9]+(\/|$)` anywhere: a port, not an scp path.
    let bytes = body.as_bytes();
    let port = (0..bytes.len()).any(|i| {
        bytes[i] == b':' && {
            let digits = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            digits > 0 && matches!(bytes.get(i + 1 + digits), None | Some(b'/'))
        }
    });
    !port
}

/// `isFileType`: ends in `.tgz`, `.tar.gz` or `.tar` (case-insensitive).
fn is_tarball_name(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    [".tgz", ".tar.gz", ".tar"]
        .iter()
        .any(|e| lower.ends_with(e))
}

/// `isFileSpec` on POSIX: `file:` (any case), `.`, `~/`, `/`, or a drive letter `c:`.
fn is_file_spec(spec: &str) -> bool {
    let b = spec.as_bytes();
    spec.get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("file:"))
        || spec.starts_with(['.', '/'])
        || spec.starts_with("~/")
        || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
}

fn is_js_whitespace(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

fn is_js_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// `encodeURIComponent(s) === s`.
fn is_uri_component(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.!~*'()".contains(c))
}

/// validate-npm-package-name's `validForOldPackages` (what npa requires of a name).
fn valid_for_old_packages(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("it is empty");
    }
    if name.starts_with(['.', '-', '_']) {
        return Err("it cannot start with `.`, `-` or `_`");
    }
    if js_trim(name) != name {
        return Err("it cannot have leading or trailing spaces");
    }
    if matches!(name.to_lowercase().as_str(), "node_modules" | "favicon.ico") {
        return Err("the name is reserved");
    }
    if is_uri_component(name) {
        return Ok(());
    }
    let scoped = name
        .strip_prefix('@')
        .and_then(|r| r.split_once('/'))
        .filter(|(user, pkg)| !user.is_empty() && !pkg.is_empty() && !pkg.contains('/'));
    match scoped {
        Some((_, pkg)) if pkg.starts_with('.') => Err("it cannot start with `.`"),
        Some((user, pkg)) if is_uri_component(user) && is_uri_component(pkg) => Ok(()),
        _ => Err("only URL-safe characters are allowed"),
    }
}

// ---- Local paths: npa's `fromFile`, which resolves through a `file:` URL ----------------

/// npa's `fetchSpec` for a local spec: the path after `file:` (or the whole spec) resolved
/// as a file URL against `base/`, `~` as the home directory; percent signs are literal.
fn local_path(spec: &str, base: &Path) -> Result<PathBuf, String> {
    if spec
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\0'))
    {
        return Err(format!("`{spec}` has control characters"));
    }
    // `pathToFileURL` prefixes `file:` unless the spec starts with exactly that.
    let mut body = spec.strip_prefix("file:").unwrap_or(spec).to_string();
    if body.starts_with("//") && !body[2..].starts_with('/') && body.len() > 2 {
        // `file://x` means `file:///x` (npa keeps this for compatibility).
        body.insert(0, '/');
    }
    let slashes = body.bytes().take_while(|&b| b == b'/').count();
    if (1..=3).contains(&slashes) {
        let rest = &body[slashes..];
        let dots = if rest.starts_with("..") {
            2
        } else {
            usize::from(rest.starts_with('.'))
        };
        if dots > 0 && matches!(rest.as_bytes().get(dots), None | Some(b'/')) {
            // `file:/../x` is `file:../x`: relative.
            body = rest.to_string();
        }
    }
    let where_ = normalize(&std::path::absolute(base).map_err(|e| e.to_string())?);
    let where_segments: Vec<String> = where_
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    // The URL without a base decides `~`; with `where/` as base, the path.
    let spec_path = url_file_path(&[], &body, false);
    let resolved = if spec_path.first().is_some_and(|s| s == "~") {
        // `path.resolve(home, rest)`: a rest that starts with `/` (`~//x`) is absolute.
        let home = std::env::home_dir().ok_or("the home directory is unknown")?;
        home.join(spec_path[1..].join("/"))
    } else {
        let mut p = PathBuf::from("/");
        p.extend(url_file_path(&where_segments, &body, true));
        p
    };
    Ok(normalize(&resolved))
}

/// The path segments of `file:<body>` as the WHATWG URL parser builds them, relative to a
/// base path of `base` (a folder) when `with_base`.
fn url_file_path(base: &[String], body: &str, with_base: bool) -> Vec<String> {
    // A drive letter is `c:` only: npa percent-encodes the `|` of `c|` before parsing.
    let drive = |s: &str| {
        let b = s.as_bytes();
        b.len() >= 2
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b.get(2), None | Some(b'/'))
    };
    let (mut path, rest): (Vec<String>, &str) = if let Some(abs) = body.strip_prefix('/') {
        // `file:/x`, or `file:///x` whose empty host is dropped.
        (
            Vec::new(),
            abs.strip_prefix('/')
                .map_or(abs, |a| a.strip_prefix('/').unwrap_or(a)),
        )
    } else if body.is_empty() {
        let mut p = if with_base { base.to_vec() } else { Vec::new() };
        p.push(String::new());
        return p;
    } else if with_base && !drive(body) {
        (base.to_vec(), body)
    } else {
        (Vec::new(), body)
    };
    // Node's parser keeps a sole first segment that starts like a drive (`c:`, `c:x`) where
    // `..` would remove it; the WHATWG text says only `c:` itself.
    let is_drive_segment = |s: &str| {
        let b = s.as_bytes();
        b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
    };
    let parts: Vec<&str> = rest.split('/').collect();
    for (i, seg) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match *seg {
            ".." => {
                if !(path.len() == 1 && is_drive_segment(&path[0])) {
                    path.pop();
                }
                if last {
                    path.push(String::new());
                }
            }
            "." => {
                if last {
                    path.push(String::new());
                }
            }
            s => path.push(s.to_string()),
        }
    }
    path
}

// ---- Hosted git: hosted-git-info's `fromUrl` ---------------------------------------------

/// Shortcut schemes hosted-git-info knows (`github:u/r`).
const GIT_SHORTCUTS: &[&str] = &["github", "gitlab", "bitbucket", "gist", "sourcehut"];

/// Whether hosted-git-info reads `spec` as a repository on a host it knows. Where its
/// decoding could fail (a malformed `%` sequence) this still says yes: refusing is safe.
fn is_hosted_git(spec: &str) -> bool {
    if spec.is_empty() {
        return false;
    }
    if is_github_shorthand(spec) {
        return true;
    }
    let with_protocol = correct_protocol(spec);
    let parsed = parse_url(&with_protocol).or_else(|| parse_url(&correct_url(&with_protocol)));
    parsed.is_some_and(|u| known_git_host(&u))
}

/// `user/repo` (with an optional `#committish`).
fn is_github_shorthand(arg: &str) -> bool {
    let first_hash = arg.find('#');
    let after_hash = |i: Option<usize>| match (i, first_hash) {
        (None, _) => true,
        (Some(i), Some(h)) => i > h,
        (Some(_), None) => false,
    };
    let first_slash = arg.find('/');
    let second_slash = first_slash.and_then(|f| arg[f + 1..].find('/').map(|i| i + f + 1));
    let first_space = arg.find(is_js_whitespace);
    let ends_ok = match first_hash {
        Some(h) => h == 0 || arg.as_bytes()[h - 1] != b'/',
        None => !arg.ends_with('/'),
    };
    after_hash(first_space)
        && first_slash.is_some_and(|i| i > 0)
        && ends_ok
        && !arg.starts_with('.')
        && after_hash(arg.find('@'))
        && after_hash(arg.find(':'))
        && after_hash(second_slash)
}

/// hosted-git-info's `correctProtocol`: `host:path` gets `//`, `user@host:path` `git+ssh://`.
fn correct_protocol(arg: &str) -> String {
    const PROTOCOLS: &[&str] = &[
        "git+ssh:",
        "ssh:",
        "git+https:",
        "git:",
        "http:",
        "https:",
        "git+http:",
        "github:",
        "gitlab:",
        "bitbucket:",
        "gist:",
        "sourcehut:",
    ];
    let first_colon = arg.find(':');
    let proto = first_colon.map_or("", |c| &arg[..=c]);
    if PROTOCOLS.contains(&proto) || first_colon.is_some_and(|c| arg[c..].starts_with("://")) {
        return arg.into();
    }
    match (arg.find('@'), first_colon) {
        (Some(at), Some(c)) if at > c => format!("git+ssh://{arg}"),
        (Some(_), Some(_)) => arg.into(),
        (Some(_), None) => format!("git+ssh://{arg}"),
        (None, Some(c)) => format!("{}//{}", &arg[..=c], &arg[c + 1..]),
        (None, None) => format!("//{arg}"),
    }
}

/// hosted-git-info's `correctUrl`: scp-style `host:path` becomes `git+ssh://host/path`.
fn correct_url(giturl: &str) -> String {
    let before_hash = |s: &str, c: char| {
        let end = s.find('#').map_or(s.len(), |h| h + 1);
        s[..end].rfind(c)
    };
    let mut url = giturl.to_string();
    let at = before_hash(&url, '@');
    if let Some(colon) = before_hash(&url, ':') {
        if at.is_none_or(|a| colon > a) {
            url.replace_range(colon..=colon, "/");
        }
    }
    if before_hash(&url, ':').is_none() && !url.contains("//") {
        url = format!("git+ssh://{url}");
    }
    url
}

/// What hosted-git-info looks at in a parsed URL.
struct UrlParts {
    scheme: String,
    host: String,
    path: String,
}

/// The WHATWG URL parser, as far as hosted-git-info and npa depend on it: `None` where it
/// would fail (no scheme, an empty or malformed host of a special scheme, a bad port).
fn parse_url(input: &str) -> Option<UrlParts> {
    let s: String = input
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let colon = s.find(':')?;
    let mut scheme_chars = s[..colon].chars();
    if !scheme_chars.next()?.is_ascii_alphabetic()
        || !scheme_chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    let scheme = s[..colon].to_ascii_lowercase();
    let special = matches!(
        scheme.as_str(),
        "http" | "https" | "ws" | "wss" | "ftp" | "file"
    );
    let rest = &s[colon + 1..];
    let rest = &rest[..rest.find('#').unwrap_or(rest.len())];
    let (authority, path) = if special {
        let after = rest.trim_start_matches(['/', '\\']);
        let end = after.find(['/', '\\', '?']).unwrap_or(after.len());
        (Some(&after[..end]), &after[end..])
    } else if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?']).unwrap_or(after.len());
        (Some(&after[..end]), &after[end..])
    } else {
        (None, rest)
    };
    let host = match authority {
        Some(a) => parse_host(a, special, scheme == "file")?,
        None => String::new(),
    };
    let path = &path[..path.find('?').unwrap_or(path.len())];
    let path = if special {
        path.replace('\\', "/")
    } else {
        path.to_string()
    };
    let path = if authority.is_some() || path.starts_with('/') {
        url_path(&path)
    } else {
        path
    };
    Some(UrlParts { scheme, host, path })
}

fn parse_host(authority: &str, special: bool, file: bool) -> Option<String> {
    let host_port = authority
        .rfind('@')
        .map_or(authority, |i| &authority[i + 1..]);
    let (host, port) = if host_port.starts_with('[') {
        let end = host_port.find(']')?;
        (&host_port[..=end], &host_port[end + 1..])
    } else {
        host_port.split_at(host_port.find(':').unwrap_or(host_port.len()))
    };
    if !port.is_empty() {
        let digits = port.strip_prefix(':')?;
        if !digits.bytes().all(|b| b.is_ascii_digit())
            || (!digits.is_empty() && digits.trim_start_matches('0').len() > 5)
            || digits.parse::<u32>().is_ok_and(|p| p > 65535)
        {
            return None;
        }
    }
    let forbidden = |c: char| " #/:<>?@[\\]^|".contains(c) || c == '\0';
    if !special {
        return (!host.chars().any(forbidden)).then(|| host.to_string());
    }
    let host = percent_decode(host).to_ascii_lowercase();
    if (host.is_empty() && !file)
        || host
            .chars()
            .any(|c| forbidden(c) || c == '%' || c.is_ascii_control())
    {
        return None;
    }
    Some(host)
}

/// A URL path with its dot segments folded.
fn url_path(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    for (i, seg) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match *seg {
            ".." => {
                out.pop();
                if last {
                    out.push("");
                }
            }
            "." if last => out.push(""),
            "." => {}
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

/// hosted-git-info's hosts and their `extract`.
fn known_git_host(u: &UrlParts) -> bool {
    if GIT_SHORTCUTS.contains(&u.scheme.as_str()) {
        return true;
    }
    let protocol = format!("{}:", u.scheme);
    let host = u.host.strip_prefix("www.").unwrap_or(&u.host);
    let segments: Vec<&str> = u.path.split('/').collect();
    let seg = |i: usize| segments.get(i).copied().filter(|s| !s.is_empty());
    let project = |i: usize| {
        seg(i)
            .map(|p| p.strip_suffix(".git").unwrap_or(p))
            .filter(|p| !p.is_empty())
    };
    let (protocols, extracted): (&[&str], bool) = match host {
        "github.com" => (
            &["git:", "http:", "git+ssh:", "git+https:", "ssh:", "https:"],
            seg(3).is_none_or(|t| t == "tree") && seg(1).is_some() && project(2).is_some(),
        ),
        "bitbucket.org" => (
            &["git+ssh:", "git+https:", "ssh:", "https:"],
            seg(3) != Some("get") && seg(1).is_some() && project(2).is_some(),
        ),
        "gitlab.com" => {
            let path = u.path.get(1..).unwrap_or("");
            let last = path.rsplit('/').next().unwrap_or("");
            let last = last.strip_suffix(".git").unwrap_or(last);
            let user = path.rsplit_once('/').map_or("", |(u, _)| u);
            (
                &["git+ssh:", "git+https:", "ssh:", "https:"],
                !path.contains("/-/")
                    && !path.contains("/archive.tar.gz")
                    && !user.is_empty()
                    && !last.is_empty(),
            )
        }
        "gist.github.com" => (
            &["git:", "git+ssh:", "git+https:", "ssh:", "https:"],
            seg(3) != Some("raw") && (seg(2).is_some() || seg(1).is_some()),
        ),
        "git.sr.ht" => (
            &["git+ssh:", "https:"],
            seg(3) != Some("archive") && seg(1).is_some() && project(2).is_some(),
        ),
        _ => return false,
    };
    protocols.contains(&protocol.as_str()) && extracted
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

/// `%xx` escapes decoded (bytes that are no escape pass as they are; the result is read as
/// UTF-8, lossily).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
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
        // No leading `./`: not a path spec, and npm reads `user/repo` as a GitHub repository.
        assert!(matches!(
            parse("plugins/foo.ts", Path::new("/cfg/dir")),
            PluginSpec::Invalid { reason, .. } if reason.contains("git spec")
        ));
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

    /// The reason Berth refuses `raw` from `/cfg/dir`, or `None` when it installs it.
    fn refusal(raw: &str) -> Option<String> {
        match parse(raw, Path::new("/cfg/dir")) {
            PluginSpec::Invalid { reason, .. } => Some(reason),
            _ => None,
        }
    }

    #[test]
    fn npm_specs_install_by_what_npm_will_do_not_by_their_prefix() {
        check("alias@npm:@s/x@1", npm("alias", "npm:@s/x@1"));
        check("alias@npm:real", npm("alias", "npm:real"));
        check("foo@", npm("foo", "latest"));
        check("foo@ 1.2.0 ", npm("foo", "1.2.0"));
        check(
            "file:vendor/p",
            npm("file:vendor/p", "file:/cfg/dir/vendor/p"),
        );
        check(
            "p@file:./p.tgz",
            npm("p@file:./p.tgz", "file:/cfg/dir/p.tgz"),
        );
        check("x.tgz", npm("x.tgz", "file:/cfg/dir/x.tgz"));
        for (raw, why) in [
            // The demonstrated bypasses: a name in front of `file:` or `git+file:`.
            ("foo@file:/outside", "outside the folder"),
            ("bar@git+file:///tmp/r", "git spec"),
            ("foo@file://etc/passwd", "outside the folder"),
            ("foo@file://../x", "outside the folder"),
            ("foo@c:/x", "outside the folder"),
            ("foo@~/x", "outside the folder"),
            ("~/x", "outside the folder"),
            ("git+ssh://git@github.com/u/r.git", "git spec"),
            ("git@github.com:u/r.git", "git spec"),
            ("github:u/r", "git spec"),
            ("u/r#semver:^1", "git spec"),
            ("foo@u/r", "git spec"),
            ("https://host.example/x.tgz", "tarball URL"),
            ("foo@http://host.example/x.tgz", "tarball URL"),
            (
                "alias@npm:github:u/r",
                "aliases only work for registry packages",
            ),
            ("alias@npm:a@npm:b", "nested aliases"),
            ("foo@svn+ssh://host/x", "as a path or a URL"),
            ("Foo@1", "not a valid npm package name"),
            ("^1.2.3", "names no package"),
            ("foo bar", "not a version, range or tag"),
        ] {
            let reason = refusal(raw).unwrap_or_else(|| panic!("`{raw}` was accepted"));
            assert!(reason.contains(why), "`{raw}`: {reason}");
        }
    }

    #[test]
    fn local_packages_are_inside_their_folder_by_real_path() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let base = root.join("cfg");
        let outside = root.join("outside");
        std::fs::create_dir_all(base.join("pkg")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, base.join("escape")).unwrap();
        std::os::unix::fs::symlink(root.join("missing"), base.join("dangling")).unwrap();
        std::os::unix::fs::symlink(base.join("pkg"), base.join("alias")).unwrap();
        let request = |raw: &str| match parse(raw, &base) {
            PluginSpec::Npm { request, .. } => Some(request),
            _ => None,
        };
        let file = |p: PathBuf| Some(format!("file:{}", p.display()));
        assert_eq!(request("file:./pkg"), file(base.join("pkg")));
        // A link inside pointing inside installs the real target.
        assert_eq!(request("file:alias"), file(base.join("pkg")));
        // Not there yet: compared as written.
        assert_eq!(request("file:./new/p.tgz"), file(base.join("new/p.tgz")));
        assert_eq!(request("file:./escape"), None);
        assert_eq!(request("file:./escape/p.tgz"), None);
        assert_eq!(request("file:./dangling"), None);
        assert_eq!(request("file:./dangling/x"), None);
    }

    #[test]
    fn dedupe_keys_ignore_versions_for_npm() {
        let a = parse("foo@1", Path::new("/"));
        let b = parse("foo@2", Path::new("/"));
        assert_eq!(a.dedupe_key("foo@1"), b.dedupe_key("foo@2"));
    }
}
