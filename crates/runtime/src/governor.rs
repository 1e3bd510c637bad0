//! The policy owner: the effective policy as last read (refreshed when the store's decisions
//! marker or the organisation's file moved), the person's settings written through it — a
//! setting that would loosen a higher layer is refused with the layer that set the value —
//! and the contributions the person let through a `review` cap.
//!
//! Owns: when the policy is read again, and writing the person's side. Must not: judge a
//! contribution itself (`policy` has the rules) or load, run or stop anything.

use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

use crate::core::Core;
use crate::error::{code, BerthError};
use crate::policy::keys::{self, Kind};
use crate::policy::{
    fingerprint, organisation_layer, per_source_parent, resolve, Changeable, Effective, Entry,
    Layer,
};

/// The effective policy as last read, refreshed when a layer moved.
pub(crate) struct Governor {
    core: Arc<Core>,
    current: RwLock<Arc<Effective>>,
    /// What the current one was read from: the store's decisions marker and the organisation
    /// file's fingerprint.
    read_at: Mutex<Option<(i64, String)>>,
}

impl Governor {
    pub(crate) fn new(core: Arc<Core>) -> Arc<Governor> {
        let p = Arc::new(Governor {
            core,
            current: RwLock::new(Arc::new(Effective::default())),
            read_at: Mutex::new(None),
        });
        p.refresh();
        p
    }

    /// The policy as last read (cheap).
    pub(crate) fn current(&self) -> Arc<Effective> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reads the layers again if one moved since; true when the policy changed.
    pub(crate) fn refresh(&self) -> bool {
        let path = self.core.options().managed_policy_path();
        let stamp = (
            self.core.with_store(|s| s.decisions_marker()).unwrap_or(-1),
            fingerprint(&path),
        );
        let mut read_at = self.read_at.lock().unwrap_or_else(|p| p.into_inner());
        if read_at.as_ref() == Some(&stamp) {
            return false;
        }
        let mut settings = self
            .core
            .with_store(|s| s.policy_settings())
            .unwrap_or_default();
        // The person's permission caps live in their own table (`berth permissions cap`).
        let caps = self
            .core
            .with_store(|s| s.permission_caps())
            .unwrap_or_default();
        for (name, level) in caps {
            settings.insert(
                format!("permission.{name}"),
                berth_store::PolicySetting {
                    value: level.as_str().into(),
                    set_by: "user".into(),
                    set_at_ms: 0,
                },
            );
        }
        let grants = self
            .core
            .with_store(|s| s.contribution_grants())
            .unwrap_or_default();
        let next = resolve(&path, organisation_layer(&path), &settings, grants);
        let changed = {
            let cur = self.current();
            cur.entries != next.entries
                || cur.grants != next.grants
                || cur.problems != next.problems
        };
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        *read_at = Some(stamp);
        changed
    }

    /// Records the person's `value` for `key` (`None`: back to the layer above). Refused, with
    /// the layer that set it, when it would loosen a higher layer's value.
    pub(crate) fn set(
        &self,
        key: &str,
        value: Option<Value>,
        by: &str,
    ) -> Result<Entry, BerthError> {
        let refuse = |msg: String, recovery: &str| {
            BerthError::new(code::POLICY_LIMITED, "policy", msg, recovery.to_string())
        };
        let def = keys::def(key).ok_or_else(|| {
            BerthError::new(
                code::INVALID_ARGUMENTS,
                "policy",
                format!("`{key}` is not a policy key"),
                "list the keys with `berth policy`",
            )
        })?;
        self.refresh();
        let eff = self.current();
        if let Some(v) = &value {
            def.kind.check(v).map_err(|want| {
                BerthError::new(
                    code::INVALID_ARGUMENTS,
                    "policy",
                    format!("`{key}` takes {want}; got {v}"),
                    format!("set it to {want}"),
                )
            })?;
            if def.kind.organisation_only() {
                return Err(refuse(
                    format!("`{key}` is set by your organisation only"),
                    "ask your administrator",
                ));
            }
            let org = organisation_layer(&eff.organisation_file).values;
            if let Some(upper) = org.get(key).or_else(|| per_source_parent(key, &org)) {
                if !def.kind.within(v, upper) {
                    return Err(refuse(
                        format!("`{key}` = {v} would loosen the organisation's value {upper} (set in {}); a lower layer may only tighten it", eff.organisation_file.display()),
                        "choose a value at least as strict, or ask your administrator",
                    ));
                }
            }
            if let Kind::Budget { max } = def.kind {
                if v.as_u64().is_some_and(|n| n > max) {
                    return Err(refuse(
                        format!("`{key}` may be at most {max} ms (the product's bound)"),
                        "choose a smaller budget",
                    ));
                }
            }
        }
        if let Some(permission) = key.strip_prefix("permission.") {
            // Its own table; the log row below moves the marker other processes watch.
            let level = value
                .as_ref()
                .and_then(|v| v.as_str())
                .and_then(berth_store::PermissionLevel::parse)
                .unwrap_or(berth_store::PermissionLevel::Ask);
            self.core
                .with_store(|s| s.set_permission_cap(permission, level))?;
        }
        self.core
            .with_store(|s| s.set_policy_setting(key, value.as_ref(), by))?;
        self.refresh();
        let eff = self.current();
        Ok(eff.entry(key).cloned().unwrap_or(Entry {
            key: key.into(),
            value: value.unwrap_or(Value::Null),
            layer: Layer::User,
            changeable: Changeable::Yes,
            about: def.about,
            overruled: None,
            organisation_value: None,
            max: None,
        }))
    }

    /// Lets `item` of `source_id` through a `review` cap, or takes that back.
    pub(crate) fn grant(
        &self,
        source_id: &str,
        item: &str,
        granted: bool,
    ) -> Result<(), BerthError> {
        self.core
            .with_store(|s| s.set_contribution_grant(source_id, item, granted))?;
        self.refresh();
        Ok(())
    }
}
