//! Remote MCP servers installed into a workspace (`mcp_servers.*`): their
//! records ([`store`], with a static credential or an OAuth client secret
//! sealed like an install's; [`oauth`] fetches and holds the tokens),
//! the checks a new one passes (a name no install has, an `http(s)` URL the
//! egress policy lets components reach), and their tools, listed and called
//! through the gateway's own MCP client ([`client`]), each call guarded and
//! logged as a component's ([`calls`]).
//!
//! The remote's session lives in this gateway's memory, keyed by workspace,
//! name and URL: another gateway, or this one after a restart, opens its
//! own. A remote that forgot the session (404) is initialized again once
//! and the request retried, so the caller never sees the expiry.

pub mod calls;
pub mod client;
pub mod oauth;
mod sse;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reqwest::header::{HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tollgate_components::{ComponentHost, Origin};
use tollgate_core::db::Database;
use tollgate_core::sealed::SealingKey;

use crate::installs::InstallError;
use client::{Endpoint, RemoteError, Transport, Upstream};
use oauth::{NewClientCredentials, OAuthClient, Tokens};
pub use store::ServerRecord;
use store::ServerStore;

/// The transport a remote gets when `mcp_servers.create` names none.
pub const STREAMABLE_HTTP: &str = "streamable-http";
/// Most remote servers one workspace may have.
pub const MAX_SERVERS_PER_WORKSPACE: usize = 32;
/// JSON-RPC's code for a method the remote does not serve.
const METHOD_NOT_FOUND: i64 = -32601;
/// Most pages of one list read from one remote.
const MAX_PAGES: usize = 8;

/// How the gateway authenticates to a remote: `"none"`, a static header, or
/// OAuth 2.1 client credentials.
#[derive(Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NewAuth {
    None(NoAuth),
    /// A header (`authorization`, `x-api-key`, …) and its value, sealed at
    /// once and never shown again.
    Header {
        header: String,
        value: String,
    },
    /// `{"client_credentials": {"token_url", "client_id", "client_secret",
    /// "scopes"}}`: the gateway fetches, holds and refreshes the token.
    ClientCredentials {
        client_credentials: NewClientCredentials,
    },
}

#[derive(Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NoAuth {
    None,
}

/// A new remote server.
pub struct NewServer {
    pub name: String,
    pub url: String,
    pub transport: String,
    pub auth: NewAuth,
}

/// A remote server as the API shows it: never the credential's value.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ServerShown {
    pub name: String,
    pub url: String,
    pub transport: String,
    /// The header the credential goes in; `null`: no auth.
    pub auth_header: Option<String>,
    /// With OAuth client credentials: the token URL, client id and scopes
    /// (never the secret or a token).
    pub oauth: Option<OAuthClient>,
    pub created_at_ms: i64,
}

impl From<&ServerRecord> for ServerShown {
    fn from(record: &ServerRecord) -> Self {
        Self {
            name: record.name.clone(),
            url: record.url.clone(),
            transport: record.transport.clone(),
            auth_header: record.auth_header.clone(),
            oauth: record.oauth.clone(),
            created_at_ms: record.created_at_ms,
        }
    }
}

type SessionKey = (String, String, String);

fn key_of(server: &ServerRecord) -> SessionKey {
    (server.workspace_id.clone(), server.name.clone(), server.url.clone())
}

pub struct Remotes {
    store: ServerStore,
    host: ComponentHost,
    sealing: Arc<SealingKey>,
    sessions: Mutex<HashMap<SessionKey, Upstream>>,
    tokens: Tokens,
}

impl Remotes {
    pub(crate) fn new(database: Database, host: ComponentHost, sealing: Arc<SealingKey>) -> Self {
        Self {
            store: ServerStore::new(database),
            host,
            sealing,
            sessions: Mutex::new(HashMap::new()),
            tokens: Tokens::default(),
        }
    }

    /// Checks and stores a new remote (through `Installs::create_remote`,
    /// which keeps its name apart from the installs'). The URL must pass the
    /// egress policy now (an internal address needs the operator's
    /// allowance); a name resolving to one is refused again when a call
    /// connects.
    pub(crate) async fn create(&self, workspace_id: &str, request: NewServer) -> Result<ServerShown, InstallError> {
        crate::installs::check_install_name(&request.name)?;
        if Transport::parse(&request.transport).is_none() {
            return Err(InstallError::Invalid(format!(
                "transport '{}' is not one of {}",
                request.transport,
                Transport::NAMES.join(", ")
            )));
        }
        let url = parse_url(&request.url)?;
        let origin = Origin::of(&url)
            .ok_or_else(|| InstallError::Invalid(format!("'{}' is not an http(s) URL", request.url)))?;
        self.host
            .egress()
            .check_origin(&origin)
            .map_err(InstallError::Invalid)?;
        let existing = self.store.in_workspace(workspace_id).await?;
        if existing.len() >= MAX_SERVERS_PER_WORKSPACE {
            return Err(InstallError::QuotaExceeded(format!(
                "a workspace may have at most {MAX_SERVERS_PER_WORKSPACE} remote MCP servers"
            )));
        }
        let mut record = ServerRecord {
            workspace_id: workspace_id.to_string(),
            name: request.name,
            url: url.to_string(),
            transport: request.transport,
            auth_header: None,
            sealed_auth: String::new(),
            oauth: None,
            created_at_ms: tollgate_core::db::now_ms(),
        };
        match request.auth {
            NewAuth::None(_) => {}
            NewAuth::Header { header, value } => {
                let header = header.to_ascii_lowercase();
                header_pair(&header, &value)?;
                record.sealed_auth = self.sealing.seal(value.as_bytes(), &sealing_context(&record));
                record.auth_header = Some(header);
            }
            NewAuth::ClientCredentials { client_credentials } => {
                let (client, token_url) = client_credentials.check().map_err(InstallError::Invalid)?;
                let origin = Origin::of(&token_url)
                    .ok_or_else(|| InstallError::Invalid("token_url is not an http(s) URL".into()))?;
                self.host
                    .egress()
                    .check_origin(&origin)
                    .map_err(InstallError::Invalid)?;
                let secret = client_credentials.client_secret.as_bytes();
                record.sealed_auth = self.sealing.seal(secret, &sealing_context(&record));
                record.auth_header = Some("authorization".into());
                record.oauth = Some(client);
            }
        }
        match self.store.create(&record).await? {
            true => Ok(ServerShown::from(&record)),
            false => Err(taken(&record.name)),
        }
    }

    pub async fn list(&self, workspace_id: &str) -> Result<Vec<ServerRecord>, InstallError> {
        Ok(self.store.in_workspace(workspace_id).await?)
    }

    /// The workspace's remote named `name`, if any.
    pub async fn get(&self, workspace_id: &str, name: &str) -> Result<Option<ServerRecord>, InstallError> {
        let servers = self.store.in_workspace(workspace_id).await?;
        Ok(servers.into_iter().find(|server| server.name == name))
    }

    pub async fn delete(&self, workspace_id: &str, name: &str) -> Result<bool, InstallError> {
        let deleted = self.store.delete(workspace_id, name).await?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|(workspace, server, _), _| !(workspace == workspace_id && server == name));
        self.tokens.forget_server(workspace_id, name);
        Ok(deleted)
    }

    /// What the remote lists under `field` in the answers to `method`
    /// (`tools/list` → `tools`, …), every page up to [`MAX_PAGES`]; only
    /// objects with a string `name` are kept. A remote that does not serve
    /// the method (-32601) lists nothing.
    pub async fn listed(&self, server: &ServerRecord, method: &str, field: &str) -> Result<Vec<Value>, RemoteError> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => serde_json::json!({"cursor": cursor}),
                None => serde_json::json!({}),
            };
            let mut page = match self.request(server, method, params).await {
                Err(RemoteError::Rpc {
                    code: METHOD_NOT_FOUND, ..
                }) => break,
                outcome => outcome?,
            };
            if let Some(Value::Array(listed)) = page.get_mut(field).map(Value::take) {
                items.extend(
                    listed
                        .into_iter()
                        .filter(|item| item.get("name").is_some_and(Value::is_string)),
                );
            }
            cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        Ok(items)
    }

    /// One request to `server` in its session, opening one first when there
    /// is none, and once more when the remote says it ended. A remote on
    /// OAuth that refuses its token (401) gets a fresh one, once.
    pub async fn request(&self, server: &ServerRecord, method: &str, params: Value) -> Result<Value, RemoteError> {
        match self.attempt(server, method, params.clone()).await {
            Err(RemoteError::Unauthorized) if server.oauth.is_some() => {
                tracing::info!(server = %server.name, "remote MCP server refused its access token; fetching another");
                self.tokens.forget(&key_of(server));
                self.attempt(server, method, params).await
            }
            outcome => outcome,
        }
    }

    async fn attempt(&self, server: &ServerRecord, method: &str, params: Value) -> Result<Value, RemoteError> {
        let url = parse_url(&server.url).map_err(|e| RemoteError::Refused(e.to_string()))?;
        let limits = self.host.limits();
        let transport = Transport::parse(&server.transport)
            .ok_or_else(|| RemoteError::Refused(format!("transport '{}' is not served", server.transport)))?;
        let endpoint = Endpoint {
            url: &url,
            transport,
            auth: self.auth_of(server).await?,
            egress: self.host.egress(),
            timeout_ms: limits.http_timeout_ms,
            max_bytes: limits.http_max_body_bytes,
        };
        let key = key_of(server);
        let known = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let (upstream, fresh) = match known {
            Some(upstream) => (upstream, false),
            None => (self.open(&endpoint, &key).await?, true),
        };
        match endpoint.request(&upstream, method, params.clone()).await {
            Err(RemoteError::SessionGone) if !fresh => {
                tracing::info!(server = %server.name, "remote MCP session ended; initializing again");
                let upstream = self.open(&endpoint, &key).await?;
                endpoint.request(&upstream, method, params).await
            }
            outcome => outcome,
        }
    }

    async fn open(&self, endpoint: &Endpoint<'_>, key: &SessionKey) -> Result<Upstream, RemoteError> {
        let upstream = endpoint.initialize().await?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.insert(key.clone(), upstream.clone());
        Ok(upstream)
    }

    /// The header and value a call sends: the static one opened from the
    /// store, or a bearer token got with the sealed client secret.
    async fn auth_of(&self, server: &ServerRecord) -> Result<Option<(HeaderName, HeaderValue)>, RemoteError> {
        let Some(header) = &server.auth_header else {
            return Ok(None);
        };
        let broken = |e: String| {
            RemoteError::Refused(format!(
                "the stored credential of '{}' cannot be used: {e}",
                server.name
            ))
        };
        let opened = self
            .sealing
            .open(&server.sealed_auth, &sealing_context(server))
            .map_err(|e| broken(e.to_string()))?;
        let value = String::from_utf8(opened).map_err(|e| broken(e.to_string()))?;
        if let Some(client) = &server.oauth {
            let fetch = oauth::Fetch {
                client,
                secret: &value,
                egress: self.host.egress(),
                timeout_ms: self.host.limits().http_timeout_ms,
            };
            let bearer = self.tokens.bearer(&key_of(server), fetch).await?;
            return Ok(Some((reqwest::header::AUTHORIZATION, bearer)));
        }
        header_pair(header, &value).map(Some).map_err(|e| broken(e.to_string()))
    }
}

fn parse_url(text: &str) -> Result<url::Url, InstallError> {
    let url = url::Url::parse(text).map_err(|e| InstallError::Invalid(format!("url '{text}': {e}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(InstallError::Invalid(
            "a remote's URL may not hold user info; use auth".into(),
        ));
    }
    Ok(url)
}

/// A header the gateway may send a credential in, and its value.
fn header_pair(header: &str, value: &str) -> Result<(HeaderName, HeaderValue), InstallError> {
    const HOST_OWNED: [&str; 7] = [
        "host",
        "content-length",
        "content-type",
        "accept",
        "transfer-encoding",
        "mcp-session-id",
        "mcp-protocol-version",
    ];
    let name = HeaderName::from_bytes(header.as_bytes())
        .ok()
        .filter(|name| !HOST_OWNED.contains(&name.as_str()))
        .ok_or_else(|| {
            InstallError::Invalid(format!(
                "auth.header '{header}' is not a header the gateway lets a credential use"
            ))
        })?;
    if value.is_empty() || value.len() > 4096 {
        return Err(InstallError::Invalid("auth.value must be 1-4096 bytes".into()));
    }
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| InstallError::Invalid("auth.value is not a valid header value".into()))?;
    value.set_sensitive(true);
    Ok((name, value))
}

fn taken(name: &str) -> InstallError {
    InstallError::Conflict(format!(
        "the workspace already has an install or remote MCP server named '{name}'"
    ))
}

/// What a sealed credential is bound to: its workspace and remote's name.
fn sealing_context(record: &ServerRecord) -> Vec<u8> {
    format!("mcp-server\0{}\0{}", record.workspace_id, record.name).into_bytes()
}
