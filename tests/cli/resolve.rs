//! The scan resolves what the runtime resolves: every rule of `berth_discovery::resolve`
//! compared, case by case, with what real Bun (an import or require that really runs) and real
//! Node (its loaders' resolution) pick — extension orders, `.js` → `.ts` mapping, folders and
//! their `package.json`, index files, symlinks, queries and URLs. A difference would let the
//! scan hash one file while the runtime runs another (the host's gate would then refuse it, so
//! a difference is a load failure, never unlisted code; still, none is allowed). A negative
//! control proves the comparison sees a wrong rule.

use std::path::{Path, PathBuf};
use std::process::Command;

use berth_discovery::resolve::{resolve_local, ImportKind};
use berth_discovery::Runtime;

use crate::support::repo_root;

/// The importing file each case loads from: `run(spec, kind)` answers with the `loaded`
/// marker of the file that ran (Bun) or that the loaders resolve (Node).
const PROBE: &str = r#"import { createRequire } from "node:module"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
const marker = (path) => {
  const text = readFileSync(path, "utf8")
  try { return JSON.parse(text).loaded } catch {}
  return /__loaded = "([^"]+)"/.exec(text)?.[1] ?? "?"
}
export async function run(spec, kind) {
  try {
    if (typeof Bun !== "undefined") {
      globalThis.__loaded = null
      const m = kind === "import" ? await import(spec) : createRequire(import.meta.url)(spec)
      return globalThis.__loaded ?? m?.default?.loaded ?? m?.loaded ?? "?"
    }
    return marker(kind === "import" ? fileURLToPath(import.meta.resolve(spec)) : createRequire(import.meta.url).resolve(spec))
  } catch {
    return "none"
  }
}
"#;

struct Case {
    /// Files of the case (relative to its folder); each one's marker is its own path.
    files: Vec<String>,
    /// Extra set-up: (relative path, contents) written as given (package.json files).
    raw: Vec<(String, String)>,
    /// Symlinks: (link, target as written).
    links: Vec<(String, String)>,
    /// The importing file (the probe), relative to the case folder.
    probe: String,
    spec: String,
}

fn case(files: &[&str], spec: &str) -> Case {
    Case {
        files: files.iter().map(|s| s.to_string()).collect(),
        raw: vec![],
        links: vec![],
        probe: "probe.mjs".into(),
        spec: spec.into(),
    }
}

impl Case {
    fn raw(mut self, path: &str, text: &str) -> Case {
        self.raw.push((path.into(), text.into()));
        self
    }
    fn link(mut self, link: &str, target: &str) -> Case {
        self.links.push((link.into(), target.into()));
        self
    }
    fn probe(mut self, probe: &str) -> Case {
        self.probe = probe.into();
        self
    }
}

const ALL_EXTS: &[&str] = &["tsx", "jsx", "mts", "ts", "mjs", "js", "cts", "cjs", "json"];

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    // Extension orders, by elimination: every candidate, then without the one that won, …
    // in both Bun orders (import and require differ), so each order is pinned completely.
    for order in [
        &["tsx", "jsx", "mts", "ts", "mjs", "js", "cts", "cjs", "json"][..],
        &["tsx", "ts", "jsx", "cts", "cjs", "js", "mjs", "mts", "json"][..],
        &["js", "json", "ts", "tsx"][..],
    ] {
        for skip in 0..order.len() {
            let files: Vec<String> = ALL_EXTS
                .iter()
                .filter(|e| !order[..skip].contains(e))
                .map(|e| format!("lib/h.{e}"))
                .collect();
            let refs: Vec<&str> = files.iter().map(String::as_str).collect();
            out.push(case(&refs, "./lib/h"));
            let index: Vec<String> = files
                .iter()
                .map(|f| f.replace("lib/h.", "lib/index."))
                .collect();
            let refs: Vec<&str> = index.iter().map(String::as_str).collect();
            out.push(case(&refs, "./lib"));
        }
    }
    // `.js`-family names that mean TypeScript files, and what wins over them.
    out.push(case(&["x.ts"], "./x.js"));
    out.push(case(&["x.ts", "x.js"], "./x.js"));
    out.push(case(&["x.tsx"], "./x.js"));
    out.push(case(&["x.mts"], "./x.js"));
    out.push(case(&["x.mts"], "./x.mjs"));
    out.push(case(&["x.ts"], "./x.mjs"));
    out.push(case(&["x.cts"], "./x.cjs"));
    out.push(case(&["x.tsx"], "./x.jsx"));
    out.push(case(&["x.ts"], "./x.jsx"));
    out.push(case(&["x.js.ts", "x.ts"], "./x.js"));
    out.push(case(&["x.js"], "./x.ts"));
    // A file and a folder of one name; trailing slash; `.` and `..`.
    out.push(case(&["x.ts", "x/index.ts"], "./x"));
    out.push(case(&["x.js", "x/index.js"], "./x"));
    out.push(case(&["x.ts", "x/m.js"], "./x").raw("x/package.json", r#"{"main":"m.js"}"#));
    out.push(case(&["x.ts", "x/index.ts"], "./x/"));
    out.push(case(&["x", "x.ts"], "./x"));
    out.push(case(&["x.ts/index.js"], "./x.ts"));
    out.push(case(&["index.ts"], "."));
    out.push(case(&["index.ts"], "./"));
    out.push(case(&["index.ts", "sub/probe-here.ts"], "..").probe("sub/probe.mjs"));
    // A folder's package.json, for a relative import of the folder.
    let pkg = |json: &str, files: &[&str]| {
        let mut all = vec!["lib/index.js"];
        all.extend_from_slice(files);
        case(&all, "./lib").raw("lib/package.json", json)
    };
    out.push(pkg(r#"{"main":"m.js"}"#, &["lib/m.js"]));
    out.push(pkg(r#"{"main":"./m"}"#, &["lib/m.ts"]));
    out.push(pkg(r#"{"main":"missing.js"}"#, &[]));
    out.push(pkg(r#"{"main":"sub"}"#, &["lib/sub/index.ts"]));
    out.push(pkg(r#"{"module":"mod.js"}"#, &["lib/mod.js"]));
    out.push(pkg(r#"{"exports":"./e.js"}"#, &["lib/e.js"]));
    out.push(pkg(
        r#"{"exports":{".":{"import":"./ei.js","require":"./er.cjs"}}}"#,
        &["lib/ei.js", "lib/er.cjs"],
    ));
    out.push(pkg(
        r#"{"main":"m.js","module":"mod.js","exports":"./e.js"}"#,
        &["lib/m.js", "lib/mod.js", "lib/e.js"],
    ));
    out.push(pkg(r#"{"type":"module"}"#, &[]));
    out.push(pkg("{ not json", &[]));
    // Case: Bun matches the last component without regard to case; directories do not.
    out.push(case(&["x.ts"], "./X.ts"));
    out.push(case(&["lib/h.ts"], "./LIB/h.ts"));
    // Queries, fragments, escapes, URLs and absolute paths (`@` is the case folder).
    out.push(case(&["a.js"], "./a.js?x=1"));
    out.push(case(&["a.ts"], "./a?x=1"));
    out.push(case(&["a.js"], "./a.js#h"));
    out.push(case(&["a b.js"], "./a%20b.js"));
    out.push(case(&["a b.js"], "./a b.js"));
    out.push(case(&["a.ts"], "file://@/a.ts"));
    out.push(case(&["a.ts"], "file://@/a"));
    out.push(case(&["a.js"], "@/a.js"));
    out.push(case(&["a.ts"], "@/a"));
    // Symlinks: imports resolve next to the real file (file links and folder links).
    out.push(
        case(
            &["plugins/helper.js", "elsewhere/real/helper.js"],
            "./helper",
        )
        .raw("elsewhere/real/p.mjs", PROBE)
        .link("plugins/p.mjs", "../elsewhere/real/p.mjs")
        .probe("plugins/p.mjs"),
    );
    out.push(
        case(&["elsewhere/real/helper.ts"], "./helper")
            .raw("elsewhere/real/p.mjs", PROBE)
            .link("plugins2", "elsewhere/real")
            .probe("plugins2/p.mjs"),
    );
    // The importer reached through a symlinked folder, and `..` out of it: taken from the real
    // folder, not from the link's (a file waits at each, so the two readings differ; with its
    // extension, so that Node's ESM loader, which adds none, finds it too).
    out.push(
        case(&["helper.js", "elsewhere/helper.js"], "../helper.js")
            .raw("elsewhere/real/p.mjs", PROBE)
            .link("plugins3", "elsewhere/real")
            .probe("plugins3/p.mjs"),
    );
    out.push(
        case(&["lib/h.ts", "elsewhere/lib/h.ts"], "../../lib/h.ts")
            .raw("elsewhere/deep/sub/p.mjs", PROBE)
            .link("linked", "elsewhere/deep")
            .probe("linked/sub/p.mjs"),
    );
    out
}

/// How many cases reach their importer through a symlinked folder and leave it with `..`.
const THROUGH_A_LINKED_FOLDER: usize = 2;

/// Writes each case into its own folder; returns (probe path, spec with `@` filled in).
fn lay_out(root: &Path, cases: &[Case]) -> Vec<(PathBuf, String)> {
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let dir = root.join(format!("c{i}"));
            let write = |rel: &str, text: &str| {
                let p = dir.join(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, text).unwrap();
            };
            for f in &c.files {
                if f.ends_with(".json") {
                    write(f, &format!("{{\"loaded\":\"{f}\"}}"));
                } else {
                    write(f, &format!("globalThis.__loaded = \"{f}\";\n"));
                }
            }
            for (p, text) in &c.raw {
                write(p, text);
            }
            for (link, target) in &c.links {
                let l = dir.join(link);
                std::fs::create_dir_all(l.parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(target, l).unwrap();
            }
            let probe = dir.join(&c.probe);
            if !probe.exists() {
                write(&c.probe, PROBE);
            }
            (probe, c.spec.replace('@', &dir.display().to_string()))
        })
        .collect()
}

/// What the real runtime loads for every case and kind, as markers ("none" for nothing).
fn observe(
    runtime: Runtime,
    laid: &[(PathBuf, String)],
    kind: ImportKind,
    scratch: &Path,
) -> Vec<String> {
    let list: Vec<serde_json::Value> = laid
        .iter()
        .map(|(probe, spec)| {
            serde_json::json!({ "probe": probe, "spec": spec, "kind": if kind == ImportKind::Import { "import" } else { "require" } })
        })
        .collect();
    let input = scratch.join(format!("cases-{runtime:?}-{kind:?}.json"));
    std::fs::write(&input, serde_json::to_vec(&list).unwrap()).unwrap();
    let mut cmd = match runtime {
        Runtime::Bun => {
            let mut c = Command::new(repo_root().join(".tools/bin/bun"));
            c.arg("--no-install");
            c
        }
        Runtime::Node => Command::new("node"),
    };
    let out = cmd
        .arg(repo_root().join("tests/cli/resolve-probe.mjs"))
        .arg(&input)
        .env_remove("NODE_PATH")
        .output()
        .expect("the runtime runs (scripts/setup installs Bun)");
    assert!(
        out.status.success(),
        "{runtime:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What Berth's rules say, as the same markers, for the importer at its real path (as the
/// scan hands it to them).
fn predict(runtime: Runtime, laid: &[(PathBuf, String)], kind: ImportKind) -> Vec<String> {
    predict_from(runtime, laid, kind, |probe| {
        std::fs::canonicalize(probe).unwrap()
    })
}

/// What Berth's rules say with the importer at `importer(probe)`.
fn predict_from(
    runtime: Runtime,
    laid: &[(PathBuf, String)],
    kind: ImportKind,
    importer: impl Fn(&Path) -> PathBuf,
) -> Vec<String> {
    laid.iter()
        .map(|(probe, spec)| {
            let importer = importer(probe);
            match resolve_local(runtime, &importer, spec, kind) {
                None => "none".to_string(),
                Some(file) => {
                    let text = std::fs::read_to_string(&file).unwrap_or_default();
                    serde_json::from_str::<serde_json::Value>(&text)
                        .ok()
                        .and_then(|v| v["loaded"].as_str().map(str::to_string))
                        .or_else(|| text.split('"').nth(1).map(str::to_string))
                        .unwrap_or_else(|| "?".into())
                }
            }
        })
        .collect()
}

/// The cases where `predicted` and `observed` differ, described.
fn differences(cases: &[Case], predicted: &[String], observed: &[String]) -> Vec<String> {
    cases
        .iter()
        .zip(predicted.iter().zip(observed))
        .filter(|(_, (p, o))| p != o)
        .map(|(c, (p, o))| {
            format!(
                "{} from {} with {:?}: Berth {p}, runtime {o}",
                c.spec, c.probe, c.files
            )
        })
        .collect()
}

#[test]
fn the_scan_resolves_every_local_import_as_real_bun_and_node_do() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    let laid = lay_out(dir.path(), &cases);
    let mut failures = Vec::new();
    for runtime in [Runtime::Bun, Runtime::Node] {
        for kind in [ImportKind::Import, ImportKind::Require] {
            let observed = observe(runtime, &laid, kind, dir.path());
            let predicted = predict(runtime, &laid, kind);
            for d in differences(&cases, &predicted, &observed) {
                failures.push(format!("{runtime:?} {kind:?}: {d}"));
            }
            if runtime == Runtime::Bun && kind == ImportKind::Import {
                // Negative control: Node's rules taken for Bun's must be caught.
                let wrong = predict(Runtime::Node, &laid, ImportKind::Require);
                assert!(
                    differences(&cases, &wrong, &observed).len() > 10,
                    "the comparison does not see a wrong rule set"
                );
            }
            // Negative control: the importer taken at its link's path is caught, in each case
            // that reaches it through a symlinked folder.
            let at_link = predict_from(runtime, &laid, kind, Path::to_path_buf);
            let seen = differences(&cases, &at_link, &observed);
            assert!(
                seen.len() >= THROUGH_A_LINKED_FOLDER,
                "{runtime:?} {kind:?}: a path through a link is not told from the real one: {seen:?}"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
