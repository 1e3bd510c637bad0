//! OpenCode 1.18.4's config graph (spec §2.1–§2.3): which config files and folders exist, in
//! which order they apply, and the resulting ordered, deduplicated plugin list.
//!
//! Owns: the order and merge rules. Must not: read plugin code (that is `scan`), write into
//! any OpenCode folder, or stop at the first bad file — every problem is a diagnostic.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::env::{OpencodeEnv, Switch};
use crate::source::{Diagnostic, Scope};
use crate::spec::{self, PluginSpec};

/// Top-level keys of OpenCode 1.18.4's config (`Config` in `@opencode-ai/sdk@1.18.4`, v1 and
/// v2 typings together). Anything else is reported, never fatal.
const KNOWN_KEYS: &[&str] = &[
    "$schema",
    "theme",
    "keybinds",
    "tui",
    "shell",
    "logLevel",
    "server",
    "command",
    "skills",
    "references",
    "reference",
    "watcher",
    "snapshot",
    "plugin",
    "share",
    "autoshare",
    "autoupdate",
    "disabled_providers",
    "enabled_providers",
    "model",
    "small_model",
    "default_agent",
    "subagent_depth",
    "username",
    "mode",
    "agent",
    "provider",
    "mcp",
    "formatter",
    "lsp",
    "instructions",
    "layout",
    "permission",
    "tools",
    "attachment",
    "enterprise",
    "tool_output",
    "compaction",
    "experimental",
];

/// OpenCode V2's own keys Berth reads beside V1's (D-044): V2 reads the V1 format and people mix.
const V2_KEYS: &[&str] = &["plugins"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigRole {
    /// `~/.config/opencode/{config.json,opencode.json,opencode.jsonc}`
    Global,
    /// `OPENCODE_CONFIG`
    EnvFile,
    /// `opencode.json[c]` between the worktree and the directory
    Project,
    /// `opencode.json[c]` inside a `.opencode` folder or `OPENCODE_CONFIG_DIR`
    ConfigDir,
    /// `OPENCODE_CONFIG_CONTENT`
    Inline,
    /// the administrator's managed folder
    Managed,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub role: ConfigRole,
    pub scope: Scope,
    pub exists: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirRole {
    Global,
    Project,
    Home,
    Env,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConfigDir {
    pub path: PathBuf,
    pub role: DirRole,
    pub scope: Scope,
    pub exists: bool,
}

/// One entry of OpenCode's `plugin_origins`.
#[derive(Debug, Clone)]
pub struct PluginOrigin {
    pub raw: String,
    pub spec: PluginSpec,
    pub options: Option<Value>,
    /// The config file, or the config folder whose `plugin(s)/` held the file.
    pub source: PathBuf,
    pub scope: Scope,
    /// True when the entry came from scanning `{plugin,plugins}/`.
    pub from_scan: bool,
    /// Options of a configured tuple that a scanned entry for the same file replaced.
    /// OpenCode drops them; Berth keeps them (deviations ledger D-003).
    pub options_kept_from_config: bool,
    /// OpenCode's dedupe key (file URL, package name, or the raw inline path).
    pub key: String,
    /// How OpenCode lists the entry in its `plugin` list.
    pub listed_as: String,
    /// Set for names on OpenCode's built-in skip list (kept in position, not loaded).
    pub skip: Option<Diagnostic>,
}

/// The origin name of `OPENCODE_CONFIG_CONTENT`.
pub const INLINE_ORIGIN: &str = "OPENCODE_CONFIG_CONTENT";

#[derive(Debug, Clone)]
pub struct ToolFile {
    pub path: PathBuf,
    pub config_dir: PathBuf,
    pub scope: Scope,
}

#[derive(Debug, Clone)]
pub struct McpEntry {
    pub name: String,
    pub origin: PathBuf,
    pub scope: Scope,
    pub config: Value,
}

/// The whole graph. Diagnostics here concern files and folders; source-level ones are added by
/// the scanner.
#[derive(Debug, Clone)]
pub struct ConfigGraph {
    pub directory: PathBuf,
    pub worktree: PathBuf,
    pub has_git: bool,
    pub files: Vec<ConfigFile>,
    pub dirs: Vec<ConfigDir>,
    pub plugins: Vec<PluginOrigin>,
    pub tool_files: Vec<ToolFile>,
    pub mcp: Vec<McpEntry>,
    /// OpenCode V2's `-<id>` selectors in `plugins` (`id`, `prefix.*`, `*`), with the file each
    /// came from, in the order read (D-044).
    pub v2_disabled: Vec<(String, PathBuf)>,
    pub diagnostics: Vec<Diagnostic>,
    pub pure: Switch,
    /// External plugins left out because of the pure switch.
    pub withheld_by_pure: usize,
    /// The merged configuration (later files deep-merged over earlier ones, arrays replaced,
    /// `instructions` unioned), with `plugin` set to the final list: what a `config` hook gets.
    pub merged: Value,
}

/// Deep merge as OpenCode layers its config: objects merge key by key, arrays and scalars are
/// replaced, except `instructions`, whose entries are unioned.
pub fn deep_merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing)
                        if k == "instructions" && existing.is_array() && v.is_array() =>
                    {
                        let list = existing.as_array_mut().unwrap();
                        for item in v.as_array().unwrap() {
                            if !list.contains(item) {
                                list.push(item.clone());
                            }
                        }
                    }
                    Some(existing) if existing.is_object() && v.is_object() => {
                        deep_merge(existing, v)
                    }
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

/// Finds the git worktree as OpenCode does: the nearest ancestor holding `.git`.
pub fn find_worktree(directory: &Path) -> Option<PathBuf> {
    directory
        .ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

impl ConfigGraph {
    pub fn resolve(env: &OpencodeEnv, directory: &Path) -> ConfigGraph {
        let directory = spec::normalize(&crate::env::absolute(&env.cwd, directory));
        let git_root = find_worktree(&directory);
        let has_git = git_root.is_some();
        // Without git OpenCode walks to the filesystem root.
        let worktree = git_root.unwrap_or_else(|| PathBuf::from("/"));
        let project_root = if has_git {
            worktree.clone()
        } else {
            directory.clone()
        };
        let mut b = Builder {
            env,
            merged: Value::Object(Default::default()),
            merged_plugins: None,
            project_root,
            origins: Vec::new(),
            mcp: Vec::new(),
            v2_disabled: Vec::new(),
            files: Vec::new(),
            diagnostics: Vec::new(),
        };
        b.remote_config_notice();

        // 2. global config folder: its three files merge into one layer (arrays replaced, so
        // the last file's `plugin` list wins), whose origin is the folder itself.
        let global = env.global_config_dir();
        b.merged_plugins = Some(None);
        for name in ["config.json", "opencode.json", "opencode.jsonc"] {
            b.load_file(&global.join(name), ConfigRole::Global);
        }
        if let Some(Some((items, base))) = b.merged_plugins.take() {
            for item in &items {
                b.push_plugin_entry(item, &global, &base, Scope::Global);
            }
        }
        // 3. OPENCODE_CONFIG
        if let Some(file) = &env.opencode_config {
            b.load_file(file, ConfigRole::EnvFile);
        }
        // 4. project files: root-most first, nearest last; `.json` before `.jsonc` per folder
        let project_disabled = env.project_config_disabled();
        if let Switch::Unrecognised(raw) = &project_disabled {
            b.diagnostics.push(Diagnostic::new(
                "action-required",
                format!("OPENCODE_DISABLE_PROJECT_CONFIG={raw:?} is neither true/1 nor false/0; OpenCode reads it as off, and so does Berth"),
                "set it to 1 or 0",
            ));
        }
        let walk: Vec<PathBuf> = walk_up(&directory, &worktree);
        if !project_disabled.opencode_reads_as_on() {
            for dir in walk.iter().rev() {
                for name in ["opencode.json", "opencode.jsonc"] {
                    b.load_file(&dir.join(name), ConfigRole::Project);
                }
            }
        }
        // 5. config folders
        let dirs = config_dirs(
            env,
            &walk,
            !project_disabled.opencode_reads_as_on(),
            &b.project_root,
        );
        let mut tool_files = Vec::new();
        for dir in &dirs {
            let loads_files = dir
                .path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".opencode"))
                || env.opencode_config_dir.as_deref() == Some(dir.path.as_path());
            if loads_files {
                for name in ["opencode.json", "opencode.jsonc"] {
                    b.load_file(&dir.path.join(name), ConfigRole::ConfigDir);
                }
            }
            if dir.exists {
                for sub in ["plugin", "plugins"] {
                    let mut found = b.list_scripts(&dir.path.join(sub), &["ts", "js"]);
                    found.extend(v2_package_folders(&dir.path.join(sub)));
                    for file in found {
                        let raw = spec::file_url(&file);
                        b.origins.push(PluginOrigin {
                            spec: PluginSpec::Path {
                                url: raw.clone(),
                                path: file.clone(),
                            },
                            key: raw.clone(),
                            listed_as: raw.clone(),
                            skip: None,
                            raw,
                            options: None,
                            source: dir.path.clone(),
                            scope: dir.scope,
                            from_scan: true,
                            options_kept_from_config: false,
                        });
                    }
                }
                for sub in ["tool", "tools"] {
                    for file in b.list_scripts(&dir.path.join(sub), &["js", "ts"]) {
                        tool_files.push(ToolFile {
                            path: file,
                            config_dir: dir.path.clone(),
                            scope: dir.scope,
                        });
                    }
                }
            }
        }
        // 6. inline content
        if let Some(content) = &env.opencode_config_content {
            let origin = PathBuf::from(INLINE_ORIGIN);
            b.files.push(ConfigFile {
                path: origin.clone(),
                role: ConfigRole::Inline,
                scope: Scope::Local,
                exists: true,
            });
            b.apply_text(content, &origin, &env.cwd.clone(), Scope::Local);
        }
        // 8. managed config
        for name in ["opencode.json", "opencode.jsonc"] {
            b.load_file(&env.managed_config_dir.join(name), ConfigRole::Managed);
        }

        let plugins = dedupe(b.origins);
        let pure = env.pure();
        let mut diagnostics = b.diagnostics;
        let (plugins, withheld_by_pure) = match &pure {
            Switch::Off => (plugins, 0),
            Switch::On => {
                let n = plugins.len();
                if n > 0 {
                    diagnostics.push(Diagnostic::new(
                        "policy-limited",
                        format!("pure mode is on: {n} external plugin(s) are listed by config but not activated, as in OpenCode"),
                        "unset OPENCODE_PURE (or drop --pure) to use external plugins",
                    ));
                }
                (Vec::new(), n)
            }
            Switch::Unrecognised(raw) => {
                let n = plugins.len();
                diagnostics.push(Diagnostic::new(
                    "action-required",
                    format!("OPENCODE_PURE={raw:?} is not one of true/yes/on/1/y or false/no/off/0/n; Berth activates no external plugin until it is clear (OpenCode 1.18.4 refuses to start)"),
                    "set OPENCODE_PURE to 1 (no external plugins) or 0 (external plugins on), in lower case",
                ));
                (Vec::new(), n)
            }
        };
        let mut mcp: Vec<McpEntry> = Vec::new();
        for entry in b.mcp {
            mcp.retain(|e| e.name != entry.name);
            mcp.push(entry);
        }
        let mut merged = b.merged;
        merged["plugin"] = Value::Array(
            plugins
                .iter()
                .map(|p| match &p.options {
                    Some(o) => serde_json::json!([p.listed_as, o]),
                    None => Value::String(p.listed_as.clone()),
                })
                .collect(),
        );
        merged["plugin_origins"] = Value::Array(
            plugins
                .iter()
                .map(|p| {
                    let scope = if p.scope == Scope::Global {
                        "global"
                    } else {
                        "local"
                    };
                    serde_json::json!({ "spec": p.listed_as, "source": p.source, "scope": scope })
                })
                .collect(),
        );
        ConfigGraph {
            merged,
            directory,
            worktree,
            has_git,
            files: b.files,
            dirs,
            plugins,
            tool_files,
            mcp,
            v2_disabled: b.v2_disabled,
            diagnostics,
            pure,
            withheld_by_pure,
        }
    }

    /// Every folder a watcher must observe to see a change OpenCode would see.
    pub fn watch_roots(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = self.dirs.iter().map(|d| d.path.clone()).collect();
        roots.extend(
            self.files
                .iter()
                .filter_map(|f| f.path.parent().map(Path::to_path_buf)),
        );
        for p in &self.plugins {
            if let PluginSpec::Path { path, .. } = &p.spec {
                roots.push(if path.is_dir() {
                    path.clone()
                } else {
                    path.parent().unwrap_or(path).to_path_buf()
                });
            }
        }
        let mut seen = HashSet::new();
        roots.retain(|r| !r.as_os_str().is_empty() && r.is_absolute() && seen.insert(r.clone()));
        roots
    }
}

/// Directories from `directory` up to `stop` (inclusive), nearest first.
fn walk_up(directory: &Path, stop: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in directory.ancestors() {
        out.push(d.to_path_buf());
        if d == stop {
            break;
        }
    }
    out
}

fn config_dirs(
    env: &OpencodeEnv,
    walk: &[PathBuf],
    project: bool,
    project_root: &Path,
) -> Vec<ConfigDir> {
    let scope_of = |p: &Path| {
        if p.starts_with(project_root) {
            Scope::Local
        } else {
            Scope::Global
        }
    };
    let mut list = vec![(env.global_config_dir(), DirRole::Global)];
    if project {
        for d in walk {
            let candidate = d.join(".opencode");
            if candidate.is_dir() {
                list.push((candidate, DirRole::Project));
            }
        }
    }
    let home_dir = env.home.join(".opencode");
    if home_dir.is_dir() {
        list.push((home_dir, DirRole::Home));
    }
    if let Some(d) = &env.opencode_config_dir {
        list.push((d.clone(), DirRole::Env));
    }
    let mut seen = HashSet::new();
    list.into_iter()
        .filter(|(p, _)| seen.insert(p.clone()))
        .map(|(path, role)| ConfigDir {
            exists: path.is_dir(),
            scope: scope_of(&path),
            path,
            role,
        })
        .collect()
}

/// OpenCode's dedupe (spec §2.3): the last occurrence of a key wins and takes its position.
/// OpenCode's dedupe (spec §2.3): the last occurrence of a key wins and takes its position.
/// Entries on OpenCode's built-in skip list keep their position and carry a diagnostic.
fn dedupe(origins: Vec<PluginOrigin>) -> Vec<PluginOrigin> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut kept: Vec<PluginOrigin> = Vec::new();
    for origin in origins.iter().rev() {
        if !seen.insert(origin.key.clone()) {
            continue;
        }
        let mut chosen = origin.clone();
        if chosen.from_scan && chosen.options.is_none() {
            // A configured `[spec, options]` for the same file: OpenCode loses the options.
            if let Some(configured) = origins
                .iter()
                .rev()
                .find(|o| !o.from_scan && o.options.is_some() && o.key == origin.key)
            {
                chosen.options = configured.options.clone();
                chosen.options_kept_from_config = true;
            }
        }
        if let Some(name) = spec::OPENCODE_BUILTIN_SKIPS
            .iter()
            .find(|n| chosen.raw.contains(*n))
        {
            chosen.skip = Some(
                Diagnostic::new(
                    "unsupported",
                    format!("OpenCode 1.18.4 does not load `{name}` (unsupported there: the feature is built in); Berth has no built-in equivalent and loads it like any plugin once you approve it (deviations ledger D-005)"),
                    "approve it to use it in Berth, or remove the entry if you only use OpenCode's built-in login",
                )
                .at(chosen.source.clone())
                .ledger("D-005"),
            );
        }
        kept.push(chosen);
    }
    kept.reverse();
    kept
}

struct Builder<'e> {
    env: &'e OpencodeEnv,
    /// Every parsed document merged in apply order.
    merged: Value,
    /// While reading the files of one merged layer: the `plugin` array that wins so far.
    merged_plugins: Option<Option<(Vec<Value>, PathBuf)>>,
    project_root: PathBuf,
    origins: Vec<PluginOrigin>,
    mcp: Vec<McpEntry>,
    v2_disabled: Vec<(String, PathBuf)>,
    files: Vec<ConfigFile>,
    diagnostics: Vec<Diagnostic>,
}

impl Builder<'_> {
    fn scope_of(&self, p: &Path) -> Scope {
        if p.starts_with(&self.project_root) {
            Scope::Local
        } else {
            Scope::Global
        }
    }

    fn load_file(&mut self, path: &Path, role: ConfigRole) {
        let scope = match role {
            ConfigRole::Global | ConfigRole::Managed => Scope::Global,
            _ => self.scope_of(path),
        };
        let text = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.files.push(ConfigFile {
                    path: path.into(),
                    role,
                    scope,
                    exists: false,
                });
                return;
            }
            Err(e) => {
                self.files.push(ConfigFile {
                    path: path.into(),
                    role,
                    scope,
                    exists: true,
                });
                self.diagnostics.push(
                    Diagnostic::new(
                        "temporarily-unavailable",
                        format!("cannot read config file {}: {e}", path.display()),
                        "fix the file's permissions; the rest of the configuration was read",
                    )
                    .at(path),
                );
                return;
            }
        };
        self.files.push(ConfigFile {
            path: path.into(),
            role,
            scope,
            exists: true,
        });
        if path.is_dir() {
            return;
        }
        let Ok(text) = String::from_utf8(text) else {
            self.diagnostics.push(
                Diagnostic::new(
                    "action-required",
                    format!("config file {} is not UTF-8 text", path.display()),
                    "save the file as UTF-8",
                )
                .at(path),
            );
            return;
        };
        let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        self.apply_text(&text, path, &base, scope);
    }

    /// Parses one config document and appends its plugin and MCP entries.
    fn apply_text(&mut self, text: &str, origin: &Path, base: &Path, scope: Scope) {
        let text = substitute_env(text);
        let options = jsonc_parser::ParseOptions {
            allow_comments: true,
            allow_trailing_commas: true,
            allow_loose_object_property_names: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            allow_bare_decimal_point_numbers: false,
            allow_non_finite_numbers: false,
            allow_extended_string_escapes: false,
        };
        let value: Value = match jsonc_parser::parse_to_serde_value(&text, &options) {
            Ok(v) => v,
            Err(e) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        "action-required",
                        format!("config {} is not valid JSONC: {e}; its plugins are not listed (OpenCode refuses to start with it)", origin.display()),
                        "fix the syntax at the position shown; everything else was read",
                    )
                    .at(origin),
                );
                return;
            }
        };
        if value.is_object() {
            deep_merge(&mut self.merged, &value);
        }
        let Value::Object(map) = value else {
            if !value.is_null() {
                self.diagnostics.push(
                    Diagnostic::new(
                        "action-required",
                        format!("config {} is not a JSON object", origin.display()),
                        "make the top level an object `{ … }`",
                    )
                    .at(origin),
                );
            }
            return;
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !KNOWN_KEYS.contains(k) && !V2_KEYS.contains(k))
            .collect();
        if !unknown.is_empty() {
            self.diagnostics.push(
                Diagnostic::new(
                    "unsupported",
                    format!("config {} has keys OpenCode 1.18.4 does not define: {}; Berth ignores them", origin.display(), unknown.join(", ")),
                    "check the spelling, or remove them",
                )
                .at(origin),
            );
        }
        match map.get("plugin") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                if let Some(deferred) = self.merged_plugins.as_mut() {
                    // Files of one merged layer: the last `plugin` array replaces earlier ones.
                    *deferred = Some((items.clone(), base.to_path_buf()));
                } else {
                    for item in items {
                        self.push_plugin_entry(item, origin, base, scope);
                    }
                }
            }
            Some(_) => self.diagnostics.push(
                Diagnostic::new(
                    "action-required",
                    format!("`plugin` in {} must be a list", origin.display()),
                    "write `\"plugin\": [\"name\", …]`",
                )
                .at(origin),
            ),
        }
        match map.get("plugins") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    self.push_v2_plugin_entry(item, origin, base, scope);
                }
            }
            Some(_) => self.diagnostics.push(
                Diagnostic::new(
                    "action-required",
                    format!("`plugins` in {} must be a list", origin.display()),
                    "write `\"plugins\": [{ \"package\": \"name\", \"options\": { … } }, \"-plugin.id\"]`",
                )
                .at(origin),
            ),
        }
        if let Some(mcp) = map.get("mcp").map(v2_servers) {
            match mcp {
                Value::Object(servers) => {
                    for (name, config) in servers {
                        self.mcp.push(McpEntry {
                            name: name.clone(),
                            origin: origin.to_path_buf(),
                            scope,
                            config: config.clone(),
                        });
                    }
                }
                _ => self.diagnostics.push(
                    Diagnostic::new(
                        "action-required",
                        format!("`mcp` in {} must be an object", origin.display()),
                        "write `\"mcp\": { \"name\": { … } }`",
                    )
                    .at(origin),
                ),
            }
        }
    }

    /// One entry of V2's `plugins`: `{ package, options? }`, a spec string, or a `-<id>`
    /// selector. A package entry is read as V1's `[spec, options]` (a local `package` may be a
    /// file, as the seeds write it, or a folder, as the released docs do).
    fn push_v2_plugin_entry(&mut self, item: &Value, origin: &Path, base: &Path, scope: Scope) {
        match item {
            Value::String(s) if s.starts_with('-') => {
                let selector = s[1..].trim();
                if selector.is_empty() {
                    self.diagnostics.push(
                        Diagnostic::new(
                            "action-required",
                            format!("`-` in `plugins` of {} names no plugin", origin.display()),
                            "write `-<plugin id>`, `-<prefix>.*` or `-*`",
                        )
                        .at(origin),
                    );
                } else {
                    self.v2_disabled
                        .push((selector.to_string(), origin.to_path_buf()));
                }
            }
            Value::String(_) => self.push_plugin_entry(item, origin, base, scope),
            Value::Object(o) => match o.get("package") {
                Some(Value::String(package)) => {
                    let options = o.get("options").cloned().unwrap_or(Value::Null);
                    self.push_plugin_entry(
                        &Value::Array(vec![Value::String(package.clone()), options]),
                        origin,
                        base,
                        scope,
                    )
                }
                _ => self.diagnostics.push(
                    Diagnostic::new(
                        "action-required",
                        format!("a `plugins` entry in {} has no `package`", origin.display()),
                        "write `{ \"package\": \"name or ./path\", \"options\": { … } }`",
                    )
                    .at(origin),
                ),
            },
            other => self.diagnostics.push(
                Diagnostic::new(
                    "action-required",
                    format!("`plugins` entry {other} in {} is neither `{{ package, options }}`, a spec nor `-<id>`", origin.display()),
                    "write `{ \"package\": \"name\" }`, a spec string, or `-<plugin id>`",
                )
                .at(origin),
            ),
        }
    }

    fn push_plugin_entry(&mut self, item: &Value, origin: &Path, base: &Path, scope: Scope) {
        let (raw, options) = match item {
            Value::String(s) => (s.clone(), None),
            Value::Array(pair)
                if matches!(pair.first(), Some(Value::String(_))) && pair.len() <= 2 =>
            {
                let raw = pair[0].as_str().unwrap_or_default().to_string();
                match pair.get(1) {
                    None | Some(Value::Null) => (raw, None),
                    Some(opts @ Value::Object(_)) => (raw, Some(opts.clone())),
                    Some(_) => {
                        self.diagnostics.push(
                            Diagnostic::new(
                                "action-required",
                                format!(
                                    "options for `{raw}` in {} must be an object",
                                    origin.display()
                                ),
                                "write `[\"spec\", { … }]`",
                            )
                            .at(origin),
                        );
                        return;
                    }
                }
            }
            other => {
                self.diagnostics.push(
                    Diagnostic::new(
                        "action-required",
                        format!(
                            "plugin entry {other} in {} is neither a spec nor [spec, options]",
                            origin.display()
                        ),
                        "write a string or a `[spec, options]` pair",
                    )
                    .at(origin),
                );
                return;
            }
        };
        let mut spec = spec::parse(&raw, base);
        // A folder without package.json means its first index file (OpenCode resolves it here).
        if let PluginSpec::Path { url, path } = &mut spec {
            if path.is_dir() && !path.join("package.json").exists() {
                if let Some(index) = [
                    "index.ts",
                    "index.tsx",
                    "index.js",
                    "index.mjs",
                    "index.cjs",
                ]
                .iter()
                .map(|i| path.join(i))
                .find(|p| p.is_file())
                {
                    *url = spec::file_url(&index);
                    *path = index;
                }
            }
        }
        // Inline config keeps relative paths as written (resolved at load time against the
        // working directory), so its key and listing are the raw string, as in OpenCode.
        let inline = origin == Path::new(INLINE_ORIGIN);
        let (key, listed_as) = match &spec {
            PluginSpec::Path { .. }
                if inline && !raw.starts_with("file://") && !raw.starts_with('/') =>
            {
                (raw.clone(), raw.clone())
            }
            PluginSpec::Path { url, .. } => (spec.dedupe_key(&raw), url.clone()),
            _ => (spec.dedupe_key(&raw), raw.clone()),
        };
        self.origins.push(PluginOrigin {
            raw,
            key,
            listed_as,
            spec,
            options,
            source: origin.to_path_buf(),
            scope,
            from_scan: false,
            options_kept_from_config: false,
            skip: None,
        });
    }

    /// `*.{ext}` files directly inside `dir`, sorted by name (deviations ledger D-002), with
    /// diagnostics for what cannot be read or named.
    fn list_scripts(&mut self, dir: &Path, exts: &[&str]) -> Vec<PathBuf> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Vec::new(),
            Err(e) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        "temporarily-unavailable",
                        format!("cannot read folder {}: {e}", dir.display()),
                        "fix the folder's permissions; the other folders were scanned",
                    )
                    .at(dir),
                );
                return Vec::new();
            }
        };
        let mut files = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                if exts.iter().any(|x| {
                    name.as_encoded_bytes()
                        .ends_with(format!(".{x}").as_bytes())
                }) {
                    self.diagnostics.push(
                        Diagnostic::new(
                            "unsupported",
                            format!(
                                "{} has a file whose name is not valid UTF-8 ({}); it is not used",
                                dir.display(),
                                path.to_string_lossy()
                            ),
                            "rename the file with a UTF-8 name",
                        )
                        .at(dir),
                    );
                }
                continue;
            };
            let Some((_, ext)) = name.rsplit_once('.') else {
                continue;
            };
            if !exts.contains(&ext) {
                continue;
            }
            // Symlinks are followed; folders named like scripts are not scripts.
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => files.push(path),
                Ok(_) => {}
                Err(e) => self.diagnostics.push(
                    Diagnostic::new(
                        "temporarily-unavailable",
                        format!("cannot read {}: {e}", path.display()),
                        "fix or remove the file (a broken link?)",
                    )
                    .at(&path),
                ),
            }
        }
        files.sort();
        files
    }

    /// Remote org configs ("well-known") and account configs need OpenCode's stored login;
    /// Berth does not fetch them, and says so when the login store names any.
    fn remote_config_notice(&mut self) {
        let auth = self.env.data_home().join("opencode").join("auth.json");
        let Ok(text) = std::fs::read_to_string(&auth) else {
            return;
        };
        let Ok(Value::Object(entries)) = serde_json::from_str::<Value>(&text) else {
            return;
        };
        let remote = entries
            .values()
            .filter(|v| matches!(v.get("type").and_then(Value::as_str), Some("wellknown")))
            .count();
        if remote > 0 {
            self.diagnostics.push(
                Diagnostic::new(
                    "unsupported",
                    format!("OpenCode's login store names {remote} remote organisation config(s); Berth does not fetch remote configs, so plugins they add are not listed"),
                    "add those plugins to a local opencode.json if you want Berth to host them",
                )
                .at(auth),
            );
        }
    }
}

/// `{env:NAME}` is replaced by the variable's value (empty when unset), as OpenCode does.
fn substitute_env(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("{env:") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 5..];
        match after.find('}') {
            Some(j) => {
                out.push_str(&std::env::var(&after[..j]).unwrap_or_default());
                rest = &after[j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// V2's `mcp.servers.<name>` as V1's `mcp.<name>` (D-044). `servers` is V1's server of that
/// name when it looks like one (it has a `type`, `command` or `url`).
fn v2_servers(mcp: &Value) -> Value {
    match mcp.get("servers") {
        Some(Value::Object(servers))
            if !["type", "command", "url"]
                .iter()
                .any(|k| servers.contains_key(*k)) =>
        {
            let mut out = mcp.as_object().cloned().unwrap_or_default();
            out.remove("servers");
            for (name, config) in servers {
                out.insert(name.clone(), config.clone());
            }
            Value::Object(out)
        }
        _ => mcp.clone(),
    }
}

/// The entries of OpenCode V2 package folders in a `plugin(s)/` folder (seed 000; D-044): a
/// child folder (or a symlink to one) whose entry — `package.json`'s `exports`, `module` or
/// `main` when a string and inside the folder, else `index.ts`, `index.js` — has a V2 default
/// export. OpenCode 1.18.4 ignores folders there, so a folder with a V1 plugin stays out, as
/// in OpenCode; after the folder's files, in name order.
fn v2_package_folders(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut folders: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    folders
        .iter()
        .filter_map(|folder| {
            let pkg: Option<Value> = std::fs::read_to_string(folder.join("package.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
            let declared = ["exports", "module", "main"]
                .iter()
                .filter_map(|k| pkg.as_ref()?.get(*k)?.as_str().map(str::to_string));
            let entry = declared
                .chain(["index.ts".to_string(), "index.js".to_string()])
                .filter(|c| !Path::new(c).is_absolute())
                .map(|c| folder.join(c))
                .filter(|p| p.is_file())
                .find(|p| {
                    std::fs::canonicalize(p)
                        .ok()
                        .zip(std::fs::canonicalize(folder).ok())
                        .is_some_and(|(p, f)| p.starts_with(f))
                })?;
            // Large files are not read here; the scan reads every file it takes.
            let text = std::fs::read_to_string(&entry)
                .ok()
                .filter(|t| t.len() < 1 << 20)?;
            let shape = crate::facts::analyze(&entry, &text).default_shape;
            (crate::source::Generation::of(shape.as_ref()) != crate::source::Generation::V1)
                .then_some(entry)
        })
        .collect()
}
