//! Berth's desktop shell: opens the window, hands it the runtime's status snapshot through one
//! Tauri command, and forwards snapshot changes as `status-changed` events (`session`: the
//! project the window has open, and opening another one in place).
//!
//! Invariant: no business rules here — everything the window shows comes from
//! `berth-runtime`, exactly as `berth status` and `berth serve` show it.

use std::path::PathBuf;
use std::sync::Arc;

use berth_discovery::OpencodeEnv;
use berth_runtime::approval::DecisionRequest;
use berth_runtime::{default_data_dir, Berth, BerthError, Decision, StatusSnapshot};
use tauri::{Emitter, Manager};

mod notify;
mod placement;
mod session;
use session::Session;

/// Command-line options of the app (`--data-dir DIR`, `--project DIR` or a bare folder, as a
/// file manager passes it, `--pure`). No project: the window opens on the project picker.
#[derive(Debug, Default)]
struct AppArgs {
    data_dir: Option<PathBuf>,
    project: Option<PathBuf>,
    pure: bool,
}

fn parse_args(args: impl Iterator<Item = String>) -> AppArgs {
    let mut out = AppArgs::default();
    let mut it = args.skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--data-dir" => out.data_dir = it.next().map(PathBuf::from),
            "--project" => out.project = it.next().map(PathBuf::from),
            "--pure" => out.pure = true,
            other if !other.starts_with('-') && out.project.is_none() => {
                out.project = Some(PathBuf::from(other))
            }
            _ => {}
        }
    }
    out
}

/// When the process started (for the first-paint figure of the benchmark).
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

#[tauri::command]
fn status(session: tauri::State<'_, Session>) -> Arc<StatusSnapshot> {
    let berth = session.berth();
    report_first_paint();
    berth.status()
}

/// The page asks for the status as soon as it has loaded: with `BERTH_FIRST_PAINT_FILE` set,
/// the time from process start to that first request is written there (once).
fn report_first_paint() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let (Some(file), Some(start)) =
            (std::env::var_os("BERTH_FIRST_PAINT_FILE"), STARTED.get())
        {
            let _ = std::fs::write(file, format!("{}\n", start.elapsed().as_millis()));
        }
    });
}

/// Allow the given sources (the approval panel's "Allow"), each with the digest it showed.
#[tauri::command]
async fn approve(
    session: tauri::State<'_, Session>,
    ids: Vec<String>,
    digests: std::collections::BTreeMap<String, String>,
    including_fetch: Option<bool>,
) -> Result<Vec<String>, BerthError> {
    let berth = session.berth();
    let request = DecisionRequest {
        ids,
        digests,
        including_fetch: including_fetch.unwrap_or(false),
    };
    decide(berth, request, Decision::Allow).await
}

/// The window's decisions, under the same rules as the page's (`DecisionRequest`).
async fn decide(
    berth: Berth,
    request: DecisionRequest,
    decision: Decision,
) -> Result<Vec<String>, BerthError> {
    let choices = request.choices(decision)?;
    let with_fetch = request.including_fetch && decision == Decision::Allow;
    tauri::async_runtime::spawn_blocking(move || {
        let decided = if with_fetch {
            berth.approve_including_fetch(Some(&choices), "app", false)
        } else {
            berth.decide(Some(&choices), decision, "app", false)
        };
        decided.map(|decided| decided.into_iter().map(|d| d.id).collect())
    })
    .await
    .map_err(join_error)?
}

/// Deny the given sources (the approval panel's "Deny").
/// The person's answer to a tool's permission prompt (`once`, `always`, `reject`).
#[tauri::command]
fn answer_prompt(
    session: tauri::State<'_, Session>,
    id: String,
    reply: berth_runtime::world::PromptReply,
) -> Result<(), BerthError> {
    let berth = session.berth();
    berth.answer_prompt(&id, reply)
}

/// The person's value of one policy key (`null`: back to the layer above); refused when it
/// would loosen the organisation's value.
#[tauri::command]
async fn set_policy(
    session: tauri::State<'_, Session>,
    key: String,
    value: serde_json::Value,
) -> Result<berth_runtime::policy::Entry, BerthError> {
    let berth = session.berth();
    let value = Some(value).filter(|v| !v.is_null());
    tauri::async_runtime::spawn_blocking(move || berth.set_policy(&key, value, "app"))
        .await
        .map_err(join_error)?
}

/// Lets one held contribution of a source through its `review` cap, or holds it again.
#[tauri::command]
async fn grant(
    session: tauri::State<'_, Session>,
    source: String,
    item: String,
    granted: bool,
) -> Result<(), BerthError> {
    let berth = session.berth();
    tauri::async_runtime::spawn_blocking(move || berth.grant(&source, &item, granted))
        .await
        .map_err(join_error)?
}

/// The person chooses who serves a contested tool name (as `berth choose`).
#[tauri::command]
async fn choose(
    session: tauri::State<'_, Session>,
    tool: String,
    candidate: String,
) -> Result<berth_runtime::snapshot::Conflict, BerthError> {
    let berth = session.berth();
    berth.choose(&tool, &candidate).await
}

/// Prepares an MCP server's fetch-and-run package in Berth's data dir (as `berth prepare`).
#[tauri::command]
async fn prepare(
    session: tauri::State<'_, Session>,
    source: String,
) -> Result<berth_runtime::McpPrepared, BerthError> {
    let berth = session.berth();
    berth.prepare_mcp(&source).await
}

/// Starts a sign-in to a remote MCP server (as `berth mcp-login`): the provider's page opens
/// in the system browser; returns that page; the snapshots show how it ends.
#[tauri::command]
async fn mcp_sign_in(
    session: tauri::State<'_, Session>,
    source: String,
) -> Result<String, BerthError> {
    let berth = session.berth();
    berth.start_mcp_sign_in(&source).await
}

/// Forgets a remote MCP server's sign-in (as `berth mcp-logout`).
#[tauri::command]
async fn mcp_sign_out(
    session: tauri::State<'_, Session>,
    source: String,
) -> Result<berth_runtime::SignedIn, BerthError> {
    let berth = session.berth();
    berth.mcp_sign_out(&source).await
}

/// Opens Berth's log folder (`logs`) or the global config folder (`config`) in the file
/// manager; the folder opened.
#[tauri::command]
async fn open_folder(
    session: tauri::State<'_, Session>,
    folder: String,
) -> Result<std::path::PathBuf, BerthError> {
    let berth = session.berth();
    let folder = berth_runtime::folders::Folder::parse(&folder)?;
    tauri::async_runtime::spawn_blocking(move || berth_runtime::folders::open(&berth, folder))
        .await
        .map_err(|e| {
            BerthError::new(
                berth_runtime::code::TEMPORARILY_UNAVAILABLE,
                "open folder",
                e.to_string(),
                "retry",
            )
        })?
}

/// "Try it": one call of `tool` through the full path (hooks, permission prompts, a receipt),
/// under the window's id `call` for `cancel_call`; the receipt as stored.
#[tauri::command]
async fn invoke_tool(
    session: tauri::State<'_, Session>,
    calls: tauri::State<'_, berth_runtime::front_calls::FrontCalls>,
    tool: String,
    args: serde_json::Value,
    call: Option<String>,
) -> Result<berth_runtime::Receipt, BerthError> {
    let berth = session.berth();
    let (control, _running) = calls.start(call.as_deref());
    let args = if args.is_null() {
        serde_json::json!({})
    } else {
        args
    };
    berth.invoke(&tool, args, None, None, control).await
}

/// Cancels the window's call `call`; false when it had ended.
#[tauri::command]
fn cancel_call(
    calls: tauri::State<'_, berth_runtime::front_calls::FrontCalls>,
    call: String,
) -> bool {
    calls.cancel(&call)
}

/// Manual resume of paused plugin hosts; the backends that were paused.
#[tauri::command]
async fn resume(session: tauri::State<'_, Session>) -> Result<Vec<String>, BerthError> {
    let berth = session.berth();
    Ok(berth
        .resume_hosts()
        .await
        .into_iter()
        .map(|b| format!("{b:?}").to_lowercase())
        .collect())
}

#[tauri::command]
async fn deny(
    session: tauri::State<'_, Session>,
    ids: Vec<String>,
    digests: Option<std::collections::BTreeMap<String, String>>,
) -> Result<Vec<String>, BerthError> {
    let berth = session.berth();
    let request = DecisionRequest {
        ids,
        digests: digests.unwrap_or_default(),
        including_fetch: false,
    };
    decide(berth, request, Decision::Deny).await
}

/// Asks the registry now what each npm plugin's spec allows (`sources`: all with none).
#[tauri::command]
async fn check_updates(
    session: tauri::State<'_, Session>,
    sources: Option<Vec<String>>,
) -> Result<berth_runtime::updates::Checks, BerthError> {
    let berth = session.berth();
    Ok(berth.check_updates(sources.as_deref()).await)
}

/// Updates one npm plugin to the newest version its spec allows (progress in the snapshots).
#[tauri::command]
async fn update(
    session: tauri::State<'_, Session>,
    source: String,
    approve_growth: Option<bool>,
) -> Result<berth_runtime::updates::Outcome, BerthError> {
    let berth = session.berth();
    berth.update(&source, approve_growth.unwrap_or(false)).await
}

/// Runs an exact earlier version of an npm plugin again.
#[tauri::command]
async fn rollback(
    session: tauri::State<'_, Session>,
    source: String,
    to: Option<i64>,
) -> Result<berth_runtime::updates::Outcome, BerthError> {
    let berth = session.berth();
    berth.rollback(&source, to).await
}

fn join_error(e: impl std::fmt::Display) -> BerthError {
    failed("approval", e)
}

/// A failure of the shell itself (a worker thread that could not run), for `capability`.
pub(crate) fn failed(capability: &'static str, e: impl std::fmt::Display) -> BerthError {
    BerthError::new(
        berth_runtime::code::TEMPORARILY_UNAVAILABLE,
        capability,
        e.to_string(),
        "retry; if it keeps failing, restart Berth",
    )
}

/// The project picker's contents: the open project (none: what applies to every project)
/// and the folders opened before.
#[tauri::command]
fn projects(
    session: tauri::State<'_, Session>,
) -> Result<berth_runtime::projects::Projects, BerthError> {
    berth_runtime::projects::list(&session.berth())
}

/// Opens `path` as the window's project, or with no path the folder the person picks in the
/// native dialog (nothing changes when they cancel it); `none: true` closes the project.
#[tauri::command]
async fn open_project(
    app: tauri::AppHandle,
    session: tauri::State<'_, Session>,
    path: Option<String>,
    none: Option<bool>,
) -> Result<berth_runtime::projects::Projects, BerthError> {
    let target = match (path, none.unwrap_or(false)) {
        (_, true) => None,
        (Some(p), false) => Some(PathBuf::from(p)),
        (None, false) => match pick_folder(&app).await {
            Some(p) => Some(p),
            None => return berth_runtime::projects::list(&session.berth()),
        },
    };
    session.switch(&app, target).await
}

/// Takes a folder off the recent list.
#[tauri::command]
fn forget_project(session: tauri::State<'_, Session>, path: String) -> Result<bool, BerthError> {
    berth_runtime::projects::forget(&session.berth(), std::path::Path::new(&path))
}

/// The folder the person picks in the native folder dialog (`None`: cancelled). Debug builds
/// only: `BERTH_TEST_PICK_FOLDER` answers for the dialog, so the window tests can drive the
/// picker; release builds have no such hook.
async fn pick_folder(app: &tauri::AppHandle) -> Option<PathBuf> {
    #[cfg(debug_assertions)]
    if let Some(p) = std::env::var_os("BERTH_TEST_PICK_FOLDER").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    use tauri_plugin_dialog::DialogExt;
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.dialog()
        .file()
        .set_title("Open a project folder")
        .pick_folder(move |folder| {
            let _ = tx.send(folder.and_then(|f| f.into_path().ok()));
        });
    rx.await.ok().flatten()
}

pub fn run() {
    STARTED.get_or_init(std::time::Instant::now);
    let args = parse_args(std::env::args());
    let mut env = OpencodeEnv::from_process();
    env.pure_flag = args.pure;
    let data_dir = args.data_dir.unwrap_or_else(|| default_data_dir(&env));
    let log_file = berth_runtime::logging::init(&data_dir, "warn").ok();
    let base = session::Base {
        data_dir,
        env,
        log_file,
    };
    let session = match Session::open(base, args.project.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "berth-app: {} [{}]\n  what to do: {}",
                e.message, e.code, e.recovery
            );
            std::process::exit(1);
        }
    };

    let mut builder = tauri::Builder::default();
    if session_bus_known() {
        // A second launch hands its arguments here and ends: the running window comes to the
        // front, on the project it was given (if any).
        builder = builder.plugin(tauri_plugin_single_instance::init(|app, argv, cwd| {
            second_launch(app, argv, cwd)
        }));
    } else {
        tracing::info!("no session bus: a second launch opens a second window");
    }
    builder
        .plugin(tauri_plugin_dialog::init())
        .plugin(
            tauri_plugin_window_state::Builder::new()
                .with_state_flags(placement::KEPT)
                .build(),
        )
        .manage(session)
        .manage(berth_runtime::front_calls::FrontCalls::default())
        .invoke_handler(tauri::generate_handler![
            status,
            approve,
            deny,
            answer_prompt,
            resume,
            set_policy,
            grant,
            check_updates,
            update,
            rollback,
            choose,
            prepare,
            mcp_sign_in,
            mcp_sign_out,
            open_folder,
            invoke_tool,
            cancel_call,
            projects,
            open_project,
            forget_project
        ])
        .setup(move |app| {
            let handle = app.handle().clone();
            let _runtime = tauri::async_runtime::handle().inner().enter();
            app.state::<Session>().start(&handle)?;
            placement::keep(&handle);
            Ok(())
        })
        .run(tauri::generate_context!("../tauri.conf.json"))
        .expect("error while running the Berth window");
}

/// Another `berth-app` was started while this one runs: bring the window forward and open
/// the project its arguments name (a folder from the file manager, or `--project DIR`),
/// resolved against the directory it was started in.
fn second_launch(app: &tauri::AppHandle, argv: Vec<String>, cwd: String) {
    if let Some(w) = app.get_webview_window("main") {
        let _ = w.unminimize();
        let _ = w.show();
        let _ = w.set_focus();
    }
    let Some(project) = parse_args(argv.into_iter()).project else {
        return;
    };
    let project = PathBuf::from(cwd).join(project);
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let session = app.state::<Session>();
        if let Err(e) = session.switch(&app, Some(project)).await {
            tracing::warn!(code = e.code, "{} ({})", e.message, e.recovery);
            let _ = app.emit("project-error", &e);
        }
    });
}

/// Whether the desktop session's message bus has an address (the single-instance handshake
/// runs over it; without one the plugin cannot start).
fn session_bus_known() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR")
            .is_some_and(|d| std::path::Path::new(&d).join("bus").exists())
}
