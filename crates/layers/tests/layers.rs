//! Berth's layering, checked on every crate of the workspace: no module cycle inside a crate
//! (Cargo already refuses one between crates), and the runtime's facade `Berth` implemented in
//! its one file, of at most 400 lines. The negative controls prove the check can fail.

use std::path::{Path, PathBuf};

use berth_layers::{cycles, impl_sites, module_graph};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn crate_sources() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(workspace().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    out.push(workspace().join("src-tauri/src"));
    out.sort();
    out
}

#[test]
fn no_crate_has_a_module_cycle() {
    let mut seen = 0;
    for src in crate_sources() {
        let graph = module_graph(&src).unwrap();
        seen += graph.len();
        let found = cycles(&graph);
        assert!(
            found.is_empty(),
            "{}: module cycles {found:?}",
            src.display()
        );
    }
    assert!(seen > 30, "the check read only {seen} modules");
}

#[test]
fn the_facade_is_implemented_in_one_file_of_at_most_400_lines() {
    let src = workspace().join("crates/runtime/src");
    let sites = impl_sites(&src, "Berth").unwrap();
    assert_eq!(
        sites
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_owned())
            .collect::<Vec<_>>(),
        ["berth.rs"],
        "`impl Berth` outside the facade: {sites:?}"
    );
    assert!(sites[0].1 <= 400, "berth.rs has {} lines", sites[0].1);
}

/// Copies the runtime's sources (folders too) into a scratch folder, where the controls break
/// them.
fn scratch_runtime() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if src.is_dir() {
                copy(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(&workspace().join("crates/runtime/src"), dir.path());
    dir
}

#[test]
fn negative_control_a_cycle_through_a_path_inside_a_function_body_is_found() {
    let dir = scratch_runtime();
    assert!(cycles(&module_graph(dir.path()).unwrap()).is_empty());
    // `world` sits below `catalog`; one fully qualified call back up closes a cycle.
    let world = dir.path().join("world.rs");
    let mut text = std::fs::read_to_string(&world).unwrap();
    text.push_str(
        "\nfn up() -> usize {\n    std::mem::size_of::<crate::catalog::Activation>()\n}\n",
    );
    std::fs::write(&world, text).unwrap();
    let found = cycles(&module_graph(dir.path()).unwrap());
    assert!(
        found
            .iter()
            .any(|c| c.contains(&"world".to_string()) && c.contains(&"catalog".to_string())),
        "{found:?}"
    );
}

#[test]
fn negative_control_a_path_in_a_macro_or_through_a_root_reexport_counts_too() {
    let dir = scratch_runtime();
    let world = dir.path().join("world.rs");
    let base = std::fs::read_to_string(&world).unwrap();
    std::fs::write(&world, format!("{base}\nfn up() -> String {{\n    format!(\"{{}}\", crate::Berth::open as usize)\n}}\n")).unwrap();
    let found = cycles(&module_graph(dir.path()).unwrap());
    assert!(
        found
            .iter()
            .any(|c| c.contains(&"world".to_string()) && c.contains(&"berth".to_string())),
        "{found:?}"
    );
}

#[test]
fn negative_control_an_impl_berth_block_outside_its_file_is_found() {
    let dir = scratch_runtime();
    let catalog = dir.path().join("catalog/mod.rs");
    let mut text = std::fs::read_to_string(&catalog).unwrap();
    text.push_str("\nimpl crate::Berth {\n    pub fn extra(&self) {}\n}\n");
    std::fs::write(&catalog, text).unwrap();
    let sites = impl_sites(dir.path(), "Berth").unwrap();
    assert_eq!(sites.len(), 2, "{sites:?}");
}
