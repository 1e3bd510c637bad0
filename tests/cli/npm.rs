//! npm plugins: prepared in the data dir with npm and install scripts off, described from the
//! bytes npm fetched, judged again on them, entry and `engines.opencode` rules as OpenCode.

use crate::support::*;

fn npm_sandbox(packages: &[&str], extra_specs: &[&str]) -> Sandbox {
    let s = Sandbox::new();
    let mut specs: Vec<String> = Vec::new();
    for p in packages {
        let dir = repo_root().join("fixtures/packages").join(p);
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            s.copy_fixture(
                &format!("packages/{p}/{name}"),
                &format!("project/vendor/{p}/{name}"),
            );
        }
        specs.push(format!("file:./vendor/{p}"));
    }
    specs.extend(extra_specs.iter().map(|x| x.to_string()));
    s.write(
        "project/opencode.json",
        &serde_json::json!({ "plugin": specs }).to_string(),
    );
    s
}

fn run(s: &Sandbox, args: &[&str]) -> (i32, serde_json::Value) {
    let mut cmd = s.berth(args);
    cmd.arg("--json")
        .env("BERTH_TEST_MARKER", s.root.path().join("MARKER"));
    parse_json_output(&cmd.output().unwrap())
}

#[test]
fn install_scripts_never_run_and_the_package_is_judged_on_its_bytes() {
    let s = npm_sandbox(&["postinstall-marker"], &[]);
    let (_, v) = run(&s, &["sources"]);
    let src = source_by_spec(&v, "postinstall-marker");
    assert_eq!(
        src["capabilities"]["contents_unknown"], true,
        "nothing is downloaded before approval"
    );
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    let (code, _) = run(&s, &["tools"]);
    assert_eq!(code, 0);
    assert!(
        !s.root.path().join("MARKER").exists(),
        "an install script ran"
    );
    assert!(
        s.data_dir().join("packages").is_dir(),
        "prepared in the data dir"
    );
    assert!(
        !s.project().join("node_modules").exists()
            && !s.project().join("package-lock.json").exists(),
        "nothing written into the project"
    );
    let (_, v) = run(&s, &["sources"]);
    assert_schema("sources", &v);
    let src = source_by_spec(&v, "postinstall-marker");
    assert_eq!(src["capabilities"]["contents_unknown"], false);
    assert_eq!(
        src["capabilities"]["install_scripts"],
        serde_json::json!(["postinstall", "preinstall"])
    );
    assert_eq!(src["capabilities"]["engines_opencode"], ">=1.0.0 <2");
    assert_eq!(
        src["state"], "pending-approval",
        "what the bytes can do is shown before they run"
    );
    assert!(src["approval"]["grew"]
        .to_string()
        .contains("install scripts"));
    // Approve what the package really is, then what it contributes: its hook runs.
    approve_and_load(|a| run(&s, a));
    let (code, v) = run_hook(|a| run(&s, a), "chat.params", "{}", r#"{"options":{}}"#);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["output"]["options"]["fromPackage"], true);
    assert!(!s.root.path().join("MARKER").exists());
}

#[test]
fn engines_and_entry_rules_follow_opencode() {
    let s = npm_sandbox(&["needs-newer-opencode", "exports-without-server"], &[]);
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    run(&s, &["tools"]);
    let (_, v) = run(&s, &["sources"]);
    assert_schema("sources", &v);
    let newer = source_by_spec(&v, "needs-newer-opencode");
    assert_eq!(newer["state"], "incompatible-version");
    assert!(newer["diagnostics"]
        .to_string()
        .contains("Plugin requires opencode >=2.0.0 but running 1.18.4"));
    let tui = source_by_spec(&v, "exports-without-server");
    assert_eq!(tui["state"], "unsupported");
    assert!(tui["diagnostics"].to_string().contains("no server entry"));
}

#[test]
fn a_real_plugin_from_npm_is_prepared_judged_and_loaded() {
    let s = npm_sandbox(&[], &["opencode-wakatime@1.3.9"]);
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    run(&s, &["tools"]);
    let (_, v) = run(&s, &["sources"]);
    let src = source_by_spec(&v, "opencode-wakatime");
    assert_eq!(src["state"], "pending-approval");
    let grew = src["approval"]["grew"].to_string();
    assert!(
        grew.contains("node:child_process") && grew.contains("process.env"),
        "{grew}"
    );
    approve_and_load(|a| run(&s, a));
    let (_, v) = run(&s, &["sources"]);
    let src = source_by_spec(&v, "opencode-wakatime");
    assert_eq!(src["approval"]["grew"], serde_json::json!([]), "{src}");
    // The execution version: what the request resolved to, with npm's integrity.
    let resolved = &src["npm"]["resolved"];
    assert_eq!(resolved["version"], "1.3.9", "{src}");
    assert!(resolved["integrity"]
        .as_str()
        .is_some_and(|i| i.starts_with("sha512-")));
    assert!(resolved["packages"].as_u64().unwrap() >= 1);
    // Legacy module: `chat.message` and `event` are among what it registers.
    let (code, v) = run_hook(
        |a| run(&s, a),
        "chat.message",
        r#"{"sessionID":"s"}"#,
        r#"{"message":{},"parts":[]}"#,
    );
    assert_eq!(code, 0, "{v}");
}

#[test]
fn negative_control_npm_with_scripts_on_does_run_the_fixtures_install_script() {
    // Proves the fixture above would have written its marker had scripts been on.
    let s = npm_sandbox(&["postinstall-marker"], &[]);
    let slot = s.root.path().join("slot");
    std::fs::create_dir_all(&slot).unwrap();
    std::fs::write(
        slot.join("package.json"),
        r#"{"name":"slot","private":true}"#,
    )
    .unwrap();
    let marker = s.root.path().join("MARKER");
    let ok = std::process::Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--",
        ])
        .arg(format!(
            "file:{}",
            s.project().join("vendor/postinstall-marker").display()
        ))
        .current_dir(&slot)
        .env("BERTH_TEST_MARKER", &marker)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    assert!(std::fs::read_to_string(&marker)
        .unwrap()
        .contains("install ran"));
}

/// A config folder's own package.json dependencies are prepared in Berth's data dir (from its
/// lockfile, scripts off) and resolved for that folder's tools, on Bun and on Node; the
/// user's folder gets no node_modules (D-001).
#[test]
fn a_config_folders_own_dependencies_are_prepared_in_the_data_dir_for_both_backends() {
    for node in [false, true] {
        let s = Sandbox::new();
        for rel in ["package.json", "package-lock.json", "tools/parity.ts"] {
            s.copy_fixture(
                &format!("config-deps/project/.opencode/{rel}"),
                &format!("project/.opencode/{rel}"),
            );
        }
        let run_b = |args: &[&str]| {
            let mut cmd = s.berth(args);
            cmd.arg("--json");
            if node {
                cmd.env("BERTH_BUN", "/nonexistent");
            }
            parse_json_output(&cmd.output().unwrap())
        };
        approve_and_load(run_b);
        let (code, r) = run_b(&["invoke", "parity", "--args", r#"{"n":3}"#]);
        assert_eq!(
            (code, r["output"].as_str()),
            (0, Some("odd")),
            "node={node}: {r}"
        );
        let (_, r) = run_b(&["invoke", "parity", "--args", r#"{"n":4}"#]);
        assert_eq!(r["output"], "even");
        assert!(
            !s.project().join(".opencode/node_modules").exists(),
            "Berth wrote into the user's folder"
        );
        // The lockfile was honoured: the version it pins, not whatever ^6 resolves to today.
        let prepared = std::fs::read_dir(s.data_dir().join("config-deps"))
            .unwrap()
            .flatten()
            .find(|e| e.path().join("node_modules").is_dir())
            .expect("prepared in the data dir")
            .path();
        let is_number: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(prepared.join("node_modules/is-number/package.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(is_number["version"], "6.0.0");
    }
}

/// Bun's auto-install would fetch an unprepared import at load time, behind the approval and
/// without a lockfile. Berth's Bun host runs with it off: the file fails alone, nothing is
/// downloaded.
#[test]
fn an_unprepared_import_is_never_downloaded_at_load_time() {
    let s = Sandbox::new();
    s.copy_fixture(
        "tools/imports-unprepared-package.ts",
        "project/.opencode/tools/imports-unprepared-package.ts",
    );
    approve_and_load(|a| run(&s, a));
    let (code, v) = run(&s, &["tools"]);
    assert_eq!(code, 0, "{v}");
    let problem = v["problems"][0].to_string();
    assert!(problem.contains("is-odd"), "{v}");
    assert!(v["tools"].as_array().unwrap().is_empty());
    // Nothing of it reached a package cache anywhere in this machine's scratch home.
    let mut stack = vec![s.root.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            assert!(
                !e.file_name().to_string_lossy().starts_with("is-odd"),
                "downloaded: {}",
                e.path().display()
            );
            if e.path().is_dir() && !e.path().is_symlink() {
                stack.push(e.path());
            }
        }
    }
}

#[test]
fn an_npm_older_than_10_is_refused_with_the_way_out() {
    let s = npm_sandbox(&["postinstall-marker"], &[]);
    // A real npm 9, installed for this test only.
    let old = s.root.path().join("old-npm");
    let ok = std::process::Command::new("npm")
        .args(["install", "--prefix"])
        .arg(&old)
        .args([
            "npm@9.9.4",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ])
        .status()
        .unwrap();
    assert!(ok.success(), "npm 9 could not be installed for the test");
    let npm9 = old.join("node_modules/.bin/npm");
    let marker = s.root.path().join("MARKER");
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    // Where Berth prepares this source: `<packages>/<name@request>/node_modules/<package>`.
    let (_, v) = run(&s, &["sources"]);
    let npm = &source_by_spec(&v, "postinstall-marker")["npm"];
    let (name, request) = (
        npm["name"].as_str().unwrap(),
        npm["request"].as_str().unwrap(),
    );
    let packages = s.data_dir().join("packages");
    let prepared = berth_discovery::npm_install_dir(&packages, name, request)
        .join("node_modules/berth-fixture-postinstall-marker/package.json");
    let mut cmd = s.berth(&["tools", "--json"]);
    cmd.env("BERTH_NPM", &npm9)
        .env("BERTH_TEST_MARKER", &marker);
    let (_, v) = parse_json_output(&cmd.output().unwrap());
    let problem = v["problems"].to_string();
    assert!(
        problem.contains("dependency-failed")
            && problem.contains("\\\"9.9.4\\\"")
            && problem.contains("scripts/setup"),
        "{v}"
    );
    // Refused before anything was installed: no package was prepared, no install script ran.
    assert!(!prepared.exists(), "npm 9 prepared {}", prepared.display());
    assert!(!marker.exists(), "an install script ran under npm 9");
    // Positive control: with the machine's npm the same source is prepared at that very path
    // (so the check above looks where a prepared package would be), scripts still off.
    let (code, v) = run(&s, &["tools"]);
    assert_eq!(code, 0, "{v}");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&prepared)
            .unwrap_or_else(|e| panic!("not prepared at {}: {e}: {v}", prepared.display())),
    )
    .unwrap();
    assert_eq!(manifest["name"], "berth-fixture-postinstall-marker");
    assert!(!marker.exists(), "an install script ran");
}

/// A prepared install loads natively, so before every load it is checked against the file list
/// made when Berth prepared it: code added to the package after approval — in a file the scan
/// cannot follow (a computed import) — never runs, and the plugin says which file changed.
#[test]
fn a_prepared_package_changed_after_approval_never_runs() {
    let s = Sandbox::new();
    let vendor = s.project().join("vendor");
    std::fs::create_dir_all(&vendor).unwrap();
    // A tarball, so npm copies the files into the install (a folder would be linked).
    let packed = std::process::Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(&vendor)
        .current_dir(repo_root().join("fixtures/packages/computed-helper"))
        .output()
        .unwrap();
    assert!(packed.status.success(), "{packed:?}");
    s.write(
        "project/opencode.json",
        r#"{ "plugin": ["file:./vendor/berth-fixture-computed-helper-1.0.0.tgz"] }"#,
    );
    // Prepared on the first approval; the bytes, then what they contribute, on the next ones.
    assert_eq!(run(&s, &["approve", "--all"]).0, 0);
    run(&s, &["tools"]);
    approve_and_load(|a| run(&s, a));
    let hook = || run_hook(|a| run(&s, a), "chat.params", "{}", r#"{"options":{}}"#);
    let (code, v) = hook();
    assert_eq!(
        (code, &v["output"]["options"]["fromHelper"]),
        (0, &serde_json::json!(true)),
        "{v}"
    );
    let helper = std::fs::read_dir(s.data_dir().join("packages"))
        .unwrap()
        .flatten()
        .map(|e| {
            e.path()
                .join("node_modules/berth-fixture-computed-helper/helper.js")
        })
        .find(|p| p.is_file())
        .expect("the prepared package");
    let mut text = std::fs::read_to_string(&helper).unwrap();
    text.push_str("import { writeFileSync as __w } from 'node:fs'\n__w(process.env.BERTH_TEST_MARKER, 'tampered')\n");
    std::fs::write(&helper, &text).unwrap();
    let marker = s.root.path().join("MARKER");
    for _ in 0..2 {
        let (_, v) = hook();
        assert_ne!(v["output"]["options"]["fromHelper"], true, "{v}");
        let (_, t) = run(&s, &["tools"]);
        assert!(
            t.to_string()
                .contains("helper.js changed since Berth prepared it"),
            "{t}"
        );
        assert!(!marker.exists(), "code added after approval ran");
    }
    // Negative control: the added code does write the marker when it runs.
    let ok = std::process::Command::new("node")
        .arg(&helper)
        .env("BERTH_TEST_MARKER", &marker)
        .status()
        .unwrap()
        .success();
    assert!(ok && marker.exists());
}

/// A fetch that fails stays on the source in a running Berth: `load-failed` with npm's message
/// and a way out, not `approved` with the reason only in the log.
#[test]
fn a_failed_fetch_is_shown_on_the_source_until_it_works() {
    let s = npm_sandbox(&[], &["opencode-wakatime@1.3.9"]);
    // A registry nobody listens on.
    let registry = std::path::PathBuf::from("http://127.0.0.1:9/");
    let no_retries = std::path::PathBuf::from("0");
    let srv = crate::serve::start_with(
        &s,
        "127.0.0.1:0",
        &[
            ("npm_config_registry", registry.as_path()),
            ("npm_config_fetch_retries", no_retries.as_path()),
        ],
    )
    .unwrap();
    let (code, v) = run(&s, &["approve", "--all", "--including-fetch"]);
    assert_eq!(code, 0, "{v}");
    let v = crate::serve::wait_for(&srv, "the failed fetch on the source", |v| {
        source_by_spec(v, "opencode-wakatime")["state"] == "load-failed"
    });
    let src = source_by_spec(&v, "opencode-wakatime");
    let diag = src["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "dependency-failed")
        .unwrap_or_else(|| panic!("no dependency-failed diagnostic: {src}"));
    assert!(diag["message"].as_str().unwrap().contains("npm"), "{diag}");
    assert!(!diag["recovery"].as_str().unwrap().is_empty());
    assert_schema("status", &v);
}
