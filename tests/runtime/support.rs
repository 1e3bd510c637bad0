//! Shared by the runtime tests: a scratch machine (home, git project, managed dir, data dir)
//! with fixture files copied into the project, opened as one Berth.

use std::path::Path;

use berth_discovery::OpencodeEnv;
use berth_runtime::{Berth, BerthOptions};

/// Opens Berth on `<dir>/project` (a git worktree) with `<dir>/home` as HOME, after copying
/// each `(fixture, dest)`: `fixtures/<fixture>` to `project/<dest>`.
pub fn open_project(dir: &Path, files: &[(&str, &str)]) -> Berth {
    let home = dir.join("home");
    let project = dir.join("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    for (fixture, dest) in files {
        let to = project.join(dest);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root.join("fixtures").join(fixture), &to).unwrap();
    }
    let env = OpencodeEnv {
        home,
        cwd: project.clone(),
        managed_config_dir: dir.join("managed"),
        ..OpencodeEnv::default()
    };
    Berth::open(BerthOptions {
        data_dir: dir.join("data"),
        project,
        env,
        log_file: None,
    })
    .unwrap()
}
