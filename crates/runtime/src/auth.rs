//! Logins of plugins' `auth` hooks (`opencode auth login`): each runs in a host of its own
//! (D-028), the credential goes to the OS keyring and nowhere else (D-020).
//!
//! Owns: the login flow and the keyring entries. Must not: let a credential reach a log line,
//! the store, an error message or another plugin's host.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use berth_protocol::CallKind;
use serde::Serialize;
use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::core::Core;
use crate::error::{code, BerthError};
use crate::host::CallOptions;
use crate::secret::{keyring_delete, keyring_read, keyring_write, Secret};

/// The owner.
pub(crate) struct Auth {
    pub(crate) core: Arc<Core>,
    pub(crate) catalog: Arc<Catalog>,
}

impl Auth {
    /// The login methods of every active plugin's `auth` hook, by provider (the last plugin
    /// registering a provider wins, as `opencode auth login` picks it).
    pub fn auth_providers(&self) -> Vec<AuthProvider> {
        let cat = self.catalog.state();
        let mut by: BTreeMap<String, AuthProvider> = BTreeMap::new();
        for owner in &cat.hooks {
            for a in &owner.auth {
                let Some(provider) = a["provider"].as_str() else {
                    continue;
                };
                by.insert(
                    provider.to_string(),
                    AuthProvider {
                        provider: provider.to_string(),
                        plugin: owner.source_id.clone(),
                        methods: a["methods"].as_array().cloned().unwrap_or_default(),
                        stored: false,
                    },
                );
            }
        }
        let mut out: Vec<AuthProvider> = by.into_values().collect();
        for p in &mut out {
            p.stored = credential_stored(self.core.domain(), &p.provider);
        }
        out
    }

    /// Runs one login method of a plugin's `auth` hook and files the credential in the OS
    /// keyring. `inputs` answer the method's prompts; `ask_secret` is called when the person
    /// must type an API key or paste an OAuth code (with the URL and instructions to show).
    /// The result never contains the credential.
    pub async fn auth_login(
        &self,
        provider: &str,
        method: usize,
        inputs: serde_json::Map<String, Value>,
        ask_secret: impl FnOnce(&AuthPrompt) -> Option<Secret>,
    ) -> Result<AuthOutcome, BerthError> {
        self.catalog.activate().await;
        let Some(p) = self
            .auth_providers()
            .into_iter()
            .find(|p| p.provider == provider)
        else {
            return Err(BerthError::new(
                code::UNSUPPORTED,
                "auth",
                format!("no active plugin registers a login for provider `{provider}`"),
                "list providers with `berth auth`; the plugin must be approved and active",
            ));
        };
        let Some(m) = p.methods.get(method) else {
            return Err(BerthError::new(
                code::INVALID_ARGUMENTS,
                "auth",
                format!(
                    "provider `{provider}` has {} login methods; there is no method {method}",
                    p.methods.len()
                ),
                "pick one of the methods `berth auth` lists",
            )
            .for_plugin(p.plugin.clone()));
        };
        let backend = crate::approval::backend_for(&self.core.runtimes());
        // The login runs in a host of its own with only this plugin loaded: the code the
        // person pastes and the tokens it turns into cross no other plugin's process (D-028).
        let fresh = self.core.fresh_scan();
        let source = fresh
            .sources
            .iter()
            .find(|s| s.id == p.plugin)
            .filter(|s| {
                self.core
                    .with_store(|st| {
                        crate::approval::gate(
                            st,
                            s,
                            self.core.domain(),
                            backend,
                            &self.core.project_key(),
                        )
                    })
                    .is_ok()
            })
            .ok_or_else(|| {
                BerthError::new(
                    code::ACTION_REQUIRED,
                    "auth",
                    format!("{} is no longer approved as it is now", p.plugin),
                    "review it and approve it again, then log in",
                )
                .for_plugin(p.plugin.clone())
            })?;
        let host = RetireWhenDone(
            self.core
                .supervisor()
                .await?
                .dedicated(backend, &p.plugin, self.catalog.runs_restricted(&p.plugin))
                .await?,
        );
        self.catalog
            .load_plugin(&host.0, source, backend)
            .await
            .map_err(|e| e.for_plugin(p.plugin.clone()))?;
        host.0
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(p.plugin.clone());
        let host = &host.0;
        let long = CallOptions {
            timeout: Duration::from_secs(300),
            ..CallOptions::default()
        };
        let fail = |e: crate::host::CallError| {
            BerthError::new(
                e.code,
                "auth",
                e.message,
                "try the login again; if it keeps failing, report it to the plugin's author",
            )
            .for_plugin(p.plugin.clone())
        };
        let started = host
            .call(
                &p.plugin,
                CallKind::AuthAuthorize,
                json!({ "provider": provider, "method": method, "inputs": inputs }),
                long.clone(),
            )
            .await
            .map_err(fail)?;
        let label = m["label"].as_str().unwrap_or_default().to_string();
        let result = match started["kind"].as_str() {
            Some("key-needed") => {
                let prompt = AuthPrompt {
                    provider: provider.to_string(),
                    label: label.clone(),
                    url: None,
                    instructions: "enter the API key".into(),
                    wants: "key",
                };
                let key = ask_secret(&prompt).ok_or_else(|| {
                    BerthError::new(
                        code::ACTION_REQUIRED,
                        "auth",
                        "no API key was given",
                        "run the login again and type the key",
                    )
                })?;
                Ok(Secret::new(
                    json!({ "type": "api", "key": key.expose() }).to_string(),
                ))
            }
            Some("result") => auth_result_to_secret(&started["result"]),
            Some("oauth") => {
                let flow = started["flow"].as_str().unwrap_or_default().to_string();
                let code_input = if started["method"] == "code" {
                    let prompt = AuthPrompt {
                        provider: provider.to_string(),
                        label: label.clone(),
                        url: started["url"].as_str().map(str::to_string),
                        instructions: started["instructions"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        wants: "code",
                    };
                    Some(ask_secret(&prompt).ok_or_else(|| {
                        BerthError::new(
                            code::ACTION_REQUIRED,
                            "auth",
                            "no authorization code was given",
                            "open the URL, then run the login again and paste the code",
                        )
                    })?)
                } else {
                    None
                };
                let done = host
                    .call(
                        &p.plugin,
                        CallKind::AuthCallback,
                        json!({ "flow": flow, "code": code_input.as_ref().map(|c| c.expose()) }),
                        long,
                    )
                    .await
                    .map_err(fail)?;
                auth_result_to_secret(&done["result"])
            }
            _ => Err(
                "the plugin's login method answered something Berth does not understand"
                    .to_string(),
            ),
        };
        let (secret, target) = match result {
            Ok(s) => (
                s,
                started["result"]["provider"]
                    .as_str()
                    .unwrap_or(provider)
                    .to_string(),
            ),
            Err(why) => {
                return Err(BerthError::new(
                    code::ACTION_REQUIRED,
                    "auth",
                    format!("the login for `{provider}` did not succeed: {why}"),
                    "try again",
                )
                .for_plugin(p.plugin.clone()))
            }
        };
        store_credential(self.core.domain(), &target, &secret)?;
        tracing::info!(plugin = %p.plugin, provider = %target, "credential stored in the OS keyring");
        Ok(AuthOutcome {
            provider: target,
            plugin: p.plugin,
            method: label,
            stored_in: "os-keyring",
        })
    }

    /// Removes the stored credential of `provider`. Returns whether there was one.
    pub fn auth_logout(&self, provider: &str) -> Result<bool, BerthError> {
        keyring_delete(&account(self.core.domain(), provider))
    }
}

/// A host started for one login, retired however the login ends.
struct RetireWhenDone(std::sync::Arc<crate::host::Host>);

impl Drop for RetireWhenDone {
    fn drop(&mut self) {
        self.0.retire("the login it was started for ended");
    }
}

/// An OpenCode auth result (`{type:"success", key|access…}`) as the stored `Auth` JSON.
fn auth_result_to_secret(r: &Value) -> Result<Secret, String> {
    if r["type"] != "success" {
        return Err("the plugin reported the login as failed".into());
    }
    let auth = if let Some(key) = r["key"].as_str() {
        json!({ "type": "api", "key": key, "metadata": r["metadata"] })
    } else if r["access"].is_string() {
        json!({ "type": "oauth", "access": r["access"], "refresh": r["refresh"], "expires": r["expires"], "accountId": r["accountId"], "enterpriseUrl": r["enterpriseUrl"] })
    } else {
        return Err("the plugin's success carried neither a key nor tokens".into());
    };
    Ok(Secret::new(auth.to_string()))
}

/// What the person is asked during a login.
#[derive(Debug, Clone, Serialize)]
pub struct AuthPrompt {
    pub provider: String,
    pub label: String,
    pub url: Option<String>,
    pub instructions: String,
    /// `key` or `code`.
    pub wants: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuthProvider {
    pub provider: String,
    pub plugin: String,
    /// `{type, label, prompts?}` as the plugin declared them.
    pub methods: Vec<Value>,
    /// A credential for it is in the OS keyring.
    pub stored: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuthOutcome {
    pub provider: String,
    pub plugin: String,
    pub method: String,
    pub stored_in: &'static str,
}

/// The keyring account of `provider`'s credential.
fn account(domain: &str, provider: &str) -> String {
    format!("{domain}/auth/{provider}")
}

pub(crate) fn store_credential(
    domain: &str,
    provider: &str,
    secret: &Secret,
) -> Result<(), BerthError> {
    keyring_write(&account(domain, provider), secret.expose())
}

fn credential_stored(domain: &str, provider: &str) -> bool {
    keyring_read(&account(domain, provider)).is_ok_and(|v| v.is_some())
}

impl Auth {
    /// The stored credential of `provider` (the `Auth` JSON), for the plugin's `auth.loader`
    /// and for tests. Never log it.
    pub fn stored_credential(&self, provider: &str) -> Result<Option<Secret>, BerthError> {
        keyring_read(&account(self.core.domain(), provider))
    }
}
