//! The test registry against real npm: what it serves installs like any registry's package, a
//! version published mid-test is seen at once, a hidden one cannot be installed, and the heavy
//! update brings its sixty dependencies. It checks the fixture only, not Berth.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::registry::Registry;

/// A private npm world: its own HOME (so its own cache and no user npmrc) and project folders.
struct Npm<'r> {
    root: tempfile::TempDir,
    registry: &'r Registry,
}

impl<'r> Npm<'r> {
    fn new(registry: &'r Registry) -> Npm<'r> {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        Npm { root, registry }
    }

    /// A fresh project folder with a package.json, so npm does not look above it for one.
    fn project(&self, name: &str) -> PathBuf {
        let dir = self.root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("package.json"),
            serde_json::json!({ "name": name, "version": "0.0.0", "private": true }).to_string(),
        )
        .unwrap();
        dir
    }

    /// `npm ARGS` in `dir` against the test registry, nothing of this machine's npm set-up.
    fn run(&self, dir: &Path, args: &[&str]) -> Output {
        let mut c = Command::new("npm");
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            let lower = k.to_ascii_lowercase();
            if lower.starts_with("npm_config_") || lower.ends_with("_proxy") {
                c.env_remove(&k);
            }
        }
        c.args(args)
            .current_dir(dir)
            .env("HOME", self.root.path().join("home"))
            .env("npm_config_registry", self.registry.url())
            // Otherwise npm asks the registry about itself (`GET /npm`) in the background.
            .env("npm_config_update_notifier", "false")
            .output()
            .expect("npm runs")
    }

    fn install(&self, dir: &Path, spec: &str) -> Output {
        self.run(
            dir,
            &[
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                spec,
            ],
        )
    }
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn installed_version(dir: &Path, name: &str) -> String {
    read_json(&dir.join("node_modules").join(name).join("package.json"))["version"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Imports the installed plugin with node and runs its tool `tool`: what the tool returned.
fn run_tool(dir: &Path, name: &str, tool: &str) -> String {
    let script = format!(
        "const p = (await import({name:?})).default\n\
         const hooks = await p.server({{ directory: process.cwd() }}, {{}})\n\
         process.stdout.write(await hooks.tool[{tool:?}].execute({{}}, {{}}))"
    );
    let out = Command::new("node")
        .args(["--input-type=module", "-e", &script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert_ok(&out, &format!("{name}'s tool {tool}"));
    String::from_utf8(out.stdout).unwrap()
}

fn count(requests: &serde_json::Value, path: &str) -> u64 {
    requests[path].as_u64().unwrap_or(0)
}

#[test]
fn npm_installs_a_visible_version_with_the_integrity_the_packument_states() {
    let registry = Registry::start(&["berth-update-probe@1.0.0"]);
    let doc = registry.packument("berth-update-probe");
    assert_eq!(doc["dist-tags"]["latest"], "1.0.0");
    assert_eq!(
        doc["versions"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["1.0.0"],
        "only the visible version is in the packument"
    );
    let dist = &doc["versions"]["1.0.0"]["dist"];
    let integrity = dist["integrity"].as_str().unwrap();
    assert!(integrity.starts_with("sha512-"), "{dist}");
    assert_eq!(
        dist["tarball"],
        format!(
            "{}berth-update-probe/-/berth-update-probe-1.0.0.tgz",
            registry.url()
        )
    );
    assert!(doc["time"]["1.0.0"].is_string() && doc["time"]["created"].is_string());

    // Tarballs are built the same way every start: another registry states the same integrity.
    let again = Registry::start(&["berth-update-probe@1.0.0"]);
    assert_eq!(
        again.packument("berth-update-probe")["versions"]["1.0.0"]["dist"]["integrity"],
        integrity
    );
    drop(again);

    registry.reset_requests();
    let npm = Npm::new(&registry);
    let dir = npm.project("consumer");
    assert_ok(
        &npm.install(&dir, "berth-update-probe@^1.0.0"),
        "npm install",
    );
    assert_eq!(installed_version(&dir, "berth-update-probe"), "1.0.0");
    let lock = read_json(&dir.join("package-lock.json"));
    let locked = &lock["packages"]["node_modules/berth-update-probe"];
    assert_eq!(locked["integrity"], integrity, "{lock}");
    assert_eq!(locked["resolved"], dist["tarball"]);
    assert_eq!(
        std::fs::read(dir.join("node_modules/berth-update-probe/index.js")).unwrap(),
        std::fs::read(
            crate::support::repo_root().join("fixtures/registry/berth-update-probe/1.0.0/index.js")
        )
        .unwrap(),
        "the fixture's bytes arrive unchanged"
    );
    assert_eq!(
        run_tool(&dir, "berth-update-probe", "probe_version"),
        "berth-update-probe 1.0.0"
    );

    // One packument, one tarball, nothing else asked of the registry.
    let requests = registry.requests();
    assert_eq!(
        requests,
        serde_json::json!({
            "/berth-update-probe": 1,
            "/berth-update-probe/-/berth-update-probe-1.0.0.tgz": 1,
        })
    );
}

#[test]
fn a_published_version_is_seen_at_once_and_a_hidden_one_is_not_installable() {
    let registry = Registry::start(&["berth-update-probe@1.0.0"]);
    let npm = Npm::new(&registry);
    let first = npm.project("first");
    assert_ok(
        &npm.install(&first, "berth-update-probe@^1.0.0"),
        "npm install",
    );
    assert_eq!(installed_version(&first, "berth-update-probe"), "1.0.0");

    let tarball_110 = "/berth-update-probe/-/berth-update-probe-1.1.0.tgz";
    assert_eq!(registry.get(tarball_110).0, 404, "not yet published");
    registry.publish("berth-update-probe@1.1.0");
    assert_eq!(registry.get(tarball_110).0, 200);
    registry.reset_requests();

    // The same npm cache holds the old packument; no-cache makes npm ask again.
    let out = npm.run(&first, &["view", "berth-update-probe", "version", "--json"]);
    assert_ok(&out, "npm view");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown, "1.1.0");
    let second = npm.project("second");
    assert_ok(
        &npm.install(&second, "berth-update-probe@^1.0.0"),
        "npm install",
    );
    assert_eq!(installed_version(&second, "berth-update-probe"), "1.1.0");
    assert_eq!(
        run_tool(&second, "berth-update-probe", "probe_version"),
        "berth-update-probe 1.1.0"
    );
    let requests = registry.requests();
    assert_eq!(
        count(&requests, "/berth-update-probe"),
        2,
        "one packument fetch each for view and install: {requests}"
    );

    // 2.0.0 is a fixture but not published: npm finds no such version, its tarball is 404.
    let third = npm.project("third");
    let out = npm.install(&third, "berth-update-probe@2.0.0");
    assert!(!out.status.success(), "a hidden version installed");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ETARGET"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        registry
            .get("/berth-update-probe/-/berth-update-probe-2.0.0.tgz")
            .0,
        404
    );
    assert!(!third.join("node_modules/berth-update-probe").exists());

    // Published with a chosen time, 2.0.0 is latest; unpublished again, 1.1.0 is.
    registry.publish_at("berth-update-probe@2.0.0", "2030-01-02T03:04:05Z");
    let doc = registry.packument("berth-update-probe");
    assert_eq!(doc["dist-tags"]["latest"], "2.0.0");
    assert_eq!(doc["time"]["2.0.0"], "2030-01-02T03:04:05.000Z");
    assert_ok(
        &npm.install(&third, "berth-update-probe@2.0.0"),
        "npm install",
    );
    assert_eq!(
        run_tool(&third, "berth-update-probe", "probe_extra"),
        "berth-update-probe 2.0.0 extra"
    );
    registry.unpublish("berth-update-probe@2.0.0");
    let doc = registry.packument("berth-update-probe");
    assert_eq!(doc["dist-tags"]["latest"], "1.1.0");
    assert!(doc["versions"].get("2.0.0").is_none());
}

#[test]
fn the_heavy_update_installs_with_its_sixty_synthetic_dependencies() {
    let registry = Registry::start(&["berth-update-heavy@1.0.0"]);
    registry.publish("berth-update-heavy@2.0.0");
    let npm = Npm::new(&registry);
    let dir = npm.project("heavy");
    assert_ok(
        &npm.install(&dir, "berth-update-heavy@2.0.0"),
        "npm install",
    );
    assert_eq!(installed_version(&dir, "berth-update-heavy"), "2.0.0");
    let synth = std::fs::read_dir(dir.join("node_modules"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("berth-synth-dep-")
        })
        .count();
    assert_eq!(synth, 60);
    assert_eq!(
        run_tool(&dir, "berth-update-heavy", "heavy_version"),
        "berth-update-heavy 2.0.0 (60 of 60 dependencies load)"
    );

    // Every package's packument and tarball exactly once: 61 of each.
    let requests = registry.requests();
    let paths = requests.as_object().unwrap();
    assert_eq!(paths.len(), 122, "{requests}");
    assert!(paths.values().all(|n| n == 1), "{requests}");
    assert_eq!(count(&requests, "/berth-synth-dep-042"), 1);
    assert_eq!(
        count(
            &requests,
            "/berth-synth-dep-042/-/berth-synth-dep-042-1.0.0.tgz"
        ),
        1
    );
}
