//! `berth`: parse the command line, call the runtime, print the result. No rules live here.
//!
//! With `--json` every command prints exactly one JSON document on stdout; exit code 0 on
//! success, 1 when the operation failed (stdout holds `{"error": …}`), 2 when the command line
//! was wrong.

mod check;
mod lifecycle;
mod mcp;
mod output;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use berth_discovery::OpencodeEnv;
use berth_runtime::{code, default_data_dir, Berth, BerthError, BerthOptions, Decision};
use clap::{Parser, Subcommand};

use output::Out;

#[derive(Parser, Debug)]
#[command(
    name = "berth",
    version,
    about = "Host OpenCode plugins and tools, governed and visible"
)]
struct Cli {
    /// Berth's state folder (default: $XDG_DATA_HOME/berth).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The workspace (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Print exactly one JSON document on stdout.
    #[arg(long, global = true)]
    json: bool,
    /// Use no external plugins (as `opencode --pure`).
    #[arg(long, global = true)]
    pure: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The status snapshot the app renders.
    Status,
    /// Discovered plugins, tools and MCP servers, without running any of them.
    Sources,
    /// The active tool catalog (activates approved sources).
    Tools,
    /// Tool names several candidates register (built-in, tool file, plugin, MCP server): who
    /// serves each, and whether it waits for your choice (activates approved sources).
    Conflicts,
    /// Choose who serves a contested tool name: a candidate id from `berth conflicts` (a
    /// source id, or `builtin`). The choice holds until any candidate changes.
    Choose { tool: String, candidate: String },
    /// For an MCP server started with `npx -y pkg` (or bunx, pnpm dlx): install the newest
    /// version of its package once in Berth's data dir (integrity checked, install scripts
    /// off) and run it from there, instead of whatever is newest at every start.
    Prepare { id: String },
    /// Sign in to a remote MCP server that asks for it (OAuth): its page opens in your browser
    /// (`$BROWSER`, else the desktop's default; the link is printed too) and the token goes to
    /// the OS keyring. `server` is its source id or its name in the config.
    McpLogin { server: String },
    /// Forget a remote MCP server's sign-in (it asks again on its next connection).
    McpLogout { server: String },
    /// Call one tool through the full path and print its receipt.
    Invoke {
        tool: String,
        /// Arguments: inline JSON or @file.
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long)]
        idempotency_key: Option<String>,
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// Run one hook chain as OpenCode would and print the final output.
    Hook {
        name: String,
        /// The hook's input: inline JSON or @file.
        #[arg(long, default_value = "{}")]
        input: String,
        /// The initial output object: inline JSON or @file.
        #[arg(long, default_value = "{}")]
        output: String,
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// Receipts of calls, newest first.
    Receipts {
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Allow sources to run (by id, or every source waiting for a decision with --all).
    /// `ID@DIGEST` approves only if the source is still what `berth sources` showed (the
    /// full digest or at least 8 of its hex digits); otherwise nothing is approved.
    Approve {
        #[arg(required_unless_present = "all", value_name = "ID[@DIGEST]")]
        ids: Vec<String>,
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        /// Decide for this project only (overrides the decision for every project).
        #[arg(long)]
        this_project: bool,
        /// For an npm plugin not fetched yet: allow what the fetch brings too (both steps at
        /// once; the fetched bytes are still read and recorded before anything runs).
        #[arg(long)]
        including_fetch: bool,
    },
    /// Refuse sources: they are never imported, and running ones are withdrawn.
    Deny {
        #[arg(required = true)]
        ids: Vec<String>,
        /// Decide for this project only (overrides the decision for every project).
        #[arg(long)]
        this_project: bool,
    },
    /// Give sources a host of their own: no other plugin shares their process (plugins that
    /// share a host can reach each other's code and data). `--off` puts them back.
    Isolate {
        #[arg(required = true)]
        ids: Vec<String>,
        #[arg(long)]
        off: bool,
    },
    /// Every approval decision, newest first, with the digests it applies to.
    Approvals,
    /// Write a consistent copy of Berth's store to FILE.
    Backup { file: PathBuf },
    /// Replace Berth's store with the contents of FILE (made by `berth backup`).
    Restore { file: PathBuf },
    /// For plugin authors: load a plugin, tool file, folder or npm spec in a throw-away domain
    /// and report what it contributes and every problem (exit 1 on a problem).
    Check { target: String },
    /// Logins that plugins' `auth` hooks offer; credentials go to the OS keyring.
    Auth {
        #[command(subcommand)]
        action: Option<AuthAction>,
    },
    /// Permissions tools ask for (`ctx.ask`): your caps, standing answers and the decisions.
    Permissions {
        #[command(subcommand)]
        action: Option<PermissionAction>,
    },
    /// The effective policy: each value, the layer that set it (organisation > product >
    /// your settings) and whether you may change it; per source, the mode it runs in.
    Policy {
        #[command(subcommand)]
        action: Option<PolicyAction>,
    },
    /// npm plugins: the version each runs, its update policy and the last check; `--check`
    /// asks the registry now what each spec allows (never done in the background unless the
    /// plugin's update policy says so).
    Updates {
        ids: Vec<String>,
        #[arg(long)]
        check: bool,
    },
    /// Update an npm plugin (or an MCP server Berth prepared) to the newest version its spec
    /// allows: prepared while the version that runs keeps serving, then the old one stopped and
    /// the new one loaded. One that can do more waits for `--approve-growth`.
    Update {
        id: String,
        #[arg(long)]
        approve_growth: bool,
    },
    /// Run an exact earlier version of a plugin, tool file or prepared MCP server again
    /// (default: the one before).
    Rollback {
        id: String,
        /// The execution version to run (its id in `berth versions`).
        #[arg(long, value_name = "VERSION_ID")]
        to: Option<i64>,
    },
    /// Every version of a source that ran here: what it was, why it ran, whether its exact
    /// bytes are kept.
    Versions { id: String },
    /// Serve your approved tools to an agent over MCP (stdio): OpenCode, Claude Code, Codex.
    #[command(after_long_help = mcp::AFTER_HELP)]
    Mcp {
        /// Also serve Berth's built-ins (read, glob, grep: limited to the project, receipted)
        /// where they serve their names; off by default, since the agent has its own.
        #[arg(long)]
        builtins: bool,
    },
    /// Serve the status page and local API on loopback (token-protected).
    Serve {
        #[arg(long, default_value = "127.0.0.1:0", value_name = "127.0.0.1:PORT")]
        addr: SocketAddr,
    },
}

#[derive(Subcommand, Debug)]
enum AuthAction {
    /// Providers with a login, their methods, and whether a credential is stored (default).
    List,
    /// Run one login method. Prompt answers, API keys and OAuth codes are read from stdin,
    /// one per line (never from the command line, where other processes could see them).
    Login {
        provider: String,
        /// The method's index in `berth auth list`.
        #[arg(long, default_value_t = 0)]
        method: usize,
    },
    /// Remove the stored credential of a provider.
    Logout { provider: String },
}

#[derive(Subcommand, Debug)]
enum PolicyAction {
    /// Every value with its layer (default).
    Show,
    /// Set your value of KEY (JSON, or a bare word); `--unset` goes back to the layer above.
    /// Refused when it would loosen the organisation's value.
    Set {
        key: String,
        #[arg(required_unless_present = "unset")]
        value: Option<String>,
        #[arg(long, conflicts_with = "value")]
        unset: bool,
    },
    /// Let one contribution of a source through a `review` cap (ITEM as the source lists it,
    /// e.g. `hook:shell.env` or `tool:webfetch`).
    Allow { source: String, item: String },
    /// Hold it for review again.
    Hold { source: String, item: String },
}

#[derive(Subcommand, Debug)]
enum PermissionAction {
    /// Caps, standing answers and the newest decisions (default).
    List {
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// The most a plugin's `permission.ask` answer may grant for PERMISSION (default: ask).
    Cap {
        permission: String,
        #[arg(value_parser = ["allow", "ask", "deny"])]
        level: String,
    },
    /// Always allow PERMISSION for PATTERN (`*` for every pattern) without asking; for every
    /// plugin, or only for the one given with --plugin.
    Allow {
        permission: String,
        pattern: String,
        #[arg(long, value_name = "SOURCE_ID")]
        plugin: Option<String>,
    },
    /// Always refuse PERMISSION for PATTERN (every plugin, or the one given with --plugin).
    Deny {
        permission: String,
        pattern: String,
        #[arg(long, value_name = "SOURCE_ID")]
        plugin: Option<String>,
    },
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let wants_json = argv.iter().any(|a| a == "--json");
    let cli = match Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(
                e.kind(),
                DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            if wants_json {
                let err = BerthError::new(
                    code::INVALID_ARGUMENTS,
                    "cli",
                    e.kind().to_string(),
                    "run `berth --help` for the usage",
                );
                output::print_json(&serde_json::json!({ "error": err }));
            }
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    let out = Out { json: cli.json };
    match run(cli, &out) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::FailedReported) => ExitCode::from(1),
        Err(e) => {
            out.error(&e);
            ExitCode::from(1)
        }
    }
}

fn open(cli: &Cli) -> Result<Berth, BerthError> {
    let mut env = OpencodeEnv::from_process();
    env.pure_flag = cli.pure;
    if matches!(cli.command, Command::Mcp { .. }) {
        // An agent that starts `berth mcp` passes its own environment down: its
        // OPENCODE_PURE says that the agent loads no plugins itself (they run here instead),
        // not that Berth should not run them. Berth's own `--pure` still holds.
        env.pure_env = None;
    }
    let data_dir = cli
        .data_dir
        .clone()
        .unwrap_or_else(|| default_data_dir(&env));
    let data_dir = if data_dir.is_absolute() {
        data_dir
    } else {
        env.cwd.join(data_dir)
    };
    let project = cli.project.clone().unwrap_or_else(|| env.cwd.clone());
    let log_file = berth_runtime::logging::init(&data_dir, "warn").ok();
    Berth::open(BerthOptions {
        data_dir,
        project,
        env,
        log_file,
    })
}

/// How a command ended when it did not return an error.
enum Outcome {
    Ok,
    /// Failed, and stdout already says how (a failed receipt).
    FailedReported,
}

fn run(cli: Cli, out: &Out) -> Result<Outcome, BerthError> {
    if let Command::Check { target } = &cli.command {
        // Its own scratch domain: the user's data dir and project are not opened.
        return Ok(if check::check(target, out)? {
            Outcome::Ok
        } else {
            Outcome::FailedReported
        });
    }
    let berth = open(&cli)?;
    match &cli.command {
        Command::Status => out.status(&berth.status()),
        Command::Sources => out.sources(&berth.status()),
        Command::Approve {
            ids,
            all,
            this_project,
            including_fetch,
        } => {
            let ids = if *all { None } else { Some(&ids[..]) };
            let decided = if *including_fetch {
                berth.approve_including_fetch(ids, "cli", *this_project)?
            } else {
                berth.decide(ids, Decision::Allow, "cli", *this_project)?
            };
            let ids: Vec<&str> = decided.iter().map(|d| d.id.as_str()).collect();
            // Each with the digest of the bytes approved: what runs is exactly that.
            let shown: Vec<String> = decided
                .iter()
                .map(|d| format!("{}@{}", d.id, output::short_digest(&d.digest)))
                .collect();
            out.done(
                serde_json::json!({ "approved": ids }),
                &format!(
                    "approved: {}",
                    if ids.is_empty() {
                        "nothing was waiting".to_string()
                    } else {
                        shown.join(", ")
                    }
                ),
            );
        }
        Command::Deny { ids, this_project } => {
            let decided = berth.decide(Some(ids), Decision::Deny, "cli", *this_project)?;
            let ids: Vec<&str> = decided.iter().map(|d| d.id.as_str()).collect();
            out.done(
                serde_json::json!({ "denied": ids }),
                &format!("denied: {}", ids.join(", ")),
            );
        }
        Command::Isolate { ids, off } => {
            let ids = berth.set_own_host(ids, !off)?;
            out.done(
                serde_json::json!({ "own_host": !off, "sources": ids }),
                &format!(
                    "{}: {}",
                    if *off {
                        "back in the shared host"
                    } else {
                        "in a host of its own"
                    },
                    ids.join(", ")
                ),
            );
        }
        Command::Approvals => out.approvals(&berth.approvals()?),
        Command::Policy { action } => policy_command(&berth, out, action.as_ref())?,
        Command::Tools => {
            let act = block_on(async {
                let act = berth.activate().await;
                berth.shutdown_hosts().await;
                act
            })?;
            out.tools(&act);
        }
        Command::Conflicts => {
            let act = block_on(async {
                let act = berth.activate().await;
                berth.shutdown_hosts().await;
                act
            })?;
            out.conflicts(&act);
        }
        Command::Prepare { id } => {
            let p = block_on(async {
                let r = berth.prepare_mcp(id).await;
                berth.shutdown_hosts().await;
                r
            })??;
            out.done(
                serde_json::json!({ "prepared": p }),
                &format!(
                    "{id}: {}@{} prepared (integrity {}), runs from Berth's data dir",
                    p.package, p.version, p.integrity
                ),
            );
        }
        Command::McpLogin { server } => {
            let done = block_on(async {
                let r = berth
                    .mcp_sign_in(server, |url| {
                        eprintln!("berth: sign in to `{server}` in your browser; if none opened, open:\n  {url}");
                    })
                    .await;
                berth.shutdown_hosts().await;
                r
            })??;
            out.done(
                serde_json::json!({ "signed_in": done }),
                &format!(
                    "{}: signed in to {} (the token is in the OS keyring)",
                    done.source, done.host
                ),
            );
        }
        Command::McpLogout { server } => {
            let done = block_on(async {
                let r = berth.mcp_sign_out(server).await;
                berth.shutdown_hosts().await;
                r
            })??;
            out.done(
                serde_json::json!({ "signed_out": done }),
                &format!("{}: signed out of {}", done.source, done.host),
            );
        }
        Command::Choose { tool, candidate } => {
            let chosen = block_on(async {
                let r = berth.choose(tool, candidate).await;
                berth.shutdown_hosts().await;
                r
            })??;
            out.done(
                serde_json::json!({ "conflict": chosen }),
                &format!(
                    "`{}` is served by {} ({})",
                    chosen.tool, candidate, chosen.reason
                ),
            );
        }
        Command::Invoke {
            tool,
            args,
            idempotency_key,
            timeout_ms,
        } => {
            let args = json_arg(args, "--args")?;
            let receipt = block_on(async {
                // Ctrl-C cancels the call: the plugin's AbortSignal fires, the receipt says so.
                let control = berth_runtime::catalog::CallControl::default();
                let cancel = control.cancel.clone();
                tokio::spawn(async move {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        cancel.notify_one();
                    }
                });
                let r = berth
                    .invoke(
                        tool,
                        args,
                        idempotency_key.as_deref(),
                        timeout_ms.map(std::time::Duration::from_millis),
                        control,
                    )
                    .await;
                berth.shutdown_hosts().await;
                r
            })??;
            let ok = receipt.status == berth_store::ReceiptStatus::Completed;
            out.receipt(&receipt);
            // The receipt on stdout carries the error; only the exit code is left to say.
            return Ok(if ok {
                Outcome::Ok
            } else {
                Outcome::FailedReported
            });
        }
        Command::Hook {
            name,
            input,
            output,
            timeout_ms,
        } => {
            let input = json_arg(input, "--input")?;
            let output = json_arg(output, "--output")?;
            let result = block_on(async {
                let r = berth
                    .run_hook(
                        name,
                        input,
                        output,
                        timeout_ms.map(std::time::Duration::from_millis),
                    )
                    .await;
                berth.shutdown_hosts().await;
                r
            })??;
            out.done(
                serde_json::json!({ "output": result }),
                &serde_json::to_string_pretty(&result).unwrap_or_default(),
            );
        }
        Command::Receipts { limit } => out.receipts(&berth.receipts(*limit)?),
        Command::Backup { file } => {
            berth.backup(file)?;
            let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
            out.done(
                serde_json::json!({ "backup": { "path": absolute(file), "bytes": bytes } }),
                &format!("backup written to {} ({bytes} bytes)", file.display()),
            );
        }
        Command::Restore { file } => {
            berth.restore(file)?;
            out.done(
                serde_json::json!({ "restored": { "from": absolute(file) } }),
                &format!("store restored from {}", file.display()),
            );
        }
        Command::Auth { action } => auth(&berth, action.as_ref(), out)?,
        Command::Permissions { action } => permissions(&berth, action.as_ref(), out)?,
        Command::Serve { addr } => serve(berth, *addr, out)?,
        Command::Mcp { builtins } => mcp::mcp(berth, *builtins)?,
        Command::Updates { ids, check } => lifecycle::updates(&berth, ids, *check, out)?,
        Command::Update { id, approve_growth } => {
            lifecycle::change(&berth, id, None, *approve_growth, out)?
        }
        Command::Rollback { id, to } => lifecycle::change(&berth, id, Some(*to), false, out)?,
        Command::Versions { id } => lifecycle::versions(&berth, id, out)?,
        Command::Check { .. } => unreachable!("handled before the store is opened"),
    }
    Ok(Outcome::Ok)
}

/// Runs `fut` on a fresh runtime of two worker threads, or one when the process may use only one
/// core (a second worker there only adds a thread hand-off to every wake-up: measured on
/// `berth mcp`, 10–15% of a call); `TOKIO_WORKER_THREADS`, tokio's own variable, sets another
/// count.
pub(crate) fn block_on<T>(fut: impl std::future::Future<Output = T>) -> Result<T, BerthError> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let workers = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(cores.min(2));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "cli",
                format!("cannot start the async runtime: {e}"),
                "retry",
            )
        })?;
    Ok(rt.block_on(fut))
}

/// Inline JSON or `@file`.
fn json_arg(raw: &str, flag: &str) -> Result<serde_json::Value, BerthError> {
    let text = match raw.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            BerthError::new(
                code::INVALID_ARGUMENTS,
                "cli",
                format!("cannot read {flag} file {path}: {e}"),
                "check the path after @",
            )
        })?,
        None => raw.to_string(),
    };
    serde_json::from_str(&text).map_err(|e| {
        BerthError::new(
            code::INVALID_ARGUMENTS,
            "cli",
            format!("{flag} is not valid JSON: {e}"),
            "pass a JSON object, e.g. --args '{\"city\":\"Oslo\"}'",
        )
    })
}

fn auth(berth: &Berth, action: Option<&AuthAction>, out: &Out) -> Result<(), BerthError> {
    match action.unwrap_or(&AuthAction::List) {
        AuthAction::List => {
            let providers = block_on(async {
                berth.activate().await;
                let p = berth.auth_providers();
                berth.shutdown_hosts().await;
                p
            })?;
            let human = providers
                .iter()
                .map(|p| {
                    format!(
                        "{} ({}){}: {}",
                        p.provider,
                        p.plugin,
                        if p.stored { ", credential stored" } else { "" },
                        p.methods
                            .iter()
                            .enumerate()
                            .map(|(i, m)| format!(
                                "[{i}] {} {}",
                                m["type"].as_str().unwrap_or(""),
                                m["label"].as_str().unwrap_or("")
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.done(
                serde_json::json!({ "providers": providers }),
                if human.is_empty() {
                    "no active plugin offers a login"
                } else {
                    &human
                },
            );
        }
        AuthAction::Login { provider, method } => {
            use std::io::BufRead;
            let stdin = std::io::stdin();
            let mut lines = stdin.lock().lines();
            let mut next_line = move |what: &str| {
                eprintln!("{what}:");
                lines
                    .next()
                    .and_then(|l| l.ok())
                    .map(|l| l.trim_end().to_string())
            };
            // One runtime for the whole login: the plugin host lives as long as it.
            let outcome = block_on(async {
                berth.activate().await;
                // The method's prompts first (answers are inputs to `authorize`).
                let mut inputs = serde_json::Map::new();
                if let Some(m) = berth
                    .auth_providers()
                    .iter()
                    .find(|p| &p.provider == provider)
                    .and_then(|p| p.methods.get(*method))
                {
                    for p in m["prompts"].as_array().into_iter().flatten() {
                        let key = p["key"].as_str().unwrap_or_default();
                        let answer =
                            next_line(p["message"].as_str().unwrap_or(key)).unwrap_or_default();
                        inputs.insert(key.to_string(), serde_json::Value::String(answer));
                    }
                }
                let r = berth
                    .auth_login(provider, *method, inputs, |prompt| {
                        if let Some(url) = &prompt.url {
                            eprintln!("open {url}");
                        }
                        next_line(&prompt.instructions)
                            .filter(|l| !l.is_empty())
                            .map(berth_runtime::Secret::new)
                    })
                    .await;
                berth.shutdown_hosts().await;
                r
            })??;
            out.done(
                serde_json::json!({ "login": outcome }),
                &format!(
                    "signed in to {} with {} ({}); the credential is in the OS keyring",
                    outcome.provider, outcome.method, outcome.plugin
                ),
            );
        }
        AuthAction::Logout { provider } => {
            let removed = berth.auth_logout(provider)?;
            out.done(
                serde_json::json!({ "logout": { "provider": provider, "removed": removed } }),
                &if removed {
                    format!("the credential of {provider} was removed from the OS keyring")
                } else {
                    format!("no credential of {provider} was stored")
                },
            );
        }
    }
    Ok(())
}

fn permissions(
    berth: &Berth,
    action: Option<&PermissionAction>,
    out: &Out,
) -> Result<(), BerthError> {
    use berth_store::PermissionLevel;
    let set_rule = |plugin: &Option<String>,
                    permission: &str,
                    pattern: &str,
                    level: PermissionLevel| {
        let source_id = plugin.as_deref().unwrap_or(berth_store::EVERY_PLUGIN);
        berth.with_store(|s| s.set_permission_rule(source_id, permission, pattern, level))?;
        out.done(
                serde_json::json!({ "rule": { "source_id": source_id, "permission": permission, "pattern": pattern, "action": level } }),
                &format!(
                    "{permission} {pattern}: always {} ({})",
                    level.as_str(),
                    if source_id == berth_store::EVERY_PLUGIN { "every plugin".to_string() } else { source_id.to_string() }
                ),
            );
        Ok::<(), BerthError>(())
    };
    match action.unwrap_or(&PermissionAction::List { limit: 50 }) {
        PermissionAction::List { limit } => {
            let (caps, rules, decisions) = berth.with_store(|s| {
                Ok::<_, berth_store::StoreError>((
                    s.permission_caps()?,
                    s.permission_rules()?,
                    s.permission_decisions(*limit)?,
                ))
            })?;
            let caps: serde_json::Map<String, serde_json::Value> = caps
                .into_iter()
                .map(|(p, c)| (p, serde_json::json!(c)))
                .collect();
            let human = decisions
                .iter()
                .map(|d| {
                    format!(
                        "{} {} {}: plugin {} / cap {} -> {} ({}{})",
                        d.source_id,
                        d.tool,
                        d.permission,
                        d.plugin_answer.as_str(),
                        d.cap.as_str(),
                        d.final_answer.as_str(),
                        d.decided_by,
                        if d.policy_limited {
                            ", policy-limited"
                        } else {
                            ""
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.done(
                serde_json::json!({ "default_cap": "ask", "caps": caps, "rules": rules, "decisions": decisions }),
                if human.is_empty() { "no permission was asked yet" } else { &human },
            );
        }
        PermissionAction::Cap { permission, level } => {
            let level = PermissionLevel::parse(level).unwrap_or(PermissionLevel::Ask);
            // Through the policy: an organisation's cap for it may only be tightened.
            berth.set_policy(
                &format!("permission.{permission}"),
                Some(serde_json::json!(level.as_str())),
                "cli",
            )?;
            out.done(
                serde_json::json!({ "cap": { "permission": permission, "level": level } }),
                &format!(
                    "plugins may answer at most {} for {permission}",
                    level.as_str()
                ),
            );
        }
        PermissionAction::Allow {
            permission,
            pattern,
            plugin,
        } => set_rule(plugin, permission, pattern, PermissionLevel::Allow)?,
        PermissionAction::Deny {
            permission,
            pattern,
            plugin,
        } => set_rule(plugin, permission, pattern, PermissionLevel::Deny)?,
    }
    Ok(())
}

fn absolute(p: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn serve(berth: Berth, addr: SocketAddr, out: &Out) -> Result<(), BerthError> {
    block_on(async move {
        // The catalog over MCP beside the page, behind the same token (`berth mcp` for HTTP).
        let server = berth_serve::Server::bind(berth.clone(), addr)
            .await?
            .mount("/mcp", berth_mcp::http_router(berth.clone(), false));
        let _watch = berth_runtime::watch::watch(berth.clone()).map_err(|e| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "discovery",
                format!("cannot watch the config folders: {e}"),
                "raise the inotify watch limit, or restart Berth",
            )
        })?;
        let mcp_url = format!("http://{}/mcp", server.local_addr());
        out.done(
            serde_json::json!({ "serve": { "url": server.url(), "addr": server.local_addr().to_string(), "mcp_url": mcp_url } }),
            &format!(
                "Berth status page: {}\nMCP (streamable HTTP): {mcp_url} with the header `Authorization: Bearer {}`",
                server.url(),
                server.token()
            ),
        );
        // Graceful shutdown waits for open connections; an open event stream would hold it
        // forever, so the signal also starts a short deadline.
        let stop = std::sync::Arc::new(tokio::sync::Notify::new());
        let stop_server = stop.clone();
        let serving = tokio::spawn(server.run(async move { stop_server.notified().await }));
        let _activation = berth.keep_active();
        berth.enable_prompts();
        shutdown_signal().await;
        stop.notify_one();
        let _ = tokio::time::timeout(std::time::Duration::from_millis(500), serving).await;
        berth.shutdown_hosts().await;
        Ok(())
    })?
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}

/// `berth policy`: show it, set a value, or let a held contribution through.
fn policy_command(
    berth: &Berth,
    out: &output::Out,
    action: Option<&PolicyAction>,
) -> Result<(), BerthError> {
    match action.unwrap_or(&PolicyAction::Show) {
        PolicyAction::Show => out.policy(&berth.policy(), &berth.status()),
        PolicyAction::Set { key, value, unset } => {
            let value = if *unset {
                None
            } else {
                let raw = value.as_deref().unwrap_or_default();
                Some(
                    serde_json::from_str(raw)
                        .unwrap_or_else(|_| serde_json::Value::String(raw.to_string())),
                )
            };
            let entry = berth.set_policy(key, value, "cli")?;
            out.done(
                serde_json::json!({ "set": entry }),
                &format!("{} = {} ({:?})", entry.key, entry.value, entry.layer).to_lowercase(),
            );
        }
        PolicyAction::Allow { source, item } | PolicyAction::Hold { source, item } => {
            let granted = matches!(action, Some(PolicyAction::Allow { .. }));
            berth.grant(source, item, granted)?;
            out.done(
                serde_json::json!({ "grant": { "source": source, "item": item, "granted": granted } }),
                &format!(
                    "{source}: {item} {}",
                    if granted { "allowed (it registers on the next call)" } else { "held for review again" }
                ),
            );
        }
    }
    Ok(())
}
