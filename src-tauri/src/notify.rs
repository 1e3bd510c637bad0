//! Desktop notifications (freedesktop `org.freedesktop.Notifications` on the session bus) for
//! what waits for the person while the window is not in front: the runtime says what is new
//! (`berth_runtime::attention`); a click on the notification (its `default` action) brings the
//! window forward and to that item (`focus-item` to the page). Nothing modal, nothing waits on
//! the person here.
//!
//! Owns: sending the notification and following its click. Must not: decide what deserves a
//! notice (the runtime does) or block the thread that forwards snapshots.

use std::collections::HashMap;

use berth_runtime::attention::Notice;
use tauri::{AppHandle, Emitter, Manager};
use zbus::zvariant::Value;

const BUS_NAME: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

/// Whether the person is looking at the window (then nothing is sent: the page shows it).
pub fn window_in_front(app: &AppHandle) -> bool {
    app.get_webview_window("main")
        .and_then(|w| w.is_focused().ok())
        .unwrap_or(false)
}

/// Sends `notice` on a thread of its own, which then waits for its click (or its closing).
pub fn send(app: &AppHandle, notice: Notice) {
    let app = app.clone();
    let spawned = std::thread::Builder::new()
        .name("berth-notice".into())
        .spawn(move || {
            if let Err(e) = show_and_follow(&app, &notice) {
                tracing::info!(error = %e, "no desktop notification (no notification service on the session bus)");
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the notification thread");
    }
}

fn show_and_follow(app: &AppHandle, notice: &Notice) -> zbus::Result<()> {
    let conn = zbus::blocking::Connection::session()?;
    // Subscribe before sending, so a click that comes at once is not missed.
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(BUS_NAME)?
        .path(PATH)?
        .build();
    let mut signals = zbus::blocking::MessageIterator::for_match_rule(rule, &conn, Some(64))?;
    let hints: HashMap<&str, Value<'_>> = HashMap::from([
        ("desktop-entry", Value::from("Berth")),
        ("urgency", Value::U8(1)),
    ]);
    let reply = conn.call_method(
        Some(BUS_NAME),
        PATH,
        Some(BUS_NAME),
        "Notify",
        &(
            "Berth",
            0u32,
            "berth-app",
            notice.title.as_str(),
            notice.body.as_str(),
            vec!["default", "Show in Berth"],
            hints,
            -1i32,
        ),
    )?;
    let id: u32 = reply.body().deserialize()?;
    for msg in signals.by_ref() {
        let msg = msg?;
        let header = msg.header();
        match header.member().map(|m| m.as_str()) {
            Some("ActionInvoked") => {
                let (nid, action): (u32, String) = msg.body().deserialize()?;
                if nid == id && action == "default" {
                    bring_to(app, notice);
                    return Ok(());
                }
            }
            Some("NotificationClosed") => {
                let (nid, _reason): (u32, u32) = msg.body().deserialize()?;
                if nid == id {
                    return Ok(());
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The notification's click: the window comes forward and the page shows the item.
fn bring_to(app: &AppHandle, notice: &Notice) {
    if let Some(w) = app.get_webview_window("main") {
        let _ = w.unminimize();
        let _ = w.show();
        let _ = w.set_focus();
    }
    if let Err(e) = app.emit("focus-item", &notice.item) {
        tracing::warn!(error = %e, "cannot bring the window to the item");
    }
}
