//! The store through the CLI: backup/restore, corrupt and future files.

use crate::support::*;

#[test]
fn backup_then_restore_round_trips_through_the_cli() {
    let s = Sandbox::new();
    let file = s.root.path().join("b.db");
    let (code, v) = s.run_json(&["backup", file.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_schema("backup", &v);
    let (code, v) = s.run_json(&["restore", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{v}");
    assert_schema("restore", &v);
}

#[test]
fn a_corrupt_database_is_moved_aside_and_the_status_says_where() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.data_dir()).unwrap();
    std::fs::write(s.data_dir().join("berth.db"), vec![0x42u8; 4096]).unwrap();
    let (code, v) = s.run_json(&["status"]);
    assert_eq!(code, 0);
    assert_schema("status", &v);
    let moved = v["berth"]["store"]["moved_aside"]
        .as_str()
        .expect("moved_aside is reported");
    assert_eq!(std::fs::read(moved).unwrap(), vec![0x42u8; 4096]);
}

#[test]
fn a_database_from_a_newer_berth_is_refused_with_incompatible_version() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.data_dir()).unwrap();
    let conn = rusqlite::Connection::open(s.data_dir().join("berth.db")).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    let (code, v) = s.run_json(&["status"]);
    assert_eq!(code, 1);
    assert_schema("error", &v);
    assert_eq!(v["error"]["code"], "incompatible-version");
    assert!(v["error"]["message"].as_str().unwrap().contains("berth.db"));
}
