//! The status owner: re-reads the config graph, judges every source against its approval,
//! joins what the catalog, the world and the hosts say, and publishes the snapshot with a
//! diff when it changed (`StatusEvent`). What plugins put before the person is published on
//! the current snapshot without a rescan (`publish_world`), under the same lock.
//!
//! Owns: the scanner's cache, the snapshot fingerprint, publishing. Must not: wait on a
//! plugin, an install or a hook; reading the status never does.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use berth_discovery::{Scanner, SourceKind, SourceState};

use crate::approval;
use crate::catalog::Catalog;
use crate::core::{Core, Publisher};
use crate::error::code;
use crate::governor::Governor;
use crate::snapshot::*;
use crate::world::World;

pub(crate) struct Status {
    core: Arc<Core>,
    world: Arc<World>,
    catalog: Arc<Catalog>,
    policy: Arc<Governor>,
    /// Per-file parse cache lives here, so rescans only re-read what changed.
    scanner: Mutex<Scanner>,
    /// What the current snapshot was made from, to publish only real, newer changes.
    published: Mutex<Published>,
    /// Numbers the rescans in the order they start reading.
    started: AtomicU64,
    /// What the hosts' restart budgets held paused at the last publish (see `pauses`).
    pauses_seen: Mutex<String>,
}

/// The fingerprint of the published snapshot and the rescan it came from. Rescans run on
/// several threads (the watcher, a decision, an activation); one that started reading earlier
/// and finishes later holds older facts and must not replace a newer snapshot — the page
/// would show a tool withdrawn while its source still reads approved.
#[derive(Default)]
struct Published {
    fingerprint: String,
    generation: u64,
}

impl Published {
    /// Whether the rescan numbered `generation`, which computed `fingerprint`, is installed:
    /// it is newer than the one installed and it changed something.
    fn accept(&mut self, generation: u64, fingerprint: String) -> bool {
        if generation < self.generation {
            return false;
        }
        self.generation = generation;
        if self.fingerprint == fingerprint {
            return false;
        }
        self.fingerprint = fingerprint;
        true
    }
}

impl Status {
    pub(crate) fn new(
        core: Arc<Core>,
        world: Arc<World>,
        catalog: Arc<Catalog>,
        policy: Arc<Governor>,
    ) -> Status {
        let scanner = Mutex::new(core.scanner());
        Status {
            core,
            world,
            catalog,
            policy,
            scanner,
            published: Mutex::new(Published::default()),
            started: AtomicU64::new(1),
            pauses_seen: Mutex::default(),
        }
    }

    /// Re-reads the config graph and publishes an event if anything changed.
    pub fn rescan(&self) -> Option<StatusEvent> {
        let generation = self.started.fetch_add(1, Ordering::SeqCst);
        let o = &self.core.options;
        let discovery = {
            let mut scanner = self.scanner.lock().unwrap_or_else(|p| p.into_inner());
            let (env, directory) = o.scan_target();
            scanner.scan(&env, directory)
        };
        let g = &discovery.graph;
        let backend = approval::backend_for(&self.core.runtimes);
        self.policy.refresh();
        let policy = self.policy.current();
        let boundary = self.core.status().boundary.clone();
        let (
            tools,
            builtins,
            conflicts,
            activity,
            limited,
            failures,
            progress,
            unreadable,
            pinned,
            sign_ins,
        ) = {
            let cat = self.catalog.state();
            (
                cat.source_tools(),
                cat.builtins.clone(),
                cat.conflicts.values().cloned().collect::<Vec<_>>(),
                cat.activity.clone(),
                cat.limited.clone(),
                cat.failures.clone(),
                cat.update_progress.clone(),
                cat.unreadable.clone(),
                cat.pinned
                    .keys()
                    .cloned()
                    .collect::<std::collections::HashSet<String>>(),
                cat.sign_ins.clone(),
            )
        };
        let hosts = self
            .core
            .supervisor_if_started()
            .map(|s| s.hosts_now())
            .unwrap_or_default();
        let (quarantined, backend_paused) = self
            .core
            .supervisor_if_started()
            .map(|s| (s.quarantined(), s.is_paused(backend)))
            .unwrap_or_default();
        let project_key = if g.has_git {
            g.worktree.display().to_string()
        } else {
            g.directory.display().to_string()
        };
        let sources: Vec<SourceView> = self.core.with_store(|store| {
            let own = store.own_hosts().unwrap_or_default();
            discovery
                .sources
                .iter()
                .map(|src| {
                    let key = approval::key_for(src, self.core.domain(), backend, &project_key);
                    let row = store.current_approval(&key).ok().flatten();
                    let observed = store
                        .contributions(&src.id, &src.digest, &key.backend)
                        .ok()
                        .flatten();
                    let baseline = store.active_contributions(&src.id, &key.backend).ok().flatten();
                    let (mut state, view) = approval::evaluate(
                        src,
                        row.as_ref(),
                        &key,
                        observed.as_ref(),
                        baseline.as_ref(),
                    );
                    // The host's word, for sources the gate let through.
                    if state == SourceState::Approved {
                        if let Some(s) = activity.get(&src.id) {
                            state = *s;
                        }
                    }
                    // A budget spent since the last activation (a call found the host paused):
                    // it reads paused, with its Resume, not active.
                    if matches!(state, SourceState::Active | SourceState::Approved)
                        && src.kind != SourceKind::Mcp
                        && (backend_paused || quarantined.contains_key(&src.id))
                    {
                        state = SourceState::Paused;
                    }
                    // It cannot be read now and its loaded version serves on (not a new
                    // question: nothing new of it runs).
                    let unreadable_note = unreadable.get(&src.id).map(|why| {
                        state = activity.get(&src.id).copied().unwrap_or(SourceState::Active);
                        berth_discovery::Diagnostic::new(
                            code::TEMPORARILY_UNAVAILABLE,
                            format!("{why}; the version loaded before keeps serving, and nothing new of it runs until it can be read again"),
                            "make the file readable again (or remove it from the config to withdraw it)",
                        )
                    });
                    // Why it does not run, when preparing or loading it failed here.
                    let failure = failures
                        .get(&src.id)
                        .filter(|_| {
                            state == SourceState::LoadFailed
                                || (src.kind == berth_discovery::SourceKind::Mcp
                                    && matches!(state, SourceState::Unsupported | SourceState::Paused))
                        })
                        .map(|e| berth_discovery::Diagnostic::new(e.code, e.message.clone(), e.recovery.clone()));
                    let mut policy_note = None;
                    if matches!(state, SourceState::PendingApproval | SourceState::Approved) {
                        if let Err(why) = policy.source_allowed(&src.id, src.npm.as_ref().map(|n| n.name.as_str())) {
                            state = SourceState::PolicyLimited;
                            policy_note = Some(why);
                        }
                    }
                    let mut source = src.clone();
                    source.state = state;
                    // Options go to the plugin as written; every view shows secrets redacted.
                    source.options = source.options.as_ref().map(crate::secret::redact_options);
                    // An MCP server Berth prepared in place of its launcher: it no longer fetches
                    // at start, so the launcher's warning gives way to what runs instead.
                    let prepared = (src.kind == SourceKind::Mcp)
                        .then(|| store.mcp_prepared(&src.id).ok().flatten())
                        .flatten()
                        .filter(|p| p.config_digest == src.digest);
                    if prepared.is_some() {
                        source.diagnostics.retain(|d| {
                            !d.message.contains("downloads and runs whatever is newest")
                        });
                    }
                    if state == SourceState::Paused {
                        let why = match quarantined.get(&src.id) {
                            Some(why) => format!("{why}; it is paused, and the other plugins run on"),
                            None => format!(
                                "its plugin host was lost {} times within {} minutes and is paused; nothing of this source runs until it is resumed",
                                crate::host::RESTART_BUDGET,
                                crate::host::RESTART_WINDOW.as_secs() / 60
                            ),
                        };
                        source.diagnostics.push(berth_discovery::Diagnostic::new(
                            code::TEMPORARILY_UNAVAILABLE,
                            why,
                            "look at the plugin's diagnostics and log, then press Resume on the status page (or restart Berth)",
                        ));
                    }
                    source.diagnostics.extend(failure);
                    source.diagnostics.extend(unreadable_note);
                    // Rolled back: the kept version runs, whatever its files on disk say now.
                    if pinned.contains(&source.id) {
                        if let Some(s) = activity.get(&source.id) {
                            state = *s;
                            source.state = state;
                        }
                        source.diagnostics.push(berth_discovery::Diagnostic::new(
                            code::ACTION_REQUIRED,
                            "rolled back: it runs the kept earlier version, not its files on disk as they are now",
                            "edit its files again, or approve them as they are, to run them instead",
                        ));
                    }
                    if let Some(why) = policy_note {
                        source.diagnostics.push(berth_discovery::Diagnostic::new(
                            code::POLICY_LIMITED,
                            format!("nothing of it runs: {why}"),
                            "ask your administrator to add it to `sources.allow`",
                        ));
                    }
                    let (restricted, layer) = policy.restricted(&source.id);
                    if restricted && state == SourceState::Approved {
                        if let Some(why) = &boundary.unavailable {
                            state = SourceState::PolicyLimited;
                            source.state = state;
                            source.diagnostics.push(berth_discovery::Diagnostic::new(
                                code::POLICY_LIMITED,
                                format!("it must run restricted, and no OS boundary can be made here ({why}); nothing of it runs"),
                                "run Berth where bubblewrap or Landlock works, or set this source to compatible mode if your policy allows",
                            ));
                        }
                    }
                    let mut lifecycle = lifecycle_of(
                        store,
                        &o.data_dir,
                        &source,
                        if src.kind == SourceKind::Mcp {
                            crate::versions::MCP_BACKEND
                        } else {
                            key.backend.as_str()
                        },
                        &policy,
                        progress.get(&source.id).cloned(),
                    );
                    lifecycle.pinned = pinned.contains(&source.id);
                    lifecycle.preparable = if prepared.is_none() && src.kind == SourceKind::Mcp {
                        berth_discovery::mcp::target_of(g, src).and_then(|t| match t {
                            berth_discovery::McpTarget::Local { program, args, .. } => {
                                berth_discovery::mcp::fetched_command(&program, &args)
                                    .filter(|f| f.is_npm())
                                    .map(|f| crate::snapshot::Preparable {
                                        launcher: f.launcher,
                                        package: f.package,
                                    })
                            }
                            _ => None,
                        })
                    } else {
                        None
                    };
                    let sign_in = match (src.kind == SourceKind::Mcp)
                        .then(|| berth_discovery::mcp::target_of(g, src))
                        .flatten()
                    {
                        Some(berth_discovery::McpTarget::Remote { url, oauth, .. })
                            if oauth != berth_discovery::McpOAuth::Off =>
                        {
                            Some(crate::snapshot::SignInView {
                                host: berth_discovery::mcp::url_host(&url).unwrap_or_default(),
                                signed_in: crate::mcp_servers::oauth::signed_in(
                                    self.core.domain(),
                                    &url,
                                ),
                                progress: sign_ins.get(&src.id).cloned().unwrap_or_default(),
                            })
                        }
                        _ => None,
                    };
                    lifecycle.prepared = prepared;
                    if lifecycle.pinned {
                        // It runs the earlier version already.
                        lifecycle.rollback_to = None;
                    }
                    SourceView {
                        lifecycle,
                        own_host: own.contains(&source.id),
                        // What this process registered; else what the caps would keep from
                        // what it was seen to contribute (a one-shot CLI shows the same).
                        limited: limited.get(&source.id).cloned().unwrap_or_else(|| {
                            observed
                                .as_ref()
                                .filter(|_| state == SourceState::Approved)
                                .map(|o| policy.judge(&source.id, &o.tools, &o.hooks).limited)
                                .unwrap_or_default()
                        }),
                        paused_parts: self.catalog.paused_parts(&source.id),
                        run_mode: RunMode::of(restricted, layer, &g.worktree),
                        sign_in,
                        source,
                        approval: view,
                    }
                })
                .collect()
        });
        // Calls end in other processes too: their receipts are read here, and the watcher on
        // the data dir brings a rescan when any process writes one.
        let calls: Vec<CallView> = self
            .core
            .with_store(|s| s.receipts(RECENT_CALLS))
            .map(|r| r.into_iter().map(CallView::from).collect())
            .unwrap_or_default();
        let standing_answers = self
            .core
            .with_store(|s| s.permission_rules())
            .unwrap_or_default();
        // What plugins asked for (toasts, prompts) is published by `publish_world`, not here.
        // Any decision, policy setting or grant (by any process) is a new snapshot: what the
        // sources may do follows from it, and long-running front ends act on the event.
        let marker = self.core.with_store(|s| s.decisions_marker()).unwrap_or(-1);
        let fingerprint = berth_discovery::sha256_hex(
            serde_json::json!([
                marker,
                calls,
                standing_answers,
                g.dirs,
                g.files,
                sources,
                g.diagnostics,
                g.pure,
                tools,
                conflicts,
                policy.entries,
                policy.problems,
                hosts
                    .iter()
                    .map(|h| (h.pid, &h.instances))
                    .collect::<Vec<_>>()
            ])
            .to_string()
            .as_bytes(),
        );
        let mut published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        if !published.accept(generation, fingerprint) {
            return None;
        }
        let old = self.core.status();
        let (notices, prompts) = {
            let w = self.world.state();
            (w.notices(), w.prompt_views())
        };
        let snapshot = Arc::new(StatusSnapshot {
            berth: BerthInfo {
                version: env!("CARGO_PKG_VERSION"),
                data_dir: o.data_dir.clone(),
                store: self.core.store_info.clone(),
                log_file: o.log_file.clone(),
            },
            project: ProjectInfo {
                directory: g.directory.clone(),
                worktree: g.worktree.clone(),
                has_git: g.has_git,
                open: o.has_project(),
            },
            config_dirs: Arc::new(g.dirs.clone()),
            config_files: Arc::new(g.files.clone()),
            pure: g.pure.clone(),
            runtimes: self.core.runtimes.clone(),
            counts: Counts::of(&sources),
            diagnostics: g.diagnostics.clone(),
            sources: Arc::new(sources),
            tools: Arc::new(tools),
            builtins: Arc::new(builtins),
            conflicts: Arc::new(conflicts),
            hosts,
            notices,
            prompts,
            calls: Arc::new(calls),
            standing_answers: Arc::new(standing_answers),
            policy,
            boundary: old.boundary.clone(),
            revision: old.revision + 1,
        });
        let diff = SnapshotDiff::between(&old, &snapshot);
        let event = self.install(snapshot, diff);
        drop(published);
        tracing::info!(
            revision = event.revision,
            added = event.diff.added.len(),
            removed = event.diff.removed.len(),
            changed = event.diff.changed.len(),
            "snapshot changed"
        );
        Some(event)
    }

    /// The backends and plugins the restart budgets hold paused now, as one comparable text
    /// (empty when nothing is, as before the first publish).
    fn pauses(&self) -> String {
        let Some(s) = self.core.supervisor_if_started() else {
            return String::new();
        };
        let backends = [
            crate::runtimes::RuntimeKind::Bun,
            crate::runtimes::RuntimeKind::Node,
        ]
        .map(|b| s.is_paused(b));
        let quarantined = s.quarantined();
        if !backends.contains(&true) && quarantined.is_empty() {
            return String::new();
        }
        format!("{backends:?} {:?}", quarantined.keys().collect::<Vec<_>>())
    }

    /// Publishes a change of what plugins asked the person for (toasts, permission prompts)
    /// on the current snapshot, without rescanning anything.
    pub(crate) fn publish_world_now(&self) {
        // The same lock as `rescan`, so neither overwrites the other's newer snapshot.
        let _published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.core.status();
        let (notices, prompts) = {
            let w = self.world.state();
            (w.notices(), w.prompt_views())
        };
        if old.notices == notices && old.prompts == prompts {
            return;
        }
        let mut next = (*old).clone();
        next.notices = notices;
        next.prompts = prompts;
        next.revision = old.revision + 1;
        self.install(Arc::new(next), SnapshotDiff::default());
    }

    /// Makes `snapshot` the current one and publishes it (the caller holds the `published`
    /// lock, so snapshots are installed in revision order).
    fn install(&self, snapshot: Arc<StatusSnapshot>, diff: SnapshotDiff) -> StatusEvent {
        let event = StatusEvent {
            revision: snapshot.revision,
            diff,
            snapshot: snapshot.clone(),
        };
        *self.core.current.write().unwrap_or_else(|p| p.into_inner()) = snapshot;
        let _ = self.core.events.send(event.clone());
        event
    }

    /// The folders a watcher should observe for the current graph.
    pub fn watch_roots(&self) -> Vec<PathBuf> {
        let s = self.core.status();
        // The data dir's signal folder: another process (the CLI next to the app) committing
        // a decision or a receipt signals there, and this process then shows it (`signals`).
        let mut roots: Vec<PathBuf> = vec![crate::signals::dir(&self.core.options.data_dir)];
        // The organisation's policy file and its drop-ins: an edit there takes effect at once.
        let managed = self.core.options.managed_policy_path();
        if let Some(dir) = managed.parent() {
            roots.push(dir.to_path_buf());
            roots.push(dir.join("managed.d"));
        }
        roots.extend(s.config_dirs.iter().map(|d| d.path.clone()));
        for d in s.config_dirs.iter() {
            for sub in ["plugin", "plugins", "tool", "tools"] {
                roots.push(d.path.join(sub));
            }
        }
        roots.extend(
            s.config_files
                .iter()
                .filter_map(|f| f.path.parent().map(Path::to_path_buf)),
        );
        for src in s.sources.iter() {
            roots.extend(
                src.capabilities
                    .files
                    .iter()
                    .filter_map(|f| f.parent().map(Path::to_path_buf)),
            );
            // A plugin file listed by path: its folder too, so that the file coming back
            // after a moment away (its files are unknown then) is noticed.
            let entry = Path::new(&src.entry);
            if entry.is_absolute() {
                roots.extend(entry.parent().map(Path::to_path_buf));
            }
        }
        roots.sort();
        roots.dedup();
        roots.retain(|r| r.is_absolute());
        roots
    }
}

impl Publisher for Status {
    fn rescan(&self) {
        Status::rescan(self);
    }
    fn publish_world(&self) {
        self.publish_world_now();
    }
    fn publish_calls(&self) {
        // A call found a backend paused or a plugin quarantined (or resumed) since the last
        // snapshot: the sources' states change too, so the whole status is read again.
        let pauses = self.pauses();
        {
            let mut seen = self.pauses_seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen != pauses {
                *seen = pauses;
                drop(seen);
                self.rescan();
                return;
            }
        }
        // The same lock as `rescan`, so neither overwrites the other's newer snapshot.
        let _published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.core.status();
        let Ok(calls) = self
            .core
            .with_store(|s| s.receipts(RECENT_CALLS))
            .map(|r| r.into_iter().map(CallView::from).collect::<Vec<CallView>>())
        else {
            return;
        };
        if *old.calls == calls {
            return;
        }
        let mut next = (*old).clone();
        next.calls = Arc::new(calls);
        next.revision = old.revision + 1;
        self.install(Arc::new(next), SnapshotDiff::default());
    }
}

/// What ran of `source` here and how it is updated, read from the store.
fn lifecycle_of(
    store: &berth_store::Store,
    data_dir: &std::path::Path,
    source: &berth_discovery::Source,
    backend: &str,
    policy: &crate::policy::Effective,
    progress: Option<crate::snapshot::UpdateProgress>,
) -> crate::snapshot::Lifecycle {
    let rows = store
        .execution_versions(&source.id, backend, 10)
        .unwrap_or_default();
    let mut views = crate::versions::views(data_dir, &rows, false).into_iter();
    let current = views.next();
    let history: Vec<_> = views.collect();
    let from_registry = source
        .npm
        .as_ref()
        .is_some_and(berth_discovery::NpmRef::from_registry);
    let updates = (source.kind == berth_discovery::SourceKind::NpmPlugin && from_registry)
        .then(|| updates_view(store, source, policy, progress, &current, &history));
    // The newest version that ran whose exact bytes are here and that is not on disk now.
    let rollback_to = current
        .iter()
        .chain(history.iter())
        // (For a prepared MCP server, the digest is its install's, never the entry's: the one
        // that ran last is the one that runs.)
        .filter(|v| !(v.current && backend == crate::versions::MCP_BACKEND))
        .find(|v| v.recoverable && v.digest != source.digest)
        .map(|v| v.id);
    crate::snapshot::Lifecycle {
        current,
        history,
        updates,
        rollback_to,
        pinned: false,
        prepared: None,
        preparable: None,
    }
}

/// An npm plugin's update policy, last check, what is under way or failed, and the version a
/// rollback would run.
fn updates_view(
    store: &berth_store::Store,
    source: &berth_discovery::Source,
    policy: &crate::policy::Effective,
    progress: Option<crate::snapshot::UpdateProgress>,
    current: &Option<crate::versions::VersionView>,
    history: &[crate::versions::VersionView],
) -> crate::snapshot::UpdatesView {
    let (mode, min_age, layer) = policy.updates(&source.id);
    let check = store.update_check(&source.id).ok().flatten();
    // A failed update is kept with the check, so every process shows it until the next update
    // or rollback.
    let failed = check
        .as_ref()
        .and_then(|c| serde_json::from_value(c.0["failed"].clone()).ok());
    let failed_versions: Vec<String> = check
        .as_ref()
        .and_then(|c| c.0["failed_versions"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let offer = check.as_ref().map(|c| {
        let mut o = c.0.clone();
        if let Some(o) = o.as_object_mut() {
            o.remove("failed");
            o.remove("failed_versions");
        }
        o
    });
    crate::snapshot::UpdatesView {
        policy: mode,
        layer,
        min_age_hours: min_age.as_secs() / 3600,
        checked_at_ms: check.as_ref().map(|c| c.1),
        offer,
        progress: progress.or(failed),
        failed_versions,
        // The newest version that ran whose exact bytes are here and that is not what the spec
        // points at now.
        rollback_to: current
            .iter()
            .chain(history.iter())
            .find(|v| v.recoverable && v.digest != source.digest)
            .map(|v| v.id),
    }
}

#[cfg(test)]
mod tests {
    use super::Published;

    #[test]
    fn a_rescan_that_started_earlier_never_replaces_a_newer_snapshot() {
        let mut p = Published::default();
        // Rescan 2 (tool active) finishes first; rescan 1 (read before the activation)
        // finishes after it and is refused.
        assert!(p.accept(2, "active".into()));
        assert!(!p.accept(1, "stale".into()));
        assert_eq!(p.fingerprint, "active");
        // The same facts again publish nothing; newer different facts do.
        assert!(!p.accept(3, "active".into()));
        assert!(p.accept(4, "withdrawn".into()));
        // Negative control: in start order every different result is installed.
        let mut q = Published::default();
        assert!(q.accept(1, "stale".into()) && q.accept(2, "active".into()));
    }
}
