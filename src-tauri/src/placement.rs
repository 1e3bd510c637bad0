//! The window's size and position, kept across starts (`tauri-plugin-window-state`, in the
//! app's config folder). Saved half a second after the last move or resize as well as on
//! close, so a session that ends without closing the window (a logout, a kill) keeps them.
//!
//! Owns: when the placement is saved. Must not: save on every event of a drag.

use std::sync::mpsc;
use std::time::Duration;

use tauri::{AppHandle, Manager, WindowEvent};
use tauri_plugin_window_state::{AppHandleExt, StateFlags};

/// What is kept: not visibility or decorations (the window always opens shown, as built).
pub const KEPT: StateFlags = StateFlags::SIZE
    .union(StateFlags::POSITION)
    .union(StateFlags::MAXIMIZED);

const QUIET: Duration = Duration::from_millis(500);

/// Saves the main window's placement shortly after it stops moving or resizing.
pub fn keep(app: &AppHandle) {
    let Some(window) = app.get_webview_window("main") else {
        return;
    };
    let (tx, rx) = mpsc::channel::<()>();
    let handle = app.clone();
    let spawned = std::thread::Builder::new()
        .name("berth-placement".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                // Wait for the drag or resize to settle.
                while rx.recv_timeout(QUIET).is_ok() {}
                if let Err(e) = handle.save_window_state(KEPT) {
                    tracing::warn!(error = %e, "cannot save the window's size and position");
                }
            }
        });
    if spawned.is_err() {
        return;
    }
    window.on_window_event(move |e| {
        if matches!(e, WindowEvent::Moved(_) | WindowEvent::Resized(_)) {
            let _ = tx.send(());
        }
    });
}
