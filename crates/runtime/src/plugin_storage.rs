//! The `storage.*` calls an OpenCode V2 plugin's `ctx.storage` makes into Berth (ledger
//! D-044): `get`, `set`, `remove`, `scan`, on JSON values, in the space of the plugin's ID as
//! its approved source spells it, in Berth's store (never in the user's OpenCode folders).
//!
//! Owns: checking and answering those calls. Must not: log or show a value (they are the
//! plugin's data), or take the space from the call: a forged frame names only itself.

use berth_protocol::WireError;
use serde_json::{json, Value};

use crate::core::Core;
use crate::error::code;

/// The largest value one key holds (as JSON text).
const MAX_VALUE_BYTES: usize = 1 << 20;
/// The longest key.
const MAX_KEY_BYTES: usize = 1024;

fn refused(code: &str, message: String) -> WireError {
    WireError {
        code: code.to_string(),
        message,
    }
}

/// One `storage.<method>` call of `instance` (the source the host loaded the plugin from).
pub(crate) fn answer(
    core: &Core,
    instance: &str,
    method: &str,
    body: &Value,
) -> Result<Value, WireError> {
    // The space is the one Berth knows for this source, never one the frame names: the
    // plugin's `id` as its approved bytes spell it (a host can forge frames, not approvals),
    // else the source's own id.
    let status = core.status();
    let plugin = status
        .sources
        .iter()
        .find(|s| s.source.id == instance)
        .map(|s| {
            s.source
                .capabilities
                .plugin_id
                .clone()
                .unwrap_or_else(|| s.source.id.clone())
        })
        .ok_or_else(|| {
            refused(
                code::UNSUPPORTED,
                format!("{instance}: ctx.storage.{method} from a source Berth does not list"),
            )
        })?;
    let plugin = plugin.as_str();
    let key = body["key"].as_str().unwrap_or_default();
    if key.len() > MAX_KEY_BYTES {
        return Err(refused(
            code::INVALID_ARGUMENTS,
            format!(
                "{plugin}: ctx.storage key of {} bytes (at most {MAX_KEY_BYTES})",
                key.len()
            ),
        ));
    }
    let stored = |r: Result<Value, berth_store::StoreError>| {
        r.map_err(|e| {
            refused(
                e.code(),
                format!(
                    "{plugin}: ctx.storage.{method} failed: {e} ({})",
                    e.recovery()
                ),
            )
        })
    };
    match method {
        "get" => {
            stored(core.with_store(|s| s.plugin_value(plugin, key)).map(
                |v| json!({ "value": v.and_then(|t| serde_json::from_str::<Value>(&t).ok()) }),
            ))
        }
        "set" => {
            let text = body["value"].to_string();
            if text.len() > MAX_VALUE_BYTES {
                return Err(refused(code::INVALID_ARGUMENTS, format!("{plugin}: ctx.storage.set(\"{key}\") of {} bytes (at most {MAX_VALUE_BYTES})", text.len())));
            }
            stored(
                core.with_store(|s| s.set_plugin_value(plugin, key, &text))
                    .map(|_| Value::Null),
            )
        }
        "remove" => stored(
            core.with_store(|s| s.remove_plugin_value(plugin, key))
                .map(|_| Value::Null),
        ),
        "scan" => {
            let prefix = body["prefix"].as_str().unwrap_or_default();
            let limit = body["limit"]
                .as_i64()
                .unwrap_or(berth_store::PLUGIN_SCAN_LIMIT);
            stored(
                core.with_store(|s| s.scan_plugin_values(plugin, prefix, body["after"].as_str(), limit))
                    .map(|rows| {
                        let more = rows.len() as i64 >= limit.clamp(1, berth_store::PLUGIN_SCAN_LIMIT);
                        let next = rows.last().filter(|_| more).map(|(k, _)| k.clone());
                        let entries: Vec<Value> = rows
                            .into_iter()
                            .map(|(k, v)| json!({ "key": k, "value": serde_json::from_str::<Value>(&v).unwrap_or(Value::Null) }))
                            .collect();
                        json!({ "entries": entries, "next": next })
                    }),
            )
        }
        other => Err(refused(
            code::UNSUPPORTED,
            format!("{plugin}: ctx.storage.{other} is not a storage call Berth knows"),
        )),
    }
}
