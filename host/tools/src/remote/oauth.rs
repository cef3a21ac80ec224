//! OAuth 2.1 client credentials for a remote MCP server: the gateway is the
//! OAuth client. It asks the token endpoint for an access token (HTTP Basic
//! client authentication, `grant_type=client_credentials`, the scopes
//! joined by spaces), keeps it in memory until shortly before it expires,
//! and sends it as `Authorization: Bearer …`. A remote that answers 401 gets
//! one fresh token and one retry (`Remotes::request`).
//!
//! The token endpoint is reached as the remote is: on the components'
//! egress client for its URL (internal addresses only where the operator
//! allowed them, no redirects, no proxy), within the remote's timeout, its
//! answer capped. The client secret is sealed in the store; it and the
//! tokens are never shown, logged or put in an error: a refusal names the
//! endpoint's HTTP status and its OAuth `error` code only.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tollgate_components::{Egress, Origin};

use super::client::RemoteError;

/// The most a token endpoint's answer may hold.
const MAX_ANSWER_BYTES: usize = 64 << 10;
/// A token is fetched again this long before it expires.
const EARLY: Duration = Duration::from_secs(30);
/// How long a token whose answer gave no `expires_in` is kept (a 401
/// before then still replaces it).
const UNTIMED: Duration = Duration::from_secs(300);

/// The public half of a remote's client credentials, as stored and shown;
/// the client secret is sealed apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OAuthClient {
    pub token_url: String,
    pub client_id: String,
    /// Asked for in `scope`; empty: none asked.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `auth: {"client_credentials": {…}}` of `mcp_servers.create`.
#[derive(Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewClientCredentials {
    /// The authorization server's token endpoint.
    pub token_url: String,
    pub client_id: String,
    /// Sealed at once and never shown again.
    pub client_secret: String,
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl NewClientCredentials {
    /// Checks the fields' form; the token URL's egress is the caller's check.
    pub(super) fn check(&self) -> Result<(OAuthClient, url::Url), String> {
        let url = url::Url::parse(&self.token_url).map_err(|e| format!("token_url '{}': {e}", self.token_url))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err("token_url may not hold user info".into());
        }
        let printable = |text: &str, most: usize| {
            !text.is_empty() && text.len() <= most && text.bytes().all(|b| (0x21..0x7f).contains(&b))
        };
        if !printable(&self.client_id, 256) {
            return Err("client_id must be 1-256 printable ASCII characters".into());
        }
        if self.client_secret.is_empty() || self.client_secret.len() > 4096 {
            return Err("client_secret must be 1-4096 bytes".into());
        }
        // RFC 6749's scope-token: visible ASCII but `"` and `\`.
        let scope_ok = |scope: &String| printable(scope, 128) && !scope.contains(['"', '\\']);
        if self.scopes.len() > 32 || !self.scopes.iter().all(scope_ok) {
            return Err("scopes must be at most 32 scope tokens (visible ASCII but \" and \\)".into());
        }
        let client = OAuthClient {
            token_url: url.to_string(),
            client_id: self.client_id.clone(),
            scopes: self.scopes.clone(),
        };
        Ok((client, url))
    }
}

struct Token {
    bearer: HeaderValue,
    fresh_until: Instant,
}

/// The access tokens held, by remote (workspace, name, URL).
#[derive(Default)]
pub(super) struct Tokens {
    held: Mutex<HashMap<super::SessionKey, Token>>,
}

/// What fetching a token needs besides the remote's identity.
pub(super) struct Fetch<'a> {
    pub client: &'a OAuthClient,
    pub secret: &'a str,
    pub egress: &'a Egress,
    pub timeout_ms: u64,
}

impl Tokens {
    /// `Authorization: Bearer …` for the remote: the held token while it is
    /// fresh, else a new one from the token endpoint.
    pub(super) async fn bearer(&self, key: &super::SessionKey, fetch: Fetch<'_>) -> Result<HeaderValue, RemoteError> {
        let held = (self.lock().get(key))
            .filter(|token| Instant::now() < token.fresh_until)
            .map(|token| token.bearer.clone());
        if let Some(bearer) = held {
            return Ok(bearer);
        }
        let timeout = Duration::from_millis(fetch.timeout_ms);
        let token = match tokio::time::timeout(timeout, fetch.token()).await {
            Ok(token) => token?,
            Err(_) => {
                return Err(RemoteError::Refused(format!(
                    "the token endpoint did not answer within {} ms",
                    fetch.timeout_ms
                )));
            }
        };
        let bearer = token.bearer.clone();
        self.lock().insert(key.clone(), token);
        Ok(bearer)
    }

    /// Drops the remote's token (it was refused, or the remote deleted).
    pub(super) fn forget(&self, key: &super::SessionKey) {
        self.lock().remove(key);
    }

    /// Drops every token of `name` in `workspace_id`.
    pub(super) fn forget_server(&self, workspace_id: &str, name: &str) {
        self.lock()
            .retain(|(workspace, server, _), _| !(workspace == workspace_id && server == name));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<super::SessionKey, Token>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Fetch<'_> {
    async fn token(&self) -> Result<Token, RemoteError> {
        let refused = |why: String| RemoteError::Refused(format!("OAuth token for the remote MCP server: {why}"));
        let url = url::Url::parse(&self.client.token_url).map_err(|e| refused(e.to_string()))?;
        let origin = Origin::of(&url).ok_or_else(|| refused("token_url is not an http(s) URL".into()))?;
        let http = self.egress.client_for(&origin, &url).ok_or_else(|| {
            refused(format!(
                "{origin} is an internal address the operator has not allowed ([components] allow_internal_origins)"
            ))
        })?;
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            if !self.client.scopes.is_empty() {
                form.append_pair("scope", &self.client.scopes.join(" "));
            }
            form.finish()
        };
        let response = http
            .post(url)
            .basic_auth(basic_part(&self.client.client_id), Some(basic_part(self.secret)))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(form)
            .send()
            .await
            .map_err(|e| refused(format!("the token endpoint could not be reached: {}", e.without_url())))?;
        let status = response.status();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| refused(e.without_url().to_string()))?;
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(refused(format!(
                    "the token endpoint's answer is over {MAX_ANSWER_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(refused(format!(
                "the token endpoint answered HTTP {status}{}",
                error_code(&answer).map(|code| format!(" ({code})")).unwrap_or_default()
            )));
        }
        parse_token(&answer).map_err(refused)
    }
}

/// RFC 6749 §2.3.1: the client id and secret are form-encoded before they
/// go into HTTP Basic.
fn basic_part(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The OAuth `error` code of a refusal, if it is a short plain token (it
/// is shown; a description is not, as it may echo what was sent).
fn error_code(answer: &Value) -> Option<&str> {
    answer
        .get("error")
        .and_then(Value::as_str)
        .filter(|code| code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

fn parse_token(answer: &Value) -> Result<Token, String> {
    let token = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty() && token.len() <= 8192)
        .ok_or("the token endpoint's answer has no access_token")?;
    if let Some(kind) = answer.get("token_type").and_then(Value::as_str)
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(format!("token_type '{kind}' is not served (only Bearer)"));
    }
    let mut bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| "the access token is not a valid header value")?;
    bearer.set_sensitive(true);
    let lifetime = match answer.get("expires_in").and_then(Value::as_u64) {
        Some(seconds) => Duration::from_secs(seconds).saturating_sub(EARLY),
        None => UNTIMED,
    };
    Ok(Token {
        bearer,
        fresh_until: Instant::now() + lifetime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_token_answer_is_read_and_its_lifetime_kept_short() {
        let token = parse_token(&json!({"access_token": "abc", "token_type": "bearer", "expires_in": 3600})).unwrap();
        assert_eq!(token.bearer.to_str().unwrap(), "Bearer abc");
        assert!(token.bearer.is_sensitive());
        let left = token.fresh_until - Instant::now();
        assert!(
            left <= Duration::from_secs(3570) && left > Duration::from_secs(3500),
            "{left:?}"
        );
        let short = parse_token(&json!({"access_token": "abc", "expires_in": 10})).unwrap();
        assert!(
            short.fresh_until <= Instant::now(),
            "a token about to expire is not kept"
        );
        assert!(parse_token(&json!({"token_type": "bearer"})).is_err());
        assert!(parse_token(&json!({"access_token": "abc", "token_type": "mac"})).is_err());
        assert!(parse_token(&json!({"access_token": "a\nb"})).is_err());
    }

    #[test]
    fn only_a_plain_error_code_is_shown() {
        assert_eq!(error_code(&json!({"error": "invalid_client"})), Some("invalid_client"));
        assert_eq!(error_code(&json!({"error": "secret=hunter2 rejected"})), None);
        assert_eq!(basic_part("a b:c"), "a+b%3Ac");
    }

    #[test]
    fn new_credentials_are_checked_for_form() {
        let good = NewClientCredentials {
            token_url: "https://auth.example.com/token".into(),
            client_id: "gateway".into(),
            client_secret: "s3cret".into(),
            scopes: vec!["mcp:tools".into()],
        };
        let (client, _) = good.check().unwrap();
        assert_eq!(client.scopes, ["mcp:tools"]);
        let bad_scope = NewClientCredentials {
            scopes: vec!["a b".into()],
            ..good.clone()
        };
        assert!(bad_scope.check().is_err());
        let user_info = NewClientCredentials {
            token_url: "https://u:p@auth.example.com/token".into(),
            ..good.clone()
        };
        assert!(user_info.check().is_err());
        let empty = NewClientCredentials {
            client_secret: String::new(),
            ..good
        };
        assert!(empty.check().is_err());
    }
}
