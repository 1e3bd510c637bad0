//! A secret cannot reach the log, the database or its WAL: the type forbids it, and a canary
//! pushed through logging and the store is searched for in every file Berth wrote.

use berth_discovery::OpencodeEnv;
use berth_runtime::{Berth, BerthOptions, Secret};

// The type has no way into a log line's Display, serde, or SQL parameters.
static_assertions::assert_not_impl_any!(Secret: std::fmt::Display, serde::Serialize, rusqlite::ToSql, Clone);

#[test]
fn a_canary_secret_never_reaches_log_database_or_wal() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log_file = berth_runtime::logging::init(&data, "off").unwrap();
    let canary = "CANARY-7f3a9c1e-do-not-log";
    let secret = Secret::new(canary);
    // A plugin configured with a secret option: views show it redacted, decisions never store it.
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join("p.ts"),
        "export default { id: 'p', server: async () => ({}) }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("opencode.json"),
        format!(r#"{{ "plugin": [["./p.ts", {{ "apiKey": "{canary}" }}]] }}"#),
    )
    .unwrap();
    let env = OpencodeEnv {
        home: dir.path().join("home"),
        cwd: dir.path().to_path_buf(),
        managed_config_dir: dir.path().join("managed"),
        ..OpencodeEnv::default()
    };
    let berth = Berth::open(BerthOptions {
        data_dir: data.clone(),
        project: dir.path().to_path_buf(),
        env,
        log_file: Some(log_file.clone()),
    })
    .unwrap();

    let status = serde_json::to_string(&*berth.status()).unwrap();
    assert!(
        !status.contains(canary),
        "the status shows the option: {status}"
    );
    assert!(status.contains("[redacted]"), "{status}");
    berth
        .decide(None, berth_runtime::Decision::Allow, "cli", false)
        .unwrap();
    let approvals = serde_json::to_string(&berth.approvals().unwrap()).unwrap();
    assert!(!approvals.contains(canary));

    // Every way a careless call site might try: debug-format into a log event, into a
    // message, and store a formatted value.
    tracing::info!(?secret, "received a credential");
    tracing::warn!("header value {:?}", secret);
    let formatted = format!("{secret:?}");
    berth
        .with_store(|s| s.set_meta("last_credential_debug", &formatted))
        .unwrap();
    assert_eq!(
        secret.expose(),
        canary,
        "the value itself is intact for its one legitimate use"
    );

    // Keep the WAL in place (no checkpoint) and search every file in the data dir.
    let mut searched = 0;
    for entry in walk(&data) {
        let bytes = std::fs::read(&entry).unwrap();
        searched += 1;
        assert!(
            !contains(&bytes, canary.as_bytes()),
            "canary found in {}",
            entry.display()
        );
    }
    assert!(
        searched >= 3,
        "log, database and WAL were searched ({searched} files)"
    );
    let log = std::fs::read_to_string(&log_file).unwrap();
    assert!(
        log.contains("received a credential") && log.contains("<redacted>"),
        "the log line itself was written:\n{log}"
    );
    assert!(data.join("berth.db-wal").exists());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p))
        } else {
            out.push(p)
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
