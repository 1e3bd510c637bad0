//! Berth's reading of npm specs against npm's own: the machine's npm-package-arg, run through
//! `node`, reads the same specs, and every class must agree with what it fetches: the name and
//! the requested version or range (npa's `fetchSpec`), the alias target and its request (npa's
//! `subSpec`), the local path, the git spec and the tarball URL. node and npm are required:
//! without them this fails, it does not skip.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_discovery::spec::{classify, classify_dependency, NpmSpecClass};
use serde_json::{json, Value};

/// npm's `where` and Berth's `base`; neither reader touches it.
const BASE: &str = "/cfg/dir";

/// Plugin specs, read as `npm install <spec>` reads them (`npa(spec, where)`).
const PLUGIN_SPECS: &[&str] = &[
    // Registry: names, versions, ranges, tags, scopes.
    "opencode-wakatime",
    "opencode-wakatime@1.3.9",
    "foo@^1.2.0",
    "foo@>=1 <2",
    "foo@1.x || 2",
    "foo@latest",
    "foo@next",
    "foo@",
    "@scope/pkg",
    "@scope/pkg@^1",
    "@scope/pkg@beta",
    "Foo@1",
    // Whitespace npm trims from a version, and whitespace it does not accept in a name.
    "foo@ 1.0.0",
    "foo@\t^1 ",
    "foo bar",
    // No name: a bare range, an alias without a name.
    "^1.2.3",
    "npm:foo@1",
    // Aliases.
    "alias@npm:real@1",
    "alias@npm:@s/x@1",
    "alias@npm:real",
    "alias@npm:github:u/r",
    "alias@npm:./dir",
    "alias@npm:other@npm:x",
    // Local: `file:` relative, absolute, outside, bare paths, home, tarballs.
    "file:vendor/p",
    "file:./p.tgz",
    "file:/abs/p",
    "file:../../outside",
    "file://etc/x",
    "file://../x",
    "./x",
    "../x",
    "~/x",
    "x.tgz",
    "foo@1.tar",
    "foo@./dir",
    "foo@file:/outside",
    "foo@file:",
    "foo@file:~/x",
    "foo@file:./~/x",
    "foo@FILE:x",
    "foo@c:/x",
    // `path.resolve(home, "/x")` is `/x`.
    "~//x",
    // Git, however it is spelled.
    "bar@git+file:///tmp/r",
    "git+ssh://git@github.com/u/r.git",
    "git+ssh://git@host.example:u/r#v1",
    "git://github.com/u/r",
    "foo@git+https://github.com/u/r#main",
    "git@github.com:u/r.git",
    "foo@git@example.com:u/r",
    "github:u/r",
    "gitlab:u/r",
    "bitbucket:u/r",
    "foo@gist:abc123",
    "u/r",
    "u/r#semver:^1",
    "plugins/foo.ts",
    "foo@u/r",
    "https://github.com/u/r",
    "https://gitlab.com/group/sub/repo",
    "ssh://git@github.com/u/r",
    // Remote tarballs, and a URL scheme npm does not install.
    "https://host.example/x.tgz",
    "http://host.example/x.tgz",
    "foo@https://host.example/x.tgz",
    "https://github.com/u/r/archive/x.tgz",
    "ssh://git@host.example/u/r",
];

/// package.json dependency entries (`npa.resolve(name, spec, where)`).
const DEPENDENCIES: &[(&str, &str)] = &[
    ("a", "^1.0.0"),
    ("a", ""),
    ("a", "latest"),
    ("@s/a", "1.x"),
    ("a", "npm:b@2"),
    ("a", "file:../sibling"),
    ("a", "./vendor/a"),
    ("a", "../../x"),
    ("a", "vendor/a.tgz"),
    ("a", "vendor/sub/dir"),
    ("a", "vendor/dir"),
    ("a", "~/a"),
    ("a", "c:/x"),
    ("a", "/c:x/../y"),
    ("a", "file:C|/x"),
    ("a", "file:"),
    ("a", "u/r"),
    ("a", "github:u/r#v1"),
    ("a", "git+ssh://git@github.com/u/r.git"),
    ("a", "git@github.com:u/r.git"),
    ("a", " https://github.com/u/r"),
    ("a", "https://host.example/a.tgz"),
    ("A B", "1"),
];

/// Where Berth is stricter by design: npm reads a path, Berth cannot be as sure that the
/// spec is not a URL npm corrects into a git host (or that npm's decoding fails), and refuses.
const STRICTER: &[(Option<&str>, &str)] = &[
    (None, "foo@svn+ssh://host/x"),
    (None, "u/r@1"),
    (Some("a"), "git@example.com:u/r"),
    (Some("a"), "u/r%zz"),
];

/// What a spec leads to, in terms both readers can be compared on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// `request`: the version, range or tag fetched (npa's `fetchSpec`), see [`request`].
    Registry {
        name: String,
        request: String,
    },
    /// `target`, `target_request`: npa's `subSpec` name and `fetchSpec`.
    Alias {
        name: String,
        target: String,
        target_request: String,
    },
    Directory {
        path: PathBuf,
    },
    File {
        path: PathBuf,
    },
    /// `spec`: the git spec as npm reads it (npa's `rawSpec`: after the name, scp-style
    /// `user@host:path` given its `git+ssh://`).
    Git {
        spec: String,
    },
    /// `url`: what npm downloads (npa's `fetchSpec`).
    Remote {
        url: String,
    },
    /// npm throws, or names no package (a bare `^1.2.3`): nothing to install.
    Refused,
}

/// A registry request as both readers can be compared on: no request (Berth's `""`, npa's
/// `""` from `npa.resolve` and `*` from `npa`) is the range `*`, which is what npm fetches.
fn request(r: &str) -> String {
    if r.is_empty() {
        "*".into()
    } else {
        r.into()
    }
}

fn berth_outcome(class: Result<NpmSpecClass, String>) -> Outcome {
    match class {
        Ok(NpmSpecClass::Registry { name, request: r }) => Outcome::Registry {
            name,
            request: request(&r),
        },
        Ok(NpmSpecClass::Alias {
            name,
            target_name,
            target_request,
        }) => Outcome::Alias {
            name,
            target: target_name,
            target_request: request(&target_request),
        },
        Ok(NpmSpecClass::Directory { path }) => Outcome::Directory { path },
        Ok(NpmSpecClass::File { path }) => Outcome::File { path },
        Ok(NpmSpecClass::Git { spec }) => Outcome::Git { spec },
        Ok(NpmSpecClass::Remote { url }) => Outcome::Remote { url },
        Err(_) => Outcome::Refused,
    }
}

/// The mapping of npa's `type` onto Berth's classes.
fn npa_class(npa_type: &str) -> &'static str {
    match npa_type {
        "tag" | "version" | "range" => "registry",
        "alias" => "alias",
        "directory" => "directory",
        "file" => "file",
        "git" => "git",
        "remote" => "remote",
        other => panic!("npm-package-arg has a type Berth does not know: {other}"),
    }
}

/// One npa result (`{type, name, rawSpec, fetchSpec, target, targetFetchSpec}` or
/// `{error}`) under a type mapping.
fn npa_outcome(v: &Value, class_of: fn(&str) -> &'static str) -> Outcome {
    if v.get("error").is_some() {
        return Outcome::Refused;
    }
    let text = |k: &str| v[k].as_str().map(str::to_string);
    match class_of(v["type"].as_str().expect("npa result has a type")) {
        "registry" => text("name").map_or(Outcome::Refused, |name| Outcome::Registry {
            name,
            request: request(&text("fetchSpec").expect("a registry spec has a fetchSpec")),
        }),
        "alias" => match (text("name"), text("target")) {
            (Some(name), Some(target)) => Outcome::Alias {
                name,
                target,
                target_request: request(
                    &text("targetFetchSpec").expect("an alias target has a fetchSpec"),
                ),
            },
            _ => Outcome::Refused,
        },
        "directory" => Outcome::Directory {
            path: text("fetchSpec").expect("a directory has a path").into(),
        },
        "file" => Outcome::File {
            path: text("fetchSpec").expect("a file has a path").into(),
        },
        "git" => Outcome::Git {
            spec: text("rawSpec").expect("a git spec has a rawSpec"),
        },
        // No URL (a git shortcut under a confused mapping) is an empty one: never Berth's.
        "remote" => Outcome::Remote {
            url: text("fetchSpec").unwrap_or_default(),
        },
        other => unreachable!("{other}"),
    }
}

/// Every case where the two readers disagree, described.
fn differences(cases: &[String], npa: &[Outcome], berth: &[Outcome]) -> Vec<String> {
    assert_eq!(cases.len(), npa.len());
    assert_eq!(cases.len(), berth.len());
    cases
        .iter()
        .zip(npa.iter().zip(berth))
        .filter(|(_, (n, b))| n != b)
        .map(|(c, (n, b))| format!("{c}: npm reads {n:?}, Berth {b:?}"))
        .collect()
}

const NPA_SCRIPT: &str = r#"
const npa = require(process.argv[1]);
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const out = JSON.parse(input).map((c) => {
    try {
      const r = c.name === null ? npa(c.spec, c.where) : npa.resolve(c.name, c.spec, c.where);
      return {
        type: r.type,
        name: r.name ?? null,
        rawSpec: r.rawSpec ?? null,
        fetchSpec: r.fetchSpec ?? null,
        target: r.subSpec ? r.subSpec.name ?? null : null,
        targetFetchSpec: r.subSpec ? r.subSpec.fetchSpec ?? null : null,
      };
    } catch (e) {
      return { error: String(e && e.message) };
    }
  });
  process.stdout.write(JSON.stringify(out));
});
"#;

/// Runs the machine's npm-package-arg on `(name, spec)` pairs (`name` `None`: a plugin spec).
fn run_npa(cases: &[(Option<&str>, &str)]) -> Vec<Value> {
    let root = Command::new("npm")
        .args(["root", "-g"])
        .output()
        .expect("`npm` must be on PATH: this test compares Berth with npm's own npm-package-arg");
    assert!(root.status.success(), "`npm root -g` failed: {root:?}");
    let npa = PathBuf::from(String::from_utf8(root.stdout).unwrap().trim())
        .join("npm/node_modules/npm-package-arg");
    assert!(
        npa.join("lib/npa.js").is_file(),
        "npm-package-arg is not where npm keeps it: {}",
        npa.display()
    );
    let input: Vec<Value> = cases
        .iter()
        .map(|(name, spec)| json!({ "name": name, "spec": spec, "where": BASE }))
        .collect();
    let mut child = Command::new("node")
        .arg("-e")
        .arg(NPA_SCRIPT)
        .arg(&npa)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("`node` must be on PATH: this test runs npm's own npm-package-arg");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&input).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node failed: {out:?}");
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(results.len(), cases.len());
    results
}

fn berth_read(name: Option<&str>, spec: &str) -> Outcome {
    let base = Path::new(BASE);
    berth_outcome(match name {
        None => classify(spec, base),
        Some(name) => classify_dependency(name, spec, base),
    })
}

fn describe(cases: &[(Option<&str>, &str)]) -> Vec<String> {
    cases
        .iter()
        .map(|(name, spec)| match name {
            None => format!("{spec:?}"),
            Some(n) => format!("{n:?}: {spec:?}"),
        })
        .collect()
}

/// Both readers on `cases`: (descriptions, npm's outcomes, Berth's outcomes).
fn read_both(cases: &[(Option<&str>, &str)]) -> (Vec<String>, Vec<Outcome>, Vec<Outcome>) {
    let npa: Vec<Outcome> = run_npa(cases)
        .iter()
        .map(|v| npa_outcome(v, npa_class))
        .collect();
    let berth = cases.iter().map(|(n, s)| berth_read(*n, s)).collect();
    (describe(cases), npa, berth)
}

#[test]
fn plugin_specs_are_classified_as_npm_package_arg_classifies_them() {
    let cases: Vec<(Option<&str>, &str)> = PLUGIN_SPECS.iter().map(|s| (None, *s)).collect();
    let (described, npa, berth) = read_both(&cases);
    let diffs = differences(&described, &npa, &berth);
    assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
    // Every class is exercised, so the comparison proves something about each.
    for class in [
        Outcome::Refused,
        Outcome::Registry {
            name: "foo".into(),
            request: "^1.2.0".into(),
        },
        Outcome::Registry {
            name: "foo".into(),
            request: "latest".into(),
        },
        Outcome::Registry {
            name: "@scope/pkg".into(),
            request: "*".into(),
        },
        Outcome::Alias {
            name: "alias".into(),
            target: "real".into(),
            target_request: "1".into(),
        },
        Outcome::Git {
            spec: "git+ssh://git@github.com:u/r.git".into(),
        },
        Outcome::Remote {
            url: "https://host.example/x.tgz".into(),
        },
    ] {
        assert!(npa.contains(&class), "no case reads as {class:?}");
    }
    assert!(npa.iter().any(|o| matches!(o, Outcome::Directory { .. })));
    assert!(npa.iter().any(|o| matches!(o, Outcome::File { .. })));
}

#[test]
fn dependency_entries_are_classified_as_npm_package_arg_resolves_them() {
    let cases: Vec<(Option<&str>, &str)> =
        DEPENDENCIES.iter().map(|(n, s)| (Some(*n), *s)).collect();
    let (described, npa, berth) = read_both(&cases);
    let diffs = differences(&described, &npa, &berth);
    assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
}

#[test]
fn berth_refuses_where_it_cannot_be_as_sure_as_npm_that_a_path_is_a_path() {
    let (described, npa, berth) = read_both(STRICTER);
    for ((case, n), b) in described.iter().zip(&npa).zip(&berth) {
        assert!(
            matches!(n, Outcome::Directory { .. } | Outcome::File { .. }),
            "{case}: npm reads {n:?}; this list is for paths"
        );
        assert!(
            matches!(b, Outcome::Refused | Outcome::Git { .. }),
            "{case}: Berth reads {b:?}"
        );
    }
}

#[test]
fn the_comparison_catches_a_wrong_classification() {
    let cases: Vec<(Option<&str>, &str)> = PLUGIN_SPECS.iter().map(|s| (None, *s)).collect();
    let raw = run_npa(&cases);
    let described = describe(&cases);
    let berth: Vec<Outcome> = cases.iter().map(|(n, s)| berth_read(*n, s)).collect();
    // A mapping that confuses git with remote tarballs must not pass.
    let confused = |t: &str| match t {
        "git" => "remote",
        "remote" => "git",
        other => npa_class(other),
    };
    let npa_confused: Vec<Outcome> = raw.iter().map(|v| npa_outcome(v, confused)).collect();
    assert!(!differences(&described, &npa_confused, &berth).is_empty());
    // Nor a Berth that reads one git spec as a folder inside the config folder.
    let npa: Vec<Outcome> = raw.iter().map(|v| npa_outcome(v, npa_class)).collect();
    let mut corrupted = berth.clone();
    let git = corrupted
        .iter()
        .position(|o| matches!(o, Outcome::Git { .. }))
        .unwrap();
    corrupted[git] = Outcome::Directory {
        path: Path::new(BASE).join("u/r"),
    };
    let diffs = differences(&described, &npa, &corrupted);
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    // Nor one that fetches another version than npm would: what is requested is compared too,
    // for a registry package, an alias target, a git spec and a tarball URL.
    for pick in [
        |o: &Outcome| matches!(o, Outcome::Registry { request, .. } if request != "*"),
        |o: &Outcome| matches!(o, Outcome::Alias { .. }),
        |o: &Outcome| matches!(o, Outcome::Git { .. }),
        |o: &Outcome| matches!(o, Outcome::Remote { .. }),
    ] {
        let mut corrupted = berth.clone();
        let at = corrupted.iter().position(pick).unwrap();
        match &mut corrupted[at] {
            Outcome::Registry { request, .. } => *request = "*".into(),
            Outcome::Alias { target_request, .. } => target_request.push_str(".0"),
            Outcome::Git { spec } => spec.push_str("#other"),
            Outcome::Remote { url } => url.push_str("?other"),
            other => unreachable!("{other:?}"),
        }
        let diffs = differences(&described, &npa, &corrupted);
        assert_eq!(diffs.len(), 1, "{diffs:?}");
    }
}
