//! Permissions a tool asks for (`ctx.ask`): the person's cap per permission, standing answers
//! ("always"), and the audit trail of every decision with the plugin's answer beside the final
//! one — a cap that limited a plugin is recorded as such, never as the plugin's own deny.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::{Store, StoreError};

/// `deny` < `ask` < `allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionLevel {
    Deny,
    Ask,
    Allow,
}

impl PermissionLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionLevel::Deny => "deny",
            PermissionLevel::Ask => "ask",
            PermissionLevel::Allow => "allow",
        }
    }
    pub fn parse(s: &str) -> Option<PermissionLevel> {
        match s {
            "deny" => Some(PermissionLevel::Deny),
            "ask" => Some(PermissionLevel::Ask),
            "allow" => Some(PermissionLevel::Allow),
            _ => None,
        }
    }
}

/// The `source_id` of a standing answer the person set for every plugin.
pub const EVERY_PLUGIN: &str = "*";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionRule {
    /// The plugin whose asks it answers, or [`EVERY_PLUGIN`].
    pub source_id: String,
    pub permission: String,
    pub pattern: String,
    pub action: PermissionLevel,
    pub set_at_ms: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PermissionDecision {
    pub request_id: String,
    pub source_id: String,
    pub tool: String,
    pub call_id: String,
    pub permission: String,
    pub patterns: Vec<String>,
    /// What the `permission.ask` chain answered (`ask` when no plugin answered).
    pub plugin_answer: PermissionLevel,
    /// The plugin whose hook set the answer, if one did.
    pub answered_by: Option<String>,
    pub cap: PermissionLevel,
    pub final_answer: PermissionLevel,
    /// `plugin`, `cap`, `rule`, `person`, `no-prompt` (headless) or `timeout`.
    pub decided_by: String,
    /// The cap turned the plugin's answer into something stricter.
    pub policy_limited: bool,
    pub decided_at_ms: i64,
}

impl Store {
    /// The cap for `permission` (the most a plugin may grant); `ask` unless the person set one.
    pub fn permission_cap(&self, permission: &str) -> Result<PermissionLevel, StoreError> {
        let cap: Option<String> = self
            .conn
            .query_row(
                "SELECT cap FROM permission_caps WHERE permission = ?1",
                [permission],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(cap
            .as_deref()
            .and_then(PermissionLevel::parse)
            .unwrap_or(PermissionLevel::Ask))
    }

    pub fn set_permission_cap(
        &self,
        permission: &str,
        cap: PermissionLevel,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO permission_caps (permission, cap, set_at_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(permission) DO UPDATE SET cap = excluded.cap, set_at_ms = excluded.set_at_ms",
                params![permission, cap.as_str(), crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Every cap the person set, by permission.
    pub fn permission_caps(&self) -> Result<Vec<(String, PermissionLevel)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT permission, cap FROM permission_caps ORDER BY permission")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?;
        rows.map(|r| {
            r.map(|(p, c)| {
                (
                    p,
                    PermissionLevel::parse(&c).unwrap_or(PermissionLevel::Ask),
                )
            })
            .map_err(|e| self.err(e))
        })
        .collect()
    }

    /// A standing answer of the person ("always") for one plugin (`source_id`, or
    /// [`EVERY_PLUGIN`]), one permission and pattern.
    pub fn set_permission_rule(
        &self,
        source_id: &str,
        permission: &str,
        pattern: &str,
        action: PermissionLevel,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO permission_rules (source_id, permission, pattern, action, set_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(source_id, permission, pattern) DO UPDATE SET action = excluded.action, set_at_ms = excluded.set_at_ms",
                params![source_id, permission, pattern, action.as_str(), crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    pub fn permission_rules(&self) -> Result<Vec<PermissionRule>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT source_id, permission, pattern, action, set_at_ms FROM permission_rules ORDER BY source_id, permission, pattern")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(PermissionRule {
                    source_id: r.get(0)?,
                    permission: r.get(1)?,
                    pattern: r.get(2)?,
                    action: PermissionLevel::parse(&r.get::<_, String>(3)?)
                        .unwrap_or(PermissionLevel::Deny),
                    set_at_ms: r.get(4)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.map(|r| r.map_err(|e| self.err(e))).collect()
    }

    pub fn record_permission_decision(&self, d: &PermissionDecision) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO permission_decisions (request_id, source_id, tool, call_id, permission, patterns_json, plugin_answer, answered_by, cap, final, decided_by, policy_limited, decided_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    d.request_id,
                    d.source_id,
                    d.tool,
                    d.call_id,
                    d.permission,
                    serde_json::to_string(&d.patterns).unwrap_or_default(),
                    d.plugin_answer.as_str(),
                    d.answered_by,
                    d.cap.as_str(),
                    d.final_answer.as_str(),
                    d.decided_by,
                    d.policy_limited as i64,
                    d.decided_at_ms,
                ],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The newest decisions first.
    pub fn permission_decisions(
        &self,
        limit: usize,
    ) -> Result<Vec<PermissionDecision>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT request_id, source_id, tool, call_id, permission, patterns_json, plugin_answer, answered_by, cap, final, decided_by, policy_limited, decided_at_ms
                 FROM permission_decisions ORDER BY decided_at_ms DESC, id DESC LIMIT ?1",
            )
            .map_err(|e| self.err(e))?;
        let level = |s: String| PermissionLevel::parse(&s).unwrap_or(PermissionLevel::Ask);
        let rows = stmt
            .query_map([limit as i64], |r| {
                Ok(PermissionDecision {
                    request_id: r.get(0)?,
                    source_id: r.get(1)?,
                    tool: r.get(2)?,
                    call_id: r.get(3)?,
                    permission: r.get(4)?,
                    patterns: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
                    plugin_answer: level(r.get(6)?),
                    answered_by: r.get(7)?,
                    cap: level(r.get(8)?),
                    final_answer: level(r.get(9)?),
                    decided_by: r.get(10)?,
                    policy_limited: r.get::<_, i64>(11)? != 0,
                    decided_at_ms: r.get(12)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.map(|r| r.map_err(|e| self.err(e))).collect()
    }
}
