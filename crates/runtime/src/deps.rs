//! npm work, always in Berth's data dir — never in the user's OpenCode folders (deviations
//! ledger D-001) — and always with install scripts off: the plugin host's own dependencies
//! (`@opencode-ai/plugin` 1.18.4 with zod 4.1.8, sucrase for TypeScript on Node, effect 4.0.1
//! for OpenCode 2 plugins) from the pinned lockfile, linked from the set-up's local copy
//! (`.tools/host-deps`, same lockfile) instead of downloading again; npm plugins' installs
//! (`<data dir>/packages/`), into which an OpenCode 2 plugin gets the packages Berth provides
//! linked (D-044); config folders' own dependencies; the registry's answer for updates.
//!
//! Must not: run any package's install script, write outside the data dir, or let npm fetch a
//! package Berth provides its plugins itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use berth_discovery::{V2_API, V2_EFFECT};

use crate::error::{code, BerthError};

const PACKAGE_JSON: &str = include_str!("../../../scripts/tools/host-deps/package.json");
const PACKAGE_LOCK: &str = include_str!("../../../scripts/tools/host-deps/package-lock.json");
const STAMP: &str = ".berth-prepared";

fn lock_digest() -> String {
    berth_discovery::sha256_hex(PACKAGE_LOCK.as_bytes())
}

/// Returns the prepared folder (`<data dir>/deps/host`), preparing it first when needed.
/// Concurrent preparations of one data dir are serialised by a lock file.
pub fn prepare_host_deps(data_dir: &Path, seed: Option<&Path>) -> Result<PathBuf, BerthError> {
    let deps = data_dir.join("deps");
    let target = deps.join("host");
    let want = lock_digest();
    let failed = |msg: String| {
        BerthError::new(code::DEPENDENCY_FAILED, "dependencies", msg, "check the network (npm registry) and disk space, then retry; run scripts/setup to prepare a local copy")
    };
    let mut seeded = false;
    let prepared = prepare_stamped(
        &target,
        &deps.join(".host.lock"),
        &want,
        &failed,
        |staging| {
            std::fs::write(staging.join("package.json"), PACKAGE_JSON)
                .map_err(|e| failed(e.to_string()))?;
            std::fs::write(staging.join("package-lock.json"), PACKAGE_LOCK)
                .map_err(|e| failed(e.to_string()))?;
            seeded = seed
                .filter(|s| {
                    std::fs::read_to_string(s.join("package-lock.json"))
                        .is_ok_and(|l| l == PACKAGE_LOCK)
                        && s.join("node_modules").is_dir()
                })
                .map(|s| link_tree(&s.join("node_modules"), &staging.join("node_modules")))
                .transpose()
                .map_err(|e| failed(format!("cannot link the local dependency copy: {e}")))?
                .is_some();
            if seeded {
                return Ok(());
            }
            run_npm(staging, "ci", &[], HOST_DEPS_BUDGET).map_err(failed)
        },
    )?;
    if prepared {
        tracing::info!(seeded, path = %target.display(), "plugin host dependencies prepared");
    }
    Ok(target)
}

/// Makes `target` hold what `fill` prepares, stamped `want`. Nothing happens when it already
/// does. Otherwise, holding the lock file `lock` (concurrent preparations of one folder wait
/// for each other, and the second finds the first's result), `fill` writes a fresh staging
/// folder that then replaces `target`. Returns whether this call prepared it.
fn prepare_stamped(
    target: &Path,
    lock: &Path,
    want: &str,
    failed: &dyn Fn(String) -> BerthError,
    fill: impl FnOnce(&Path) -> Result<(), BerthError>,
) -> Result<bool, BerthError> {
    let ready = || std::fs::read_to_string(target.join(STAMP)).is_ok_and(|s| s.trim() == want);
    if ready() {
        return Ok(false);
    }
    if let Some(parent) = lock.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| failed(format!("cannot create {}: {e}", parent.display())))?;
    }
    let lock_file = std::fs::File::create(lock)
        .map_err(|e| failed(format!("cannot create the install lock: {e}")))?;
    let _guard = FileLock::acquire(&lock_file);
    // Another process may have finished while we waited for the lock.
    if ready() {
        return Ok(false);
    }
    let staging = target.with_extension(format!("staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| failed(format!("cannot create {}: {e}", staging.display())))?;
    if let Err(e) = fill(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    std::fs::write(staging.join(STAMP), format!("{want}\n")).map_err(|e| failed(e.to_string()))?;
    let _ = std::fs::remove_dir_all(target);
    std::fs::rename(&staging, target).map_err(|e| {
        failed(format!(
            "cannot move the prepared dependencies into place: {e}"
        ))
    })?;
    Ok(true)
}

/// How long preparing Berth's own host dependencies may take (a plugin's preparation has the
/// policy's `budget.prepare`).
const HOST_DEPS_BUDGET: Duration = Duration::from_secs(600);

/// `npm <command>` in `dir` with install scripts off (and no audit, fund or progress noise),
/// then `extra`, stopped (its whole process group) once it has run `budget`. A failure
/// carries npm's own message.
fn run_npm(dir: &Path, command: &str, extra: &[&str], budget: Duration) -> Result<(), String> {
    npm_output(dir, command, extra, budget, false).map(drop)
}

/// `run_npm`, returning what npm printed on stdout. npm never checks for its own updates
/// here (no request Berth did not ask for). `background`: the work of an update, while the
/// version that runs keeps serving — npm then yields the CPU and the disk to the hosts (nice
/// 10, the lowest best-effort I/O priority), so a preparation beside a busy plugin leaves its
/// round trips about as npm alone would (docs/performance.md). A first preparation, which the
/// person waits for, runs at normal priority.
fn npm_output(
    dir: &Path,
    command: &str,
    extra: &[&str],
    budget: Duration,
    background: bool,
) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let npm = npm_program()?;
    let mut cmd = Command::new(npm);
    cmd.arg(command)
        .args([
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--no-update-notifier",
            "--loglevel=error",
        ])
        .args(extra)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    // npm dies with Berth: a killed app must not leave it writing into the data dir. (The
    // signal follows the thread that started it, which waits below until npm ends.)
    // SAFETY: prctl, setpriority and the ioprio_set syscall are async-signal-safe and touch no
    // memory of ours.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if background {
                libc::setpriority(libc::PRIO_PROCESS, 0, BACKGROUND_NICE);
                // IOPRIO_WHO_PROCESS = 1; class best-effort (2) << 13, its lowest level 7.
                libc::syscall(libc::SYS_ioprio_set, 1, 0, (2 << 13) | 7);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot run npm: {e}"))?;
    // Its output, read as it comes (a full pipe would stall it).
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        pipe.map(|mut e| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(&mut e, &mut text);
                text
            })
        })
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= budget => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for npm: {e}")),
        }
    };
    let Some(status) = status else {
        // SAFETY: killpg with the group npm leads; no memory is touched.
        unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        return Err(format!(
            "npm {command} did not finish within {} s (the policy's budget.prepare); it was stopped",
            budget.as_secs()
        ));
    };
    let message = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let printed = stdout.and_then(|t| t.join().ok()).unwrap_or_default();
    if status.success() {
        Ok(printed)
    } else {
        // `--json` commands print their error as JSON on stdout.
        let summary = serde_json::from_str::<serde_json::Value>(&printed)
            .ok()
            .and_then(|v| v["error"]["summary"].as_str().map(str::to_string));
        let why = summary.unwrap_or_else(|| message.trim().to_string());
        Err(format!("npm {command} failed: {why}"))
    }
}

/// What the registry offers now for `name@request`, as npm resolves it (`npm view --json`,
/// revalidating any cached document: a cached answer is never taken as today's): every
/// version the request matches with its integrity, and the package's dist-tags and publish
/// times. Runs where plugin installs run (`packages`), so the same npm configuration applies.
pub fn npm_view(
    packages: &Path,
    name: &str,
    request: &str,
    budget: Duration,
) -> Result<serde_json::Value, String> {
    std::fs::create_dir_all(packages)
        .map_err(|e| format!("cannot create {}: {e}", packages.display()))?;
    let spec = format!("{name}@{request}");
    let out = npm_output(
        packages,
        "view",
        &[
            "--json",
            "--prefer-online",
            "--fetch-retries=1",
            "--",
            &spec,
            "version",
            "dist.integrity",
            "time",
            "dist-tags",
        ],
        budget,
        false,
    )?;
    serde_json::from_str(&out).map_err(|e| format!("npm view printed no JSON ({e})"))
}

/// Prepares exactly `name@version` — whose tarball must have `integrity` — in a folder of
/// its own under `<packages>/.versions/`, named by package, version and integrity (install
/// scripts off, the same npm rules as a first preparation). A folder prepared before is kept
/// and returned as it is: exact versions are never prepared twice, and an older one stays for
/// a rollback. Returns the folder.
pub fn prepare_npm_version(
    packages: &Path,
    name: &str,
    version: &str,
    integrity: &str,
    budget: Duration,
    provided: &[(&str, PathBuf)],
) -> Result<PathBuf, BerthError> {
    let failed = |msg: String| {
        BerthError::new(
            code::DEPENDENCY_FAILED,
            "update",
            msg,
            "check the network and the registry, then press Update again; the version that runs now keeps serving",
        )
        .for_plugin(format!("{name}@{version}"))
    };
    let versions = berth_discovery::npm_versions_dir(packages);
    let folder = version_folder(name, version, integrity);
    let target = versions.join(&folder);
    std::fs::create_dir_all(&versions)
        .map_err(|e| failed(format!("cannot create {}: {e}", versions.display())))?;
    let lock_file = std::fs::File::create(versions.join(format!("{folder}.lock")))
        .map_err(|e| failed(format!("cannot create the install lock: {e}")))?;
    let _guard = FileLock::acquire(&lock_file);
    if berth_discovery::prepared::list_digest(&target).is_some() {
        return Ok(target);
    }
    let staging = versions.join(format!("{folder}.staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| failed(e.to_string()))?;
    let fill = || -> Result<(), String> {
        std::fs::write(staging.join("package.json"), SLOT_MANIFEST).map_err(|e| e.to_string())?;
        install_plugin(
            &staging,
            &format!("{name}@{version}"),
            budget,
            true,
            provided,
        )?;
        let pkg = staging.join("node_modules").join(name);
        let got = berth_discovery::resolved_in(&staging, &pkg)
            .ok_or_else(|| format!("npm finished but {} is missing", pkg.display()))?;
        if got.version != version || got.integrity.as_deref() != Some(integrity) {
            return Err(format!(
                "the registry sent other bytes than it announced: {name}@{} with integrity {} (announced {version} with {integrity}); nothing of it is used",
                got.version,
                got.integrity.as_deref().unwrap_or("none")
            ));
        }
        in_background(|| write_file_list(&staging))
    };
    if let Err(e) = fill() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(failed(e));
    }
    std::fs::rename(&staging, &target).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staging);
        failed(format!("cannot move the prepared version into place: {e}"))
    })?;
    tracing::info!(%name, %version, path = %target.display(), "npm plugin version prepared");
    Ok(target)
}

/// What a plugin's slot starts as: one private package whose only dependency npm adds.
const SLOT_MANIFEST: &str = "{ \"name\": \"berth-plugin-slot\", \"private\": true }\n";

/// Installs the plugin `spec` into its slot `dir`, with the packages Berth provides
/// (`provided`, D-044) linked in where npm would fetch them: `@opencode/plugin` is never
/// fetched (an OpenCode 2 plugin names it as a peer, and Berth's is the one it gets at
/// runtime). A package written for OpenCode 2 — one that names `@opencode/plugin` among its
/// dependencies, peers or dev dependencies — also gets Berth's one `effect` linked at the
/// slot's top and every `effect` 4 of its tree pointed there, so that its imports, native in
/// the host, reach the copy OpenCode 2 would provide (a second `npm install`, for those
/// packages only). A V1 package's install is npm's alone.
fn install_plugin(
    dir: &Path,
    spec: &str,
    budget: Duration,
    background: bool,
    provided: &[(&str, PathBuf)],
) -> Result<(), String> {
    let link = |name: &str| {
        provided
            .iter()
            .find(|(n, d)| *n == name && d.join("package.json").is_file())
            .map(|(_, d)| serde_json::Value::String(format!("file:{}", d.display())))
    };
    let (api, effect) = (link(V2_API), link(V2_EFFECT));
    let edit_slot = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let path = dir.join("package.json");
        let mut slot: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
                .unwrap_or_else(|_| serde_json::json!({}));
        if let Some(o) = slot.as_object_mut() {
            f(o);
        }
        std::fs::write(&path, format!("{slot:#}\n"))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    if let Some(api) = &api {
        edit_slot(&|o| {
            o.insert(
                "overrides".into(),
                serde_json::json!({ V2_API: api.clone() }),
            );
        })?;
    }
    install_spec(dir, spec, budget, background)?;
    let (Some(api), Some(effect)) = (api, effect) else {
        return Ok(());
    };
    if !installed_names(dir, provided, V2_API) {
        return Ok(());
    }
    edit_slot(&|o| {
        let deps = o
            .entry("dependencies")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(d) = deps.as_object_mut() {
            d.insert(V2_API.into(), api.clone());
            d.insert(V2_EFFECT.into(), effect.clone());
        }
        o.insert(
            "overrides".into(),
            serde_json::json!({ V2_API: api.clone(), format!("{V2_EFFECT}@^4.0.0"): effect.clone() }),
        );
    })?;
    npm_output(
        dir,
        "install",
        &["--omit-lockfile-registry-resolved"],
        budget,
        background,
    )
    .map(drop)
    .map_err(|e| format!("{e} (linking Berth's effect for {spec})"))
}

/// The plugin package npm installed in the slot `dir`: the slot's dependency that is not one of
/// the links Berth adds (`provided`).
fn installed_plugin(dir: &Path, provided: &[(&str, PathBuf)]) -> Option<String> {
    let slot: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).ok()?).ok()?;
    let berths = |name: &str, spec: &serde_json::Value| {
        provided.iter().any(|(n, d)| {
            *n == name && spec.as_str() == Some(format!("file:{}", d.display()).as_str())
        })
    };
    slot["dependencies"]
        .as_object()?
        .iter()
        .find(|(name, spec)| !berths(name, spec))
        .map(|(name, _)| name.clone())
}

/// Whether the plugin package npm installed in the slot `dir` names `name` among its
/// dependencies, peers or dev dependencies.
fn installed_names(dir: &Path, provided: &[(&str, PathBuf)], name: &str) -> bool {
    let Some(pkg) = installed_plugin(dir, provided) else {
        return false;
    };
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("node_modules").join(pkg).join("package.json"))
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    [
        "dependencies",
        "peerDependencies",
        "devDependencies",
        "optionalDependencies",
    ]
    .iter()
    .any(|field| manifest[field].get(name).is_some())
}

/// `npm install` of exactly `spec` into the slot `dir` (its lockfile records no registry URL).
/// The spec comes after `--`: it can never be read as an option.
fn install_spec(dir: &Path, spec: &str, budget: Duration, background: bool) -> Result<(), String> {
    npm_output(
        dir,
        "install",
        &[
            "--save-exact",
            "--omit-lockfile-registry-resolved",
            "--",
            spec,
        ],
        budget,
        background,
    )
    .map(drop)
    .map_err(|e| format!("{e} (installing {spec})"))
}

/// The niceness of an update's background work (npm, and the hashing and reading around it):
/// it gets a tenth of a core that the hosts want, and all of one they do not.
const BACKGROUND_NICE: i32 = 10;

/// Runs `f` on a thread of its own at the background niceness (an update's hashing and reading
/// around npm), and returns its result. A fresh thread: its priority goes with it.
pub(crate) fn in_background<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: gettid and setpriority on this thread's own id touch no memory of ours.
                unsafe {
                    let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                    libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE);
                }
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// `<name>@<version>+<the integrity's first 16 hex digits>`, safe as one folder name.
fn version_folder(name: &str, version: &str, integrity: &str) -> String {
    let hex = berth_discovery::sha256_hex(integrity.as_bytes());
    let short = hex
        .trim_start_matches("sha256:")
        .get(..16)
        .unwrap_or_default()
        .to_string();
    format!("{name}@{version}+{short}")
        .chars()
        .map(|c| match c {
            '/' => '+',
            c if c.is_ascii_alphanumeric() || "@._+-".contains(c) => c,
            _ => '_',
        })
        .collect()
}

/// Makes `name@request` run from `folder` (a `.versions` folder name), or from its first slot
/// with `None`. Atomic: the pointer file is replaced in one rename.
pub fn point_npm_spec(
    packages: &Path,
    name: &str,
    request: &str,
    folder: Option<&str>,
) -> Result<(), String> {
    let pointer = berth_discovery::npm_pointer(packages, name, request);
    match folder {
        None => match std::fs::remove_file(&pointer) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot remove {}: {e}", pointer.display())),
        },
        Some(f) => {
            let staging = pointer.with_extension(format!("staging-{}", std::process::id()));
            std::fs::write(&staging, format!("{f}\n"))
                .and_then(|_| std::fs::rename(&staging, &pointer))
                .map_err(|e| format!("cannot write {}: {e}", pointer.display()))
        }
    }
}

/// The oldest npm Berth prepares packages with: its lockfile v3 handling, `--ignore-scripts`
/// for every lifecycle step and `--omit-lockfile-registry-resolved` (scripts/install-tools
/// installs a pinned npm when the machine's is older).
const NPM_MIN_MAJOR: u64 = 10;

/// The npm to run (`BERTH_NPM`, else `npm` on `PATH`), checked once per process to be at least
/// [`NPM_MIN_MAJOR`]; Err says which npm was found and what to do.
fn npm_program() -> Result<PathBuf, String> {
    static CHECKED: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let npm = std::env::var_os("BERTH_NPM")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("npm"));
            let out = Command::new(&npm)
                .arg("--version")
                .output()
                .map_err(|e| format!("cannot run {}: {e}; run scripts/setup", npm.display()))?;
            let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let major = version
                .split('.')
                .next()
                .and_then(|m| m.parse::<u64>().ok())
                .unwrap_or(0);
            if major < NPM_MIN_MAJOR {
                return Err(format!(
                    "{} is npm {version:?}; Berth needs npm {NPM_MIN_MAJOR} or newer to prepare packages safely (run scripts/setup, or set BERTH_NPM)",
                    npm.display()
                ));
            }
            Ok(npm)
        })
        .clone()
}

/// Recreates `from` at `to` with hard links (a copy where links are impossible).
fn link_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type()?;
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if ft.is_dir() {
            link_tree(&src, &dst)?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Hashes every file of a prepared install's `node_modules` into its file list
/// (`.berth-files.json`, `berth_discovery::prepared`), which every load is checked against
/// (`integrity`). For an npm plugin the list's digest is part of the source's digest, so what
/// the person approves after preparation is these exact bytes (and a re-preparation that
/// fetched other bytes is asked again); a config folder's dependencies are pinned by its
/// lockfile, and from preparation on by their list.
fn write_file_list(install: &Path) -> Result<(), String> {
    let list = berth_discovery::prepared::compute(install)
        .map_err(|e| format!("cannot hash the prepared files: {e}"))?;
    std::fs::write(
        install.join(berth_discovery::prepared::FILES_LIST),
        berth_discovery::prepared::to_bytes(&list),
    )
    .map_err(|e| format!("cannot write the file list: {e}"))
}

/// An exclusive advisory lock held until dropped.
struct FileLock<'f>(&'f std::fs::File);

impl<'f> FileLock<'f> {
    fn acquire(f: &'f std::fs::File) -> FileLock<'f> {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; blocks until the lock is ours.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        FileLock(f)
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: releases the lock taken in `acquire`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Prepares one npm plugin package in `<packages>/<name@request>/` with npm, install
/// scripts off, the user's spec after `--`. A package already there is used as it is: a
/// `latest` is not re-resolved (OpenCode's behaviour; checking for updates is explicit).
/// Returns the package folder (`…/node_modules/<name>`).
pub fn prepare_npm_plugin(
    packages: &Path,
    name: &str,
    request: &str,
    budget: Duration,
    provided: &[(&str, PathBuf)],
) -> Result<PathBuf, BerthError> {
    let local = request.starts_with("file:");
    if name == request && !local {
        return Err(BerthError::new(code::UNSUPPORTED, "dependencies", format!("`{name}` is a git or tarball URL spec; Berth prepares registry and local `file:` packages only for now"), "use a registry version of the plugin (name@version)"));
    }
    let root = packages.to_path_buf();
    let dir = berth_discovery::npm_install_dir(&root, name, request);
    let pkg = berth_discovery::prepared_package_dir(&root, name, request);
    let failed = |msg: String| {
        BerthError::new(
            code::DEPENDENCY_FAILED,
            "dependencies",
            msg,
            "check the package name and version and the network, then approve again to retry",
        )
        .for_plugin(format!("{name}@{request}"))
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
    let lock_file = std::fs::File::create(dir.join(".berth.lock"))
        .map_err(|e| failed(format!("cannot create the install lock: {e}")))?;
    let _guard = FileLock::acquire(&lock_file);
    if pkg.join("package.json").is_file() {
        // Prepared by a Berth that kept no file list: the bytes are hashed now, as they are.
        if berth_discovery::prepared::list_digest(&dir).is_none() {
            write_file_list(&dir).map_err(failed)?;
        }
        return Ok(pkg);
    }
    if !dir.join("package.json").exists() {
        std::fs::write(dir.join("package.json"), SLOT_MANIFEST)
            .map_err(|e| failed(e.to_string()))?;
    }
    let spec = if local {
        request.to_string()
    } else {
        format!("{name}@{request}")
    };
    install_plugin(&dir, &spec, budget, false, provided).map_err(failed)?;
    if local {
        // The package's own name is only known now: record it for discovery.
        let real = installed_plugin(&dir, provided)
            .ok_or_else(|| failed("npm recorded no dependency".into()))?;
        std::fs::write(dir.join(".berth-package"), &real).map_err(|e| failed(e.to_string()))?;
    }
    let pkg = berth_discovery::prepared_package_dir(&root, name, request);
    if !pkg.join("package.json").is_file() {
        return Err(failed(format!(
            "npm finished but {} is missing",
            pkg.display()
        )));
    }
    write_file_list(&dir).map_err(failed)?;
    tracing::info!(%spec, path = %pkg.display(), "npm plugin prepared");
    Ok(pkg)
}

/// The folder a config dir's own dependencies are prepared in:
/// `<data dir>/config-deps/<first 16 hex of sha256(config dir path)>`. The plugin host computes
/// the same name to resolve imports of files below that config dir (host/berth-host.mjs).
pub fn config_deps_dir(data_dir: &Path, config_dir: &Path) -> PathBuf {
    let digest = berth_discovery::sha256_hex(config_dir.to_string_lossy().as_bytes());
    let hex = digest.trim_start_matches("sha256:");
    data_dir.join("config-deps").join(&hex[..16])
}

pub use berth_discovery::config_dir_of;

/// Prepares the dependencies a config dir's own `package.json` lists (OpenCode installs them
/// into the folder itself; Berth into its data dir, D-001): npm with install scripts off, the
/// folder's `package-lock.json` respected when there is one (`npm ci`). Nothing to do (None)
/// when the folder lists no dependencies; already prepared for these exact bytes is a no-op.
pub fn prepare_config_dir_deps(
    data_dir: &Path,
    config_dir: &Path,
    budget: Duration,
) -> Result<Option<PathBuf>, BerthError> {
    let manifest = match std::fs::read(config_dir.join("package.json")) {
        Ok(b) => b,
        Err(_) => return Ok(None),
    };
    let failed = |msg: String| {
        BerthError::new(
            code::DEPENDENCY_FAILED,
            "dependencies",
            format!("the dependencies of {} could not be prepared: {msg}", config_dir.display()),
            "fix the folder's package.json (or its lockfile) and approve again, or check the network",
        )
    };
    let parsed: serde_json::Value = serde_json::from_slice(&manifest)
        .map_err(|e| failed(format!("package.json is not JSON: {e}")))?;
    let wants = berth_discovery::scan::config_dependencies(&parsed);
    if wants.is_empty() {
        return Ok(None);
    }
    // By what npm would do with each entry, whatever its prefix (no git, no downloaded
    // tarballs, no folders outside the config folder).
    for (name, spec) in &wants {
        if let Some(why) = berth_discovery::spec::dependency_refusal(name, spec, config_dir) {
            return Err(failed(why));
        }
    }
    let target = config_deps_dir(data_dir, config_dir);
    let slim = crate::relocate::manifest(&parsed, config_dir, &target);
    let lock = std::fs::read(config_dir.join("package-lock.json"))
        .ok()
        .map(|bytes| crate::relocate::lockfile(&bytes, &parsed, config_dir, &target))
        .transpose()
        .map_err(&failed)?;
    let mut stamp_src = manifest.clone();
    stamp_src.extend(lock.as_deref().unwrap_or_default());
    stamp_src.extend(b"\nlock-v2");
    let want = berth_discovery::sha256_hex(&stamp_src);
    let prepared = prepare_stamped(
        &target,
        &target.with_extension("lock"),
        &want,
        &failed,
        |staging| {
            // Only the dependency lists travel: no scripts, no workspaces, nothing else of the file.
            std::fs::write(staging.join("package.json"), slim.to_string())
                .map_err(|e| failed(e.to_string()))?;
            if let Some(lock) = &lock {
                std::fs::write(staging.join("package-lock.json"), lock)
                    .map_err(|e| failed(e.to_string()))?;
            }
            run_npm(
                staging,
                if lock.is_some() { "ci" } else { "install" },
                &[],
                budget,
            )
            .map_err(&failed)?;
            write_file_list(staging).map_err(&failed)
        },
    )?;
    if !prepared {
        // Prepared by a Berth that kept no file list: the bytes are hashed now, as they are.
        if berth_discovery::prepared::list_digest(&target).is_none() {
            write_file_list(&target).map_err(&failed)?;
        }
        return Ok(Some(target));
    }
    tracing::info!(config_dir = %config_dir.display(), path = %target.display(), "config folder dependencies prepared");
    Ok(Some(target))
}
