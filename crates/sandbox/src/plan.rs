//! Which paths of a `Boundary` a child gets and how (read or read-write), shared by both
//! tiers, including the carving of `write` trees around protected paths.
//!
//! Owns: path checks (absolute, present), the protected set, the carving walk and the
//! parent-first order. Must not: mount, open rulesets, or know tier syntax.
//!
//! Carving: a `write` root with no protected path inside is granted whole. When it has some,
//! a tier that can lay a read-only mount over a writable one (`can_mask`, bubblewrap) grants
//! the root read-write and each protected path read-only on top — as long as every protected
//! path under it exists and is not a symlink. Otherwise (Landlock, whose rules only ever add
//! rights, or a protected path that is missing) the root is "sealed": granted read-only, and
//! each of its entries is carved in turn. Entries of a sealed folder keep their rights, but
//! new entries cannot be created directly in it — so a missing protected path cannot be
//! created either. Symlinks directly in a sealed folder are left as they are (read-only,
//! their targets not granted).

use std::path::{Component, Path, PathBuf};

use crate::error::SandboxError;
use crate::Boundary;

/// How a path is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
}

/// One path and its access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub access: Access,
}

/// The grants of `b`'s `read` and `write` lists (plus `extra_read`), missing paths skipped,
/// parents before children (a deeper grant wins in bubblewrap; Landlock adds them up).
/// A `read` or `protect` path at or under a `write` root stays read-only.
pub fn grants(
    b: &Boundary,
    extra_read: &[PathBuf],
    can_mask: bool,
) -> Result<Vec<Grant>, SandboxError> {
    check_absolute(b)?;
    let protected: Vec<&Path> = b
        .protect
        .iter()
        .chain(&b.read)
        .filter(|p| b.write.iter().any(|w| p.starts_with(w)))
        .map(PathBuf::as_path)
        .collect();
    let mut out = Vec::new();
    for p in extra_read.iter().chain(&b.read) {
        if exists(p) {
            out.push(Grant {
                path: p.clone(),
                access: Access::Read,
            });
        }
    }
    for root in b.write.iter().filter(|w| exists(w)) {
        carve(root, &protected, can_mask, &mut out)?;
    }
    out.sort_by_key(|g| depth(&g.path));
    let mut seen = std::collections::HashSet::new();
    out.retain(|g| seen.insert((g.path.clone(), g.access)));
    Ok(out)
}

/// How many normal components `p` has: mounts must go parent-first.
pub fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// Whether `p` exists (a dangling symlink counts as missing).
pub fn exists(p: &Path) -> bool {
    p.metadata().is_ok()
}

fn check_absolute(b: &Boundary) -> Result<(), SandboxError> {
    let all = b
        .read
        .iter()
        .chain(&b.write)
        .chain(&b.sockets)
        .chain(&b.protect);
    for p in all.chain(&b.workdir) {
        if !p.is_absolute() {
            return Err(SandboxError::at(
                "use the boundary path",
                p,
                "it is not absolute",
            ));
        }
    }
    Ok(())
}

fn carve(
    dir: &Path,
    protected: &[&Path],
    can_mask: bool,
    out: &mut Vec<Grant>,
) -> Result<(), SandboxError> {
    let inside: Vec<&Path> = protected
        .iter()
        .copied()
        .filter(|p| p.starts_with(dir))
        .collect();
    let grant = |path: &Path, access| Grant {
        path: path.to_path_buf(),
        access,
    };
    if inside.contains(&dir) {
        out.push(grant(dir, Access::Read));
        return Ok(());
    }
    if inside.is_empty() || !dir.is_dir() {
        out.push(grant(dir, Access::Write));
        return Ok(());
    }
    if can_mask && inside.iter().all(|p| maskable(p)) {
        out.push(grant(dir, Access::Write));
        out.extend(inside.iter().map(|p| grant(p, Access::Read)));
        return Ok(());
    }
    out.push(grant(dir, Access::Read));
    for child in entries(dir)? {
        carve(&child, &inside, can_mask, out)?;
    }
    Ok(())
}

/// A protected path a read-only mount can be laid over: present, and not a symlink.
fn maskable(p: &Path) -> bool {
    p.symlink_metadata()
        .map(|m| !m.file_type().is_symlink())
        .unwrap_or(false)
}

/// The entries of `dir` that are not symlinks, sorted.
fn entries(dir: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    let list = std::fs::read_dir(dir).map_err(|e| SandboxError::at("list", dir, e))?;
    let mut out = Vec::new();
    for entry in list {
        let entry = entry.map_err(|e| SandboxError::at("list", dir, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| SandboxError::at("stat", &entry.path(), e))?;
        if !kind.is_symlink() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tier;

    fn project() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tempdir");
        for d in ["src", ".git/hooks", ".git/objects"] {
            std::fs::create_dir_all(t.path().join(d)).expect("mkdir");
        }
        std::fs::write(t.path().join("opencode.json"), "{}").expect("write");
        t
    }

    fn rel(root: &Path, gs: &[Grant]) -> Vec<(String, Access)> {
        let name = |p: &Path| p.strip_prefix(root).map(|r| r.display().to_string());
        gs.iter()
            .filter_map(|g| name(&g.path).ok().map(|n| (n, g.access)))
            .collect()
    }

    fn boundary(root: &Path, protect: &[&str]) -> Boundary {
        let mut b = Boundary::new(Tier::Landlock);
        b.write = vec![root.to_path_buf()];
        b.protect = protect.iter().map(|p| root.join(p)).collect();
        b
    }

    #[test]
    fn a_write_root_without_protected_paths_is_granted_whole() {
        let t = project();
        let gs = grants(&boundary(t.path(), &[]), &[], false).expect("grants");
        assert_eq!(rel(t.path(), &gs), vec![(String::new(), Access::Write)]);
    }

    #[test]
    fn masking_lays_read_only_paths_over_the_root() {
        let t = project();
        let b = boundary(t.path(), &[".git/hooks", "opencode.json"]);
        let gs = grants(&b, &[], true).expect("grants");
        let want = [
            ("", Access::Write),
            ("opencode.json", Access::Read),
            (".git/hooks", Access::Read),
        ];
        let want: Vec<_> = want.iter().map(|(p, a)| (p.to_string(), *a)).collect();
        assert_eq!(rel(t.path(), &gs), want);
    }

    #[test]
    fn sealing_grants_the_siblings_and_keeps_the_way_read_only() {
        let t = project();
        let b = boundary(t.path(), &[".git/hooks", "opencode.json", ".opencode"]);
        let want = |list: &[(&str, Access)]| -> Vec<(String, Access)> {
            list.iter().map(|(p, a)| (p.to_string(), *a)).collect()
        };
        let sealed = grants(&b, &[], false).expect("grants");
        let all_sealed = want(&[
            ("", Access::Read),
            (".git", Access::Read),
            ("opencode.json", Access::Read),
            ("src", Access::Write),
            (".git/hooks", Access::Read),
            (".git/objects", Access::Write),
        ]);
        assert_eq!(
            rel(t.path(), &sealed),
            all_sealed,
            "Landlock seals every way"
        );
        let masked = grants(&b, &[], true).expect("grants");
        let root_sealed = want(&[
            ("", Access::Read),
            (".git", Access::Write),
            ("opencode.json", Access::Read),
            ("src", Access::Write),
            (".git/hooks", Access::Read),
        ]);
        assert_eq!(
            rel(t.path(), &masked),
            root_sealed,
            "a missing .opencode seals the root"
        );
    }

    #[test]
    fn a_read_path_inside_a_write_root_stays_read_only() {
        let t = project();
        let mut b = boundary(t.path(), &[]);
        b.read = vec![t.path().join("src")];
        let gs = grants(&b, &[], true).expect("grants");
        let want = [("", Access::Write), ("src", Access::Read)];
        let want: Vec<_> = want.iter().map(|(p, a)| (p.to_string(), *a)).collect();
        assert_eq!(rel(t.path(), &gs), want);
    }

    #[test]
    fn relative_paths_are_refused_and_missing_ones_skipped() {
        let mut b = Boundary::new(Tier::Bwrap);
        b.read = vec![PathBuf::from("/no/such/berth/path")];
        assert_eq!(grants(&b, &[], true).expect("grants"), vec![]);
        b.write = vec![PathBuf::from("relative")];
        assert!(grants(&b, &[], true).is_err());
    }
}
