use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::*;

fn user(pairs: &[(&str, Value)]) -> BTreeMap<String, berth_store::PolicySetting> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                berth_store::PolicySetting {
                    value: v.clone(),
                    set_by: "test".into(),
                    set_at_ms: 0,
                },
            )
        })
        .collect()
}

fn org(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("managed.json");
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn an_organisation_cap_overrules_a_user_setting_that_loosens_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = org(
        dir.path(),
        r#"{"cap.model-request": "review", "budget.tool": 20000}"#,
    );
    let u = user(&[
        ("cap.model-request", json!("allow")),
        ("cap.ui", json!("deny")),
        ("budget.tool", json!(5000)),
    ]);
    let eff = resolve(&path, organisation_layer(&path), &u, BTreeSet::new());
    let e = eff.entry("cap.model-request").unwrap();
    assert_eq!(
        (e.value.clone(), e.layer, e.changeable),
        (
            json!("review"),
            Layer::Organisation,
            Changeable::StricterOnly
        )
    );
    assert!(e.overruled.as_deref().unwrap().contains("loosen"), "{e:?}");
    // Tightening below the organisation is the person's right.
    let b = eff.entry("budget.tool").unwrap();
    assert_eq!((b.value.clone(), b.layer), (json!(5000), Layer::User));
    let ui = eff.entry("cap.ui").unwrap();
    assert_eq!((ui.value.clone(), ui.layer), (json!("deny"), Layer::User));
    let d = eff.entry("cap.config").unwrap();
    assert_eq!((d.value.clone(), d.layer), (json!("allow"), Layer::Product));
}

#[test]
fn an_unreadable_organisation_value_is_taken_as_strict() {
    let dir = tempfile::tempdir().unwrap();
    let path = org(
        dir.path(),
        r#"{"cap.shell-env": "sometimes", "mode": "on", "nonsense": 1}"#,
    );
    let eff = resolve(
        &path,
        organisation_layer(&path),
        &BTreeMap::new(),
        BTreeSet::new(),
    );
    assert_eq!(eff.value("cap.shell-env"), json!("deny"));
    assert_eq!(eff.value("mode"), json!("restricted"));
    assert_eq!(eff.problems.len(), 3, "{:?}", eff.problems);
    let broken = org(dir.path(), "{ not json");
    let eff = resolve(
        &broken,
        organisation_layer(&broken),
        &BTreeMap::new(),
        BTreeSet::new(),
    );
    assert_eq!(eff.value("cap.config"), json!("review"));
    assert_eq!(eff.value("cap.shell-env"), json!("review"));
}

#[test]
fn drop_ins_join_lists_and_later_files_win() {
    let dir = tempfile::tempdir().unwrap();
    let path = org(
        dir.path(),
        r#"{"tools.protected": ["bash"], "cap.ui": "review"}"#,
    );
    std::fs::create_dir(dir.path().join("managed.d")).unwrap();
    std::fs::write(
        dir.path().join("managed.d/10.json"),
        r#"{"tools.protected": ["edit"], "cap.ui": "deny"}"#,
    )
    .unwrap();
    let eff = resolve(
        &path,
        organisation_layer(&path),
        &BTreeMap::new(),
        BTreeSet::new(),
    );
    assert_eq!(
        eff.protected_tools(),
        vec![
            "invalid".to_string(),
            "bash".to_string(),
            "edit".to_string()
        ],
        "Berth's own list, then the organisation's"
    );
    assert_eq!(eff.value("cap.ui"), json!("deny"));
}

#[test]
fn a_review_cap_holds_a_contribution_until_granted_and_protected_tools_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = org(dir.path(), r#"{"tools.protected": ["deploy"]}"#);
    let u = user(&[("cap.model-request", json!("review"))]);
    let tools = vec![
        "mine".to_string(),
        "webfetch".to_string(),
        "deploy".to_string(),
        "invalid".to_string(),
    ];
    let hooks = vec![
        "chat.params".to_string(),
        "event".to_string(),
        "shell.env".to_string(),
    ];
    let eff = resolve(&path, organisation_layer(&path), &u, BTreeSet::new());
    let j = eff.judge("p", &tools, &hooks);
    assert_eq!(j.tools, vec!["mine".to_string()]);
    assert_eq!(j.hooks, vec!["event".to_string()]);
    let held: Vec<(&str, &str)> = j
        .limited
        .iter()
        .map(|l| (l.item.as_str(), l.cap.as_str()))
        .collect();
    assert_eq!(
        held,
        vec![
            ("tool:webfetch", "review"),
            ("tool:deploy", "deny"),
            ("tool:invalid", "deny"),
            ("hook:chat.params", "review"),
            ("hook:shell.env", "review")
        ]
    );
    let grants: BTreeSet<(String, String)> = [
        ("p".to_string(), "hook:chat.params".to_string()),
        ("p".to_string(), "tool:deploy".to_string()),
    ]
    .into();
    let eff = resolve(&path, organisation_layer(&path), &u, grants);
    let j = eff.judge("p", &tools, &hooks);
    assert_eq!(
        j.hooks,
        vec!["chat.params".to_string(), "event".to_string()]
    );
    // A grant does not lift a deny; nor does it reach another source.
    assert!(!j.tools.contains(&"deploy".to_string()));
    assert_eq!(
        eff.judge("q", &tools, &hooks).hooks,
        vec!["event".to_string()]
    );
}

#[test]
fn the_source_allow_list_matches_ids_and_package_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = org(
        dir.path(),
        r#"{"sources.allow": ["npm-opencode-wakatime-*", "opencode-beads"]}"#,
    );
    let eff = resolve(
        &path,
        organisation_layer(&path),
        &BTreeMap::new(),
        BTreeSet::new(),
    );
    assert!(eff
        .source_allowed("npm-opencode-wakatime-1a2b3c4d", None)
        .is_ok());
    assert!(eff
        .source_allowed("npm-beads-fork-00000000", Some("opencode-beads"))
        .is_ok());
    assert!(eff.source_allowed("plugin-a-12345678", None).is_err());
    let none = resolve(
        &dir.path().join("absent.json"),
        organisation_layer(&dir.path().join("absent.json")),
        &BTreeMap::new(),
        BTreeSet::new(),
    );
    assert!(none.source_allowed("anything", None).is_ok());
    assert!(!none.organisation_present);
}

#[test]
fn a_source_runs_restricted_by_its_own_setting_or_the_organisation() {
    let dir = tempfile::tempdir().unwrap();
    let none = dir.path().join("absent.json");
    let u = user(&[("mode.a", json!("restricted"))]);
    let eff = resolve(&none, organisation_layer(&none), &u, BTreeSet::new());
    assert_eq!(eff.restricted("a"), (true, Layer::User));
    assert_eq!(eff.restricted("b"), (false, Layer::Product));
    let path = org(dir.path(), r#"{"mode": "restricted"}"#);
    let u = user(&[("mode.b", json!("compatible"))]);
    let eff = resolve(&path, organisation_layer(&path), &u, BTreeSet::new());
    assert_eq!(eff.restricted("b"), (true, Layer::Organisation));
    assert!(eff.entry("mode.b").unwrap().overruled.is_some());
}

#[test]
fn a_plugins_update_policy_is_bounded_by_the_organisations() {
    let dir = tempfile::tempdir().unwrap();
    let path = org(dir.path(), r#"{"updates": "notify", "update-age": 24}"#);
    let u = user(&[
        ("updates.npm-a-00000001", json!("auto")),
        ("updates.npm-b-00000002", json!("manual")),
        ("update-age.npm-b-00000002", json!(48)),
        ("update-age.npm-c-00000003", json!(1)),
    ]);
    let eff = resolve(&path, organisation_layer(&path), &u, BTreeSet::new());
    // Looser than the organisation: overruled, the organisation's value holds.
    let (policy, age, layer) = eff.updates("npm-a-00000001");
    assert_eq!(
        (policy.as_str(), age.as_secs(), layer),
        ("notify", 24 * 3600, Layer::Organisation)
    );
    let a = eff.entry("updates.npm-a-00000001").unwrap();
    assert!(a.overruled.as_deref().unwrap().contains("loosen"), "{a:?}");
    // Stricter: the person's.
    let (policy, age, layer) = eff.updates("npm-b-00000002");
    assert_eq!(
        (policy.as_str(), age.as_secs(), layer),
        ("manual", 48 * 3600, Layer::User)
    );
    // A minimum age below the organisation's is not applied.
    assert_eq!(eff.updates("npm-c-00000003").1.as_secs(), 24 * 3600);
    // Without an organisation: manual, no minimum age.
    let none = product_defaults();
    let (policy, age, layer) = none.updates("npm-d-00000004");
    assert_eq!(
        (policy.as_str(), age.as_secs(), layer),
        ("manual", 0, Layer::Product)
    );
    assert!(
        Kind::Age.check(&json!(8761)).is_err() && Kind::Updates.check(&json!("sometimes")).is_err()
    );
}
