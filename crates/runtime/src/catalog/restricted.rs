//! Restricted sources: each runs alone in a host inside an OS boundary (`berth_host::boundary`)
//! made from what the policy lets it reach — its approved files and prepared installs read-only,
//! its own cache folder (its `HOME`), the project read-only or read-write (`.git/hooks`,
//! `.git/config`, `.opencode`, `opencode.json` and Berth's data dir kept read-only), network
//! only when `restricted.network` is `on`, and the environment names `restricted.env` adds.
//!
//! Owns: that restriction, per source. Must not: start or wrap a process (the supervisor does),
//! or let a restricted source run anywhere else — with no boundary available it is
//! `policy-limited`, never run unrestricted.

use std::path::{Path, PathBuf};

use berth_discovery::{Source, SourceKind};

use crate::core::Core;
use crate::host::boundary::Restriction;
use crate::policy::Effective;

/// The files and folders a project's own configuration lives in: read-only even when the
/// project is writable (a plugin must not plant hooks or rewrite what loads next time).
const PROTECTED: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".opencode",
    "opencode.json",
    "opencode.jsonc",
];

/// What restricted `source` may reach.
pub(crate) fn restriction_for(
    core: &Core,
    source: &Source,
    policy: &Effective,
    kept: &[PathBuf],
) -> Restriction {
    let options = core.options();
    let project = core.status().project.worktree.clone();
    let home = options.data_dir.join("restricted").join(&source.id);
    let _ = std::fs::create_dir_all(home.join(".cache"));
    let mut read: Vec<PathBuf> = source.manifest.files.keys().cloned().collect();
    read.extend(source.manifest.trees.keys().cloned());
    // Berth's copies of these exact bytes, where a source rolled back reads them from: only
    // then (`kept`). Berth keeps a copy of every version it activates, so probing for one would
    // change the boundary right after the first load and restart the host for nothing.
    read.extend(kept.iter().cloned());
    match (&source.npm, source.kind) {
        (Some(npm), SourceKind::NpmPlugin) => read.push(berth_discovery::npm_install_dir(
            &options.packages_dir(),
            &npm.name,
            &npm.request,
        )),
        _ => {
            if let Some(dir) = berth_discovery::config_dir_of(Path::new(&source.entry)) {
                read.push(crate::deps::config_deps_dir(&options.data_dir, &dir));
            }
        }
    }
    let mut write = vec![home.clone()];
    let mut protect = Vec::new();
    if policy.value("restricted.project") == "read-write" {
        write.push(project.clone());
        protect.extend(PROTECTED.iter().map(|p| project.join(p)));
        // Berth's own data dir, should it live inside the project.
        protect.push(options.data_dir.clone());
    } else {
        read.push(project.clone());
    }
    let env_extra = crate::policy::keys::names(&policy.value("restricted.env"));
    Restriction {
        read,
        write,
        protect,
        network: policy.value("restricted.network") == "on",
        env_extra,
        home,
        workdir: project,
    }
}
