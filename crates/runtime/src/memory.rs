//! Gives the heap's free memory back to the OS once Berth goes quiet after work. glibc keeps
//! what a busy moment freed in its per-thread arenas (and raises its mmap threshold after a
//! large output was freed), so a long-running Berth would otherwise hold the high-water mark of
//! its busiest minute for good; measured by `berth-soak`, see docs/performance.md.
//!
//! Owns: that one loop, woken by Berth's own events. Must not: run while nothing happens (an
//! idle Berth does no work), or trim in the middle of a burst more than once a minute.

use std::time::{Duration, Instant};

use tokio::sync::broadcast;

/// Quiet for this long after an event: the work is over, trim.
const QUIET: Duration = Duration::from_secs(2);
/// Busy without a pause for this long: trim anyway.
const BUSY_AT_MOST: Duration = Duration::from_secs(60);

/// Trims after each burst of events, until the event channel closes.
pub async fn keep_trimmed<T: Clone>(mut events: broadcast::Receiver<T>) {
    loop {
        // Idle: wait for work.
        match events.recv().await {
            Err(broadcast::error::RecvError::Closed) => return,
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
        }
        let busy_since = Instant::now();
        loop {
            tokio::time::sleep(QUIET).await;
            let mut more = false;
            loop {
                match events.try_recv() {
                    Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => more = true,
                    Err(broadcast::error::TryRecvError::Empty) => break,
                    Err(broadcast::error::TryRecvError::Closed) => return,
                }
            }
            if !more || busy_since.elapsed() > BUSY_AT_MOST {
                break;
            }
        }
        let _ = tokio::task::spawn_blocking(trim).await;
    }
}

/// Returns free heap pages of every arena to the OS.
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes and
    // returns no pointers of ours.
    unsafe {
        libc::malloc_trim(0);
    }
}
