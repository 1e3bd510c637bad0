//! How a supervised process starts: its own process group, the tree mark that lets its
//! escaped descendants be reclaimed (`procs`), piped stdio, killed when its handle drops, and
//! an environment without Berth's handshake names (secrets travel on stdin). Every child Berth
//! supervises starts here: this is the one place an OS sandbox wraps, and nothing here is
//! specific to the JavaScript host.
//!
//! Owns: building that command. Must not: talk to the process (the supervisor does) or put a
//! secret in its arguments or environment.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use crate::procs;

/// Names that must never reach a child's environment (`/proc/<pid>/environ` keeps what a
/// process was started with, whatever it deletes later).
const SCRUBBED: &[&str] = &[
    "BERTH_HOST_SOCKET",
    "BERTH_HOST_SECRET",
    "BERTH_HOST_GENERATION",
    "BERTH_HOST_SERVER_URL",
    "BERTH_HOST_SERVER_TOKEN",
];

/// One supervised process to start.
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The value of `procs::TREE_VAR` its whole tree inherits.
    pub tree: String,
    /// The OS boundary it runs in, if any (`crate::boundary`).
    pub boundary: Option<berth_sandbox::Boundary>,
}

/// A command ready to spawn, and what must live as long as its process (a boundary's private
/// folder).
pub struct Ready {
    pub command: tokio::process::Command,
    pub wrapped: Option<berth_sandbox::Wrapped>,
}

impl Launch {
    /// The command, ready to spawn (inside its boundary when it has one).
    pub fn command(&self) -> Result<Ready, String> {
        let (mut cmd, wrapped) = match &self.boundary {
            None => {
                let mut cmd = tokio::process::Command::new(&self.program);
                cmd.env(procs::TREE_VAR, &self.tree);
                for k in SCRUBBED {
                    cmd.env_remove(k);
                }
                cmd.args(&self.args);
                (cmd, None)
            }
            Some(b) => {
                // The boundary's environment is an allow-list that carries the tree mark.
                let w =
                    berth_sandbox::wrap(&self.program, &self.args, b).map_err(|e| e.to_string())?;
                let mut cmd = tokio::process::Command::new(w.program());
                cmd.args(w.args());
                w.apply(&mut cmd);
                (cmd, Some(w))
            }
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // It dies with Berth, however Berth ends (a kill -9 runs no cleanup). The signal
        // follows the thread that started it: the runtime's worker, alive as long as Berth.
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(Ready {
            command: cmd,
            wrapped,
        })
    }
}
