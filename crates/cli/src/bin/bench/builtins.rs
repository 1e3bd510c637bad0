//! `berth-bench --only builtins`: the built-in `grep` (berth-builtins) against `rg` from PATH
//! with the same query over this repository's tree, interleaved in one run (the comparison is
//! the crate's, shared with its `grep_vs_rg` example). Wall time per search: the built-in's
//! call, and rg's process from spawn to exit, run as OpenCode runs it.

use std::path::Path;

#[path = "../../../../builtins/bench/grep_vs_rg.rs"]
mod grep_vs_rg;
use grep_vs_rg::{compare, percentile, rg_available};

use super::Figures;

/// Rare in the tree (the built-in stops at 100 matches, rg does not), so both do the same
/// work: walk everything, report a handful of lines.
const PATTERN: &str = "fn call_blocking";

pub fn run(f: &mut Figures) {
    if !rg_available() {
        eprintln!(
            "builtins: skipped, no `rg` on PATH (install ripgrep: CI's test set-up does, scripts/setup)"
        );
        return;
    }
    // The tree the bench was built from: the workspace root, two levels above this crate.
    let tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository's tree is here");
    let mut c = compare(&tree, PATTERN, 51);
    eprintln!(
        "builtins: grep {PATTERN:?} over the repository's tree: {} matches built-in, {} rg",
        c.builtin_matches, c.rg_matches
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let (b, r) = (
        ms(percentile(&mut c.builtin, 50.0)),
        ms(percentile(&mut c.rg, 50.0)),
    );
    f.print("builtin_grep_repo_p50", b, "ms", None);
    f.print(
        "builtin_grep_repo_p99",
        ms(percentile(&mut c.builtin, 99.0)),
        "ms",
        None,
    );
    f.print("rg_grep_repo_p50", r, "ms", None);
    f.print(
        "rg_grep_repo_p99",
        ms(percentile(&mut c.rg, 99.0)),
        "ms",
        None,
    );
    f.print("builtin_grep_vs_rg", b / r, "ratio", Some((2.0, true)));
}
