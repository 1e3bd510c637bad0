//! The deviations ledger is machine-readable and every id the code cites exists.

use std::collections::BTreeSet;

use crate::support::repo_root;

pub struct Deviation {
    pub id: String,
    pub cells: Vec<String>,
}

pub fn ledger() -> Vec<Deviation> {
    let text = std::fs::read_to_string(repo_root().join("docs/deviations.md")).unwrap();
    text.lines()
        .filter(|l| l.starts_with("| D-"))
        .map(|l| {
            let cells: Vec<String> = l
                .trim()
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect();
            Deviation {
                id: cells[0].clone(),
                cells,
            }
        })
        .collect()
}

#[test]
fn the_ledger_has_five_filled_columns_and_ordered_ids() {
    let rows = ledger();
    assert!(rows.len() >= 9);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(
            row.id,
            format!("D-{:03}", i + 1),
            "ids are D-001, D-002, … in order"
        );
        assert_eq!(
            row.cells.len(),
            5,
            "{} has {} columns",
            row.id,
            row.cells.len()
        );
        assert!(
            row.cells.iter().all(|c| !c.is_empty()),
            "{} has an empty cell",
            row.id
        );
    }
}

#[test]
fn every_ledger_id_cited_in_code_exists() {
    let known: BTreeSet<String> = ledger().into_iter().map(|d| d.id).collect();
    let mut cited = BTreeSet::new();
    for dir in ["crates", "src-tauri/src", "ui", "tests"] {
        collect_ids(&repo_root().join(dir), &mut cited);
    }
    let unknown: Vec<_> = cited.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "code cites ledger ids that do not exist: {unknown:?}"
    );
}

fn collect_ids(dir: &std::path::Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "node_modules" && name != "target" {
                collect_ids(&p, out);
            }
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            let b = text.as_bytes();
            for i in 0..b.len().saturating_sub(4) {
                if &b[i..i + 2] == b"D-"
                    && b[i + 2..i + 5].iter().all(u8::is_ascii_digit)
                    && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
                {
                    out.insert(text[i..i + 5].to_string());
                }
            }
        }
    }
}
