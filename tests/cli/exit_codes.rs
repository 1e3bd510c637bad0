//! Exit codes and error documents (DESIGN.md: 0 ok, 1 operation failed, 2 wrong command line).

use crate::support::*;

#[test]
fn a_usage_error_exits_2_and_still_prints_one_error_document_with_json() {
    let s = Sandbox::new();
    let out = s.berth(&["no-such-command", "--json"]).output().unwrap();
    let (code, v) = parse_json_output(&out);
    assert_eq!(code, 2);
    assert_schema("error", &v);
    assert_eq!(v["error"]["code"], "invalid-arguments");
    let plain = s.berth(&["status", "--bogus-flag"]).output().unwrap();
    assert_eq!(plain.status.code(), Some(2));
}

#[test]
fn a_failed_operation_exits_1_with_an_error_document() {
    let s = Sandbox::new();
    let missing = s.root.path().join("no-such-backup.db");
    let (code, v) = s.run_json(&["restore", missing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_schema("error", &v);
    assert_eq!(v["error"]["code"], "action-required");
    assert_eq!(v["error"]["capability"], "store");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-backup.db"));
}

#[test]
fn a_data_dir_that_cannot_be_created_names_the_path_and_the_way_out() {
    let s = Sandbox::new();
    let file = s.write("plain-file", "x");
    let out = std::process::Command::new(berth_bin())
        .args(["status", "--json", "--data-dir"])
        .arg(file.join("data"))
        .arg("--project")
        .arg(s.project())
        .env("HOME", s.home())
        .output()
        .unwrap();
    let (code, v) = parse_json_output(&out);
    assert_eq!(code, 1);
    assert_schema("error", &v);
    assert_eq!(v["error"]["code"], "action-required");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("plain-file"));
    assert!(v["error"]["recovery"]
        .as_str()
        .unwrap()
        .contains("--data-dir"));
}
