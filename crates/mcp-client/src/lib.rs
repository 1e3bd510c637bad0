//! Berth as an MCP client: one connection to one MCP server of OpenCode's config, behind a
//! narrow interface of Berth's own types (`McpTool`, `McpCallResult`, `BerthError` with the
//! stable codes). A local server is started through `berth_host::launch` like every child
//! Berth supervises (its own process group, the tree mark, killed with Berth, a bounded
//! stderr), and its stdin/stdout are handed to the SDK as the transport; a remote one is
//! reached over streamable HTTP, signed in to with OAuth when it asks (`oauth`).
//!
//! Owns: the server's process (its tree is killed when the connection ends or a cancel's grace
//! is over) and the session with it. Must not: decide whether a server may run (the approval
//! plane did), replay a call, or put a variable's or header's value in an error or a log line.
//! Invariant: no type of the MCP SDK crosses this crate's public interface.
//!
//! ```no_run
//! # async fn f() -> Result<(), berth_base::error::BerthError> {
//! use berth_mcp_client::{Connection, Target};
//! let target = Target::Local { program: "node".into(), args: vec!["server.mjs".into()], environment: vec![], cwd: ".".into() };
//! let conn = Connection::connect("fixture", &target, std::time::Duration::from_secs(5)).await?;
//! for tool in conn.list_tools().await? { println!("{}", tool.name); }
//! # Ok(()) }
//! ```

mod client;
mod oauth;

pub use client::{
    minimal_environment, CallOutcome, Connection, McpCallResult, McpTool, Target, CANCEL_GRACE,
};
pub use oauth::{OAuth, SignIn, TokenVault};
