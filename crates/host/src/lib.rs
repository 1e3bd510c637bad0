//! The plugin hosts and nothing else: which runtimes this machine has (`runtimes`), the
//! supervisor that spawns `host/berth-host.mjs` on Bun or Node in its own process group and
//! speaks the framed protocol with it (`supervisor`), where its sockets live and who may
//! connect (`channel`), process trees (`procs`), restart budgets (`budget`), and each host's
//! loopback `serverUrl` service (`compat`). Every child starts through `launch`, the one place
//! an OS sandbox wraps; `boundary` says which one works here and what a restricted host gets.
//!
//! Owns: every child process of Berth and every byte on a host channel. Must not: decide what
//! may run or answer a plugin's calls — calls from plugin code reach the layer above through
//! [`Upcalls`], which the runtime implements — nor import anything of that layer.
//!
//! Invariant: only this crate holds child process handles; a call whose host dies fails with
//! `process-lost`/`worker-lost` and is never sent again.

pub mod boundary;
pub mod budget;
pub mod channel;
pub mod compat;
pub mod launch;
pub mod procs;
pub mod runtimes;
mod supervisor;

pub use budget::{Loss, RestartBudget, RESTART_BUDGET, RESTART_WINDOW};
pub use supervisor::*;
