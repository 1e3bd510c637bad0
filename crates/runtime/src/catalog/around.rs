//! `tool.execute.before` / `tool.execute.after` around a tool call whose hooks do not run in
//! the tool's own host call: an MCP server's tool, a built-in, or a plugin tool whose hooks live
//! in other hosts (`invoke_across_hosts`). OpenCode runs both chains around every tool.
//!
//! Owns: the two chains (host by host, `run_segments`), what they changed and who changed it.
//! Must not: call the tool, check the arguments the hooks left (the tool does: the host against
//! its schema, a built-in its own arguments, an MCP server its own), or write the receipt.

use std::time::Duration;

use serde_json::Value;

use crate::error::BerthError;
use crate::host::HostKey;

use super::*;

/// The plugins whose tool hooks run around one call, in OpenCode's order.
pub(super) struct ToolHooks {
    pub before: Vec<(String, HostKey)>,
    pub after: Vec<(String, HostKey)>,
}

/// What the hooks did to one call.
#[derive(Default)]
pub(super) struct Hooked {
    /// The arguments the tool ran with, when `tool.execute.before` changed them.
    pub final_args: Option<Value>,
    /// The result before `tool.execute.after` changed it (none when it did not).
    pub raw: Option<Value>,
    /// The plugins that changed the arguments, then every plugin of the after chain.
    pub by: Vec<String>,
}

impl Hooked {
    /// The digest of the arguments the tool really ran with, when the hooks changed them.
    pub fn args_digest(&self) -> Option<String> {
        self.final_args
            .as_ref()
            .map(|a| berth_discovery::sha256_hex(a.to_string().as_bytes()))
    }

    /// A receipt's end with what the hooks did: who transformed it, the arguments that ran and
    /// the result before `tool.execute.after` changed it (a call that failed sets `raw: None`).
    pub fn finish<'a>(
        &'a self,
        args_digest: Option<&'a str>,
        status: berth_store::ReceiptStatus,
    ) -> berth_store::Finish<'a> {
        berth_store::Finish {
            raw: self.raw.as_ref().filter(|_| !self.by.is_empty()),
            transformed_by: &self.by,
            args_digest,
            ..berth_store::Finish::new(status)
        }
    }
}

fn instances(v: &Value) -> Vec<String> {
    v["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["instance"].as_str().map(str::to_string))
        .collect()
}

impl Catalog {
    /// The active plugins with `tool.execute.before` and `tool.execute.after` hooks.
    pub(super) fn tool_hooks(&self) -> ToolHooks {
        let cat = self.state.lock().unwrap_or_else(|p| p.into_inner());
        ToolHooks {
            before: cat.with_hook_in("tool.execute.before"),
            after: cat.with_hook_in("tool.execute.after"),
        }
    }

    /// `tool.execute.before` on `args` (input `{tool, sessionID, callID}`, output `{args}`, as
    /// OpenCode gives it); returns the arguments to run with.
    pub(super) async fn run_before(
        &self,
        hooks: &ToolHooks,
        tool: &str,
        call_id: &str,
        args: Value,
        timeout: Duration,
        hooked: &mut Hooked,
    ) -> Result<Value, BerthError> {
        if hooks.before.is_empty() {
            return Ok(args);
        }
        let input = serde_json::json!({ "tool": tool, "sessionID": "berth", "callID": call_id });
        let mut v = self
            .run_segments(
                "tool.execute.before",
                &hooks.before,
                input,
                serde_json::json!({ "args": args }),
                Some(timeout),
            )
            .await?;
        let left = v["output"]["args"].take();
        if left == args {
            return Ok(args);
        }
        hooked.by = instances(&v);
        hooked.final_args = Some(left.clone());
        Ok(left)
    }

    /// `tool.execute.after` on `result` (input `{tool, sessionID, callID, args}`; the output is
    /// the result in the shape plugins get for this kind of tool: `{title, output, metadata}`,
    /// or an MCP server's `{content, …}` as OpenCode passes it); returns the final result.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_after(
        &self,
        hooks: &ToolHooks,
        tool: &str,
        call_id: &str,
        args: &Value,
        result: Value,
        timeout: Duration,
        hooked: &mut Hooked,
    ) -> Result<Value, BerthError> {
        if hooks.after.is_empty() {
            return Ok(result);
        }
        let input = serde_json::json!({ "tool": tool, "sessionID": "berth", "callID": call_id, "args": args });
        let mut v = self
            .run_segments(
                "tool.execute.after",
                &hooks.after,
                input,
                result.clone(),
                Some(timeout),
            )
            .await?;
        for i in instances(&v) {
            if !hooked.by.contains(&i) {
                hooked.by.push(i);
            }
        }
        let fin = v["output"].take();
        if fin != result {
            hooked.raw = Some(result);
        }
        Ok(fin)
    }
}
