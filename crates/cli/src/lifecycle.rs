//! `berth updates`, `berth update`, `berth rollback`, `berth versions`: the npm plugins'
//! updates and every source's execution versions, as the runtime reports them. No rules here.

use berth_runtime::updates::Outcome;
use berth_runtime::{Berth, BerthError};

use crate::output::Out;

/// The npm plugins with their update policy and the last check (`check`: ask the registry now).
pub(crate) fn updates(
    berth: &Berth,
    ids: &[String],
    check: bool,
    out: &Out,
) -> Result<(), BerthError> {
    let chosen = (!ids.is_empty()).then_some(ids);
    let mut errors = Vec::new();
    if check {
        let checks = crate::block_on(async {
            let r = berth.check_updates(chosen).await;
            berth.shutdown_hosts().await;
            r
        })?;
        errors.extend(checks.errors);
        if let (Some(e), true) = (errors.first(), chosen.is_some_and(|c| c.len() == 1)) {
            return Err(e.clone());
        }
    }
    let status = berth.status();
    let rows: Vec<serde_json::Value> = status
        .sources
        .iter()
        .filter(|s| chosen.is_none_or(|c| c.contains(&s.id)))
        .filter_map(|s| {
            let u = s.lifecycle.updates.as_ref()?;
            Some(serde_json::json!({
                "source_id": s.id,
                "name": s.npm.as_ref().map(|n| n.name.clone()),
                "request": s.npm.as_ref().map(|n| n.request.clone()),
                "current": s.npm.as_ref().and_then(|n| n.resolved.as_ref()).map(|r| r.version.clone()),
                "policy": u.policy,
                "layer": u.layer,
                "min_age_hours": u.min_age_hours,
                "offer": u.offer,
                "checked_at_ms": u.checked_at_ms,
                "progress": u.progress,
                "failed_versions": u.failed_versions,
                "rollback_to": u.rollback_to,
            }))
        })
        .collect();
    let mut human = Vec::new();
    for r in &rows {
        let current = r["current"].as_str().unwrap_or("not prepared");
        let offer = match r["offer"]["available"]["version"].as_str() {
            Some(v) => format!("{current} → {v} available"),
            None if r["checked_at_ms"].is_null() => {
                format!("{current} (not checked; berth updates --check)")
            }
            None => format!("{current} (the newest its spec allows)"),
        };
        human.push(format!(
            "{}  {}@{}  {offer}  [updates: {}]",
            r["source_id"].as_str().unwrap_or(""),
            r["name"].as_str().unwrap_or(""),
            r["request"].as_str().unwrap_or(""),
            r["policy"].as_str().unwrap_or("")
        ));
    }
    for e in &errors {
        human.push(format!(
            "{}: {} [{}]",
            e.plugin.as_deref().unwrap_or(""),
            e.message,
            e.code
        ));
    }
    if human.is_empty() {
        human.push("no npm plugin from a registry".into());
    }
    out.done(
        serde_json::json!({ "updates": rows, "errors": errors }),
        &human.join("\n"),
    );
    Ok(())
}

/// Updates one npm plugin, or runs an exact earlier version again (`rollback`).
pub(crate) fn change(
    berth: &Berth,
    id: &str,
    rollback: Option<Option<i64>>,
    approve_growth: bool,
    out: &Out,
) -> Result<(), BerthError> {
    let outcome = crate::block_on(async {
        let r = match rollback {
            Some(to) => berth.rollback(id, to).await,
            None => berth.update(id, approve_growth).await,
        };
        berth.shutdown_hosts().await;
        r
    })??;
    let human = match &outcome {
        Outcome::UpToDate { version } => format!(
            "{id} is the newest version its spec allows ({})",
            version.as_deref().unwrap_or("?")
        ),
        Outcome::Updated { from, to } => format!(
            "{id} updated: {} → {to}",
            from.as_deref().unwrap_or("?")
        ),
        Outcome::RolledBack { from, to } => format!(
            "{id} rolled back: {} → {to}",
            from.as_deref().unwrap_or("?")
        ),
        Outcome::Held { to, grew } => format!(
            "{id} {to} registers more than the version before ({}); nothing of it is registered until you approve it",
            grew.join("; ")
        ),
    };
    out.done(serde_json::json!({ "update": outcome }), &human);
    Ok(())
}

/// Every version of a source that ran here.
pub(crate) fn versions(berth: &Berth, id: &str, out: &Out) -> Result<(), BerthError> {
    let versions = berth.versions(id)?;
    let human: Vec<String> = versions
        .iter()
        .map(|v| {
            format!(
                "{}{:>4}  {}  {}  {}  {}",
                if v.current { "*" } else { " " },
                v.id,
                v.version
                    .as_deref()
                    .unwrap_or(crate::output::short_digest(&v.digest)),
                v.why,
                if v.recoverable {
                    "bytes kept"
                } else {
                    "not recoverable"
                },
                v.kept
            )
        })
        .collect();
    out.done(
        serde_json::json!({ "versions": versions }),
        &if human.is_empty() {
            format!("{id} has not run here yet")
        } else {
            human.join("\n")
        },
    );
    Ok(())
}
