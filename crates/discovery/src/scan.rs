//! Turns the config graph into described sources: entry files, digests, static capabilities
//! and diagnostics. Re-parses only files whose (size, mtime) changed since the last scan (and
//! those modified within 100 ms of being read, which may have changed within one timestamp tick).
//!
//! Must not: execute or import anything, or follow a relative import out of the source's own
//! folder.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::digest::{sha256_hex, sha256_parts};
use crate::env::OpencodeEnv;
use crate::facts::{analyze, FileFacts};
use crate::graph::{ConfigGraph, PluginOrigin};
use crate::resolve::{is_local_specifier, resolve_local, ImportKind, Runtime};
use crate::source::*;
use crate::spec::PluginSpec;

/// Files larger than this are hashed but not parsed (a 50 MB "tool" is not a tool).
pub const MAX_ANALYZED_BYTES: u64 = 4 * 1024 * 1024;
/// Relative imports followed per source, at most.
const MAX_FILES_PER_SOURCE: usize = 256;
const INDEX_FILES: &[&str] = &[
    "index.ts",
    "index.tsx",
    "index.js",
    "index.mjs",
    "index.cjs",
];

/// A file modified this close to the moment it was read may change again within the same
/// timestamp tick without its size or mtime moving: its cached result is not reused (git's
/// "racily clean" rule). Ticks are 1–10 ms on Linux, ~16 ms on NTFS, ns on APFS; FAT's 2 s
/// are not covered.
const RACY: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Clone)]
struct CachedFile {
    size: u64,
    mtime: Option<SystemTime>,
    /// When it was read, to tell a settled file from a racy one.
    read_at: SystemTime,
    digest: String,
    facts: Option<FileFacts>,
    too_large: bool,
}

/// Keeps per-file results between scans.
#[derive(Default)]
pub struct Scanner {
    cache: HashMap<PathBuf, CachedFile>,
    /// Where Berth prepares npm packages (`<data dir>/packages`): a prepared package is
    /// described from its files; an unprepared one by its spec alone.
    packages_root: Option<PathBuf>,
    /// Whose resolution rules local imports follow (the backend the sources would run on).
    runtime: Runtime,
    /// What each config folder's own package.json adds to its sources, for this scan.
    folders: HashMap<PathBuf, FolderPart>,
}

/// What a config folder's own `package.json` adds to every source in it.
#[derive(Clone, Default)]
struct FolderPart {
    dependencies: BTreeSet<String>,
    manifest: BTreeMap<PathBuf, String>,
    facts: FileFacts,
    analysis_incomplete: bool,
    diagnostics: Vec<Diagnostic>,
}

/// The OpenCode version whose `engines.opencode` ranges Berth checks against.
pub const OPENCODE_VERSION: &str = "1.18.4";

/// The folder an npm spec runs from: the version the person chose last — an update or a
/// rollback names a folder of `<root>/.versions/` in `<slot>.current` — else the slot it was
/// first prepared in (`npm_slot_dir`).
pub fn npm_install_dir(root: &Path, name: &str, request: &str) -> PathBuf {
    let slot = npm_slot_dir(root, name, request);
    match npm_current_version(root, name, request) {
        Some(v) => npm_versions_dir(root).join(v),
        None => slot,
    }
}

/// The `.versions` folder an update or a rollback points the spec at, if it still exists.
pub fn npm_current_version(root: &Path, name: &str, request: &str) -> Option<String> {
    let pointer = npm_pointer(root, name, request);
    let v = std::fs::read_to_string(pointer).ok()?;
    let v = v.trim();
    let plain = !v.is_empty() && !v.starts_with('.') && !v.contains('/') && !v.contains('\\');
    (plain && npm_versions_dir(root).join(v).is_dir()).then(|| v.to_string())
}

/// The file that names the version a spec runs (absent: its slot).
pub fn npm_pointer(root: &Path, name: &str, request: &str) -> PathBuf {
    let slot = npm_slot_dir(root, name, request);
    let file = slot
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    root.join(format!("{file}.current"))
}

/// Where exact versions prepared by an update are kept, each in a folder of its own named by
/// package, version and integrity.
pub fn npm_versions_dir(root: &Path) -> PathBuf {
    root.join(".versions")
}

/// The folder an npm spec is first prepared in: `<root>/<name@request>` with `/` made safe.
pub fn npm_slot_dir(root: &Path, name: &str, request: &str) -> PathBuf {
    let safe: String = format!("{name}@{request}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "@._+-".contains(c) {
                c
            } else if c == '/' {
                '+'
            } else {
                '_'
            }
        })
        .collect();
    root.join(safe)
}

/// The version and integrity a prepared request resolved to, from its install's lockfile.
pub fn resolved_version(root: &Path, name: &str, request: &str) -> Option<crate::source::Resolved> {
    let dir = npm_install_dir(root, name, request);
    resolved_in(&dir, &prepared_package_dir(root, name, request))
}

/// The version and integrity of the package at `pkg` in the install `dir`, from its lockfile.
pub fn resolved_in(dir: &Path, pkg: &Path) -> Option<crate::source::Resolved> {
    let lock: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package-lock.json")).ok()?).ok()?;
    let pkg = pkg.to_path_buf();
    let real = pkg.file_name()?.to_string_lossy().into_owned();
    let real = match pkg.parent().and_then(|p| p.file_name()) {
        Some(scope) if scope.to_string_lossy().starts_with('@') => {
            format!("{}/{real}", scope.to_string_lossy())
        }
        _ => real,
    };
    let packages = lock["packages"].as_object()?;
    let entry = packages.get(&format!("node_modules/{real}"))?;
    Some(crate::source::Resolved {
        version: entry["version"].as_str()?.to_string(),
        integrity: entry["integrity"].as_str().map(str::to_string),
        packages: packages.keys().filter(|k| !k.is_empty()).count(),
    })
}

/// Where a prepared package's files are: `node_modules/<name>` of its install folder (for a
/// `file:` spec the real name is recorded at preparation in `.berth-package`).
pub fn prepared_package_dir(root: &Path, name: &str, request: &str) -> PathBuf {
    let dir = npm_install_dir(root, name, request);
    let real = std::fs::read_to_string(dir.join(".berth-package"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| name.to_string());
    dir.join("node_modules").join(real)
}

/// The module OpenCode imports from a prepared package (spec §2.4): `exports["./server"]`
/// (string, `import` or `default`), else `main`; a package whose `exports` object has neither
/// has no server entry; otherwise the package folder, which the runtime resolves through
/// `exports["."]`, `module`, `main`, then `index.*`. Err says why there is none.
pub fn npm_entry(pkg_dir: &Path) -> Result<PathBuf, String> {
    let pkg = read_package_json(pkg_dir)
        .ok_or_else(|| format!("{} has no readable package.json", pkg_dir.display()))?;
    let target = match server_entry(&pkg) {
        Some(t) => t,
        None if pkg.get("exports").is_some_and(Value::is_object) => {
            return Err("its package.json `exports` has no `./server` entry and there is no `main`: OpenCode finds no server entry and skips it".into())
        }
        None => {
            let dot = pkg.get("exports").and_then(|e| match e {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => o.get(".").and_then(|d| match d {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(c) => c.get("import").or_else(|| c.get("default")).and_then(Value::as_str).map(str::to_string),
                    _ => None,
                }),
                _ => None,
            });
            match dot.or_else(|| pkg.get("module").and_then(Value::as_str).map(str::to_string)) {
                Some(t) => t,
                None => match INDEX_FILES.iter().find(|i| pkg_dir.join(i).is_file()) {
                    Some(i) => i.to_string(),
                    None => return Err("it has no entry (`exports`, `module`, `main` or index file)".into()),
                },
            }
        }
    };
    let entry = crate::spec::normalize(&pkg_dir.join(&target));
    if !stays_inside(&entry, pkg_dir) {
        return Err(format!("its entry {target} points outside the package"));
    }
    Ok(entry)
}

/// One scan's result.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub graph: ConfigGraph,
    pub sources: Vec<Source>,
}

impl Discovery {
    /// Graph-level diagnostics (files, folders, switches) — source ones live on the sources.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.graph.diagnostics
    }
}

impl Scanner {
    pub fn new() -> Scanner {
        Scanner::default()
    }

    /// A scanner that also describes npm packages prepared under `root`.
    pub fn with_packages(root: PathBuf) -> Scanner {
        Scanner {
            packages_root: Some(root),
            ..Scanner::default()
        }
    }

    /// Local imports resolve as `runtime` resolves them (Bun unless told otherwise).
    pub fn resolving_for(mut self, runtime: Runtime) -> Scanner {
        self.runtime = runtime;
        self
    }

    pub fn scan(&mut self, env: &OpencodeEnv, directory: &Path) -> Discovery {
        let mut graph = ConfigGraph::resolve(env, directory);
        let mut sources = Vec::new();
        let mut live = HashSet::new();
        // A config folder's package.json is read once per scan, however many files it holds.
        self.folders.clear();

        for (order, tool) in graph.tool_files.iter().enumerate() {
            let mut s = self.describe_files(
                SourceKind::StandaloneTool,
                &tool.path,
                &tool.config_dir,
                &mut live,
            );
            self.apply_config_dir(&mut s, &tool.config_dir, &mut live);
            sources.push(finish(
                s,
                SourceKind::StandaloneTool,
                tool.scope,
                &tool.config_dir,
                tool.path.display().to_string(),
                None,
                None,
                order,
                &tool.path,
            ));
        }
        for (order, origin) in graph.plugins.iter().enumerate() {
            let mut s = self.describe_plugin(origin, order, &mut live);
            // OpenCode skips these names (built in there); Berth has no built-in equivalent,
            // so the source follows the normal approval path and the note says why (D-005).
            if let Some(diag) = &origin.skip {
                s.diagnostics.push(diag.clone());
            }
            sources.push(s);
        }
        // OpenCode V2's IDs: `-<id>` selectors and one ID from two sources (D-044).
        let id_problems = crate::v2ids::apply(&mut sources, &graph.v2_disabled);
        graph.diagnostics.extend(id_problems);
        for (order, m) in graph.mcp.iter().enumerate() {
            // The approval binds to the entry as written: any change of its command, URL,
            // variables or headers asks again.
            let digest = sha256_hex(m.config.to_string().as_bytes());
            let facts = crate::mcp::describe(&m.name, &m.config);
            let s = Pending {
                digest,
                capabilities: facts.capabilities,
                diagnostics: facts.diagnostics,
                ..Pending::default()
            };
            let mut src = finish(
                s,
                SourceKind::Mcp,
                m.scope,
                &m.origin,
                m.name.clone(),
                None,
                None,
                order,
                Path::new(&format!("{}#{}", m.origin.display(), m.name)),
            );
            if facts.state != SourceState::Discovered {
                src.state = facts.state;
            }
            sources.push(src);
        }
        // Forget files no source uses any more.
        self.cache.retain(|p, _| live.contains(p));
        Discovery { graph, sources }
    }

    fn describe_plugin(
        &mut self,
        origin: &PluginOrigin,
        order: usize,
        live: &mut HashSet<PathBuf>,
    ) -> Source {
        match &origin.spec {
            PluginSpec::Path { path, .. } => {
                let (entry, root, mut diags) = resolve_file_entry(path);
                let mut s = match &entry {
                    Some(entry) => self.describe_files(SourceKind::FilePlugin, entry, &root, live),
                    None => Pending {
                        contents_unknown: true,
                        ..Pending::default()
                    },
                };
                s.diagnostics.append(&mut diags);
                if let Some(pkg) = read_package_json(&root) {
                    apply_package_json(&mut s, &pkg, &root);
                }
                if let Some(dir) = entry.as_deref().and_then(config_dir_of) {
                    self.apply_config_dir(&mut s, &dir, live);
                }
                if origin.options_kept_from_config {
                    s.diagnostics.push(Diagnostic::new(
                        "unsupported",
                        "this file is both configured with options and found in a plugins folder; OpenCode 1.18.4 drops the options, Berth keeps them (deviations ledger D-003)",
                        "remove one of the two entries to make the intent explicit",
                    ).ledger("D-003"));
                }
                let entry_text = entry.as_deref().unwrap_or(path).display().to_string();
                finish(
                    s,
                    SourceKind::FilePlugin,
                    origin.scope,
                    &origin.source,
                    entry_text,
                    Some(origin.listed_as.clone()),
                    origin.options.clone(),
                    order,
                    path,
                )
            }
            PluginSpec::Npm { name, request } => {
                let prepared = self
                    .packages_root
                    .as_ref()
                    .map(|r| prepared_package_dir(r, name, request))
                    .filter(|d| d.join("package.json").is_file());
                let mut s = match &prepared {
                    Some(pkg_dir) => {
                        let install = self
                            .packages_root
                            .as_ref()
                            .map(|r| npm_install_dir(r, name, request))
                            .unwrap_or_default();
                        self.describe_package(&install, pkg_dir, live)
                    }
                    None => {
                        let mut s = Pending {
                            contents_unknown: true,
                            ..Pending::default()
                        };
                        s.digest = sha256_hex(format!("npm:{name}@{request}").as_bytes());
                        s
                    }
                };
                let entry_text = s
                    .files
                    .first()
                    .map(|f| f.display().to_string())
                    .unwrap_or_else(|| format!("{name}@{request}"));
                let blocked = s.blocked.take();
                let mut src = finish(
                    s,
                    SourceKind::NpmPlugin,
                    origin.scope,
                    &origin.source,
                    entry_text,
                    Some(origin.listed_as.clone()),
                    origin.options.clone(),
                    order,
                    Path::new(name),
                );
                if let Some(state) = blocked {
                    src.state = state;
                }
                src.npm = Some(NpmRef {
                    name: name.clone(),
                    request: request.clone(),
                    resolved: self
                        .packages_root
                        .as_ref()
                        .and_then(|r| resolved_version(r, name, request)),
                });
                src
            }
            PluginSpec::Invalid { reason, recovery } => {
                let mut s = Pending {
                    contents_unknown: true,
                    ..Pending::default()
                };
                s.digest = sha256_hex(origin.raw.as_bytes());
                s.diagnostics.push(
                    Diagnostic::new("unsupported", reason.clone(), recovery.clone())
                        .at(origin.source.clone()),
                );
                let mut src = finish(
                    s,
                    SourceKind::NpmPlugin,
                    origin.scope,
                    &origin.source,
                    origin.raw.clone(),
                    Some(origin.listed_as.clone()),
                    origin.options.clone(),
                    order,
                    Path::new(&origin.raw),
                );
                src.state = SourceState::Unsupported;
                src
            }
        }
    }

    /// `source` (an npm plugin) as it would be if it ran from the prepared install `install`:
    /// what an update or a rollback would run, described before anything is switched to it
    /// (nothing is imported). `None` for a source that is not an npm plugin.
    pub fn npm_candidate(&mut self, source: &Source, install: &Path) -> Option<Source> {
        let npm = source.npm.as_ref()?;
        let real = std::fs::read_to_string(install.join(".berth-package"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| npm.name.clone());
        let pkg_dir = install.join("node_modules").join(real);
        let mut live = HashSet::new();
        let mut s = self.describe_package(install, &pkg_dir, &mut live);
        let entry_text = s
            .files
            .first()
            .map(|f| f.display().to_string())
            .unwrap_or_else(|| source.entry.clone());
        let blocked = s.blocked.take();
        let mut src = finish(
            s,
            SourceKind::NpmPlugin,
            source.scope,
            &source.origin,
            entry_text,
            source.spec.clone(),
            source.options.clone(),
            source.order,
            Path::new(&npm.name),
        );
        if let Some(state) = blocked {
            src.state = state;
        }
        src.npm = Some(NpmRef {
            name: npm.name.clone(),
            request: npm.request.clone(),
            resolved: resolved_in(install, &pkg_dir),
        });
        Some(src)
    }

    /// Reads `entry` and every local file it imports (relative, absolute or `file:` specifiers,
    /// resolved as the backend's runtime resolves them, from real paths), wherever they are:
    /// each file read goes into the manifest with the digest of the bytes its facts came from.
    /// Files outside `root` are shown as such.
    fn describe_files(
        &mut self,
        _kind: SourceKind,
        entry: &Path,
        root: &Path,
        live: &mut HashSet<PathBuf>,
    ) -> Pending {
        let mut p = Pending::default();
        let root_canon = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        // The runtime runs a symlinked file from its real path, and resolves its imports there.
        let entry = real_path_below(entry, root, &root_canon);
        let mut queue = vec![entry.clone()];
        let mut seen = HashSet::new();
        while let Some(file) = queue.pop() {
            if !seen.insert(file.clone()) {
                continue;
            }
            if seen.len() > MAX_FILES_PER_SOURCE {
                p.analysis_incomplete = true;
                p.diagnostics.push(Diagnostic::new(
                    "unsupported",
                    format!("more than {MAX_FILES_PER_SOURCE} local files are imported; the summary covers the first ones and the others will not load"),
                    "split the plugin, or make it a package",
                ));
                break;
            }
            let is_entry = file == entry;
            let cached = match self.read_file(&file) {
                Ok(c) => c,
                Err(e) => {
                    let (code, recovery) = if is_entry {
                        ("temporarily-unavailable", "check that the file exists and is readable; Berth rescans when it changes")
                    } else {
                        (
                            "plugin-failed",
                            "fix the import path; OpenCode would fail to load this module too",
                        )
                    };
                    p.diagnostics.push(
                        Diagnostic::new(
                            code,
                            format!("cannot read {}: {e}", file.display()),
                            recovery,
                        )
                        .at(&file),
                    );
                    if is_entry {
                        p.contents_unknown = true;
                    }
                    continue;
                }
            };
            live.insert(file.clone());
            p.manifest.insert(file.clone(), cached.digest.clone());
            p.files.push(file.clone());
            if !file.starts_with(&root_canon) {
                p.outside.insert(file.display().to_string());
            }
            let Some(facts) = &cached.facts else {
                p.analysis_incomplete = true;
                p.diagnostics.push(
                    Diagnostic::new(
                        "unsupported",
                        format!(
                            "{} is larger than {} MiB; Berth does not analyse it",
                            file.display(),
                            MAX_ANALYZED_BYTES / 1024 / 1024
                        ),
                        "approve only if you expect a file this large here",
                    )
                    .at(&file),
                );
                continue;
            };
            if !facts.syntax_errors.is_empty() {
                // Facts from a file that does not parse are partial.
                p.analysis_incomplete = true;
                p.diagnostics.push(
                    Diagnostic::new(
                        "plugin-failed",
                        format!(
                            "{} does not parse: {}",
                            file.display(),
                            facts.syntax_errors[0]
                        ),
                        "fix the syntax error; the file would fail to load",
                    )
                    .at(&file),
                );
            }
            if is_entry {
                p.exports = facts.exports.clone();
                p.non_tool_exports = facts.non_tool_exports.clone();
                p.facts.default_shape = facts.default_shape.clone();
            }
            p.merge(facts);
            let imports = facts
                .static_imports
                .iter()
                .chain(facts.dynamic_imports.iter())
                .map(|s| (s, ImportKind::Import));
            let requires = facts.requires.iter().map(|s| (s, ImportKind::Require));
            for (spec, how) in imports.chain(requires) {
                if !is_local_specifier(spec) {
                    continue;
                }
                match resolve_local(self.runtime, &file, spec, how) {
                    Some(target) => queue.push(target),
                    None => p.diagnostics.push(
                        Diagnostic::new(
                            "plugin-failed",
                            format!("{} imports {spec}, which does not exist", file.display()),
                            "fix the import path",
                        )
                        .at(&file),
                    ),
                }
            }
        }
        p
    }

    /// What a config folder's own `package.json` adds to the sources in it (computed once per
    /// scan): the dependencies it lists (`name@spec`, which Berth prepares for them), with a
    /// diagnostic for each Berth will not install; the manifest and lockfile bytes; and the
    /// files of dependencies that are folders inside it (`file:./lib`: npm links them, so they
    /// run from where they are — read, hashed and summed into the source like its own files).
    fn apply_config_dir(
        &mut self,
        p: &mut Pending,
        config_dir: &Path,
        live: &mut HashSet<PathBuf>,
    ) {
        if !self.folders.contains_key(config_dir) {
            let part = self.folder_part(config_dir, live);
            self.folders.insert(config_dir.to_path_buf(), part);
        }
        let part = &self.folders[config_dir];
        p.dependencies.extend(part.dependencies.iter().cloned());
        p.manifest
            .extend(part.manifest.iter().map(|(k, v)| (k.clone(), v.clone())));
        p.merge(&part.facts);
        p.analysis_incomplete |= part.analysis_incomplete;
        p.diagnostics.extend(part.diagnostics.iter().cloned());
    }

    fn folder_part(&mut self, config_dir: &Path, live: &mut HashSet<PathBuf>) -> FolderPart {
        let mut part = FolderPart::default();
        let Some(pkg) = read_package_json(config_dir) else {
            return part;
        };
        let mut files = Pending::default();
        record_package_files(&mut files, config_dir);
        for (name, spec) in config_dependencies(&pkg) {
            if let Some(why) = crate::spec::dependency_refusal(&name, &spec, config_dir) {
                part.diagnostics.push(
                    Diagnostic::new(
                        "dependency-failed",
                        format!("{}: {why}", config_dir.join("package.json").display()),
                        "use a registry version or a folder inside the config folder",
                    )
                    .at(config_dir.join("package.json")),
                );
            } else if let Ok(crate::spec::NpmSpecClass::Directory { path }) =
                crate::spec::classify_dependency(&name, &spec, config_dir)
            {
                if let Ok(entry) = npm_entry(&path) {
                    let dep = self.describe_files(SourceKind::NpmPlugin, &entry, &path, live);
                    part.facts = merged(&part.facts, &dep.facts);
                    files.manifest.extend(dep.manifest);
                    part.diagnostics.extend(dep.diagnostics);
                    part.analysis_incomplete |= dep.analysis_incomplete;
                    record_package_files(&mut files, &path);
                }
            }
            part.dependencies.insert(format!("{name}@{spec}"));
        }
        part.manifest = files.manifest;
        part
    }

    /// Describes a prepared npm package: its entry and relative imports, its package.json
    /// (install scripts, `engines.opencode`), and whether OpenCode would load it at all.
    fn describe_package(
        &mut self,
        install: &Path,
        pkg_dir: &Path,
        live: &mut HashSet<PathBuf>,
    ) -> Pending {
        let mut p = match npm_entry(pkg_dir) {
            Ok(entry) => self.describe_files(SourceKind::NpmPlugin, &entry, pkg_dir, live),
            Err(why) => {
                let mut p = Pending {
                    analysis_incomplete: true,
                    blocked: Some(SourceState::Unsupported),
                    ..Pending::default()
                };
                p.diagnostics.push(
                    Diagnostic::new(
                        "unsupported",
                        format!("{}: {why}", pkg_dir.display()),
                        "use a version of the package that has a server entry",
                    )
                    .at(pkg_dir.join("package.json")),
                );
                p
            }
        };
        // Everything the install holds is part of what runs: its file list (written when Berth
        // prepared it) is in the digest, and the host's loader checks each file against it.
        match crate::prepared::list_digest(install) {
            Some(d) => {
                let real = std::fs::canonicalize(install).unwrap_or_else(|_| install.to_path_buf());
                p.trees.insert(real, d);
            }
            None => p.contents_unknown = true,
        }
        if let Some(pkg) = read_package_json(pkg_dir) {
            apply_package_json(&mut p, &pkg, pkg_dir);
            if let Some(range) = p.engines_opencode.clone() {
                let ok = nodejs_semver::Range::parse(&range)
                    .ok()
                    .zip(nodejs_semver::Version::parse(OPENCODE_VERSION).ok())
                    .map(|(r, v)| r.satisfies(&v));
                if ok != Some(true) {
                    p.blocked = Some(SourceState::IncompatibleVersion);
                    p.diagnostics.push(Diagnostic::new(
                        "incompatible-version",
                        format!("Plugin requires opencode {range} but running {OPENCODE_VERSION}"),
                        "use a version of the plugin made for OpenCode 1.18",
                    ));
                }
            }
        }
        p
    }

    fn read_file(&mut self, path: &Path) -> std::io::Result<CachedFile> {
        let meta = std::fs::metadata(path)?;
        if !meta.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let mtime = meta.modified().ok();
        if let Some(c) = self.cache.get(path) {
            let settled = c
                .mtime
                .is_some_and(|m| m.checked_add(RACY).is_some_and(|t| t < c.read_at));
            if settled && c.size == meta.len() && c.mtime == mtime {
                return Ok(c.clone());
            }
        }
        let read_at = SystemTime::now();
        let too_large = meta.len() > MAX_ANALYZED_BYTES;
        let (digest, facts) = if too_large {
            (crate::digest::file_digest(path)?, None)
        } else {
            let bytes = std::fs::read(path)?;
            let digest = sha256_hex(&bytes);
            let text = String::from_utf8_lossy(&bytes);
            (digest, Some(analyze(path, &text)))
        };
        let c = CachedFile {
            size: meta.len(),
            mtime,
            read_at,
            digest,
            facts,
            too_large,
        };
        let _ = c.too_large;
        self.cache.insert(path.to_path_buf(), c.clone());
        Ok(c)
    }
}

/// A source being described; becomes a [`Source`] in [`finish`].
#[derive(Default)]
struct Pending {
    files: Vec<PathBuf>,
    exports: Vec<String>,
    facts: FileFacts,
    contents_unknown: bool,
    analysis_incomplete: bool,
    non_tool_exports: BTreeSet<String>,
    /// A state discovery already knows the source ends in (no server entry, wrong engine).
    blocked: Option<SourceState>,
    install_scripts: BTreeSet<String>,
    engines_opencode: Option<String>,
    /// Every file read, by real path, with its digest.
    manifest: BTreeMap<PathBuf, String>,
    /// Prepared installs the source loads from (install folder → file-list digest).
    trees: BTreeMap<PathBuf, String>,
    outside: BTreeSet<String>,
    dependencies: BTreeSet<String>,
    digest: String,
    capabilities: Capabilities,
    diagnostics: Vec<Diagnostic>,
}

impl Pending {
    fn merge(&mut self, f: &FileFacts) {
        let t = &mut self.facts;
        t.static_imports.extend(f.static_imports.iter().cloned());
        t.dynamic_imports.extend(f.dynamic_imports.iter().cloned());
        t.requires.extend(f.requires.iter().cloned());
        t.computed_dynamic_import |= f.computed_dynamic_import;
        t.opaque.extend(f.opaque.iter().cloned());
        // Code in a `data:` or `blob:` URL is loaded from a string, never from a file.
        for spec in f.all_specifiers() {
            if let Some(scheme) = ["data:", "blob:"].iter().find(|s| spec.starts_with(*s)) {
                t.opaque.insert(format!("code from a {scheme} URL"));
            }
        }
        t.bun_apis.extend(f.bun_apis.iter().cloned());
        t.process.extend(f.process.iter().cloned());
        t.network.extend(f.network.iter().cloned());
        t.filesystem.extend(f.filesystem.iter().cloned());
        t.environment.extend(f.environment.iter().cloned());
    }
}

/// Two files' facts as one.
fn merged(a: &FileFacts, b: &FileFacts) -> FileFacts {
    let mut p = Pending {
        facts: a.clone(),
        ..Pending::default()
    };
    p.merge(b);
    p.facts
}

#[allow(clippy::too_many_arguments)]
fn finish(
    p: Pending,
    kind: SourceKind,
    scope: Scope,
    origin: &Path,
    entry: String,
    spec: Option<String>,
    options: Option<Value>,
    order: usize,
    location: &Path,
) -> Source {
    let mut caps = if p.files.is_empty() {
        p.capabilities
    } else {
        Capabilities::default()
    };
    if !p.files.is_empty() {
        caps.files = p.files;
        caps.exports = p.exports;
        let f = p.facts;
        let v2 = if matches!(kind, SourceKind::FilePlugin | SourceKind::NpmPlugin) {
            let generation = Generation::of(f.default_shape.as_ref());
            caps.generation = Some(generation);
            if generation != Generation::V1 {
                caps.plugin_id = f.default_shape.as_ref().and_then(|d| d.id.clone());
            }
            generation != Generation::V1
        } else {
            false
        };
        caps.imports_plugin_api = f
            .all_specifiers()
            .any(|s| s == "@opencode-ai/plugin" || s.starts_with("@opencode-ai/plugin/"));
        caps.packages = f
            .all_specifiers()
            .filter(|s| {
                !s.starts_with('.')
                    && !s.starts_with('/')
                    && !s.starts_with("node:")
                    && !s.starts_with("bun:")
                    && !is_node_builtin(s)
                    && *s != "bun"
                    && !(v2 && V2_PROVIDED.contains(&package_name(s)))
            })
            .map(|s| package_name(s).to_string())
            .collect();
        caps.loads_computed_modules = f.computed_dynamic_import;
        caps.opaque = f.opaque;
        caps.bun_apis = f.bun_apis;
        caps.process = f.process;
        caps.network = f.network;
        caps.filesystem = f.filesystem;
        caps.environment = f.environment;
    }
    caps.install_scripts = p.install_scripts;
    caps.engines_opencode = p.engines_opencode;
    caps.outside_files = p.outside;
    caps.dependencies = p.dependencies;
    caps.contents_unknown |= p.contents_unknown;
    caps.analysis_incomplete |= p.analysis_incomplete;
    if kind == SourceKind::StandaloneTool {
        let candidates: Vec<String> = caps
            .exports
            .iter()
            .filter(|e| !p.non_tool_exports.contains(*e))
            .cloned()
            .collect();
        caps.tools = tool_names(location, &candidates);
    }
    caps.describe();
    let canonical = std::fs::canonicalize(location).unwrap_or_else(|_| location.to_path_buf());
    let id = source_id(kind, scope, &canonical);
    // The bytes: every file read and every prepared install (an unprepared npm spec keeps the
    // digest of its spec).
    let digest = if p.manifest.is_empty() && p.trees.is_empty() {
        p.digest
    } else {
        manifest_digest(&p.manifest, &p.trees)
    };
    let capability_digest = caps.digest();
    Source {
        id,
        kind,
        scope,
        origin: origin.to_path_buf(),
        entry,
        spec,
        options,
        npm: None,
        order,
        state: SourceState::PendingApproval,
        digest,
        capability_digest,
        capabilities: caps,
        manifest: crate::source::Manifest {
            files: p.manifest,
            trees: p.trees,
        },
        diagnostics: p.diagnostics,
    }
}

/// The digest of a manifest (path and content digest of each file, then each prepared
/// install's folder and file-list digest, in path order).
fn manifest_digest(files: &BTreeMap<PathBuf, String>, trees: &BTreeMap<PathBuf, String>) -> String {
    let parts: Vec<(String, &String)> = files
        .iter()
        .map(|(p, d)| (p.display().to_string(), d))
        .chain(
            trees
                .iter()
                .map(|(p, d)| (format!("tree:{}", p.display()), d)),
        )
        .collect();
    sha256_parts(parts.iter().map(|(a, b)| (a.as_str(), b.as_bytes())))
}

/// OpenCode's names for a tool file's exports: `<file>` for `default`, `<file>_<export>`
/// otherwise, sorted (module namespace order).
fn tool_names(file: &Path, exports: &[String]) -> Vec<String> {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut names: Vec<String> = exports
        .iter()
        .filter(|e| *e != "*")
        .map(|e| {
            if e == "default" {
                stem.clone()
            } else {
                format!("{stem}_{e}")
            }
        })
        .collect();
    names.sort();
    names
}

/// `tool-hello-1a2b3c4d`: readable, typeable, stable for the same kind, scope and location.
pub fn source_id(kind: SourceKind, scope: Scope, canonical: &Path) -> String {
    let scope_s = match scope {
        Scope::Global => "global",
        Scope::Local => "local",
    };
    let key = format!("{}|{}|{}", kind.id_prefix(), scope_s, canonical.display());
    let hash = &sha256_hex(key.as_bytes())["sha256:".len()..][..8];
    let stem = match kind {
        SourceKind::NpmPlugin | SourceKind::Mcp => canonical
            .to_string_lossy()
            .rsplit('#')
            .next()
            .unwrap_or_default()
            .to_string(),
        _ => canonical
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let slug: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let slug: String = slug.chars().take(40).collect();
    if slug.is_empty() {
        format!("{}-{hash}", kind.id_prefix())
    } else {
        format!("{}-{slug}-{hash}", kind.id_prefix())
    }
}

fn package_name(spec: &str) -> &str {
    let mut parts = spec.splitn(3, '/');
    let first = parts.next().unwrap_or(spec);
    if first.starts_with('@') {
        match parts.next() {
            Some(second) => &spec[..first.len() + 1 + second.len()],
            None => spec,
        }
    } else {
        first
    }
}

fn is_node_builtin(s: &str) -> bool {
    const BUILTINS: &[&str] = &[
        "assert",
        "async_hooks",
        "buffer",
        "child_process",
        "cluster",
        "console",
        "crypto",
        "dgram",
        "dns",
        "events",
        "fs",
        "fs/promises",
        "http",
        "http2",
        "https",
        "module",
        "net",
        "os",
        "path",
        "path/posix",
        "perf_hooks",
        "process",
        "querystring",
        "readline",
        "stream",
        "stream/promises",
        "string_decoder",
        "timers",
        "timers/promises",
        "tls",
        "tty",
        "url",
        "util",
        "v8",
        "vm",
        "worker_threads",
        "zlib",
    ];
    BUILTINS.contains(&s)
}

/// The entry OpenCode would import for a path spec (spec §2.2, §2.4): a directory with a
/// package.json uses `exports["./server"]` then `main`, then `index.*`; a file next to a
/// package.json with `main`/`exports["./server"]` is redirected there. Returns (entry, the
/// source's root folder, diagnostics).
fn resolve_file_entry(path: &Path) -> (Option<PathBuf>, PathBuf, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let (root, is_dir) = if path.is_dir() {
        (path.to_path_buf(), true)
    } else {
        (path.parent().unwrap_or(Path::new("/")).to_path_buf(), false)
    };
    if !is_dir && !path.exists() {
        diags.push(
            Diagnostic::new(
                "plugin-failed",
                format!("plugin file {} does not exist", path.display()),
                "fix the path in the `plugin` list, or create the file",
            )
            .at(path),
        );
        return (None, root, diags);
    }
    if let Some(pkg) = read_package_json(&root) {
        if let Some(target) = server_entry(&pkg) {
            let entry = crate::spec::normalize(&root.join(&target));
            if !stays_inside(&entry, &root) {
                diags.push(Diagnostic::new(
                    "plugin-failed",
                    format!("the entry {target} of {} points outside its package", root.display()),
                    "fix `main`/`exports` in package.json; entries must stay inside the package",
                ).at(root.join("package.json")));
                return (None, root, diags);
            }
            return (Some(entry), root, diags);
        }
    }
    if !is_dir {
        return (Some(path.to_path_buf()), root, diags);
    }
    match INDEX_FILES
        .iter()
        .map(|i| path.join(i))
        .find(|p| p.is_file())
    {
        Some(entry) => (Some(entry), root, diags),
        None => {
            diags.push(
                Diagnostic::new(
                    "plugin-failed",
                    format!(
                        "plugin folder {} has no package.json entry and no index.ts/tsx/js/mjs/cjs",
                        path.display()
                    ),
                    "add an index file or a package.json with `main`",
                )
                .at(path),
            );
            (None, root, diags)
        }
    }
}

/// The real path of `path`, found below the real `root_canon` of `root` by checking only the
/// components between them for symlinks (a scan of a thousand tool files would otherwise
/// resolve every ancestor of each).
fn real_path_below(path: &Path, root: &Path, root_canon: &Path) -> PathBuf {
    let full = || std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let Ok(rel) = path.strip_prefix(root) else {
        return full();
    };
    let mut at = root.to_path_buf();
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            return full();
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if !m.file_type().is_symlink() => {}
            _ => return full(),
        }
    }
    root_canon.join(rel)
}

/// Whether `path` is inside `root` once symlinks are followed (a link inside the folder that
/// points out of it is outside); lexically for a path that does not exist.
pub fn stays_inside(path: &Path, root: &Path) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| crate::spec::normalize(p));
    real(path).starts_with(real(root))
}

fn read_package_json(dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// `exports["./server"]` (string, or its `import`/`default`), else `main`.
pub fn server_entry(pkg: &Value) -> Option<String> {
    if let Some(server) = pkg.get("exports").and_then(|e| e.get("./server")) {
        let s = match server {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o
                .get("import")
                .or_else(|| o.get("default"))
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => None,
        };
        if s.is_some() {
            return s;
        }
    }
    pkg.get("main").and_then(Value::as_str).map(str::to_string)
}

fn apply_package_json(p: &mut Pending, pkg: &Value, root: &Path) {
    if let Some(scripts) = pkg.get("scripts").and_then(Value::as_object) {
        for hook in ["preinstall", "install", "postinstall", "prepare"] {
            if scripts.contains_key(hook) {
                p.install_scripts.insert(hook.to_string());
            }
        }
    }
    p.engines_opencode = pkg
        .get("engines")
        .and_then(|e| e.get("opencode"))
        .and_then(Value::as_str)
        .map(str::to_string);
    record_package_files(p, root);
}

/// `package.json` and `package-lock.json` of `dir` go into the manifest: they decide what
/// resolves and what gets installed.
fn record_package_files(p: &mut Pending, dir: &Path) {
    for f in ["package.json", "package-lock.json"] {
        let path = dir.join(f);
        if let Ok(bytes) = std::fs::read(&path) {
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            p.manifest.insert(real, sha256_hex(&bytes));
        }
    }
}

/// The OpenCode config folder a standalone tool or plugin file belongs to
/// (`<dir>/{tool,tools,plugin,plugins}/<file>`), if it is in one: its own `package.json`
/// dependencies are prepared for the file (D-001).
pub fn config_dir_of(entry: &Path) -> Option<PathBuf> {
    let folder = entry.parent()?;
    let name = folder.file_name()?.to_str()?;
    matches!(name, "tool" | "tools" | "plugin" | "plugins")
        .then(|| folder.parent().map(Path::to_path_buf))?
}

/// `dependencies` and `optionalDependencies` of a package.json, as (name, spec).
pub fn config_dependencies(pkg: &Value) -> Vec<(String, String)> {
    ["dependencies", "optionalDependencies"]
        .iter()
        .filter_map(|k| pkg.get(*k).and_then(Value::as_object))
        .flatten()
        .map(|(name, spec)| {
            (
                name.clone(),
                spec.as_str().unwrap_or("(not a string)").to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rewrite of the same size right after a scan (within one timestamp tick, so the
    /// size and mtime may not move) is seen by the next scan with the same cache.
    #[test]
    fn a_same_size_rewrite_right_after_a_scan_is_not_missed() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let tool = project.join(".opencode/tools/a.ts");
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
        let env = OpencodeEnv {
            home: dir.path().join("home"),
            cwd: project.clone(),
            managed_config_dir: dir.path().join("managed"),
            ..OpencodeEnv::default()
        };
        let digest = |scanner: &mut Scanner| {
            let d = scanner.scan(&env, &project);
            let s = d
                .sources
                .iter()
                .find(|s| s.entry.ends_with("a.ts"))
                .unwrap();
            s.digest.clone()
        };
        let mut scanner = Scanner::new();
        std::fs::write(&tool, "export default 'one'\n").unwrap();
        let first = digest(&mut scanner);
        let mtime = std::fs::metadata(&tool).unwrap().modified().unwrap();
        std::fs::write(&tool, "export default 'two'\n").unwrap();
        // As on a file system whose clock did not tick between the two writes.
        std::fs::File::options()
            .write(true)
            .open(&tool)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let second = digest(&mut scanner);
        assert_ne!(first, second, "the rewrite was read from the cache");
        assert_eq!(second, digest(&mut Scanner::new()));
    }
}
