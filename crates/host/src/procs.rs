//! Process-tree control for plugin hosts (Unix): own process group per host, the supervisor
//! as child subreaper so descendants that leave the group still come back to it, and a kill
//! that takes the group and every reparented descendant.
//!
//! Invariant: only the supervisor holds child process handles and sends these signals.
//!
//! Windows (designed, not built or tested here — this machine has no Windows): the same three
//! duties map onto one kill-on-close Job Object per host.
//! - Spawn: `CreateJobObjectW` with `JOBOBJECT_EXTENDED_LIMIT_INFORMATION.LimitFlags =
//!   JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION`
//!   (no `BREAKAWAY_OK`, so no descendant can leave it), plus `JOB_OBJECT_LIMIT_JOB_MEMORY` set to
//!   the memory budget; create the host with `CREATE_SUSPENDED`, `AssignProcessToJobObject`,
//!   then `ResumeThread` — no code of the host runs outside the job, and every process it
//!   starts is born inside it (this replaces the process group and the subreaper).
//! - Kill (cancel grace over, unresponsive, memory, revoke): `TerminateJobObject(job, 1)` ends
//!   the whole tree at once (this replaces `kill_group` and `reclaim_orphans`).
//! - Lifetime: the `HANDLE` lives in the `Host`; dropping it (`CloseHandle`) — or the app dying
//!   in any way — kills the tree because of KILL_ON_JOB_CLOSE, so nothing outlives Berth.
//! - RSS: `QueryInformationJobObject(JobObjectExtendedLimitInformation).PeakJobMemoryUsed` and
//!   `JobObjectBasicAccountingInformation` for the status page, instead of `/proc`.
//! - The channel: a named pipe with a random name and a per-spawn secret instead of the Unix
//!   socket; the protocol above it is unchanged.

/// Makes this process the subreaper of its descendants (Linux), once.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag and no pointers.
            let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            if rc != 0 {
                tracing::warn!(
                    "cannot become child subreaper; detached plugin processes may outlive a kill"
                );
            }
        });
    }
}

/// SIGKILL to the whole process group.
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: kill with a negative pid signals a process group; no memory is touched.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// The variable every process of one host tree inherits; its value names the tree. Only
/// processes carrying it are ever reclaimed — the app's other children (a web view, a probe)
/// are never touched.
pub const TREE_VAR: &str = "BERTH_HOST_TREE";

/// Kills and reaps every process reparented to us (descendants that escaped their group with
/// setsid, after their parent died) that belongs to host tree `tree`. Returns how many.
pub fn reclaim_orphans(tree: &str) -> usize {
    let me = std::process::id();
    let needle = format!("{TREE_VAR}={tree}");
    let mut reclaimed = 0;
    for _round in 0..5 {
        let orphans: Vec<u32> = children_of(me)
            .into_iter()
            .filter(|p| in_tree(*p, &needle))
            .collect();
        if orphans.is_empty() {
            break;
        }
        for pid in orphans {
            // SAFETY: plain signal and wait on a pid that is our child.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(pid as i32, &mut status, 0);
            }
            reclaimed += 1;
        }
    }
    reclaimed
}

/// Every running process of host tree `tree`, wherever it is now (still in the host's group,
/// reparented to us, or anywhere else it could go): the check that a stopped host is gone.
pub fn tree_members(tree: &str) -> Vec<u32> {
    let needle = format!("{TREE_VAR}={tree}");
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|pid| *pid != me && in_tree(*pid, &needle) && is_running(*pid))
        .collect()
}

/// SIGKILL to one process.
pub fn kill_pid(pid: u32) {
    if pid > 1 {
        // SAFETY: a plain signal to a pid; no memory is touched.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}

fn in_tree(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        .unwrap_or(false)
}

fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Field 4 (ppid) follows the `(comm)` field, which may contain spaces.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Whether any thread of process `pid` still runs (gone, or zombies waiting to be reaped, do
/// not). The thread group leader alone is not enough: Bun's main thread can be a zombie while
/// its other threads still exit, and the process's children are reparented only when the last
/// thread is gone.
pub fn is_running(pid: u32) -> bool {
    let state = |stat: &str| {
        stat.rsplit(')')
            .next()
            .and_then(|r| r.trim().chars().next())
            .is_some_and(|s| s != 'Z' && s != 'X')
    };
    match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(tasks) => tasks
            .flatten()
            .any(|t| std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| state(&s))),
        Err(_) => std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| state(&s)),
    }
}

/// Resident set size of `pid` in bytes (0 when unknown).
pub fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// This process's start time (read once: it never changes).
pub fn own_start_time() -> u64 {
    static OWN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| start_time(std::process::id()).unwrap_or(0))
}

/// A process's start time (clock ticks since boot), to tell a live owner from a reused pid.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
