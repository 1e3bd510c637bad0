//! Processes as /proc shows them: a process's tree, whether it still runs, its memory and open
//! files, and one random-number step for the runs' choices.
//!
//! Owns: those reads. Must not: signal anything (each run signals what it chose).

/// Every process below `pid` now (children of children), read from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// The fields of /proc/<pid>/stat after the command name (field 3 onward).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(
        s.rsplit(')')
            .next()?
            .split_whitespace()
            .map(String::from)
            .collect(),
    )
}

/// Alive and not a zombie waiting for its reaper.
pub fn running(pid: u32) -> bool {
    stat_fields(pid)
        .and_then(|f| f.first().and_then(|s| s.chars().next()))
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// When the process started (clock ticks since boot): with the pid, a name no later process
/// can take.
pub fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The program's name (`comm`).
pub fn name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of the resident memory (heap and stacks, not the program's pages).
pub fn anon_kib(pid: u32) -> u64 {
    status_kib(pid, "RssAnon:")
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// One xorshift step: the runs' random choices, repeatable from their printed seed.
pub fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}
