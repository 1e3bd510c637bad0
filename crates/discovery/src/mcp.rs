//! MCP servers of OpenCode's `mcp` config, described before anything connects: what a local
//! server runs (its command line, the *names* of the variables it is given), where a remote
//! one sends data (the URL's host, the *names* of its headers), whether OpenCode would use it
//! at all, and OpenCode's names for its tools (`opencode_tool_key`).
//!
//! Must not: start, connect to or resolve anything; put a variable's or a header's value
//! anywhere (they may be secrets — only names are read out of the config).

use serde_json::Value;

use crate::source::{Capabilities, Diagnostic, SourceState};

/// The key OpenCode 1.18.4 registers an MCP tool under (`packages/opencode/src/mcp/index.ts`):
/// `sanitize(server) + "_" + sanitize(tool)`, where sanitize replaces every character outside
/// `[a-zA-Z0-9_-]` with `_`. Two servers can collide (`foo`+`bar_baz`, `foo_bar`+`baz`).
pub fn opencode_tool_key(server: &str, tool: &str) -> String {
    format!("{}_{}", sanitize(server), sanitize(tool))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// How Berth would reach one server, as read from its config entry. Values of variables and
/// headers are here (the client needs them) and must go nowhere else.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTarget {
    Local {
        /// `command[0]` and the rest.
        program: String,
        args: Vec<String>,
        /// The entry's `environment`, in the config's order.
        environment: Vec<(String, String)>,
    },
    Remote {
        url: String,
        headers: Vec<(String, String)>,
        /// Whether Berth signs in when the server asks (OpenCode's `oauth`).
        oauth: McpOAuth,
    },
}

/// The `oauth` of a remote entry. OpenCode signs in by default when a server answers 401;
/// `"oauth": false` turns that off, an object names a client registered with the provider.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum McpOAuth {
    /// `"oauth": false`: a 401 is an error to fix in `headers`.
    Off,
    /// No `oauth`, or `{}`: the client registers itself (RFC 7591) when it signs in.
    #[default]
    Auto,
    /// `{"clientId", "clientSecret"?, "scope"?}`: a client registered with the provider.
    Client {
        client_id: String,
        client_secret: Option<String>,
        scope: Option<String>,
    },
}

impl McpOAuth {
    fn of(v: Option<&Value>) -> McpOAuth {
        match v {
            Some(Value::Bool(false)) => McpOAuth::Off,
            Some(Value::Object(o)) => match o.get("clientId").and_then(Value::as_str) {
                Some(id) => McpOAuth::Client {
                    client_id: id.to_string(),
                    client_secret: o
                        .get("clientSecret")
                        .and_then(Value::as_str)
                        .map(String::from),
                    scope: o.get("scope").and_then(Value::as_str).map(String::from),
                },
                None => McpOAuth::Auto,
            },
            _ => McpOAuth::Auto,
        }
    }
}

impl std::fmt::Debug for McpTarget {
    // Values stay out of every debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpTarget::Local {
                program,
                args,
                environment,
            } => f
                .debug_struct("Local")
                .field("program", program)
                .field("args", args)
                .field(
                    "environment",
                    &environment.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .finish(),
            McpTarget::Remote {
                url,
                headers,
                oauth,
            } => f
                .debug_struct("Remote")
                .field("url", url)
                .field(
                    "headers",
                    &headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .field(
                    "oauth",
                    &match oauth {
                        McpOAuth::Off => "off".to_string(),
                        McpOAuth::Auto => "auto".to_string(),
                        McpOAuth::Client { client_id, .. } => format!("client {client_id}"),
                    },
                )
                .finish(),
        }
    }
}

/// What the scan makes of one entry.
pub struct McpFacts {
    /// How to reach it, when the entry says so completely.
    pub target: Option<McpTarget>,
    pub capabilities: Capabilities,
    pub diagnostics: Vec<Diagnostic>,
    /// The state discovery can already tell: `Discovered` (asks for approval), `Disabled`
    /// (`enabled: false`), `Unsupported` (cannot be connected: a broken entry, Berth itself).
    pub state: SourceState,
    /// The entry is `berth mcp`: Berth itself, never connected.
    pub is_berth: bool,
}

/// Launchers that fetch a package and run its newest version at every start: `(launcher,
/// the words before the package)`.
const FETCHERS: &[(&str, &[&str])] = &[
    ("npx", &[]),
    ("bunx", &[]),
    ("uvx", &[]),
    ("pipx", &["run"]),
    ("pnpm", &["dlx"]),
    ("yarn", &["dlx"]),
];

/// The package a fetch-and-run command line runs (`npx -y pkg`, `pipx run pkg`), if it is one.
pub fn fetched_package(program: &str, args: &[String]) -> Option<(String, String)> {
    fetched_command(program, args).map(|f| (f.launcher, f.package))
}

/// A fetch-and-run command line taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `npx`, `bunx`, `uvx`, `pipx`, `pnpm`, `yarn`.
    pub launcher: String,
    /// The package spec as written (`pkg`, `pkg@1.2.3`, `@scope/pkg@^2`).
    pub package: String,
    /// The command it runs when `--package` named the package apart (`npx -p pkg cmd`).
    pub command: Option<String>,
    /// The arguments after the package (or the command).
    pub rest: Vec<String>,
}

impl Fetched {
    /// Whether the package comes from the npm registry (Berth can prepare those).
    pub fn is_npm(&self) -> bool {
        matches!(self.launcher.as_str(), "npx" | "bunx" | "pnpm" | "yarn")
    }
}

/// The parts of a fetch-and-run command line, if it is one.
pub fn fetched_command(program: &str, args: &[String]) -> Option<Fetched> {
    let name = program.rsplit('/').next().unwrap_or(program);
    let (launcher, words) = FETCHERS.iter().find(|(l, _)| *l == name)?;
    let mut rest = args.iter().map(String::as_str);
    for w in *words {
        if rest.next() != Some(*w) {
            return None;
        }
    }
    let done = |package: &str, command: Option<String>, rest: &mut dyn Iterator<Item = &str>| {
        Some(Fetched {
            launcher: launcher.to_string(),
            package: package.to_string(),
            command,
            rest: rest.map(str::to_string).collect(),
        })
    };
    // Flags before the package (`-y`, `--yes`, `--quiet`); `--package x` names it, and the
    // next word is then the command it runs.
    while let Some(a) = rest.next() {
        let named = if a == "--package" || a == "-p" {
            rest.next().map(str::to_string)
        } else {
            a.strip_prefix("--package=").map(str::to_string)
        };
        if let Some(p) = named {
            let command = rest.find(|w| !w.starts_with('-')).map(str::to_string);
            return done(&p, command, &mut rest);
        }
        if a.starts_with('-') {
            continue;
        }
        return done(a, None, &mut rest);
    }
    None
}

/// Whether a local command is Berth's own `berth mcp` (OpenCode's config pointing at Berth).
fn is_berth_itself(program: &str, args: &[String]) -> bool {
    (program == "berth" || program.ends_with("/berth"))
        && args.first().map(String::as_str) == Some("mcp")
}

/// A shell-like rendering of a command line, for the person to read.
fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .map(|w| {
            if w.is_empty()
                || w.chars()
                    .any(|c| c.is_whitespace() || "'\"$`\\".contains(c))
            {
                format!("'{}'", w.replace('\'', "'\\''"))
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The host a URL sends to (`https://user@api.example.com:8443/mcp` → `api.example.com:8443`).
pub fn url_host(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    (!host.is_empty()).then(|| host.to_string())
}

fn string_pairs(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let value = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), value)
        })
        .collect()
}

/// Describes one `mcp` entry (`name` → `config`) as OpenCode 1.18.4 reads it.
pub fn describe(name: &str, config: &Value) -> McpFacts {
    let mut caps = Capabilities::default();
    let mut diagnostics = Vec::new();
    let mut state = SourceState::Discovered;
    let mut target = None;
    let mut is_berth = false;
    let broken = |what: String, recovery: &str| {
        Diagnostic::new("action-required", what, recovery.to_string())
    };
    match config.get("type").and_then(Value::as_str) {
        Some("local") => {
            let words: Option<Vec<String>> = config
                .get("command")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(|w| w.as_str().map(str::to_string)).collect());
            match words.filter(|w| !w.is_empty() && !w[0].is_empty()) {
                None => {
                    diagnostics.push(broken(
                        format!("MCP server `{name}` is `local` but has no `command` (a list of strings: the program and its arguments)"),
                        "add `\"command\": [\"program\", \"arg\", …]` to the entry, or remove it",
                    ));
                    state = SourceState::Unsupported;
                }
                Some(words) => {
                    let (program, args) = (words[0].clone(), words[1..].to_vec());
                    let environment = string_pairs(config.get("environment"));
                    caps.process.insert(format!(
                        "runs `{}` as MCP server `{name}`",
                        command_line(&program, &args)
                    ));
                    for (k, _) in &environment {
                        caps.environment
                            .insert(format!("{k} (set for it by the config)"));
                    }
                    if let Some((launcher, package)) = fetched_package(&program, &args) {
                        caps.packages.insert(package.clone());
                        diagnostics.push(Diagnostic::new(
                            "action-required",
                            format!(
                                "MCP server `{name}` is started with `{launcher}`: at every start it downloads and runs whatever is newest of `{package}` from the package registry, with its install scripts on — what you approve today is not what runs tomorrow"
                            ),
                            if fetched_command(&program, &args).is_some_and(|f| f.is_npm()) {
                                format!("let Berth prepare it instead (`berth prepare <id>`: the newest version installed once in Berth's data dir, install scripts off, version and integrity pinned), or pin the version in the command (e.g. `{package}@1.2.3`); approve it as it is only if you trust every future release of `{package}`")
                            } else {
                                format!("install a fixed version of `{package}` and point `command` at it (or pin the version in the command, e.g. `{package}@1.2.3`); approve it only if you trust every future release of `{package}`")
                            },
                        ));
                    }
                    if is_berth_itself(&program, &args) {
                        is_berth = true;
                        state = SourceState::Unsupported;
                        diagnostics.push(Diagnostic::new(
                            "unsupported",
                            format!("MCP server `{name}` is Berth itself (`berth mcp`): this is how OpenCode reaches Berth's catalog; Berth never connects to itself"),
                            "nothing to do: keep it in OpenCode's config to give OpenCode Berth's tools",
                        ));
                    } else {
                        target = Some(McpTarget::Local {
                            program,
                            args,
                            environment,
                        });
                    }
                }
            }
        }
        Some("remote") => match config.get("url").and_then(Value::as_str) {
            Some(url) if url_host(url).is_some() => {
                let host = url_host(url).unwrap_or_default();
                let headers = string_pairs(config.get("headers"));
                caps.network.insert(format!(
                    "sends your requests and tool arguments to {host} (MCP server `{name}`)"
                ));
                for (k, _) in &headers {
                    caps.network
                        .insert(format!("sends the header {k} to {host}"));
                }
                let oauth = McpOAuth::of(config.get("oauth"));
                if oauth != McpOAuth::Off {
                    caps.network.insert(format!(
                        "may ask you to sign in to {host} (OAuth); the token is kept in your OS keyring"
                    ));
                }
                target = Some(McpTarget::Remote {
                    url: url.to_string(),
                    headers,
                    oauth,
                });
            }
            Some(url) => {
                diagnostics.push(broken(
                    format!("MCP server `{name}` has a `url` that is not an http(s) URL: `{url}`"),
                    "write `\"url\": \"https://host/path\"`",
                ));
                state = SourceState::Unsupported;
            }
            None => {
                diagnostics.push(broken(
                    format!("MCP server `{name}` is `remote` but has no `url`"),
                    "add `\"url\": \"https://host/path\"` to the entry, or remove it",
                ));
                state = SourceState::Unsupported;
            }
        },
        other => {
            let what = match other {
                Some(t) => format!("an unknown `type` `{t}`"),
                None => "no `type`".to_string(),
            };
            diagnostics.push(broken(
                format!("MCP server `{name}` has {what}; OpenCode knows `local` and `remote`"),
                "set `\"type\": \"local\"` with a `command`, or `\"type\": \"remote\"` with a `url`",
            ));
            state = SourceState::Unsupported;
        }
    }
    // OpenCode does not connect a server that is switched off, and nothing is asked for it.
    if config.get("enabled") == Some(&Value::Bool(false)) && state == SourceState::Discovered {
        state = SourceState::Disabled;
        diagnostics.push(Diagnostic::new(
            "action-required",
            format!("MCP server `{name}` is switched off in the config (`enabled: false`): not connected, nothing is asked"),
            "set `\"enabled\": true` (or remove the key) to use it",
        ));
    }
    // OpenCode V2's `mcp.servers.<name>` switch (D-044).
    if config.get("disabled") == Some(&Value::Bool(true)) && state == SourceState::Discovered {
        state = SourceState::Disabled;
        diagnostics.push(Diagnostic::new(
            "action-required",
            format!("MCP server `{name}` is switched off in the config (`disabled: true`): not connected, nothing is asked"),
            "set `\"disabled\": false` (or remove the key) to use it",
        ));
    }
    caps.describe();
    McpFacts {
        target,
        capabilities: caps,
        diagnostics,
        state,
        is_berth,
    }
}

/// How to reach the MCP server `source` describes, read again from the graph it came from (the
/// values are never kept on the source itself).
pub fn target_of(graph: &crate::ConfigGraph, source: &crate::Source) -> Option<McpTarget> {
    graph
        .mcp
        .iter()
        .find(|m| m.name == source.entry && m.origin == source.origin && m.scope == source.scope)
        .and_then(|m| describe(&m.name, &m.config).target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn opencode_keys_keep_hyphens_and_replace_everything_else() {
        assert_eq!(
            opencode_tool_key("time-keep", "current_time"),
            "time-keep_current_time"
        );
        assert_eq!(
            opencode_tool_key("my.server", "dotted.name"),
            "my_server_dotted_name"
        );
        assert_eq!(
            opencode_tool_key("foo", "bar_baz"),
            opencode_tool_key("foo_bar", "baz")
        );
    }

    #[test]
    fn launchers_that_fetch_name_their_package() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            fetched_package("npx", &a(&["-y", "@scope/pkg"])),
            Some(("npx".into(), "@scope/pkg".into()))
        );
        assert_eq!(
            fetched_package("/usr/bin/pipx", &a(&["run", "tool"])),
            Some(("pipx".into(), "tool".into()))
        );
        assert_eq!(fetched_package("pnpm", &a(&["install"])), None);
        assert_eq!(fetched_package("node", &a(&["server.js"])), None);
    }

    #[test]
    fn values_never_reach_the_summary_or_a_debug_print() {
        let f = describe(
            "s",
            &json!({"type": "local", "command": ["node", "s.js"], "environment": {"TOKEN": "canary-value"}}),
        );
        let shown = serde_json::to_string(&f.capabilities).unwrap();
        assert!(shown.contains("TOKEN") && !shown.contains("canary-value"));
        assert!(!format!("{:?}", f.target).contains("canary-value"));
        let f = describe(
            "r",
            &json!({"type": "remote", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer canary-value"}}),
        );
        let shown = serde_json::to_string(&f.capabilities).unwrap();
        assert!(shown.contains("api.example.com") && shown.contains("Authorization"));
        assert!(!shown.contains("canary-value"));
    }

    #[test]
    fn berth_itself_is_never_a_target() {
        let f = describe(
            "berth",
            &json!({"type": "local", "command": ["/opt/bin/berth", "mcp"]}),
        );
        assert!(f.is_berth && f.target.is_none());
        assert_eq!(f.state, SourceState::Unsupported);
    }
}
