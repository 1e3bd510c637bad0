//! The watcher: a file created in a config folder (even one that did not exist) reaches
//! subscribers as a snapshot event, with no polling.

use std::time::{Duration, Instant};

use berth_runtime::Berth;

#[path = "support.rs"]
mod support;

fn open(dir: &std::path::Path) -> Berth {
    support::open_project(dir, &[])
}

/// The first event whose snapshot lists `file` as a source's entry, within 5 s.
fn published(
    rt: &tokio::runtime::Runtime,
    events: &mut tokio::sync::broadcast::Receiver<berth_runtime::StatusEvent>,
    file: &std::path::Path,
) -> Option<berth_runtime::StatusEvent> {
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let ev = events.recv().await.unwrap();
                if ev
                    .snapshot
                    .sources
                    .iter()
                    .any(|s| s.entry == file.display().to_string())
                {
                    return ev;
                }
            }
        })
        .await
        .ok()
    })
}

#[test]
fn a_new_plugin_file_in_a_folder_that_did_not_exist_is_published() {
    let dir = tempfile::tempdir().unwrap();
    let berth = open(dir.path());
    assert!(berth.status().sources.is_empty());
    let mut events = berth.subscribe();
    let _watch = berth_runtime::watch::watch(berth.clone()).unwrap();

    let plugins = dir.path().join("home/.config/opencode/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let file = plugins.join("live.ts");
    let started = Instant::now();
    std::fs::write(
        &file,
        "export default { id: 'live', server: async () => ({}) }\n",
    )
    .unwrap();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let event = published(&rt, &mut events, &file).expect("an event within 5 s");
    assert_eq!(event.diff.added.len(), 1);
    eprintln!("file change → event: {:?}", started.elapsed());

    // Removing it is published too.
    std::fs::remove_file(&file).unwrap();
    let removed = rt.block_on(async {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(5), events.recv())
                .await
                .expect("an event within 5 s")
                .unwrap();
            if !ev.diff.removed.is_empty() {
                return ev;
            }
        }
    });
    assert!(removed.snapshot.sources.is_empty());
}

/// A file written without pause (a plugin's log, a ticker) in a watched folder cannot hold
/// rescans back: a new plugin file next to it is still published, within the debounce's
/// longest wait.
#[test]
fn a_file_written_without_pause_does_not_hold_back_the_rescan() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("home/.config/opencode/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let berth = open(dir.path());
    let mut events = berth.subscribe();
    let _watch = berth_runtime::watch::watch(berth.clone()).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = {
        let (stop, path) = (stop.clone(), plugins.join("ticks.log"));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                std::fs::write(&path, n.to_string()).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
            n
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let file = plugins.join("live.ts");
    std::fs::write(
        &file,
        "export default { id: 'live', server: async () => ({}) }\n",
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let seen = published(&rt, &mut events, &file);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let ticks = ticker.join().unwrap();
    assert!(
        ticks > 20,
        "the ticker wrote only {ticks} times: the test proves nothing"
    );
    assert!(
        seen.is_some(),
        "the new plugin was not published while a file kept changing"
    );
}
