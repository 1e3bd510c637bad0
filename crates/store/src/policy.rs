//! The person's side of the policy: their settings (a log, the newest row per key in force),
//! the contributions they let through a `review` cap, and what each source contributed when it
//! was last active (the baseline a later load of changed bytes is compared with).
//!
//! Owns: those three tables. Must not: judge a value (the runtime's policy owner knows the
//! keys, their layers and bounds; a row here is only what the person asked for).

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::{Contributions, Store, StoreError};

/// A setting the person made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicySetting {
    pub value: serde_json::Value,
    pub set_by: String,
    pub set_at_ms: i64,
}

/// What a source contributed when it was last registered, and for which bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveContributions {
    pub digest: String,
    pub contributions: Contributions,
}

impl Store {
    /// Records the person's value for `key`; `None` takes their setting back.
    pub fn set_policy_setting(
        &self,
        key: &str,
        value: Option<&serde_json::Value>,
        set_by: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO policy_settings (key, value_json, set_by, set_at_ms) VALUES (?1, ?2, ?3, ?4)",
                params![key, value.map(|v| v.to_string()), set_by, crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The person's settings in force: the newest row of each key, unless it took the key back.
    pub fn policy_settings(&self) -> Result<BTreeMap<String, PolicySetting>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT key, value_json, set_by, set_at_ms FROM policy_settings p
                 WHERE id = (SELECT max(id) FROM policy_settings q WHERE q.key = p.key)",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (key, value, set_by, set_at_ms) = row.map_err(|e| self.err(e))?;
            let Some(value) = value.and_then(|v| serde_json::from_str(&v).ok()) else {
                continue;
            };
            out.insert(
                key,
                PolicySetting {
                    value,
                    set_by,
                    set_at_ms,
                },
            );
        }
        Ok(out)
    }

    /// Lets `item` of `source_id` through a `review` cap (`granted`), or takes that back.
    pub fn set_contribution_grant(
        &self,
        source_id: &str,
        item: &str,
        granted: bool,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO contribution_grants (source_id, item, granted, set_at_ms) VALUES (?1, ?2, ?3, ?4)",
                params![source_id, item, granted as i64, crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Every `(source, item)` the person let through, newest word per pair.
    pub fn contribution_grants(&self) -> Result<BTreeSet<(String, String)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT source_id, item, granted FROM contribution_grants g
                 WHERE id = (SELECT max(id) FROM contribution_grants h
                             WHERE h.source_id = g.source_id AND h.item = g.item)",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = BTreeSet::new();
        for row in rows {
            let (source, item, granted) = row.map_err(|e| self.err(e))?;
            if granted != 0 {
                out.insert((source, item));
            }
        }
        Ok(out)
    }

    /// Records what `source_id` registered on `backend` for `digest` (its new baseline).
    pub fn record_active_contributions(
        &self,
        source_id: &str,
        backend: &str,
        digest: &str,
        c: &Contributions,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO active_contributions (source_id, backend, digest, tools_json, hooks_json, active_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(source_id, backend) DO UPDATE SET digest = excluded.digest, tools_json = excluded.tools_json, hooks_json = excluded.hooks_json, active_at_ms = excluded.active_at_ms",
                params![source_id, backend, digest, serde_json::to_string(&c.tools).unwrap_or_default(), serde_json::to_string(&c.hooks).unwrap_or_default(), crate::open::now_ms()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// What `source_id` contributed when it was last active on `backend`.
    pub fn active_contributions(
        &self,
        source_id: &str,
        backend: &str,
    ) -> Result<Option<ActiveContributions>, StoreError> {
        self.conn
            .query_row(
                "SELECT digest, tools_json, hooks_json FROM active_contributions WHERE source_id = ?1 AND backend = ?2",
                params![source_id, backend],
                |r| {
                    let t: String = r.get(1)?;
                    let h: String = r.get(2)?;
                    Ok(ActiveContributions {
                        digest: r.get(0)?,
                        contributions: Contributions {
                            tools: serde_json::from_str(&t).unwrap_or_default(),
                            hooks: serde_json::from_str(&h).unwrap_or_default(),
                        },
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Contributions, Store};

    #[test]
    fn the_newest_setting_is_in_force_and_a_null_takes_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("b.db")).unwrap().store;
        let before = store.decisions_marker().unwrap();
        store
            .set_policy_setting("cap.ui", Some(&serde_json::json!("review")), "cli")
            .unwrap();
        store
            .set_policy_setting("cap.ui", Some(&serde_json::json!("deny")), "cli")
            .unwrap();
        store
            .set_policy_setting("cap.config", Some(&serde_json::json!("deny")), "cli")
            .unwrap();
        store.set_policy_setting("cap.config", None, "cli").unwrap();
        let s = store.policy_settings().unwrap();
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s["cap.ui"].value, serde_json::json!("deny"));
        // Every setting moves the marker other processes watch.
        assert!(store.decisions_marker().unwrap() > before);
    }

    #[test]
    fn grants_and_baselines_keep_the_newest_word() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("b.db")).unwrap().store;
        store
            .set_contribution_grant("p", "hook:shell.env", true)
            .unwrap();
        store
            .set_contribution_grant("p", "tool:bash", true)
            .unwrap();
        store
            .set_contribution_grant("p", "tool:bash", false)
            .unwrap();
        let g = store.contribution_grants().unwrap();
        assert_eq!(
            g.into_iter().collect::<Vec<_>>(),
            vec![("p".to_string(), "hook:shell.env".to_string())]
        );
        let c = Contributions {
            tools: vec!["a".into()],
            hooks: vec!["event".into()],
        };
        store
            .record_active_contributions("p", "bun", "sha256:1", &c)
            .unwrap();
        store
            .record_active_contributions("p", "bun", "sha256:2", &c)
            .unwrap();
        let a = store.active_contributions("p", "bun").unwrap().unwrap();
        assert_eq!(a.digest, "sha256:2");
        assert_eq!(a.contributions, c);
        assert!(store.active_contributions("p", "node").unwrap().is_none());
    }
}
