// Each test binary uses a part of this module.
#![allow(dead_code)]

//! The fixture tree (fixtures/builtins/tree) copied into a scratch directory the way the
//! recorder prepares it: `<case>/project` (with a `.git`, so .gitignore rules apply, as in the
//! git-initialised recording) beside `<case>/outside`; the symlink `project/link-out` is kept.

use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

pub struct Tree {
    _tmp: tempfile::TempDir,
    /// What the recordings call `<case>`.
    pub case: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let case = tmp.path().canonicalize().unwrap().join("builtins");
        copy(&repo().join("fixtures/builtins/tree"), &case);
        std::fs::create_dir_all(case.join("project/.git")).unwrap();
        Tree { _tmp: tmp, case }
    }

    pub fn project(&self) -> PathBuf {
        self.case.join("project")
    }

    pub fn ctx(&self) -> berth_builtins::CallContext {
        berth_builtins::CallContext::new(self.project())
    }

    /// `<case>` in recorded text → this tree's path.
    pub fn place(&self, s: &str) -> String {
        s.replace("<case>", &self.case.display().to_string())
    }

    /// This tree's path → `<case>`.
    pub fn unplace(&self, s: &str) -> String {
        s.replace(&self.case.display().to_string(), "<case>")
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(from).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ft.is_dir() {
            copy(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}
