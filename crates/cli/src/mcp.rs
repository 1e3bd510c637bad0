//! `berth mcp`: this person's approved catalog served to an agent over MCP on stdin/stdout.
//!
//! Owns: starting a Berth that keeps its catalog current (the data-dir watch, activation) and
//! handing stdin/stdout to `berth-mcp`. Must not: print anything to stdout itself (it carries
//! protocol frames only; errors go to stderr and the log).

use berth_runtime::{code, Berth, BerthError};

/// What `berth mcp --help` says after the options: one snippet per agent.
pub const AFTER_HELP: &str = r#"Adds Berth to an agent as an MCP server. The agent sees the tools of the plugins and tool
files you approved in Berth (named by the agent, e.g. `berth_<tool>` in OpenCode,
`mcp__berth__<tool>` in Claude Code); every call runs in Berth's supervised hosts and leaves a
receipt (`berth receipts`). An approval, a revocation or an update in the app reaches the
agent at once (`notifications/tools/list_changed`). A permission a tool asks for is yours to
answer in the Berth app or status page, never the agent's.

OpenCode (opencode.json) — and start OpenCode with `--pure` (or OPENCODE_PURE=1) so that it
registers none of the plugins' tools or hooks itself; they run in Berth, under your approval.
(OpenCode 1.18.4 still imports each plugin file once even then, so a plugin's top-level code
also runs in OpenCode; see docs/compatibility.md.)
  { "mcp": { "berth": { "type": "local", "command": ["berth", "mcp"] } } }

Claude Code:
  claude mcp add --transport stdio berth -- berth mcp

Codex (~/.codex/config.toml):
  [mcp_servers.berth]
  command = "berth"
  args = ["mcp"]

Over streamable HTTP instead: `berth serve` serves the same catalog at http://127.0.0.1:PORT/mcp
behind the page's token (header `Authorization: Bearer <token>`, printed by `berth serve`), e.g.
  { "mcp": { "berth": { "type": "remote", "url": "http://127.0.0.1:PORT/mcp",
                        "headers": { "Authorization": "Bearer <token>" }, "oauth": false } } }

Berth's built-ins (read, glob, grep: limited to the project, receipted) are not served unless
you add `--builtins`: the agent has its own.

The project is the folder the agent starts Berth in; give `--project <DIR>` to fix it."#;

/// Serves until the client closes stdin or a signal arrives, then stops the plugin hosts.
pub fn mcp(berth: Berth, builtins: bool) -> Result<(), BerthError> {
    super::block_on(async move {
        let _watch = berth_runtime::watch::watch(berth.clone()).map_err(|e| {
            BerthError::new(
                code::TEMPORARILY_UNAVAILABLE,
                "discovery",
                format!("cannot watch the config folders: {e}"),
                "raise the inotify watch limit, or restart the agent",
            )
        })?;
        // The first `tools/list` already lists what is approved.
        let _ = berth.activate().await;
        let _activation = berth.keep_active();
        let served =
            berth_mcp::serve_stdio(berth.clone(), builtins, super::shutdown_signal()).await;
        berth.shutdown_hosts().await;
        served
    })?
}
