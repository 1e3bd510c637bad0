//! OpenCode V2 plugins from npm get the same lifecycle as V1 ones (#20, D-044), against a real
//! npm and the test registry: nothing of them runs before the person approves; they are
//! prepared with install scripts off, and the packages OpenCode 2 provides at runtime
//! (`@opencode/plugin`, named as a peer as the V2 docs ask, and `effect`) are Berth's own,
//! linked into the install — never fetched, one copy per host; updated, held when they grow,
//! rolled back byte for byte; and what they keep in `ctx.storage` outlives all of it.

use crate::support::registry::Registry;
use crate::support::*;

struct Setup {
    s: Sandbox,
    reg: Registry,
    marker: std::path::PathBuf,
}

impl Setup {
    fn run_on(&self, args: &[&str], node: bool) -> (i32, serde_json::Value) {
        let mut cmd = self.s.berth(args);
        cmd.arg("--json")
            .env("npm_config_registry", self.reg.url())
            .env("npm_config_update_notifier", "false")
            .env("BERTH_TEST_IMPORT_MARKER", &self.marker);
        if node {
            cmd.env("BERTH_BUN", "/nonexistent");
        }
        parse_json_output(&cmd.output().unwrap())
    }

    fn run(&self, args: &[&str]) -> (i32, serde_json::Value) {
        self.run_on(args, false)
    }

    fn call(&self, tool: &str, node: bool) -> String {
        let (code, v) = self.run_on(&["invoke", tool], node);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["status"], "completed", "{v}");
        v["output"].as_str().unwrap().to_string()
    }

    fn source(&self, package: &str) -> serde_json::Value {
        source_by_spec(&self.run(&["status"]).1, package).clone()
    }

    fn imports(&self) -> String {
        std::fs::read_to_string(&self.marker).unwrap_or_default()
    }
}

#[test]
fn an_opencode_2_plugin_from_npm_is_approved_prepared_updated_and_rolled_back_like_a_v1_one() {
    let s = Sandbox::new();
    let reg = Registry::start(&["berth-update-v2@1.0.0", "berth-effect-v2@1.0.0"]);
    // A local package too (npm installs it from its folder), named to sort after the links
    // Berth adds to its install.
    s.write(
        "home/.config/opencode/vendor/local-v2/package.json",
        r#"{ "name": "zz-local-v2", "version": "0.1.0", "type": "module", "main": "index.js", "peerDependencies": { "@opencode/plugin": "^2.0.0" } }"#,
    );
    s.write(
        "home/.config/opencode/vendor/local-v2/index.js",
        r#"import { Plugin } from "@opencode/plugin"
export default Plugin.define({ id: "example.local-v2", setup: (ctx) => ctx.tool.transform((tools) => tools.add({ name: "hello", description: "A local package's tool", input: { type: "object", properties: {} }, options: { namespace: "v2loc", codemode: false }, execute: async () => ({ content: "hello from a local V2 package" }) })) })
"#,
    );
    s.write(
        "home/.config/opencode/opencode.json",
        &serde_json::json!({ "plugins": [
            { "package": "berth-update-v2@latest" },
            { "package": "berth-effect-v2@1.0.0" },
            { "package": "file:./vendor/local-v2" },
        ] })
        .to_string(),
    );
    let marker = s.root.path().join("imports.txt");
    let t = Setup { s, reg, marker };
    let id = t.source("berth-update-v2")["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Nothing runs, nothing is fetched, before the person says so.
    let (_, tools) = t.run(&["tools"]);
    assert!(
        !tools["tools"].to_string().contains("v2up_"),
        "a tool before approval: {tools}"
    );
    assert_eq!(t.imports(), "", "imported before approval");
    assert_eq!(
        t.reg.requests(),
        serde_json::json!({}),
        "fetched before approval"
    );

    let (code, v) = t.run(&["approve", "--all", "--including-fetch"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        t.call("v2up_version", false),
        "berth-update-v2 1.0.0 (call 1)"
    );
    let src = t.source("berth-update-v2");
    assert_eq!(src["capabilities"]["generation"], "v2", "{src}");
    assert_eq!(src["capabilities"]["plugin_id"], "example.update-v2");
    // `@opencode/plugin` (the package's peer) was never asked of the registry: Berth's own is
    // linked in; nor was `effect`.
    let asked = t.reg.requests().to_string();
    assert!(
        !asked.contains("opencode") && !asked.contains("effect\""),
        "{asked}"
    );
    assert_eq!(
        t.call("v2loc_hello", false),
        "hello from a local V2 package"
    );
    // The Effect-flavoured package's own `import "effect"` is Berth's one copy (the host's
    // dependencies in the data dir), and its Effect runs.
    let where_ = t.call("v2fx_where", false);
    let host_effect =
        std::fs::canonicalize(t.s.data_dir().join("deps/host/node_modules/effect")).unwrap();
    assert!(
        where_.starts_with(host_effect.to_str().unwrap()),
        "{where_} is not under {}",
        host_effect.display()
    );

    // An update within the spec: the new bytes run, and the plugin's storage carries on.
    t.reg.publish("berth-update-v2@1.1.0");
    let (code, v) = t.run(&["update", &id]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["update"],
        serde_json::json!({ "outcome": "updated", "from": "1.0.0", "to": "1.1.0" })
    );
    assert_eq!(
        t.call("v2up_version", false),
        "berth-update-v2 1.1.0 (call 2)"
    );
    let good = t.source("berth-update-v2")["digest"]
        .as_str()
        .unwrap()
        .to_string();

    // 2.0.0 adds a tool: it is not registered, nor imported, before the person allows it.
    t.reg.publish("berth-update-v2@2.0.0");
    crate::updates::update_held_until_allowed(&|a| t.run(a), &id, "v2up_extra", |before_import| {
        if before_import {
            assert!(!t.imports().contains("2.0.0"), "{}", t.imports());
        }
    });
    assert_eq!(t.call("v2up_extra", false), "berth-update-v2 2.0.0 extra");
    assert_eq!(
        t.call("v2up_version", false),
        "berth-update-v2 2.0.0 (call 3)"
    );

    // A rollback runs the exact bytes of 1.1.0 again, with the same storage.
    let (code, v) = t.run(&["rollback", &id]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["update"],
        serde_json::json!({ "outcome": "rolled-back", "from": "2.0.0", "to": "1.1.0" })
    );
    assert_eq!(t.source("berth-update-v2")["digest"], good.as_str());
    assert_eq!(
        t.call("v2up_version", false),
        "berth-update-v2 1.1.0 (call 4)"
    );

    // On Node (a backend is part of what was approved: asked again), the same.
    assert_eq!(t.run_on(&["approve", "--all"], true).0, 0);
    assert_eq!(
        t.call("v2up_version", true),
        "berth-update-v2 1.1.0 (call 5)"
    );
    assert!(t
        .call("v2fx_where", true)
        .starts_with(host_effect.to_str().unwrap()));
}

/// An attacker with the person's rights swaps the link to Berth's `@opencode/plugin` in a
/// prepared install. A link to a module of their own, outside Berth's folders, passes the
/// install check (a link is not a listed file), but the host's gate refuses the module: it
/// never runs. A link into another of Berth's own folders (the host's dependencies, which load
/// unchecked, unlike the one package folder Berth provides there) is refused before anything
/// of the plugin loads.
#[test]
fn a_swapped_link_to_berths_plugin_module_in_an_install_runs_nothing() {
    let s = Sandbox::new();
    let reg = Registry::start(&["berth-update-v2@1.0.0"]);
    s.write(
        "home/.config/opencode/opencode.json",
        &serde_json::json!({ "plugins": [{ "package": "berth-update-v2@1.0.0" }] }).to_string(),
    );
    let marker = s.root.path().join("imports.txt");
    let t = Setup { s, reg, marker };
    assert_eq!(t.run(&["approve", "--all", "--including-fetch"]).0, 0);
    assert_eq!(
        t.call("v2up_version", false),
        "berth-update-v2 1.0.0 (call 1)"
    );

    let slot = std::fs::read_dir(t.s.data_dir().join("packages"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("node_modules/berth-update-v2").is_dir())
        .expect("the prepared install");
    let link = slot.join("node_modules/@opencode/plugin");
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    let evil_ran = t.s.root.path().join("evil-ran.txt");
    let evil = t.s.write(
        "evil/plugin/index.mjs",
        &format!(
            "import {{ appendFileSync }} from \"node:fs\"\nappendFileSync({:?}, \"evil ran\\n\")\nexport const Plugin = {{ define: (p) => p }}\nexport const Tool = {{}}\n",
            evil_ran.to_str().unwrap()
        ),
    );
    t.s.write(
        "evil/plugin/package.json",
        r#"{ "name": "@opencode/plugin", "type": "module", "exports": { ".": "./index.mjs" } }"#,
    );
    let refused = |target: &std::path::Path, why: &str| {
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(target, &link).unwrap();
        for node in [false, true] {
            if node {
                assert_eq!(t.run_on(&["approve", "--all"], true).0, 0);
            }
            let (_, tools) = t.run_on(&["tools"], node);
            assert!(
                !tools["tools"].to_string().contains("v2up_version"),
                "the plugin loaded through a swapped link: {tools}"
            );
            assert!(
                tools["problems"].to_string().contains(why),
                "{why} in {tools}"
            );
            assert!(!evil_ran.exists(), "the attacker's module ran");
        }
    };
    refused(evil.parent().unwrap(), "is not part of what was approved");
    let other_host_dep = t.s.data_dir().join("deps/host/node_modules/zod");
    assert!(other_host_dep.is_dir());
    refused(&other_host_dep, "leads out of what Berth prepared");
}
