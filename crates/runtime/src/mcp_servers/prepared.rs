//! An MCP server started by a fetch-and-run launcher (`npx -y pkg`, `bunx pkg`, `pnpm dlx pkg`)
//! runs whatever is newest of its package at every start, with install scripts on. Prepared
//! instead (the person asks: `berth prepare <id>`), the package is installed once in Berth's
//! data dir — the exact version the registry offers now, its integrity checked, install scripts
//! off, as npm plugins are — and the server runs from there with Node, for as long as its entry
//! stays as it was.
//!
//! Owns: resolving and installing that package, finding the program it runs, and the command
//! that replaces the launcher's. Must not: change the entry, connect anything (`mcp_servers`
//! does) or run any of the package's code while preparing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_discovery::mcp::{fetched_command, McpTarget};
use berth_store::McpPrepared;
use serde_json::Value;

use crate::error::{code, BerthError};

/// Installs the package `target` fetches at every start and returns what runs instead.
pub(crate) fn prepare(
    packages: &Path,
    node: Option<PathBuf>,
    source_id: &str,
    config_digest: &str,
    target: &McpTarget,
    budget: Duration,
) -> Result<McpPrepared, BerthError> {
    let refuse = |c: &'static str, msg: String, recovery: &str| {
        BerthError::new(c, "prepare", msg, recovery).for_plugin(source_id.to_string())
    };
    let McpTarget::Local { program, args, .. } = target else {
        return Err(refuse(
            code::INVALID_ARGUMENTS,
            "it is a remote server: nothing of it runs here".into(),
            "nothing to prepare",
        ));
    };
    let Some(fetched) = fetched_command(program, args) else {
        return Err(refuse(
            code::INVALID_ARGUMENTS,
            format!("`{program}` is not a fetch-and-run launcher: it runs what is installed"),
            "nothing to prepare",
        ));
    };
    if !fetched.is_npm() {
        return Err(refuse(
            code::UNSUPPORTED,
            format!(
                "`{}` fetches a Python package; Berth prepares npm packages only",
                fetched.launcher
            ),
            "install a fixed version yourself and point `command` at it",
        ));
    }
    let (name, request) = split_spec(&fetched.package);
    let view = crate::deps::npm_view(packages, name, request, budget).map_err(|e| {
        refuse(
            code::DEPENDENCY_FAILED,
            format!(
                "the registry could not say what `{}` is: {e}",
                fetched.package
            ),
            "check the network and the registry, then prepare it again",
        )
    })?;
    // One version, or every version a range matches (the newest last).
    let newest = match &view {
        Value::Array(all) => all.last().cloned().unwrap_or(Value::Null),
        v => v.clone(),
    };
    let (Some(version), Some(integrity)) = (
        newest["version"].as_str(),
        newest["dist.integrity"].as_str(),
    ) else {
        return Err(refuse(
            code::DEPENDENCY_FAILED,
            format!(
                "the registry has no version of `{}` with an integrity",
                fetched.package
            ),
            "check the package name in the entry's command",
        ));
    };
    // An MCP server is a program, not a plugin: nothing of Berth's is linked into its install.
    let folder = crate::deps::prepare_npm_version(packages, name, version, integrity, budget, &[])?;
    let package_dir = folder.join("node_modules").join(name);
    let bin = program_of(&package_dir, name, fetched.command.as_deref()).ok_or_else(|| {
        refuse(
            code::UNSUPPORTED,
            format!("`{name}@{version}` names no program to run (its package.json has no `bin` Berth can pick)"),
            "install it yourself and point `command` at the program",
        )
    })?;
    let node = node.ok_or_else(|| {
        refuse(
            code::UNSUPPORTED,
            "no Node.js was found to run it".into(),
            "install Node.js 20 or newer (scripts/setup does)",
        )
    })?;
    let list_digest = berth_discovery::prepared::list_digest(&folder).ok_or_else(|| {
        refuse(
            code::DEPENDENCY_FAILED,
            format!("`{name}@{version}` was installed without its file list"),
            "prepare it again",
        )
    })?;
    let mut command = vec![node.display().to_string(), bin.display().to_string()];
    command.extend(fetched.rest.iter().cloned());
    Ok(McpPrepared {
        source_id: source_id.to_string(),
        config_digest: config_digest.to_string(),
        package: name.to_string(),
        version: version.to_string(),
        integrity: integrity.to_string(),
        install: folder.display().to_string(),
        list_digest,
        program: command,
        prepared_at_ms: 0,
    })
}

/// Checks the prepared install against the file list it had when it was prepared (every file's
/// bytes, none added or removed): what runs is what was prepared.
pub(crate) fn verify(prepared: &McpPrepared) -> Result<(), String> {
    crate::integrity::verify(
        Path::new(&prepared.install),
        Some(&prepared.list_digest),
        &[],
        &[],
    )
}

/// `target` with the prepared program in place of the launcher (its environment kept).
pub(crate) fn substitute(target: McpTarget, prepared: &McpPrepared) -> McpTarget {
    match target {
        McpTarget::Local { environment, .. } if !prepared.program.is_empty() => McpTarget::Local {
            program: prepared.program[0].clone(),
            args: prepared.program[1..].to_vec(),
            environment,
        },
        other => other,
    }
}

/// `pkg@range` → (`pkg`, `range`); a bare name means `latest` (what the launcher takes).
fn split_spec(spec: &str) -> (&str, &str) {
    match spec[1..].find('@') {
        Some(i) => (&spec[..i + 1], &spec[i + 2..]),
        None => (spec, "latest"),
    }
}

/// The program a launcher runs of a package: the bin named `command` when given, else the one
/// named like the package (its name without the scope), else its only one.
fn program_of(package_dir: &Path, name: &str, command: Option<&str>) -> Option<PathBuf> {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(package_dir.join("package.json")).ok()?)
            .ok()?;
    let short = name.rsplit('/').next().unwrap_or(name);
    let rel = match &manifest["bin"] {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => {
            let pick = command.unwrap_or(short);
            m.get(pick)
                .or_else(|| (m.len() == 1).then(|| m.values().next()).flatten())
                .and_then(Value::as_str)
                .map(str::to_string)
        }
        _ => None,
    }?;
    let path = package_dir.join(rel);
    // The program must be a file of the package, not a way out of it.
    let real = path.canonicalize().ok()?;
    real.starts_with(package_dir.canonicalize().ok()?)
        .then_some(real)
        .filter(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_at_the_version_and_scopes_survive() {
        assert_eq!(split_spec("pkg"), ("pkg", "latest"));
        assert_eq!(split_spec("pkg@1.2.3"), ("pkg", "1.2.3"));
        assert_eq!(split_spec("@scope/pkg"), ("@scope/pkg", "latest"));
        assert_eq!(split_spec("@scope/pkg@^2"), ("@scope/pkg", "^2"));
    }

    #[test]
    fn the_program_is_the_packages_own_bin_and_never_outside_it() {
        let d = tempfile::tempdir().unwrap();
        let pkg = d.path().join("node_modules/@s/tool");
        std::fs::create_dir_all(pkg.join("bin")).unwrap();
        std::fs::write(pkg.join("bin/tool.mjs"), "").unwrap();
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@s/tool","bin":{"tool":"bin/tool.mjs","other":"../../../etc/passwd"}}"#,
        )
        .unwrap();
        assert_eq!(
            program_of(&pkg, "@s/tool", None),
            Some(pkg.join("bin/tool.mjs").canonicalize().unwrap())
        );
        assert_eq!(
            program_of(&pkg, "@s/tool", Some("other")),
            None,
            "a bin out of the package"
        );
    }
}
