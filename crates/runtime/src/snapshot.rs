//! The status snapshot: everything the status page, `berth status` and the desktop app show,
//! as one serialisable document (schema: `docs/cli/status.schema.json`), with the views it is
//! made of (tools, notices, prompts, sources, calls).
//!
//! Owns: the shapes front ends see. Must not: compute anything of them (the owners do) or
//! depend on any owner.

use std::path::PathBuf;
use std::sync::Arc;

use berth_discovery::{ConfigDir, ConfigFile, Diagnostic, Source, SourceState, Switch};
use serde::Serialize;

use berth_discovery::SourceKind;
use berth_store::PermissionLevel;
use serde_json::Value;

use crate::approval::ApprovalView;
use crate::host::{HostInfo, HostKey};
use crate::runtimes::{RuntimeInfo, RuntimeKind};

/// Cloning is cheap: the large parts are shared (`Arc`), so publishing a toast or a prompt on
/// the current snapshot copies pointers, not every source.
#[derive(Debug, Clone, Serialize)]
pub struct StatusSnapshot {
    pub berth: BerthInfo,
    pub project: ProjectInfo,
    /// The OpenCode config folders looked at, in OpenCode's order.
    pub config_dirs: Arc<Vec<ConfigDir>>,
    /// The OpenCode config files looked at, in the order they apply.
    pub config_files: Arc<Vec<ConfigFile>>,
    pub pure: Switch,
    pub runtimes: Vec<RuntimeInfo>,
    pub sources: Arc<Vec<SourceView>>,
    pub counts: Counts,
    /// Graph-level diagnostics (source-level ones sit on each source).
    pub diagnostics: Vec<Diagnostic>,
    /// The active tool catalog (empty until approved sources are activated): the sources'
    /// tools that serve their names (Berth's built-ins are listed apart).
    pub tools: Arc<Vec<ToolEntry>>,
    /// Berth's own built-in tools (`read`, `glob`, `grep`), each a candidate for its name.
    pub builtins: Arc<Vec<ToolEntry>>,
    /// Names several candidates register, who serves each and whether the person chose.
    pub conflicts: Arc<Vec<Conflict>>,
    /// Running plugin hosts: which sources share which process, and its memory.
    pub hosts: Vec<HostInfo>,
    /// Messages plugins addressed to the person (`client.tui.showToast`), newest last.
    pub notices: Vec<Notice>,
    /// Permissions tools are waiting on (`ctx.ask`), to answer without blocking anything.
    pub prompts: Vec<PromptView>,
    /// The person's standing answers to permissions (`berth permissions`, "Always"), each for
    /// one plugin or for every plugin (`source_id` `*`).
    pub standing_answers: Arc<Vec<berth_store::PermissionRule>>,
    /// The effective policy: each value with the layer that set it.
    pub policy: Arc<crate::policy::Effective>,
    /// Which OS boundary restricted sources get here, and what it cannot stop.
    pub boundary: Arc<crate::host::boundary::BoundaryInfo>,
    /// The latest tool calls from their receipts, newest first: what ran and how it ended
    /// (arguments and output stay in `berth receipts`).
    pub calls: Arc<Vec<CallView>>,
    /// Moves whenever anything above changes.
    pub revision: u64,
}

/// A tool as the catalog lists it (`berth tools`).
#[derive(Debug, Clone, Serialize)]
pub struct ToolEntry {
    /// The host that runs it (the shared one, or its source's own).
    #[serde(skip)]
    pub host: HostKey,
    /// Its source's place in OpenCode's load order (which source wins a name).
    #[serde(skip)]
    pub order: usize,
    pub name: String,
    pub description: String,
    /// The JSON Schema the model would get.
    pub parameters: Value,
    pub provider: Provider,
    pub state: SourceState,
}

/// A contested tool name (`catalog::conflicts` elects who serves it) as the page, `berth conflicts` and `berth status` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    pub tool: String,
    /// Over the candidates' identities and content versions: what a choice is bound to.
    pub digest: String,
    pub candidates: Vec<CandidateView>,
    /// The candidate serving the name now (none when no candidate can serve).
    pub serving: Option<String>,
    /// `asks` until the person chooses for this exact candidate set, then `chosen`.
    pub state: ConflictState,
    /// Why it asks (or what was chosen), in words.
    pub reason: String,
    /// The candidate OpenCode 1.18.4 would let win (its silent last-wins); none when its pick
    /// is not fixed: several MCP servers' tools on one key, where whichever server's list
    /// OpenCode assembles last wins (`tests/oracle/mcp/names.json` saw either win in either
    /// config order).
    pub opencode_winner: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateView {
    pub id: String,
    /// `builtin`, `standalone-tool`, `file-plugin`, `npm-plugin` or `mcp`.
    pub kind: String,
    pub available: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictState {
    Asks,
    Chosen,
}

#[derive(Debug, Clone, Serialize)]
pub struct Provider {
    /// Its source, or `builtin` for Berth's own.
    pub source_id: String,
    pub kind: ProviderKind,
    /// The JS backend of the domain (a built-in or an MCP tool runs outside any JS host).
    pub backend: RuntimeKind,
}

/// Who provides a tool: Berth itself, or a kind of source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    Builtin,
    StandaloneTool,
    FilePlugin,
    NpmPlugin,
    Mcp,
}

impl From<SourceKind> for ProviderKind {
    fn from(k: SourceKind) -> ProviderKind {
        match k {
            SourceKind::StandaloneTool => ProviderKind::StandaloneTool,
            SourceKind::FilePlugin => ProviderKind::FilePlugin,
            SourceKind::NpmPlugin => ProviderKind::NpmPlugin,
            SourceKind::Mcp => ProviderKind::Mcp,
        }
    }
}

/// A message a plugin addressed to the person (`client.tui.showToast`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Notice {
    pub at_ms: u64,
    pub plugin: String,
    pub title: Option<String>,
    pub message: String,
    /// `info`, `success`, `warning` or `error`.
    pub variant: String,
}

/// A permission a tool is waiting on, as the app and page show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PromptView {
    pub id: String,
    pub plugin: String,
    pub tool: String,
    pub call_id: String,
    pub permission: String,
    pub patterns: Vec<String>,
    pub always: Vec<String>,
    pub title: String,
    /// What the `permission.ask` chain answered (`ask` when no plugin answered).
    pub plugin_answer: PermissionLevel,
    pub cap: PermissionLevel,
    pub asked_at_ms: u64,
}

/// How many recent calls the status shows.
pub const RECENT_CALLS: usize = 10;

/// One tool call as the status shows it: its receipt without arguments or output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallView {
    pub receipt_id: String,
    pub tool: String,
    pub source_id: String,
    pub status: berth_store::ReceiptStatus,
    pub error: Option<berth_store::ReceiptError>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl From<berth_store::Receipt> for CallView {
    fn from(r: berth_store::Receipt) -> Self {
        CallView {
            receipt_id: r.receipt_id,
            tool: r.tool,
            source_id: r.source_id,
            status: r.status,
            error: r.error,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
        }
    }
}

/// A discovered source with what the approval plane says about it.
#[derive(Debug, Clone, Serialize)]
pub struct SourceView {
    #[serde(flatten)]
    pub source: Source,
    pub approval: ApprovalView,
    /// It runs in a host of its own (no other plugin shares its process); else in the
    /// backend's shared host, one trust domain with the plugins there.
    pub own_host: bool,
    /// What the policy's caps keep from it (held for review or refused); the rest is active
    /// (*partially limited*).
    pub limited: Vec<crate::policy::Limited>,
    /// Its hooks and tools Berth paused on their own for failing again and again (the source
    /// stays active; the rest of it runs).
    pub paused_parts: Vec<PausedPart>,
    /// The mode it runs in, and why.
    pub run_mode: RunMode,
    /// Its execution versions and, for an npm plugin, its updates.
    pub lifecycle: Lifecycle,
    /// For a remote MCP server that signs in when asked (OpenCode's `oauth`): where, and
    /// whether the keyring holds a sign-in for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sign_in: Option<SignInView>,
}

/// A contribution paused on its own, as the source's card shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PausedPart {
    /// `hook <name>` or `tool <name>`.
    pub capability: String,
    /// Why, with the last error.
    pub reason: String,
    pub code: String,
    pub since_ms: u64,
}

/// A remote MCP server's sign-in, as its card shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SignInView {
    /// The server's host.
    pub host: String,
    pub signed_in: bool,
    /// A sign-in under way or failed.
    #[serde(flatten)]
    pub progress: SignInProgress,
}

/// A sign-in under way (the provider's page the person finishes it on) or how the last one
/// failed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SignInProgress {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<crate::error::BerthError>,
}

/// A fetch-and-run launcher Berth can replace with a prepared package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preparable {
    /// `npx`, `bunx`, `pnpm`, `yarn`.
    pub launcher: String,
    /// The package spec as the entry writes it.
    pub package: String,
}

/// What ran of a source, and how it is updated (seed 003 §4, §9).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Lifecycle {
    /// The version that runs now (or ran last here).
    pub current: Option<crate::versions::VersionView>,
    /// Earlier versions, newest first (at most nine), each with whether it can run again.
    pub history: Vec<crate::versions::VersionView>,
    /// For an npm plugin from a registry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updates: Option<UpdatesView>,
    /// For an MCP server Berth prepared in place of its fetch-and-run launcher: the exact
    /// package version that runs, from Berth's data dir.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepared: Option<berth_store::McpPrepared>,
    /// For an MCP server started by an npm fetch-and-run launcher, not prepared (yet): what
    /// `berth prepare` would install instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preparable: Option<Preparable>,
    /// The execution version a rollback would run (the newest that ran whose exact bytes are
    /// here and that is not what is on disk now), if any.
    pub rollback_to: Option<i64>,
    /// A local source rolled back: it runs the kept version, not its files on disk.
    pub pinned: bool,
}

/// An npm plugin's update policy, the last check's answer, and what is under way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpdatesView {
    /// `manual`, `notify` or `auto`, and the layer that set it.
    pub policy: String,
    pub layer: crate::policy::Layer,
    /// For `auto`: hours a version must have been published.
    pub min_age_hours: u64,
    /// The last check (`Offer`), and when.
    pub offer: Option<serde_json::Value>,
    pub checked_at_ms: Option<i64>,
    pub progress: Option<UpdateProgress>,
    /// Versions that were updated to here and failed to load (an automatic update never takes
    /// one again; the page says so beside an offer of one).
    pub failed_versions: Vec<String>,
    /// The execution version a rollback would run (the newest earlier one whose exact bytes are
    /// here), if any.
    pub rollback_to: Option<i64>,
}

/// Where an update or rollback of a source stands (the page shows it while it lasts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case")]
pub enum UpdateProgress {
    /// Asking the registry what the spec allows now.
    Checking,
    /// Preparing the new version (npm, install scripts off); the version that runs serves on.
    Preparing { target: String },
    /// Prepared; it can do more than the version that runs, and waits for the person.
    WaitingForYou { target: String, grew: Vec<String> },
    /// Stopping the old version and loading the new one.
    Applying { target: String },
    /// It did not happen; what runs, and what to do, are in the message and recovery.
    Failed {
        target: String,
        code: String,
        message: String,
        recovery: String,
    },
}

/// How a source runs: compatible (the person's own rights, install scripts off) or
/// restricted (an OS boundary), with the layer that decided it, as whom and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunMode {
    pub mode: &'static str,
    pub layer: crate::policy::Layer,
    pub why: String,
    /// The OS user its host runs as.
    pub user: String,
    /// Its host's working folder.
    pub workdir: PathBuf,
}

impl RunMode {
    pub fn of(restricted: bool, layer: crate::policy::Layer, project: &std::path::Path) -> RunMode {
        use crate::policy::Layer;
        let by = match layer {
            Layer::Organisation => "your organisation's policy",
            Layer::Product => "Berth's default",
            Layer::User => "your setting",
        };
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            // SAFETY: getuid has no failure mode and touches no memory of ours.
            .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }));
        let workdir = if restricted {
            project.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
        };
        let what = if restricted {
            format!("restricted: an OS boundary limits it to the project ({}), its own files and cache, and no network unless allowed", project.display())
        } else {
            format!("compatible: it runs as {user} with your own rights — every file, the network and your environment, as in OpenCode — in {}; its dependencies are prepared in Berth's data dir with install scripts off", workdir.display())
        };
        RunMode {
            mode: if restricted {
                "restricted"
            } else {
                "compatible"
            },
            layer,
            why: format!("{what} ({by})"),
            user,
            workdir,
        }
    }
}

impl std::ops::Deref for SourceView {
    type Target = Source;
    fn deref(&self) -> &Source {
        &self.source
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BerthInfo {
    pub version: &'static str,
    pub data_dir: PathBuf,
    pub store: StoreInfo,
    pub log_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StoreInfo {
    pub path: PathBuf,
    pub schema_version: i64,
    /// Set when a corrupt database was moved aside at start: where it went.
    pub moved_aside: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProjectInfo {
    pub directory: PathBuf,
    pub worktree: PathBuf,
    pub has_git: bool,
    /// False when no project is open: `directory` is then the home folder, and only the
    /// config that applies to every project was read.
    pub open: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub sources: usize,
    /// Waiting for the person before anything is prepared or imported.
    pub pending_approval: usize,
    /// Loaded, but contributing more than was approved: waiting for the person again.
    pub pending_activation: usize,
    pub active: usize,
    /// Loaded before and being loaded again (a new version, a changed file): new calls wait.
    pub updating: usize,
    pub failed: usize,
    /// Denied or disabled by the person.
    pub disabled: usize,
    /// Not supported here, or limited by policy.
    pub unsupported: usize,
}

impl Counts {
    pub fn of(sources: &[SourceView]) -> Counts {
        let mut c = Counts {
            sources: sources.len(),
            ..Counts::default()
        };
        for s in sources {
            match s.state {
                SourceState::PendingApproval => c.pending_approval += 1,
                SourceState::PendingActivation => c.pending_activation += 1,
                SourceState::Active => c.active += 1,
                SourceState::Updating => c.updating += 1,
                SourceState::LoadFailed | SourceState::Paused => c.failed += 1,
                SourceState::Disabled => c.disabled += 1,
                SourceState::Unsupported
                | SourceState::PolicyLimited
                | SourceState::IncompatibleVersion => c.unsupported += 1,
                SourceState::Discovered | SourceState::Approved | SourceState::Preparing => {}
            }
        }
        c
    }
}

/// What changed between two snapshots, by source id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SnapshotDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl SnapshotDiff {
    pub fn between(old: &StatusSnapshot, new: &StatusSnapshot) -> SnapshotDiff {
        let mut d = SnapshotDiff::default();
        for s in new.sources.iter() {
            match old.sources.iter().find(|o| o.id == s.id) {
                None => d.added.push(s.id.clone()),
                Some(o)
                    if o.digest != s.digest
                        || o.state != s.state
                        || o.order != s.order
                        || o.diagnostics != s.diagnostics =>
                {
                    d.changed.push(s.id.clone())
                }
                _ => {}
            }
        }
        for o in old.sources.iter() {
            if !new.sources.iter().any(|s| s.id == o.id) {
                d.removed.push(o.id.clone());
            }
        }
        d
    }
}

/// Sent to the UI and `serve` clients when the snapshot changes.
#[derive(Debug, Clone, Serialize)]
pub struct StatusEvent {
    pub revision: u64,
    pub diff: SnapshotDiff,
    pub snapshot: std::sync::Arc<StatusSnapshot>,
}

/// The first 12 hex digits of a `sha256:` digest, as the page and the CLI name a version.
pub fn short(digest: &str) -> String {
    digest
        .trim_start_matches("sha256:")
        .chars()
        .take(12)
        .collect()
}
