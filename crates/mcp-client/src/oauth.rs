//! Signing in to a remote MCP server, as the MCP authorization spec has it (RFC 9728 resource
//! metadata, RFC 8414 server metadata, RFC 7591 registration or a pre-registered client, PKCE
//! S256, refresh tokens), and the bearer token on its requests afterwards.
//!
//! Owns: one sign-in's PKCE verifier and `state` (in memory, for that sign-in only) and the
//! adapter from the caller's [`TokenVault`] to the SDK's credential store. Must not: keep a
//! token anywhere but the vault, put one in an error or a log line, or open a listener (the
//! caller receives the redirect and hands it over). Invariant: a vault belongs to one server
//! URL, so a token is only ever sent where it was issued.

use std::sync::Arc;

use berth_base::error::{code, BerthError};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, CredentialStore, OAuthClientConfig,
    OAuthState, StoredCredentials,
};

/// Where a server's tokens live (Berth: the OS keyring, one entry per server URL). The value
/// is opaque JSON; an implementation must not log it.
pub trait TokenVault: Send + Sync {
    fn load(&self) -> Result<Option<String>, String>;
    fn save(&self, value: &str) -> Result<(), String>;
    fn clear(&self) -> Result<(), String>;
}

/// How a remote server is signed in to.
#[derive(Clone)]
pub struct OAuth {
    pub vault: Arc<dyn TokenVault>,
    /// A client registered with the provider (`oauth.clientId`, `oauth.clientSecret`); without
    /// one the client registers itself when the person signs in.
    pub client: Option<(String, Option<String>)>,
    /// `oauth.scope`, split at spaces; empty: what the server's metadata asks for.
    pub scopes: Vec<String>,
}

/// The SDK's credential store over a vault.
struct VaultStore(Arc<dyn TokenVault>);

#[async_trait::async_trait]
impl CredentialStore for VaultStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(raw) = self.0.load().map_err(AuthError::CredentialStoreError)? else {
            return Ok(None);
        };
        // An entry this version cannot read is as good as none: the person signs in again.
        Ok(serde_json::from_str(&raw).ok())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let raw = serde_json::to_string(&credentials)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        self.0.save(&raw).map_err(AuthError::CredentialStoreError)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.0.clear().map_err(AuthError::CredentialStoreError)
    }
}

fn err(server: &str, code: &'static str, message: String, recovery: &str) -> BerthError {
    BerthError::new(code, &format!("mcp:{server}"), message, recovery)
}

/// What the SDK's auth error says, without anything that could carry a token (its messages
/// name endpoints and OAuth error codes, never credentials).
fn auth_failed(server: &str, what: &str, e: AuthError) -> BerthError {
    let (code, recovery) = match e {
        AuthError::CredentialStoreError(_) => (
            code::TEMPORARILY_UNAVAILABLE,
            "unlock the OS keyring (on Linux without a desktop session: run Berth under `keyctl session -`) and try again",
        ),
        AuthError::NoAuthorizationSupport
        | AuthError::MetadataError(_)
        | AuthError::RegistrationFailed(_) => (
            code::ACTION_REQUIRED,
            "the server's provider may need a registered client: set `oauth.clientId` (and `clientSecret`) in its entry, or give a token in `headers`",
        ),
        _ => (code::ACTION_REQUIRED, "sign in again"),
    };
    err(
        server,
        code,
        format!("MCP server `{server}`: {what}: {e}"),
        recovery,
    )
}

/// A manager for `url` whose tokens go to `oauth.vault`.
async fn vaulted(
    server: &str,
    url: &str,
    oauth: &OAuth,
) -> Result<AuthorizationManager, BerthError> {
    let mut m = AuthorizationManager::new(url)
        .await
        .map_err(|e| auth_failed(server, "its sign-in cannot be set up", e))?;
    m.set_credential_store(VaultStore(oauth.vault.clone()));
    Ok(m)
}

/// A manager for `url` whose tokens are in `oauth.vault`, set up from what is stored.
pub(crate) async fn manager(
    server: &str,
    url: &str,
    oauth: &OAuth,
) -> Result<AuthorizationManager, BerthError> {
    let mut m = vaulted(server, url, oauth).await?;
    let stored = m
        .initialize_from_store()
        .await
        .map_err(|e| auth_failed(server, "the stored sign-in cannot be used", e))?;
    if let (true, Some((id, Some(secret)))) = (stored, &oauth.client) {
        // A confidential client refreshes with its secret.
        m.configure_client(OAuthClientConfig::new(id.clone(), url).with_client_secret(secret))
            .map_err(|e| auth_failed(server, "its registered client cannot be used", e))?;
    }
    Ok(m)
}

/// One sign-in in progress: the person is sent to [`SignIn::url`], and the provider's redirect
/// back is handed to [`SignIn::finish`], which stores the tokens in the vault.
pub struct SignIn {
    server: String,
    state: OAuthState,
    url: String,
}

impl SignIn {
    /// Discovers the server's authorization server, registers a client (or uses the
    /// configured one) and prepares the authorization URL that sends the person back to
    /// `redirect_uri` (a loopback address the caller listens on).
    pub async fn start(
        server: &str,
        url: &str,
        oauth: &OAuth,
        redirect_uri: &str,
    ) -> Result<SignIn, BerthError> {
        let m = vaulted(server, url, oauth).await?;
        let mut request = AuthorizationRequest::new(redirect_uri).with_client_name("Berth");
        if let Some((id, secret)) = &oauth.client {
            request = request.with_preregistered_client(id);
            if let Some(s) = secret {
                request = request.with_client_secret(s);
            }
        }
        if !oauth.scopes.is_empty() {
            request = request.with_scopes(oauth.scopes.clone());
        }
        let mut state = OAuthState::Unauthorized(m);
        state
            .start_authorization(request)
            .await
            .map_err(|e| auth_failed(server, "its sign-in could not start", e))?;
        let url = state
            .get_authorization_url()
            .await
            .map_err(|e| auth_failed(server, "its sign-in could not start", e))?;
        Ok(SignIn {
            server: server.to_string(),
            state,
            url,
        })
    }

    /// Where the person signs in (the provider's authorization page).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Exchanges the code of the redirect `callback_url` for tokens (after checking its
    /// `state` against this sign-in's) and stores them in the vault.
    pub async fn finish(mut self, callback_url: &str) -> Result<(), BerthError> {
        let server = self.server.clone();
        self.state
            .handle_callback_url(callback_url)
            .await
            .map_err(|e| auth_failed(&server, "the sign-in was not completed", e))
    }
}
