//! The effective policy: each value from the layer that set it — the organisation's file
//! (`/etc/berth/managed.json` and `managed.d/*.json`, or the file `BERTH_MANAGED_POLICY`
//! names), the product's defaults, the person's settings (SQLite) — where a lower layer may
//! tighten a value but never loosen it. Read by the catalog (what a contribution may do), the
//! hosts (the mode and budgets a source runs with) and every front end (`berth policy`, the
//! page's policy panel).
//!
//! Owns: the rules — reading the organisation's layer, resolving the three, judging
//! contributions. Must not: hold state or reach the store (`governor` does), load, run or stop
//! anything (its readers do), or write the organisation's file.

mod judge;
pub mod keys;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use judge::{hook_category, Category, Judged, Limited};
use keys::{names, Kind, KEYS};

/// Who set a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Organisation,
    Product,
    User,
}

/// Whether the person may change a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Changeable {
    Yes,
    /// The organisation set it: the person may only make it stricter.
    StricterOnly,
    No,
}

/// One value of the effective policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub key: String,
    pub value: Value,
    pub layer: Layer,
    pub changeable: Changeable,
    pub about: &'static str,
    /// The person's setting that was not applied, and why (it would loosen a higher layer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overruled: Option<String>,
    /// The organisation's value, which bounds the person's (also when a stricter one of the
    /// person's is in force).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organisation_value: Option<Value>,
    /// For a budget: the most it may be set to (the product's bound, or the organisation's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
}

/// The policy in force, as read at one moment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Effective {
    pub entries: Vec<Entry>,
    /// The organisation's file Berth looked for, and whether it was there.
    pub organisation_file: PathBuf,
    pub organisation_present: bool,
    /// What could not be read in the organisation's layer (each is taken as strict, see
    /// `organisation_layer`).
    pub problems: Vec<String>,
    /// `(source, item)` pairs the person let through a `review` cap.
    #[serde(skip)]
    pub grants: BTreeSet<(String, String)>,
}

impl Effective {
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key == key)
    }

    pub fn value(&self, key: &str) -> Value {
        self.entry(key)
            .map(|e| e.value.clone())
            .unwrap_or(Value::Null)
    }

    /// A budget in force (the product default when unreadable: never unlimited).
    pub fn budget(&self, key: &str) -> Duration {
        let ms = self
            .value(key)
            .as_u64()
            .or_else(|| keys::def(key).and_then(|d| (d.product)().as_u64()))
            .unwrap_or(30_000);
        Duration::from_millis(ms)
    }

    /// Whether `source_id` runs restricted, and the layer that decided it.
    pub fn restricted(&self, source_id: &str) -> (bool, Layer) {
        let per = self.entry(&format!("mode.{source_id}"));
        let all = self.entry("mode");
        match per.or(all) {
            Some(e) => (e.value == "restricted", e.layer),
            None => (false, Layer::Product),
        }
    }

    /// How `source_id`'s updates are taken (`manual`, `notify`, `auto`), the minimum age of a
    /// version an automatic update takes, and the layer that decided the policy.
    pub fn updates(&self, source_id: &str) -> (String, Duration, Layer) {
        let pick = |key: &str| {
            self.entry(&format!("{key}.{source_id}"))
                .or_else(|| self.entry(key))
        };
        let (policy, layer) = pick("updates")
            .and_then(|e| e.value.as_str().map(|v| (v.to_string(), e.layer)))
            .unwrap_or_else(|| ("manual".into(), Layer::Product));
        let hours = pick("update-age")
            .and_then(|e| e.value.as_u64())
            .unwrap_or(0);
        (policy, Duration::from_secs(hours * 3600), layer)
    }

    /// Whether the organisation lets `id` (or its npm package `name`) be approved at all.
    pub fn source_allowed(&self, id: &str, npm_name: Option<&str>) -> Result<(), String> {
        let Some(list) = self.value("sources.allow").as_array().cloned() else {
            return Ok(());
        };
        let hit = list
            .iter()
            .filter_map(|p| p.as_str())
            .any(|p| glob(p, id) || npm_name.is_some_and(|n| glob(p, n)));
        if hit {
            Ok(())
        } else {
            Err(format!(
                "your organisation's policy ({}) does not list it among the sources that may run",
                self.organisation_file.display()
            ))
        }
    }

    /// The names no external provider may take: Berth's own list and the organisation's.
    pub fn protected_tools(&self) -> Vec<String> {
        let mut all: Vec<String> = keys::PRODUCT_PROTECTED
            .iter()
            .map(|s| s.to_string())
            .collect();
        for n in names(&self.value("tools.protected")) {
            if !all.contains(&n) {
                all.push(n);
            }
        }
        all
    }
}

/// The organisation's layer: its values and what could not be read.
pub struct OrgLayer {
    pub present: bool,
    pub values: BTreeMap<String, Value>,
    pub problems: Vec<String>,
}

/// Reads `path` and then `managed.d/*.json` beside it in name order (a later file's value
/// replaces an earlier one's, lists are joined). A value Berth cannot read is taken as the
/// strictest of its kind (a cap `deny`, mode `restricted`, network `off`, project `read`); an
/// unreadable file holds every capped contribution for review. Either is a problem shown.
pub fn organisation_layer(path: &Path) -> OrgLayer {
    let mut layer = OrgLayer {
        present: false,
        values: BTreeMap::new(),
        problems: Vec::new(),
    };
    let mut files = vec![path.to_path_buf()];
    if let Some(dir) = path.parent() {
        let mut drop_ins: Vec<PathBuf> = std::fs::read_dir(dir.join("managed.d"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect()
            })
            .unwrap_or_default();
        drop_ins.sort();
        files.extend(drop_ins);
    }
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                layer.present = true;
                layer.problems.push(format!(
                    "{}: cannot be read ({e}); every capped contribution is held for review",
                    file.display()
                ));
                hold_everything(&mut layer.values);
                continue;
            }
        };
        layer.present = true;
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&text) else {
            layer.problems.push(format!("{}: not a JSON object of policy keys; every capped contribution is held for review", file.display()));
            hold_everything(&mut layer.values);
            continue;
        };
        for (key, v) in map {
            let Some(def) = keys::def(&key) else {
                layer.problems.push(format!(
                    "{}: `{key}` is not a policy key (ignored)",
                    file.display()
                ));
                continue;
            };
            let v = match def.kind.check(&v) {
                Ok(()) => v,
                Err(want) => {
                    layer
                        .problems
                        .push(format!("{}: `{key}` takes {want}; got {v}", file.display()));
                    match strictest(def.kind) {
                        Some(s) => s,
                        None => continue,
                    }
                }
            };
            let joined = match (layer.values.get(&key), &v) {
                (Some(Value::Array(a)), Value::Array(b)) => {
                    let mut all = a.clone();
                    all.extend(b.iter().filter(|x| !a.contains(x)).cloned());
                    Value::Array(all)
                }
                _ => v,
            };
            layer.values.insert(key, joined);
        }
    }
    layer
}

fn strictest(kind: Kind) -> Option<Value> {
    match kind {
        Kind::Cap => Some("deny".into()),
        Kind::Mode => Some("restricted".into()),
        Kind::ProjectAccess => Some("read".into()),
        Kind::Network => Some("off".into()),
        Kind::Permission => Some("deny".into()),
        Kind::EnvNames => Some(Value::Array(vec![])),
        _ => None,
    }
}

fn hold_everything(values: &mut BTreeMap<String, Value>) {
    for d in KEYS.iter().filter(|d| d.kind == Kind::Cap) {
        let v = values
            .entry(d.key.to_string())
            .or_insert_with(|| "review".into());
        if !Kind::Cap.within(v, &"review".into()) {
            *v = "review".into();
        }
    }
}

/// For a per-source key (`mode.<id>`, `updates.<id>`, …), the organisation's value of the key
/// it overrides bounds it.
pub(crate) fn per_source_parent<'a>(
    key: &str,
    org: &'a BTreeMap<String, Value>,
) -> Option<&'a Value> {
    keys::per_source_parent(key).and_then(|parent| org.get(parent))
}

/// The policy with nothing but the product's defaults (no organisation, no settings).
pub fn product_defaults() -> Effective {
    let none = OrgLayer {
        present: false,
        values: BTreeMap::new(),
        problems: Vec::new(),
    };
    resolve(Path::new(""), none, &BTreeMap::new(), BTreeSet::new())
}

/// The effective policy from the three layers.
pub fn resolve(
    path: &Path,
    org: OrgLayer,
    user: &BTreeMap<String, berth_store::PolicySetting>,
    grants: BTreeSet<(String, String)>,
) -> Effective {
    let mut eff = Effective {
        organisation_file: path.to_path_buf(),
        organisation_present: org.present,
        problems: org.problems.clone(),
        grants,
        entries: Vec::new(),
    };
    let per_source: Vec<String> = user
        .keys()
        .chain(org.values.keys())
        .filter(|k| keys::per_source_parent(k).is_some() || k.starts_with("permission."))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let all_keys = KEYS.iter().map(|d| d.key.to_string()).chain(per_source);
    for key in all_keys {
        let Some(def) = keys::def(&key) else { continue };
        let upper = org
            .values
            .get(&key)
            .or_else(|| per_source_parent(&key, &org.values));
        let mut entry = match org.values.get(&key) {
            Some(v) => Entry {
                key: key.clone(),
                value: v.clone(),
                layer: Layer::Organisation,
                changeable: if def.kind.organisation_only() || !def.kind.can_tighten(v) {
                    Changeable::No
                } else {
                    Changeable::StricterOnly
                },
                about: def.about,
                overruled: None,
                organisation_value: None,
                max: None,
            },
            None => Entry {
                key: key.clone(),
                value: (def.product)(),
                layer: Layer::Product,
                changeable: if def.kind.organisation_only() {
                    Changeable::No
                } else {
                    Changeable::Yes
                },
                about: def.about,
                overruled: None,
                organisation_value: None,
                max: None,
            },
        };
        // A per-source key with no value of its own follows the key it overrides.
        let per_source = keys::per_source_parent(&key).is_some();
        if entry.value.is_null() && per_source {
            if let Some(v) = upper {
                entry.value = v.clone();
                entry.layer = Layer::Organisation;
                entry.changeable = if def.kind.can_tighten(v) {
                    Changeable::StricterOnly
                } else {
                    Changeable::No
                };
            }
        }
        if let Some(s) = user.get(&key) {
            let fits = def.kind.check(&s.value).is_ok()
                && !def.kind.organisation_only()
                && upper.is_none_or(|u| def.kind.within(&s.value, u));
            if fits {
                entry.value = s.value.clone();
                entry.layer = Layer::User;
            } else {
                entry.overruled = Some(format!(
                    "your setting {} is not applied: it would loosen the organisation's value (a lower layer may only tighten it)",
                    s.value
                ));
            }
        }
        entry.organisation_value = upper.cloned();
        if let Kind::Budget { max } = def.kind {
            entry.max = Some(upper.and_then(Value::as_u64).map_or(max, |u| u.min(max)));
        }
        if !(entry.value.is_null() && per_source) {
            eff.entries.push(entry);
        }
    }
    eff
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, rest)) => {
            let Some(tail) = s.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob(rest, &tail[i..]))
        }
    }
}

/// Changes when the organisation's file or a drop-in changes.
pub fn fingerprint(path: &Path) -> String {
    let mut parts = Vec::new();
    let mut stat = |p: &Path| {
        if let Ok(m) = std::fs::metadata(p) {
            use std::os::unix::fs::MetadataExt;
            parts.push(format!(
                "{}:{}:{}:{}",
                p.display(),
                m.len(),
                m.mtime(),
                m.mtime_nsec()
            ));
        }
    };
    stat(path);
    if let Some(dir) = path.parent().map(|d| d.join("managed.d")) {
        stat(&dir);
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                stat(&e.path());
            }
        }
    }
    parts.sort();
    parts.join("|")
}

#[cfg(test)]
mod tests;
