//! The host's dependencies are prepared in the data dir from the pinned lockfile, with install
//! scripts off; concurrent preparations serialise; a set-up copy is linked, not downloaded.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn seed() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .join(".tools/host-deps")
}

#[test]
fn concurrent_preparations_of_one_data_dir_serialise_and_link_the_local_copy() {
    let dir = tempfile::tempdir().unwrap();
    let seed = seed();
    assert!(
        seed.join("node_modules").is_dir(),
        "run scripts/setup first"
    );
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (d, s) = (dir.path().to_path_buf(), seed.clone());
            std::thread::spawn(move || {
                berth_runtime::deps::prepare_host_deps(&d, Some(&s)).unwrap()
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    let prepared = &results[0];
    assert!(
        prepared.starts_with(dir.path()),
        "prepared inside the data dir"
    );
    let pkg = "node_modules/@opencode-ai/plugin/package.json";
    assert_eq!(
        std::fs::metadata(prepared.join(pkg)).unwrap().ino(),
        std::fs::metadata(seed.join(pkg)).unwrap().ino(),
        "linked, not copied"
    );
    // No staging folder is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("deps"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with(".host-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn without_a_local_copy_npm_installs_from_the_lockfile_with_scripts_off() {
    let dir = tempfile::tempdir().unwrap();
    let prepared = berth_runtime::deps::prepare_host_deps(dir.path(), None).unwrap();
    let plugin: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(prepared.join("node_modules/@opencode-ai/plugin/package.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plugin["version"], "1.18.4");
    let zod: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(prepared.join("node_modules/zod/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(zod["version"], "4.1.8");
    // A second call finds the stamp and does nothing.
    let again = berth_runtime::deps::prepare_host_deps(dir.path(), None).unwrap();
    assert_eq!(again, prepared);
}
