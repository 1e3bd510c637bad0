//! The desktop window's projects: with no project open only what applies to every project is
//! read (never a home folder's own `opencode.json`, never a project's files); a folder to open
//! is checked before anything changes; the recent list; and the attention notices a window
//! that is not in front turns into desktop notifications (each wait once, the start a baseline).

use std::path::Path;

use berth_discovery::OpencodeEnv;
use berth_runtime::attention::{Attention, Item};
use berth_runtime::{code, projects, Berth};

const TOOL: &str =
    "export default { description: 'd', args: {}, async execute() { return 'x' } }\n";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A home with one global tool and an `opencode.json` of its own, and a project with a tool.
fn machine(dir: &Path) -> OpencodeEnv {
    let home = dir.join("home");
    write(&home.join(".config/opencode/tools/everywhere.ts"), TOOL);
    write(
        &home.join("opencode.json"),
        r#"{ "plugin": ["./home-plugin.ts"] }"#,
    );
    write(
        &home.join("home-plugin.ts"),
        "export default async () => ({})\n",
    );
    write(&dir.join("project/.opencode/tools/here.ts"), TOOL);
    std::fs::create_dir_all(dir.join("project/.git")).unwrap();
    OpencodeEnv {
        home: home.clone(),
        cwd: home,
        managed_config_dir: dir.join("managed"),
        ..OpencodeEnv::default()
    }
}

fn entries(berth: &Berth) -> Vec<String> {
    let snap = berth.status();
    let mut e: Vec<String> = snap
        .sources
        .iter()
        .map(|s| {
            Path::new(&s.source.entry)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    e.sort();
    e
}

#[test]
fn with_no_project_open_only_what_applies_to_every_project_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let env = machine(dir.path());
    let none =
        Berth::open(projects::options(dir.path().join("data"), None, env.clone(), None).unwrap())
            .unwrap();
    assert_eq!(
        entries(&none),
        ["everywhere.ts"],
        "no project, no home opencode.json"
    );
    assert!(!none.status().project.open);
    assert_eq!(projects::list(&none).unwrap().current, None);

    let project = dir.path().join("project");
    let open = Berth::open(
        projects::options(dir.path().join("data"), Some(&project), env.clone(), None).unwrap(),
    )
    .unwrap();
    assert_eq!(entries(&open), ["everywhere.ts", "here.ts"]);
    assert!(open.status().project.open);
    // Negative control: the same home as a project does read its own opencode.json.
    let home = Berth::open(
        projects::options(dir.path().join("data"), Some(&env.home), env.clone(), None).unwrap(),
    )
    .unwrap();
    assert!(
        entries(&home).contains(&"home-plugin.ts".to_string()),
        "{:?}",
        entries(&home)
    );
}

#[test]
fn a_folder_to_open_is_checked_first_and_opened_ones_are_remembered_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let env = machine(dir.path());
    let data = dir.path().join("data");
    for bad in [
        dir.path().join("missing"),
        dir.path().join("home/opencode.json"),
    ] {
        let err = projects::options(data.clone(), Some(&bad), env.clone(), None).unwrap_err();
        assert_eq!(err.code, code::INVALID_ARGUMENTS, "{}", err.message);
        assert!(
            err.message.contains(&bad.display().to_string()),
            "{}",
            err.message
        );
    }
    // Relative to where the app was started, as `--project` is; opened by its real path.
    let o = projects::options(
        data.clone(),
        Some(Path::new("../project")),
        env.clone(),
        None,
    )
    .unwrap();
    assert_eq!(
        o.project,
        std::fs::canonicalize(dir.path().join("project")).unwrap()
    );

    let first = Berth::open(o).unwrap();
    projects::remember(&first).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3));
    let second =
        Berth::open(projects::options(data.clone(), Some(&env.home), env.clone(), None).unwrap())
            .unwrap();
    projects::remember(&second).unwrap();
    let none = Berth::open(projects::options(data, None, env.clone(), None).unwrap()).unwrap();
    projects::remember(&none).unwrap();
    let listed = projects::list(&none).unwrap();
    let paths: Vec<_> = listed.recent.iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            second.options().project.clone(),
            first.options().project.clone()
        ]
    );
    assert!(listed.recent.iter().all(|r| r.exists));
    assert!(projects::forget(&none, &paths[0]).unwrap());
    assert_eq!(projects::list(&none).unwrap().recent.len(), 1);
}

#[test]
fn attention_tells_each_new_wait_once_and_not_what_waited_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let env = machine(dir.path());
    let project = dir.path().join("project");
    let berth = Berth::open(
        projects::options(dir.path().join("data"), Some(&project), env.clone(), None).unwrap(),
    )
    .unwrap();
    let mut attention = Attention::default();
    assert!(
        attention.news(&berth.status()).is_empty(),
        "the start is the baseline"
    );

    write(&project.join(".opencode/tools/fresh.ts"), TOOL);
    berth.rescan();
    let news = attention.news(&berth.status());
    assert_eq!(news.len(), 1, "{news:?}");
    assert_eq!(news[0].title, "fresh.ts waits for your approval");
    let fresh = berth
        .status()
        .sources
        .iter()
        .find(|s| s.source.entry.ends_with("fresh.ts"))
        .unwrap()
        .source
        .id
        .clone();
    assert_eq!(news[0].item, Item::Source(fresh));
    assert!(attention.news(&berth.status()).is_empty(), "told once");

    write(&project.join(".opencode/tools/a.ts"), TOOL);
    write(&project.join(".opencode/tools/b.ts"), TOOL);
    // A changed file waits again, with its new digest.
    write(
        &project.join(".opencode/tools/fresh.ts"),
        &TOOL.replace("'x'", "'y'"),
    );
    berth.rescan();
    let news = attention.news(&berth.status());
    assert_eq!(news.len(), 1, "{news:?}");
    assert_eq!(news[0].title, "3 plugins and tools wait for your approval");
}
