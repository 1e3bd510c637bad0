//! The policy's vocabulary: every key, the kind of value it takes, the product default, and
//! which values are stricter than which (a lower layer may tighten a value, never loosen it).
//!
//! Owns: the key table and the order of strictness. Must not: read a layer (the policy owner
//! does) or know any source.

use serde_json::{json, Value};

/// How strict a value is, per kind: a higher layer's value bounds the lower layers'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `allow` < `review` < `deny`.
    Cap,
    /// `compatible` < `restricted`.
    Mode,
    /// `read-write` < `read`.
    ProjectAccess,
    /// `on` < `off`.
    Network,
    /// Names of environment variables a restricted host may see besides the core set: fewer is
    /// stricter (a lower layer's list must be part of the higher one's).
    EnvNames,
    /// Milliseconds a call class may wait; smaller is stricter, never 0 and never above `max`.
    Budget { max: u64 },
    /// Set by the organisation only: patterns of the sources that may be approved at all.
    SourceAllowList,
    /// Set by the organisation only: tool names no plugin may register.
    ProtectedTools,
    /// The most a plugin's `permission.ask` answer may grant for one permission (D-016):
    /// `allow` < `ask` < `deny`.
    Permission,
    /// How a source's updates are taken: `auto` (within its spec) < `notify` < `manual`.
    Updates,
    /// Hours a version must have been published before `auto` takes it (0 to 8760); larger is
    /// stricter.
    Age,
}

/// One key of the policy.
pub struct KeyDef {
    pub key: &'static str,
    pub kind: Kind,
    pub product: fn() -> Value,
    /// What it governs, in plain words (the page and `berth policy` show it).
    pub about: &'static str,
}

/// Every key but the per-source ones (`mode.<source id>`, whose kind is `Mode`).
pub const KEYS: &[KeyDef] = &[
    KeyDef { key: "cap.tool-override", kind: Kind::Cap, product: || json!("review"), about: "a plugin tool that takes the name of one of OpenCode's built-in tools (bash, edit, webfetch …) or a protected tool" },
    KeyDef { key: "cap.config", kind: Kind::Cap, product: || json!("allow"), about: "`config` hooks: changes a plugin makes to the merged OpenCode config (agents, commands, providers)" },
    KeyDef { key: "cap.model-request", kind: Kind::Cap, product: || json!("allow"), about: "hooks that change what is sent to the model: chat.params, chat.headers, chat.message, experimental.* transforms" },
    KeyDef { key: "cap.shell-env", kind: Kind::Cap, product: || json!("review"), about: "`shell.env`: variables a plugin puts into every shell command the agent runs" },
    KeyDef { key: "cap.credentials", kind: Kind::Cap, product: || json!("allow"), about: "credentials: `auth` logins and `client.auth.set` (stored in the OS keyring)" },
    KeyDef { key: "cap.ui", kind: Kind::Cap, product: || json!("allow"), about: "what a plugin puts before you: toasts and prompt text (`client.tui.*`)" },
    KeyDef { key: "mode", kind: Kind::Mode, product: || json!("compatible"), about: "how sources run: compatible (your own rights, install scripts off) or restricted (an OS boundary: the project, the plugin's own files, no network)" },
    KeyDef { key: "restricted.project", kind: Kind::ProjectAccess, product: || json!("read"), about: "in restricted mode: the project folder read-only, or read-write (its .git/hooks, .opencode and opencode.json stay read-only)" },
    KeyDef { key: "restricted.network", kind: Kind::Network, product: || json!("off"), about: "in restricted mode: network access (off: no IP socket of any kind)" },
    KeyDef { key: "restricted.env", kind: Kind::EnvNames, product: || json!([]), about: "in restricted mode: environment variables passed besides HOME, PATH, USER, LANG, TZ, TERM and the like (names with KEY, SECRET, TOKEN, PASSWORD, CREDENTIAL or AUTH never are)" },
    KeyDef { key: "updates", kind: Kind::Updates, product: || json!("manual"), about: "how npm plugins are updated: manual (only when you press Update), notify (Berth checks and tells you), auto (Berth takes a new version the spec allows, after the minimum age; one that can do more still asks)" },
    KeyDef { key: "update-age", kind: Kind::Age, product: || json!(0), about: "hours a version must have been published before an automatic update takes it (0: none)" },
    KeyDef { key: "budget.prepare", kind: Kind::Budget { max: 1_800_000 }, product: || json!(600_000), about: "preparing a plugin's dependencies (npm, install scripts off)" },
    KeyDef { key: "budget.init", kind: Kind::Budget { max: 300_000 }, product: || json!(30_000), about: "importing a plugin and running its factory" },
    KeyDef { key: "budget.hook", kind: Kind::Budget { max: 300_000 }, product: || json!(10_000), about: "one plugin's transform hook" },
    KeyDef { key: "budget.chain", kind: Kind::Budget { max: 600_000 }, product: || json!(30_000), about: "a whole hook chain" },
    KeyDef { key: "budget.event", kind: Kind::Budget { max: 60_000 }, product: || json!(5_000), about: "the `event` hooks for one event" },
    KeyDef { key: "budget.tool", kind: Kind::Budget { max: 3_600_000 }, product: || json!(30_000), about: "one tool call (when the caller gives no timeout)" },
    KeyDef { key: "budget.client", kind: Kind::Budget { max: 120_000 }, product: || json!(10_000), about: "a plugin's client reads and writes into Berth" },
    KeyDef { key: "budget.tool-after", kind: Kind::Budget { max: 300_000 }, product: || json!(10_000), about: "each `tool.execute.after` hook" },
    KeyDef { key: "budget.drain", kind: Kind::Budget { max: 300_000 }, product: || json!(5_000), about: "an old plugin host finishing its calls before a new version is imported (new calls wait meanwhile; calls still running then are cancelled)" },
    KeyDef { key: "budget.dispose", kind: Kind::Budget { max: 60_000 }, product: || json!(2_000), about: "a plugin's `dispose` on shutdown" },
    KeyDef { key: "sources.allow", kind: Kind::SourceAllowList, product: || Value::Null, about: "organisation only: the sources that may be approved (ids or npm package names, `*` matches any run of characters)" },
    KeyDef { key: "tools.protected", kind: Kind::ProtectedTools, product: || json!(PRODUCT_PROTECTED), about: "tool names no plugin, tool file or MCP server may register: Berth's own list (OpenCode's `invalid`, where malformed calls go) and the organisation's" },
];

/// The definition of `key` (per-source keys `mode.<id>` are `Mode` keys).
pub fn def(key: &str) -> Option<&'static KeyDef> {
    static PER_SOURCE_MODE: KeyDef = KeyDef {
        key: "mode.<source>",
        kind: Kind::Mode,
        product: || Value::Null,
        about: "how this source runs (overrides `mode` for it, within the organisation's bounds)",
    };
    static PER_PERMISSION: KeyDef = KeyDef {
        key: "permission.<name>",
        kind: Kind::Permission,
        product: || Value::from("ask"),
        about: "the most a plugin's permission.ask answer may grant for this permission (`berth permissions cap`); past it the answer is policy-limited",
    };
    static PER_SOURCE_UPDATES: KeyDef = KeyDef {
        key: "updates.<source>",
        kind: Kind::Updates,
        product: || Value::Null,
        about: "how this npm plugin is updated (overrides `updates` for it, within the organisation's bounds)",
    };
    static PER_SOURCE_AGE: KeyDef = KeyDef {
        key: "update-age.<source>",
        kind: Kind::Age,
        product: || Value::Null,
        about: "hours a version of this plugin must have been published before an automatic update takes it",
    };
    let per = |prefix: &str, d: &'static KeyDef| {
        key.strip_prefix(prefix)
            .filter(|rest| !rest.is_empty())
            .map(|_| d)
    };
    KEYS.iter()
        .find(|d| d.key == key)
        .or_else(|| per("mode.", &PER_SOURCE_MODE))
        .or_else(|| per("permission.", &PER_PERMISSION))
        .or_else(|| per("updates.", &PER_SOURCE_UPDATES))
        .or_else(|| per("update-age.", &PER_SOURCE_AGE))
}

/// The per-source keys and the key each one overrides for its source.
pub const PER_SOURCE: &[(&str, &str)] = &[
    ("mode.", "mode"),
    ("updates.", "updates"),
    ("update-age.", "update-age"),
];

/// The key a per-source key (`mode.<id>`, `updates.<id>`, `update-age.<id>`) overrides.
pub fn per_source_parent(key: &str) -> Option<&'static str> {
    PER_SOURCE
        .iter()
        .find(|(prefix, _)| {
            key.strip_prefix(prefix)
                .is_some_and(|rest| !rest.is_empty())
        })
        .map(|(_, parent)| *parent)
}

impl Kind {
    /// The value's rank, higher = stricter; `None` when the value is not one of this kind.
    fn rank(self, v: &Value) -> Option<u64> {
        let words: &[&str] = match self {
            Kind::Cap => &["allow", "review", "deny"],
            Kind::Mode => &["compatible", "restricted"],
            Kind::ProjectAccess => &["read-write", "read"],
            Kind::Network => &["on", "off"],
            Kind::Permission => &["allow", "ask", "deny"],
            Kind::Updates => &["auto", "notify", "manual"],
            Kind::Age => return v.as_u64().filter(|n| *n <= 8760),
            Kind::Budget { max } => {
                let n = v.as_u64().filter(|n| (1..=max).contains(n))?;
                // Smaller is stricter.
                return Some(u64::MAX - n);
            }
            _ => return None,
        };
        v.as_str()
            .and_then(|s| words.iter().position(|w| *w == s))
            .map(|p| p as u64)
    }

    /// Whether `v` is a value of this kind; the error says what is.
    pub fn check(self, v: &Value) -> Result<(), String> {
        match self {
            Kind::Cap => self
                .rank(v)
                .map(drop)
                .ok_or_else(|| "allow, review or deny".into()),
            Kind::Mode => self
                .rank(v)
                .map(drop)
                .ok_or_else(|| "compatible or restricted".into()),
            Kind::ProjectAccess => self
                .rank(v)
                .map(drop)
                .ok_or_else(|| "read or read-write".into()),
            Kind::Network => self.rank(v).map(drop).ok_or_else(|| "on or off".into()),
            Kind::Permission => self
                .rank(v)
                .map(drop)
                .ok_or_else(|| "allow, ask or deny".into()),
            Kind::Updates => self
                .rank(v)
                .map(drop)
                .ok_or_else(|| "manual, notify or auto".into()),
            Kind::Age => self
                .rank(v)
                .map(drop)
                .ok_or_else(|| "a number of hours from 0 to 8760".into()),
            Kind::Budget { max } => self.rank(v).map(drop).ok_or_else(|| {
                format!("a number of milliseconds from 1 to {max} (never unlimited)")
            }),
            Kind::EnvNames | Kind::SourceAllowList | Kind::ProtectedTools => {
                let ok = v
                    .as_array()
                    .is_some_and(|a| a.iter().all(|x| x.as_str().is_some_and(|s| !s.is_empty())));
                if ok {
                    Ok(())
                } else {
                    Err("a list of names".into())
                }
            }
        }
    }

    /// Whether `lower` is at least as strict as `upper` (so a lower layer may set it).
    pub fn within(self, lower: &Value, upper: &Value) -> bool {
        match self {
            Kind::EnvNames => {
                let allowed = names(upper);
                names(lower).iter().all(|n| allowed.contains(n))
            }
            Kind::SourceAllowList | Kind::ProtectedTools => false,
            _ => match (self.rank(lower), self.rank(upper)) {
                (Some(l), Some(u)) => l >= u,
                _ => false,
            },
        }
    }

    /// Whether a value of this kind can be made stricter than `v` at all.
    pub fn can_tighten(self, v: &Value) -> bool {
        match self {
            Kind::Cap => v != "deny",
            Kind::Mode => v != "restricted",
            Kind::ProjectAccess => v != "read",
            Kind::Network => v != "off",
            Kind::Permission => v != "deny",
            Kind::Updates => v != "manual",
            Kind::Age => v.as_u64().is_some_and(|n| n < 8760),
            Kind::EnvNames => v.as_array().is_some_and(|a| !a.is_empty()),
            Kind::Budget { .. } => v.as_u64().is_some_and(|n| n > 1),
            Kind::SourceAllowList | Kind::ProtectedTools => false,
        }
    }

    /// Whether only the organisation sets it.
    pub fn organisation_only(self) -> bool {
        matches!(self, Kind::SourceAllowList | Kind::ProtectedTools)
    }
}

/// The strings of a list value (none when it is not a list).
pub fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The names no external provider may take whatever any layer says: OpenCode's `invalid` (every
/// malformed tool call of the model is routed to it, arguments and all).
pub const PRODUCT_PROTECTED: &[&str] = &["invalid"];

/// OpenCode 1.18.4's built-in tools (as its `/experimental/tool/ids` lists them before any
/// plugin's), the names a plugin tool overrides.
pub const BUILT_IN_TOOLS: &[&str] = &[
    "invalid",
    "question",
    "bash",
    "read",
    "glob",
    "grep",
    "edit",
    "write",
    "task",
    "webfetch",
    "todowrite",
    "websearch",
    "skill",
    "apply_patch",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_value_must_be_as_strict_as_the_upper_one() {
        assert!(Kind::Cap.within(&json!("deny"), &json!("review")));
        assert!(!Kind::Cap.within(&json!("allow"), &json!("review")));
        assert!(Kind::Budget { max: 100_000 }.within(&json!(5_000), &json!(10_000)));
        assert!(!Kind::Budget { max: 100_000 }.within(&json!(20_000), &json!(10_000)));
        assert!(Kind::EnvNames.within(&json!(["A"]), &json!(["A", "B"])));
        assert!(!Kind::EnvNames.within(&json!(["C"]), &json!(["A", "B"])));
        assert!(Kind::Mode.within(&json!("restricted"), &json!("compatible")));
        assert!(!Kind::ProjectAccess.within(&json!("read-write"), &json!("read")));
    }

    #[test]
    fn budgets_are_never_unlimited() {
        let k = Kind::Budget { max: 60_000 };
        assert!(k.check(&json!(0)).is_err());
        assert!(k.check(&json!(60_001)).is_err());
        assert!(k.check(&json!(-1)).is_err());
        assert!(k.check(&json!("forever")).is_err());
        assert!(k.check(&json!(1_000)).is_ok());
        for d in KEYS {
            if let Kind::Budget { max } = d.kind {
                let v = (d.product)();
                assert!(v.as_u64().is_some_and(|n| n > 0 && n <= max), "{}", d.key);
            }
            assert!(
                d.kind.check(&(d.product)()).is_ok() || (d.product)().is_null(),
                "{}",
                d.key
            );
        }
    }
}
