//! Berth's desktop shell: opens the window, hands it the runtime's status snapshot through one
//! Tauri command, and forwards snapshot changes as `status-changed` events.
//!
//! Invariant: no business rules here — everything the window shows comes from
//! `berth-runtime`, exactly as `berth status` and `berth serve` show it.

use std::path::PathBuf;
use std::sync::Arc;

use berth_discovery::OpencodeEnv;
use berth_runtime::approval::DecisionRequest;
use berth_runtime::{default_data_dir, Berth, BerthError, BerthOptions, Decision, StatusSnapshot};
use tauri::{Emitter, Manager};

/// Command-line options of the app (`--data-dir DIR`, `--project DIR`, `--pure`).
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
            _ => {}
        }
    }
    out
}

/// When the process started (for the first-paint figure of the benchmark).
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

#[tauri::command]
fn status(berth: tauri::State<'_, Berth>) -> Arc<StatusSnapshot> {
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
    berth: tauri::State<'_, Berth>,
    ids: Vec<String>,
    digests: std::collections::BTreeMap<String, String>,
    including_fetch: Option<bool>,
) -> Result<Vec<String>, BerthError> {
    let request = DecisionRequest {
        ids,
        digests,
        including_fetch: including_fetch.unwrap_or(false),
    };
    decide(berth, request, Decision::Allow).await
}

/// The window's decisions, under the same rules as the page's (`DecisionRequest`).
async fn decide(
    berth: tauri::State<'_, Berth>,
    request: DecisionRequest,
    decision: Decision,
) -> Result<Vec<String>, BerthError> {
    let choices = request.choices(decision)?;
    let with_fetch = request.including_fetch && decision == Decision::Allow;
    let berth = berth.inner().clone();
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
    berth: tauri::State<'_, Berth>,
    id: String,
    reply: berth_runtime::world::PromptReply,
) -> Result<(), BerthError> {
    berth.answer_prompt(&id, reply)
}

/// The person's value of one policy key (`null`: back to the layer above); refused when it
/// would loosen the organisation's value.
#[tauri::command]
async fn set_policy(
    berth: tauri::State<'_, Berth>,
    key: String,
    value: serde_json::Value,
) -> Result<berth_runtime::policy::Entry, BerthError> {
    let berth = berth.inner().clone();
    let value = Some(value).filter(|v| !v.is_null());
    tauri::async_runtime::spawn_blocking(move || berth.set_policy(&key, value, "app"))
        .await
        .map_err(join_error)?
}

/// Lets one held contribution of a source through its `review` cap, or holds it again.
#[tauri::command]
async fn grant(
    berth: tauri::State<'_, Berth>,
    source: String,
    item: String,
    granted: bool,
) -> Result<(), BerthError> {
    let berth = berth.inner().clone();
    tauri::async_runtime::spawn_blocking(move || berth.grant(&source, &item, granted))
        .await
        .map_err(join_error)?
}

/// The person chooses who serves a contested tool name (as `berth choose`).
#[tauri::command]
async fn choose(
    berth: tauri::State<'_, Berth>,
    tool: String,
    candidate: String,
) -> Result<berth_runtime::snapshot::Conflict, BerthError> {
    berth.inner().clone().choose(&tool, &candidate).await
}

/// Prepares an MCP server's fetch-and-run package in Berth's data dir (as `berth prepare`).
#[tauri::command]
async fn prepare(
    berth: tauri::State<'_, Berth>,
    source: String,
) -> Result<berth_runtime::McpPrepared, BerthError> {
    berth.inner().clone().prepare_mcp(&source).await
}

/// Starts a sign-in to a remote MCP server (as `berth mcp-login`): the provider's page opens
/// in the system browser; returns that page; the snapshots show how it ends.
#[tauri::command]
async fn mcp_sign_in(berth: tauri::State<'_, Berth>, source: String) -> Result<String, BerthError> {
    berth.inner().clone().start_mcp_sign_in(&source).await
}

/// Forgets a remote MCP server's sign-in (as `berth mcp-logout`).
#[tauri::command]
async fn mcp_sign_out(
    berth: tauri::State<'_, Berth>,
    source: String,
) -> Result<berth_runtime::SignedIn, BerthError> {
    berth.inner().clone().mcp_sign_out(&source).await
}

/// Opens Berth's log folder (`logs`) or the global config folder (`config`) in the file
/// manager; the folder opened.
#[tauri::command]
async fn open_folder(
    berth: tauri::State<'_, Berth>,
    folder: String,
) -> Result<std::path::PathBuf, BerthError> {
    let berth = berth.inner().clone();
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
    berth: tauri::State<'_, Berth>,
    calls: tauri::State<'_, berth_runtime::front_calls::FrontCalls>,
    tool: String,
    args: serde_json::Value,
    call: Option<String>,
) -> Result<berth_runtime::Receipt, BerthError> {
    let berth = berth.inner().clone();
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
async fn resume(berth: tauri::State<'_, Berth>) -> Result<Vec<String>, BerthError> {
    let berth = berth.inner().clone();
    Ok(berth
        .resume_hosts()
        .await
        .into_iter()
        .map(|b| format!("{b:?}").to_lowercase())
        .collect())
}

#[tauri::command]
async fn deny(
    berth: tauri::State<'_, Berth>,
    ids: Vec<String>,
    digests: Option<std::collections::BTreeMap<String, String>>,
) -> Result<Vec<String>, BerthError> {
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
    berth: tauri::State<'_, Berth>,
    sources: Option<Vec<String>>,
) -> Result<berth_runtime::updates::Checks, BerthError> {
    let berth = berth.inner().clone();
    Ok(berth.check_updates(sources.as_deref()).await)
}

/// Updates one npm plugin to the newest version its spec allows (progress in the snapshots).
#[tauri::command]
async fn update(
    berth: tauri::State<'_, Berth>,
    source: String,
    approve_growth: Option<bool>,
) -> Result<berth_runtime::updates::Outcome, BerthError> {
    let berth = berth.inner().clone();
    berth.update(&source, approve_growth.unwrap_or(false)).await
}

/// Runs an exact earlier version of an npm plugin again.
#[tauri::command]
async fn rollback(
    berth: tauri::State<'_, Berth>,
    source: String,
    to: Option<i64>,
) -> Result<berth_runtime::updates::Outcome, BerthError> {
    let berth = berth.inner().clone();
    berth.rollback(&source, to).await
}

fn join_error(e: impl std::fmt::Display) -> BerthError {
    BerthError::new(
        berth_runtime::code::TEMPORARILY_UNAVAILABLE,
        "approval",
        e.to_string(),
        "retry",
    )
}

pub fn run() {
    STARTED.get_or_init(std::time::Instant::now);
    let args = parse_args(std::env::args());
    let mut env = OpencodeEnv::from_process();
    env.pure_flag = args.pure;
    let data_dir = args.data_dir.unwrap_or_else(|| default_data_dir(&env));
    let project = args.project.unwrap_or_else(|| env.cwd.clone());
    let log_file = berth_runtime::logging::init(&data_dir, "warn").ok();
    let berth = match Berth::open(BerthOptions {
        data_dir,
        project,
        env,
        log_file,
    }) {
        Ok(b) => b,
        Err(e) => {
            eprintln!(
                "berth-app: {} [{}]\n  what to do: {}",
                e.message, e.code, e.recovery
            );
            std::process::exit(1);
        }
    };

    tauri::Builder::default()
        .manage(berth.clone())
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
            cancel_call
        ])
        .setup(move |app| {
            let handle = app.handle().clone();
            let mut events = berth.subscribe();
            // Forward snapshot changes to the window; the thread ends with the channel.
            std::thread::Builder::new().name("berth-events".into()).spawn(move || {
                while let Ok(ev) = events.blocking_recv() {
                    if let Err(e) = handle.emit("status-changed", &ev) {
                        tracing::warn!(error = %e, "cannot forward a status event to the window");
                    }
                }
            })?;
            let watcher = berth_runtime::watch::watch(berth.clone())?;
            // A person is here: a tool's permission prompt waits for them (non-blocking).
            berth.enable_prompts();
            // Approved sources are activated (and revoked ones withdrawn) in the background;
            // the window never waits on it.
            let active = berth.clone();
            tauri::async_runtime::spawn(async move {
                let _ = active.keep_active().await;
            });
            app.manage(WatchGuard(std::sync::Mutex::new(Some(watcher))));
            Ok(())
        })
        .run(tauri::generate_context!("../tauri.conf.json"))
        .expect("error while running the Berth window");
}

/// Keeps the watcher alive as long as the app.
struct WatchGuard(#[allow(dead_code)] std::sync::Mutex<Option<berth_runtime::watch::WatchHandle>>);
