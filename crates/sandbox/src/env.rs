//! The environment a sandboxed child gets: built from an allow-list, never inherited whole.
//!
//! Owns: the core allow-list, the secret-name test, `env_allowlist`. Must not: read or change
//! the process's own environment (callers pass it in), or know about tiers.

use std::ffi::{OsStr, OsString};

/// Names passed through by default (the "core" set of Codex's shell environment policy).
pub const CORE_NAMES: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
    "LC_ALL", "TZ", "TERM",
];

/// Words that make a name look like it holds a secret (compared case-insensitively).
pub const SECRET_WORDS: &[&str] = &["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "AUTH"];

/// Whether `name` contains one of `SECRET_WORDS`, in any case.
pub fn looks_secret(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// The pairs of `from` whose name is in `CORE_NAMES` or `extra` and does not look secret
/// (even when listed), in `from`'s order, then the `keep` pairs, which are always set (a
/// `keep` name already present takes the `keep` value in place).
pub fn env_allowlist(
    from: impl Iterator<Item = (OsString, OsString)>,
    extra: &[&str],
    keep: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)> {
    let allowed = |name: &OsStr| {
        let listed = CORE_NAMES
            .iter()
            .chain(extra)
            .any(|n| OsStr::new(n) == name);
        listed && !looks_secret(name)
    };
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    for (name, value) in from.filter(|(n, _)| allowed(n)) {
        set(&mut out, name, value);
    }
    for (name, value) in keep {
        set(&mut out, name.clone(), value.clone());
    }
    out
}

/// Sets `name` in `env`, replacing an earlier value in place.
pub(crate) fn set(env: &mut Vec<(OsString, OsString)>, name: OsString, value: OsString) {
    match env.iter_mut().find(|(n, _)| *n == name) {
        Some(pair) => pair.1 = value,
        None => env.push((name, value)),
    }
}

/// Points the child's temp-folder variables at `dir`: `TMPDIR` always, `TMP`/`TEMP` when set.
pub(crate) fn point_tmp_at(env: &mut Vec<(OsString, OsString)>, dir: &std::path::Path) {
    set(env, "TMPDIR".into(), dir.into());
    for name in ["TMP", "TEMP"] {
        if env.iter().any(|(n, _)| n == name) {
            set(env, name.into(), dir.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn keeps_the_core_names_and_the_extra_ones_only() {
        let from = pairs(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/a"),
            ("RANDOM_THING", "x"),
            ("NODE_OPTIONS", "--inspect"),
            ("LANG", "C.UTF-8"),
        ]);
        let got = env_allowlist(from.into_iter(), &["NODE_OPTIONS"], &[]);
        assert_eq!(
            got,
            pairs(&[
                ("PATH", "/usr/bin"),
                ("HOME", "/home/a"),
                ("NODE_OPTIONS", "--inspect"),
                ("LANG", "C.UTF-8"),
            ])
        );
    }

    #[test]
    fn drops_secret_looking_names_even_when_listed() {
        let from = pairs(&[
            ("MY_API_KEY", "canary123"),
            ("github_token", "t"),
            ("DB_Password", "p"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "c"),
            ("XAUTHORITY", "/x"),
            ("PATH", "/bin"),
        ]);
        let extra = [
            "MY_API_KEY",
            "github_token",
            "DB_Password",
            "AWS_SECRET_ACCESS_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "XAUTHORITY",
        ];
        let got = env_allowlist(from.into_iter(), &extra, &[]);
        assert_eq!(got, pairs(&[("PATH", "/bin")]));
    }

    #[test]
    fn keep_pairs_are_always_set_and_replace_in_place() {
        let from = pairs(&[("PATH", "/bin"), ("HOME", "/h")]);
        let keep = pairs(&[
            ("PATH", "/only"),
            ("BERTH_TREE", "m1"),
            ("BERTH_AUTH_X", "k"),
        ]);
        let got = env_allowlist(from.into_iter(), &[], &keep);
        assert_eq!(
            got,
            pairs(&[
                ("PATH", "/only"),
                ("HOME", "/h"),
                ("BERTH_TREE", "m1"),
                ("BERTH_AUTH_X", "k")
            ])
        );
    }

    #[test]
    fn temp_variables_point_at_the_child_folder() {
        let mut env = pairs(&[("TMP", "/var/tmp"), ("HOME", "/h")]);
        point_tmp_at(&mut env, std::path::Path::new("/tmp/child"));
        assert_eq!(
            env,
            pairs(&[
                ("TMP", "/tmp/child"),
                ("HOME", "/h"),
                ("TMPDIR", "/tmp/child")
            ])
        );
    }

    #[test]
    fn names_match_exactly() {
        let from = pairs(&[("path", "/bin"), ("PATHX", "/x"), ("HOME", "/h")]);
        assert_eq!(
            env_allowlist(from.into_iter(), &[], &[]),
            pairs(&[("HOME", "/h")])
        );
    }
}
