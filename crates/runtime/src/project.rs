//! OpenCode's `project` for the project directory, as plugins get it in `PluginInput.project`
//! and from `client.project.current()`: resolved by OpenCode 1.18.4's rules (git remote, its
//! cache file, the root commit), computed once and reused while the git facts stay (D-021).
//!
//! Owns: that resolution and its cache. Must not: write into the repository (OpenCode writes
//! its cache file; Berth only reads it).

use std::sync::Mutex;

use serde_json::Value;

use crate::snapshot::ProjectInfo;

/// The resolved project, with the stamp of the git facts it was computed from.
#[derive(Default)]
pub(crate) struct OpencodeProject {
    cached: Mutex<Option<(String, Value)>>,
}

impl OpencodeProject {
    /// The value computed last, if any.
    pub(crate) fn cached(&self) -> Option<Value> {
        self.cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(_, v)| v.clone())
    }

    /// OpenCode's `project` for `info`, computed once and reused until the project's git facts
    /// change (the directory, and the times of `.git/HEAD`, `.git/config`, `.git/opencode`).
    pub(crate) async fn value(&self, info: &ProjectInfo) -> Value {
        let stamp = {
            let git = info.worktree.join(".git");
            let time = |p: &std::path::Path| {
                std::fs::metadata(p)
                    .and_then(|m| m.modified())
                    .map(|t| format!("{t:?}"))
                    .unwrap_or_default()
            };
            format!(
                "{}|{}|{}|{}|{}",
                info.directory.display(),
                info.has_git,
                time(&git.join("HEAD")),
                time(&git.join("config")),
                time(&git.join("opencode"))
            )
        };
        if let Some((s, v)) = &*self.cached.lock().unwrap_or_else(|p| p.into_inner()) {
            if *s == stamp {
                return v.clone();
            }
        }
        let owned = info.clone();
        let value = tokio::task::spawn_blocking(move || opencode_project(&owned))
            .await
            .unwrap_or(Value::Null);
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some((stamp, value.clone()));
        value
    }
}

/// The project OpenCode 1.18.4 resolves for a directory (`Project.resolve`), as plugins get it
/// in `PluginInput.project`: `{id, worktree, vcs}`. With a git folder: the worktree is
/// `git rev-parse --show-toplevel`; the id is the sha1 of the normalised `origin` remote, else
/// the trimmed `<git-common-dir>/opencode` (OpenCode's cache), else the first sorted root commit
/// of `HEAD`, else `global`. Without git (or when git cannot read it): `global`, worktree `/`.
/// OpenCode then writes the id into `<git-common-dir>/opencode`; Berth only reads it (D-021).
pub(crate) fn opencode_project(p: &ProjectInfo) -> Value {
    let no_git = serde_json::json!({ "id": "global", "worktree": "/", "vcs": null });
    if !p.has_git {
        return no_git;
    }
    let git = |cwd: &std::path::Path, args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(cwd)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // OpenCode's path rule for git's answers: trailing newlines off, empty = the base,
    // relative = resolved against the base.
    let resolve = |base: &std::path::Path, text: &str| -> std::path::PathBuf {
        let t = text.trim_end_matches(['\r', '\n']);
        if t.is_empty() {
            base.to_path_buf()
        } else {
            berth_discovery::spec::normalize(&base.join(t))
        }
    };
    // The folder holding `.git`. One spawn when git answers all three (the usual case); else
    // OpenCode's three calls, where only `--show-toplevel` may fail.
    let base = &p.worktree;
    let both = git(
        base,
        &[
            "rev-parse",
            "--show-toplevel",
            "--git-dir",
            "--git-common-dir",
        ],
    );
    let lines: Vec<String> = both
        .iter()
        .flat_map(|t| t.lines())
        .map(str::to_string)
        .collect();
    let (toplevel, common) = if lines.len() == 3 {
        (Some(lines[0].clone()), lines[2].clone())
    } else {
        let toplevel = git(base, &["rev-parse", "--show-toplevel"]);
        let (Some(_), Some(common)) = (
            git(base, &["rev-parse", "--git-dir"]),
            git(base, &["rev-parse", "--git-common-dir"]),
        ) else {
            return no_git;
        };
        (toplevel, common)
    };
    let worktree = toplevel.map_or_else(|| base.clone(), |t| resolve(base, &t));
    let common = resolve(base, &common);
    let id = git(&worktree, &["remote", "get-url", "origin"])
        .and_then(|url| remote_key(url.trim()))
        .map(|key| sha1_hex(format!("git-remote:{key}").as_bytes()))
        .or_else(|| {
            std::fs::read_to_string(common.join("opencode"))
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .or_else(|| {
            let text = git(&worktree, &["rev-list", "--max-parents=0", "HEAD"])?;
            let mut roots: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            roots.sort_unstable();
            roots.first().map(|r| r.to_string())
        })
        .unwrap_or_else(|| "global".to_string());
    serde_json::json!({ "id": id, "worktree": worktree, "vcs": "git" })
}

/// `host/path` of a git remote URL as OpenCode 1.18.4 normalises it for the project id
/// (`git@host:path`, `scheme://[user@]host[:port]/path`; `.git` and outer slashes dropped, host
/// lowercased); `None` for `file:` remotes and anything without a host or a path.
fn remote_key(url: &str) -> Option<String> {
    let key = |host: &str, path: &str| -> Option<String> {
        let path = path.trim_start_matches('/');
        let path = path
            .strip_suffix(".git/")
            .or_else(|| path.strip_suffix(".git"))
            .unwrap_or(path)
            .trim_end_matches('/');
        (!host.is_empty() && !path.is_empty()).then(|| format!("{}/{path}", host.to_lowercase()))
    };
    // `git@host:path` and `host:path` (scp-like), OpenCode's `^([^@/:]+@)?([^/:]+):(.+)$`;
    // also what a remote that is no WHATWG URL falls to.
    let scp = || -> Option<String> {
        let (left, path) = url.split_once(':')?;
        if left.is_empty() || left.contains('/') || path.is_empty() {
            return None;
        }
        let host = match left.find('@') {
            Some(i) if i > 0 && i + 1 < left.len() => &left[i + 1..],
            _ => left,
        };
        key(host, path)
    };
    if url.is_empty() {
        return None;
    }
    // A WHATWG URL needs `scheme:` first (a letter, then letters, digits, `+ - .`).
    let scheme = url.split_once(':').map(|(s, _)| s).filter(|s| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    let Some(scheme) = scheme else { return scp() };
    let rest = &url[scheme.len() + 1..];
    let scheme = scheme.to_ascii_lowercase();
    if scheme == "file" {
        return None;
    }
    let special = ["http", "https", "ws", "wss", "ftp"].contains(&scheme.as_str());
    // Without `//` a non-special URL is opaque (`host:path` with a scheme-like host): no hostname.
    let after = if special {
        rest.trim_start_matches(['/', '\\'])
    } else {
        rest.strip_prefix("//")?
    };
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let authority = &after[..end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if host_port.starts_with('[') {
        match host_port.find(']') {
            Some(i) => (&host_port[..=i], host_port[i + 1..].strip_prefix(':')),
            None => return scp(),
        }
    } else {
        match host_port.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    // What WHATWG refuses (a special URL without a host, a port that is not a number) is no
    // URL for OpenCode either: it falls back to the scp-like form.
    if (special && host.is_empty()) || port.is_some_and(|p| !p.chars().all(|c| c.is_ascii_digit()))
    {
        return scp();
    }
    let tail = &after[end..];
    let path = &tail[..tail.find(['?', '#']).unwrap_or(tail.len())];
    key(host, path)
}

/// SHA-1 as lowercase hex (OpenCode's `Hash.fast`, used for remote-derived project ids).
fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[cfg(test)]
mod opencode_project_tests {
    use super::{remote_key, sha1_hex};

    #[test]
    fn sha1_matches_the_standard_vectors() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(sha1_hex(long), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    }

    #[test]
    fn remotes_normalise_as_in_opencode() {
        let k = |u: &str| remote_key(u);
        assert_eq!(
            k("git@github.com:Example/Repo.git").as_deref(),
            Some("github.com/Example/Repo")
        );
        assert_eq!(
            k("https://GitHub.com/Example/Repo/").as_deref(),
            Some("github.com/Example/Repo")
        );
        assert_eq!(
            k("ssh://git@host.xz:2222/a/b.git/").as_deref(),
            Some("host.xz/a/b")
        );
        assert_eq!(k("https://user:pw@host/x?y#z").as_deref(), Some("host/x"));
        assert_eq!(k("file:///srv/repo.git"), None);
        assert_eq!(k("/srv/repo.git"), None);
        assert_eq!(k("github.com:Example/Repo"), None); // a URL with scheme `github.com`, no host
        assert_eq!(
            k("ssh://git@host:org/repo.git").as_deref(),
            Some("ssh/git@host:org/repo")
        );
        assert_eq!(k("me@x@host:a/b").as_deref(), Some("x@host/a/b"));
        assert_eq!(k("https:github.com/x").as_deref(), Some("github.com/x"));
        assert_eq!(k("ssh://[::1]:22/a/b").as_deref(), Some("[::1]/a/b"));
        assert_eq!(k("git://Host.XZ/a/b").as_deref(), Some("host.xz/a/b"));
        assert_eq!(k(""), None);
    }
}
