//! The discovery result: sources, what each one could do, and diagnostics. These types are
//! serialised into `berth sources --json` (schema in `docs/cli/sources.schema.json`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    StandaloneTool,
    FilePlugin,
    NpmPlugin,
    Mcp,
}

impl SourceKind {
    pub fn id_prefix(self) -> &'static str {
        match self {
            SourceKind::StandaloneTool => "tool",
            SourceKind::FilePlugin => "plugin",
            SourceKind::NpmPlugin => "npm",
            SourceKind::Mcp => "mcp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Global,
    Local,
}

/// A source's place in DESIGN.md's state machine, as far as discovery can tell. Later stages
/// (approval, preparation, the host) move it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceState {
    Discovered,
    PendingApproval,
    /// Decided, its bytes still those approved; not loaded in this process (yet).
    Approved,
    Preparing,
    PendingActivation,
    Active,
    /// Loaded before; its host is being replaced (a new version, a changed file, a sibling
    /// revoked), and it loads again in a fresh one. Its new calls wait meanwhile.
    Updating,
    LoadFailed,
    Paused,
    Disabled,
    PolicyLimited,
    Unsupported,
    IncompatibleVersion,
}

/// One problem, bound to a source or to the scan, with a stable code and a way out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub code: &'static str,
    pub message: String,
    pub recovery: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The deviations ledger row this records (`D-003`): an intended difference from OpenCode,
    /// a note on a source that works, not a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<&'static str>,
}

impl Diagnostic {
    pub fn new(
        code: &'static str,
        message: impl Into<String>,
        recovery: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            recovery: recovery.into(),
            path: None,
            ledger: None,
        }
    }

    /// Marks it as the note of deviations ledger row `row`.
    pub fn ledger(mut self, row: &'static str) -> Self {
        self.ledger = Some(row);
        self
    }

    pub fn at(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }
}

/// Which OpenCode plugin API a plugin is written for, read from its default export before it
/// runs: V1's `server` (or factory exports), V2's `setup` / `effect` (`Plugin.define`), or a
/// module with both (OpenCode 1.18.29+ reads `server`, OpenCode 2 reads `setup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Generation {
    #[serde(rename = "v1")]
    V1,
    #[serde(rename = "v2")]
    V2,
    #[serde(rename = "v1+v2")]
    Both,
}

impl Generation {
    /// The generation a default export's keys say.
    pub fn of(shape: Option<&crate::facts::DefaultShape>) -> Generation {
        match shape {
            Some(s) if (s.setup || s.effect) && s.server => Generation::Both,
            Some(s) if s.setup || s.effect => Generation::V2,
            _ => Generation::V1,
        }
    }

    /// Whether it runs through Berth's V2 adapter (no V1 entry to run).
    pub fn v2_only(self) -> bool {
        self == Generation::V2
    }

    pub fn label(self) -> &'static str {
        match self {
            Generation::V1 => "OpenCode V1",
            Generation::V2 => "OpenCode V2",
            Generation::Both => "OpenCode V1 + V2",
        }
    }
}

/// The module OpenCode 2 provides its plugins (`Plugin.define`, `Tool.Error`); Berth's is
/// `host/opencode-plugin`.
pub const V2_API: &str = "@opencode/plugin";

/// The Effect library OpenCode 2 provides its plugins; Berth's is its one pinned copy.
pub const V2_EFFECT: &str = "effect";

/// Packages OpenCode 2 provides its plugins at run time (and Berth with it): never prepared
/// from npm for a V2 plugin, always resolved to Berth's one pinned copy.
pub const V2_PROVIDED: &[&str] = &[V2_API, V2_EFFECT];

/// What a source could do, read statically. The approval plane keys on [`Capabilities::digest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Files the summary was read from (entry first, then relative imports).
    pub files: Vec<PathBuf>,
    /// Export names of the entry module.
    pub exports: Vec<String>,
    /// For standalone tools: the tool names the exports would give (`<file>`, `<file>_<export>`).
    pub tools: Vec<String>,
    /// Whether the entry imports `@opencode-ai/plugin` (the official helper).
    pub imports_plugin_api: bool,
    /// Plugins: the OpenCode plugin API it is written for (unknown before an npm package's
    /// files are there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<Generation>,
    /// A V2 plugin's `id`, when its default export spells it as a literal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_id: Option<String>,
    /// Bare (package) imports: the dependencies it needs.
    pub packages: BTreeSet<String>,
    /// `import(expr)` / `require(expr)` with a computed name: anything could be loaded.
    pub loads_computed_modules: bool,
    /// Constructs a static reader cannot resolve (`process.getBuiltinModule`, computed members
    /// of `Bun`, indirect `eval`, `vm`, `createRequire`, code from `data:` URLs, …): with them
    /// the code may do anything, whatever else the summary says.
    pub opaque: BTreeSet<String>,
    pub bun_apis: BTreeSet<String>,
    pub process: BTreeSet<String>,
    pub network: BTreeSet<String>,
    pub filesystem: BTreeSet<String>,
    pub environment: BTreeSet<String>,
    /// package.json lifecycle scripts that npm would run (Berth never runs them).
    pub install_scripts: BTreeSet<String>,
    /// `engines.opencode` of the plugin's package.json.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engines_opencode: Option<String>,
    /// Files it runs that lie outside its own folder (relative or absolute imports): part of
    /// what is approved and checked like the rest, and shown because a person would not expect
    /// them.
    pub outside_files: BTreeSet<String>,
    /// The dependencies its config folder's `package.json` lists (`name@spec`), which Berth
    /// prepares for it: a changed spec (another `file:` target, an `npm:` alias) is new code.
    pub dependencies: BTreeSet<String>,
    /// True when the bytes are not on disk yet (npm packages before preparation).
    pub contents_unknown: bool,
    /// True when the bytes are there but could not be fully read (a syntax error, too large).
    pub analysis_incomplete: bool,
    /// The summary in plain words, for the approval panel.
    pub summary: Vec<String>,
}

impl Capabilities {
    /// Fills `summary` from the fields.
    pub fn describe(&mut self) {
        let mut s = Vec::new();
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
        if self.contents_unknown {
            s.push(
                "Its code is not on this machine yet: what it can do is known after preparation."
                    .to_string(),
            );
        }
        if !self.opaque.is_empty() {
            s.push(format!(
                "May do anything, including start programs: it uses {}, which Berth cannot read ahead",
                join(&self.opaque)
            ));
        }
        if !self.process.is_empty() {
            s.push(format!(
                "Starts programs or runs code ({})",
                join(&self.process)
            ));
        }
        if !self.network.is_empty() {
            s.push(format!("Uses the network ({})", join(&self.network)));
        }
        if !self.filesystem.is_empty() {
            s.push(format!(
                "Reads or writes files ({})",
                join(&self.filesystem)
            ));
        }
        if !self.environment.is_empty() {
            s.push(format!(
                "Reads environment variables ({})",
                join(&self.environment)
            ));
        }
        let bun_only: BTreeSet<String> = self
            .bun_apis
            .iter()
            .filter(|a| !self.process.contains(*a) && !self.filesystem.contains(*a))
            .cloned()
            .collect();
        if !bun_only.is_empty() {
            s.push(format!("Needs Bun ({})", join(&bun_only)));
        }
        if !self.packages.is_empty() {
            s.push(format!("Loads packages: {}", join(&self.packages)));
        }
        if !self.dependencies.is_empty() {
            s.push(format!(
                "Its folder's package.json installs: {}",
                join(&self.dependencies)
            ));
        }
        if !self.outside_files.is_empty() {
            s.push(format!(
                "Runs files outside its folder: {}",
                join(&self.outside_files)
            ));
        }
        if self.loads_computed_modules {
            s.push("Loads modules whose names are computed at run time".to_string());
        }
        if !self.install_scripts.is_empty() {
            s.push(format!(
                "Its package has install scripts ({}); Berth never runs them",
                join(&self.install_scripts)
            ));
        }
        if !self.tools.is_empty() {
            s.push(format!("Offers tools: {}", self.tools.join(", ")));
        }
        if s.is_empty() {
            s.push(
                "Runs plain code with your user's rights; no powerful API is named in its source"
                    .into(),
            );
        }
        self.summary = s;
    }

    /// The digest approvals key on: what the source could reach before it is imported.
    /// Literal strings, comments and formatting do not move it; a new API, package, install
    /// script or tool does.
    pub fn digest(&self) -> String {
        let keyed = serde_json::json!({
            "packages": self.packages,
            "computed": self.loads_computed_modules,
            "opaque": self.opaque,
            "bun": self.bun_apis,
            "process": self.process,
            "network": self.network,
            "filesystem": self.filesystem,
            "environment": self.environment,
            "install_scripts": self.install_scripts,
            "tools": self.tools,
            "outside": self.outside_files,
            "dependencies": self.dependencies,
            "unknown": self.contents_unknown,
            "incomplete": self.analysis_incomplete,
        });
        crate::digest::sha256_hex(keyed.to_string().as_bytes())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NpmRef {
    pub name: String,
    pub request: String,
    /// What the request resolved to when the package was prepared (its execution version),
    /// from the install's lockfile; None until prepared.
    pub resolved: Option<Resolved>,
}

impl NpmRef {
    /// Whether the request names a registry version, range or tag (not a `file:` folder or a
    /// URL, which have no registry to update from).
    pub fn from_registry(&self) -> bool {
        !self.request.starts_with("file:")
            && self.request != self.name
            && !self.request.contains("://")
    }
}

/// The exact package a request was prepared as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    pub version: String,
    /// npm's `integrity` (SRI) of the tarball, when the registry gave one.
    pub integrity: Option<String>,
    /// How many packages the install holds (the plugin and its dependencies).
    pub packages: usize,
}

/// What a source will execute, by real path: every file the scan read (entry and the local
/// files it imports) with the digest of exactly the bytes that were read and judged, and the
/// prepared installs it loads packages from (install folder → digest of its file list, see
/// [`crate::prepared`]). The approval records it; the plugin host's loader runs a file only
/// if its bytes match it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Manifest {
    pub files: BTreeMap<PathBuf, String>,
    pub trees: BTreeMap<PathBuf, String>,
}

/// One plugin, tool file or MCP server OpenCode would use, described without running it.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    /// Stable across runs: kind, scope and canonical location; safe to type.
    pub id: String,
    pub kind: SourceKind,
    pub scope: Scope,
    /// The config file or directory that contributed it.
    pub origin: PathBuf,
    /// The entry file, package spec or MCP server name.
    pub entry: String,
    /// The spec as written in config, when it came from config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// Options of a `[spec, options]` tuple.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Value>,
    /// For npm plugins: the package name and the version, range or tag asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npm: Option<NpmRef>,
    /// Position in OpenCode's load order (plugins) or tool scan order (tools).
    pub order: usize,
    pub state: SourceState,
    /// `sha256:` of the bytes (entry and its relative imports; for packages, the spec until
    /// prepared).
    pub digest: String,
    /// `sha256:` of the capability summary.
    pub capability_digest: String,
    pub capabilities: Capabilities,
    /// Every file it will execute with its digest (what `digest` sums up).
    pub manifest: Manifest,
    pub diagnostics: Vec<Diagnostic>,
}
