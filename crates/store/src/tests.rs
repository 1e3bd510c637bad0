//! Store behaviour: migrations, backup/restore under a live writer, and bad files.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::open::open_at_version;
use crate::*;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn migrates_an_empty_file_to_the_current_schema() {
    let d = dir();
    let opened = Store::open(&d.path().join("berth.db")).unwrap();
    assert_eq!(opened.store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(opened.recovery.is_none());
    assert!(opened.store.meta("created_at_ms").unwrap().is_some());
}

#[test]
fn migrates_from_every_earlier_version_keeping_data() {
    for version in 0..SCHEMA_VERSION {
        let d = dir();
        let path = d.path().join("berth.db");
        {
            let conn = open_at_version(&path, version);
            if version >= 1 {
                conn.execute("INSERT INTO meta (key, value) VALUES ('kept', 'yes')", [])
                    .unwrap();
            }
        }
        let opened = Store::open(&path).unwrap();
        assert_eq!(
            opened.store.schema_version().unwrap(),
            SCHEMA_VERSION,
            "from v{version}"
        );
        if version >= 1 {
            assert_eq!(opened.store.meta("kept").unwrap().as_deref(), Some("yes"));
        }
    }
}

#[test]
fn backup_while_a_writer_is_active_restores_a_consistent_state() {
    let d = dir();
    let path = d.path().join("berth.db");
    Store::open(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut store = Store::open(&path).unwrap().store;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                // Two keys written in one transaction: a consistent copy always has them equal.
                let tx = store.conn.transaction().unwrap();
                for key in ["pair_a", "pair_b"] {
                    tx.execute(
                        "INSERT INTO meta (key, value) VALUES (?1, ?2)
                         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        rusqlite::params![key, n.to_string()],
                    )
                    .unwrap();
                }
                tx.commit().unwrap();
            }
            n
        })
    };
    // Wait until the writer has committed at least once (the event, not a sleep).
    let reader = Store::open(&path).unwrap().store;
    while reader.meta("pair_a").unwrap().is_none() {
        std::thread::yield_now();
    }
    let backups: Vec<_> = (0..5)
        .map(|i| {
            let file = d.path().join(format!("copy-{i}.db"));
            reader.backup_to(&file).unwrap();
            file
        })
        .collect();
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0);

    let mut target = Store::open(&d.path().join("restored.db")).unwrap().store;
    for file in backups {
        target.restore_from(&file).unwrap();
        let a = target.meta("pair_a").unwrap();
        assert!(a.is_some());
        assert_eq!(
            a,
            target.meta("pair_b").unwrap(),
            "torn copy in {}",
            file.display()
        );
        assert_eq!(target.schema_version().unwrap(), SCHEMA_VERSION);
    }
}

#[test]
fn restore_refuses_a_file_that_is_not_a_backup_and_keeps_the_store() {
    let d = dir();
    let mut store = Store::open(&d.path().join("berth.db")).unwrap().store;
    store.set_meta("mine", "1").unwrap();
    let junk = d.path().join("junk.db");
    std::fs::write(&junk, b"definitely not sqlite").unwrap();
    let err = store.restore_from(&junk).unwrap_err();
    assert!(matches!(err, StoreError::NotRestorable { .. }), "{err}");
    assert_eq!(store.meta("mine").unwrap().as_deref(), Some("1"));
}

#[test]
fn a_corrupt_file_is_moved_aside_never_deleted() {
    let d = dir();
    let path = d.path().join("berth.db");
    let garbage = vec![0x5au8; 8192];
    std::fs::write(&path, &garbage).unwrap();
    let opened = Store::open(&path).unwrap();
    let Some(Recovery::MovedAsideCorrupt { moved_to }) = opened.recovery else {
        panic!("expected a recovery notice");
    };
    assert_eq!(std::fs::read(&moved_to).unwrap(), garbage);
    assert_eq!(opened.store.schema_version().unwrap(), SCHEMA_VERSION);
}

#[test]
fn a_database_from_a_newer_berth_is_refused_and_untouched() {
    let d = dir();
    let path = d.path().join("berth.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 7)
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).err().expect("must refuse");
    assert_eq!(err.code(), "incompatible-version");
    assert!(err.to_string().contains(&path.display().to_string()));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_data_dir_under_a_regular_file_is_reported_with_its_path() {
    let d = dir();
    let file = d.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = Store::open(&file.join("data").join("berth.db"))
        .err()
        .expect("must fail");
    assert_eq!(err.code(), "action-required");
    assert!(err.to_string().contains("plain-file"), "{err}");
}

/// A `probe` call's receipt, accepted and running.
fn accept_running(s: &Store, id: &str, key: Option<&str>) {
    let n = NewReceipt {
        receipt_id: id,
        idempotency_key: key,
        tool: "probe",
        source_id: "src",
        args_digest: "d",
        owner_pid: 1,
        owner_start: 1,
    };
    s.accept_receipt(&n).unwrap();
    s.mark_receipt_running(id).unwrap();
}

/// Writes that never pause (the chaos soak's callers) must not grow the WAL without end: a
/// passive checkpoint alone never lets SQLite wrap it, and the `-wal` file reached 800 MB in
/// a minute, its `-shm` index growing in every process's memory with it.
#[test]
fn the_wal_stays_bounded_under_writes_that_never_pause() {
    let d = dir();
    let path = d.path().join("berth.db");
    let s = Store::open(&path).unwrap().store;
    let wal = d.path().join("berth.db-wal");
    let mut largest = 0;
    for i in 0..20_000 {
        let id = format!("rcpt_{i:06}");
        let key = format!("key-{i}");
        accept_running(&s, &id, Some(&key));
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    // 16 MiB of frames, plus what lands while a checkpoint runs (about 25 MiB at most here);
    // without the restart it is near 200 MiB, growing with every write.
    let bound = 4 * 4096 * crate::open::WAL_RESTART_FRAMES as u64;
    assert!(
        largest < bound,
        "the WAL reached {largest} bytes (bound {bound})"
    );
    let rows: i64 = s
        .conn
        .query_row("SELECT count(*) FROM receipts", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 20_000, "every write kept");
}

/// OpenCode V2 plugins' `ctx.storage`: one space per plugin ID, scanned in key order by prefix,
/// and its writes are not status changes (no rescan per write).
#[test]
fn plugin_storage_is_one_space_per_plugin_id() {
    let d = dir();
    let s = Store::open(&d.path().join("berth.db")).unwrap().store;
    let start = s.changes_beyond_calls();
    s.set_plugin_value("a", "k1", "1").unwrap();
    s.set_plugin_value("a", "k2", "{\"x\":2}").unwrap();
    s.set_plugin_value("a", "other", "3").unwrap();
    s.set_plugin_value("b", "k1", "\"b's\"").unwrap();
    s.set_plugin_value("a", "k1", "10").unwrap();
    assert_eq!(s.plugin_value("a", "k1").unwrap().as_deref(), Some("10"));
    assert_eq!(
        s.plugin_value("b", "k1").unwrap().as_deref(),
        Some("\"b's\"")
    );
    assert_eq!(s.plugin_value("c", "k1").unwrap(), None);
    let keys = |after: Option<&str>, limit| -> Vec<String> {
        s.scan_plugin_values("a", "k", after, limit)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    assert_eq!(keys(None, 100), ["k1", "k2"]);
    assert_eq!(keys(None, 1), ["k1"]);
    assert_eq!(keys(Some("k1"), 100), ["k2"]);
    s.remove_plugin_value("a", "k1").unwrap();
    assert_eq!(s.plugin_value("a", "k1").unwrap(), None);
    assert_eq!(
        s.plugin_value("b", "k1").unwrap().as_deref(),
        Some("\"b's\""),
        "b's untouched"
    );
    assert_eq!(
        s.changes_beyond_calls(),
        start,
        "storage writes are not status changes"
    );
}

#[test]
fn changes_beyond_calls_ignore_receipts_and_count_the_rest() {
    let d = dir();
    let s = Store::open(&d.path().join("berth.db")).unwrap().store;
    let start = s.changes_beyond_calls();
    accept_running(&s, "rcpt_probe", None);
    assert_eq!(s.changes_beyond_calls(), start, "receipts");
    s.set_meta("probe", "x").unwrap();
    assert_eq!(s.changes_beyond_calls(), start + 1, "anything else");
}

#[test]
fn recent_projects_are_newest_first_reopening_moves_one_up_and_the_list_is_bounded() {
    let d = dir();
    let s = Store::open(&d.path().join("berth.db")).unwrap().store;
    for i in 0..25 {
        s.remember_project(&format!("/p/{i}")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    s.remember_project("/p/7").unwrap();
    let paths: Vec<String> = s
        .recent_projects()
        .unwrap()
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(paths.len(), 20, "{paths:?}");
    assert_eq!(&paths[..3], ["/p/7", "/p/24", "/p/23"]);
    assert!(
        !paths.contains(&"/p/0".to_string()),
        "the oldest are forgotten: {paths:?}"
    );
    assert!(s.forget_project("/p/7").unwrap());
    assert!(!s.forget_project("/p/7").unwrap());
    assert_eq!(s.recent_projects().unwrap()[0].path, "/p/24");
}
