//! Browser sessions of the console (docs/console.md); owner of the
//! `console_sessions` table. A session is a random cookie token (only its
//! SHA-256 is stored) plus a CSRF token the page echoes in `X-CSRF-Token` on
//! every call the cookie authenticates. It stands for one of:
//! - an API key pasted at sign-in: the session resolves through that key, so
//!   it acts exactly as the key and ends when the key is revoked;
//! - a user signed in through an OIDC provider: it acts as that user, with the
//!   user's current role in the session's workspace (re-read on every call),
//!   like a user-scoped key.
//!
//! Either way the caller is a [`Principal`], so every permission check is the
//! one API keys get. Sessions expire (`[auth] session_ttl_secs`) and end at
//! logout.

use std::sync::Arc;

use axum::http::{HeaderMap, header};
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{KeyHash, KeyResolver, KeyScope, Principal};
use crate::accounts::Accounts;
use tollgate_core::db::{Database, new_id, now_ms};
use tollgate_core::sealed::SealingKey;

pub const SESSION_COOKIE: &str = "tg_session";
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Why a request's session did not authenticate it.
#[derive(Debug, PartialEq, Eq)]
pub enum SessionRefusal {
    /// Unknown, expired or ended session, or its key or membership is gone.
    Invalid,
    /// The cookie is good but the CSRF header is missing or wrong.
    Csrf,
}

/// What a new session was given: the cookie value and the CSRF token, both
/// to hand to the browser once.
pub struct NewSession {
    pub id: String,
    pub token: String,
    pub csrf_token: String,
}

/// A live session, as `GET /auth/session` shows it.
pub struct SessionInfo {
    pub id: String,
    pub csrf_token: String,
    pub principal: Arc<Principal>,
    pub expires_at_ms: i64,
    /// `key` or `oidc`.
    pub kind: &'static str,
}

pub struct Sessions {
    database: Database,
    keys: KeyResolver,
    accounts: Accounts,
    sealing: SealingKey,
    ttl_ms: i64,
}

type Row = (String, String, Option<Vec<u8>>, Option<String>, Option<String>, i64);

impl Sessions {
    pub fn new(database: Database, keys: KeyResolver, sealing: SealingKey, ttl_secs: u64) -> Self {
        let accounts = Accounts::new(database.clone(), keys.clone());
        Self {
            database,
            keys,
            accounts,
            sealing,
            ttl_ms: i64::try_from(ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX),
        }
    }

    /// A session acting as the API key with this hash.
    pub async fn create_for_key(&self, key_hash: &KeyHash) -> anyhow::Result<NewSession> {
        self.insert(Some(key_hash), None, None, None).await
    }

    /// A session acting as `user_id` in `workspace_id`; `first_key`, a new
    /// user's first API key, is kept sealed until [`Self::take_first_key`].
    pub async fn create_for_user(
        &self,
        user_id: &str,
        workspace_id: &str,
        first_key: Option<&str>,
    ) -> anyhow::Result<NewSession> {
        self.insert(None, Some(user_id), Some(workspace_id), first_key).await
    }

    async fn insert(
        &self,
        key_hash: Option<&KeyHash>,
        user_id: Option<&str>,
        workspace_id: Option<&str>,
        first_key: Option<&str>,
    ) -> anyhow::Result<NewSession> {
        let id = new_id("sess");
        let token = random_token();
        let csrf_token = random_token();
        let now = now_ms();
        let sealed = first_key.map(|key| self.sealing.seal(key.as_bytes(), id.as_bytes()));
        sqlx::query(
            "INSERT INTO console_sessions (id, token_hash, csrf_token, key_hash, user_id, workspace_id, first_key, \
             created_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&id)
        .bind(token_hash(&token))
        .bind(&csrf_token)
        .bind(key_hash.map(|h| h.to_vec()))
        .bind(user_id)
        .bind(workspace_id)
        .bind(sealed)
        .bind(now)
        .bind(now.saturating_add(self.ttl_ms))
        .execute(&self.database.pool)
        .await?;
        Ok(NewSession { id, token, csrf_token })
    }

    /// The session a request's cookie names, checked: `csrf` is the
    /// `X-CSRF-Token` header (`None`: do not check, for `GET /auth/session`,
    /// which hands the token out and changes nothing). `Ok(None)`: no cookie.
    pub async fn from_request(
        &self,
        headers: &HeaderMap,
        check_csrf: bool,
    ) -> anyhow::Result<Option<Result<SessionInfo, SessionRefusal>>> {
        let Some(token) = cookie(headers, SESSION_COOKIE) else {
            return Ok(None);
        };
        let Some(info) = self.resolve(&token).await? else {
            return Ok(Some(Err(SessionRefusal::Invalid)));
        };
        if check_csrf {
            let presented = headers.get(CSRF_HEADER).map(|v| v.as_bytes()).unwrap_or_default();
            if !bool::from(presented.ct_eq(info.csrf_token.as_bytes())) {
                return Ok(Some(Err(SessionRefusal::Csrf)));
            }
        }
        Ok(Some(Ok(info)))
    }

    async fn resolve(&self, token: &str) -> anyhow::Result<Option<SessionInfo>> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, csrf_token, key_hash, user_id, workspace_id, expires_at_ms FROM console_sessions \
             WHERE token_hash = $1 AND ended_at_ms IS NULL",
        )
        .bind(token_hash(token))
        .fetch_optional(&self.database.pool)
        .await?;
        let Some((id, csrf_token, key_hash, user_id, workspace_id, expires_at_ms)) = row else {
            return Ok(None);
        };
        if expires_at_ms <= now_ms() {
            return Ok(None);
        }
        let principal = match (key_hash, user_id, workspace_id) {
            (Some(hash), _, _) => {
                let Ok(hash) = KeyHash::try_from(hash.as_slice()) else {
                    return Ok(None);
                };
                match self.keys.resolve_hash(&hash).await? {
                    Some(principal) => Arc::new(Principal {
                        console_session: Some(id.clone()),
                        ..(*principal).clone()
                    }),
                    None => return Ok(None),
                }
            }
            (None, Some(user_id), Some(workspace_id)) => {
                // The role now, not at sign-in: a demoted or removed member
                // loses the rights at once.
                let Some(role) = self.accounts.role_in(&workspace_id, &user_id).await? else {
                    return Ok(None);
                };
                let role_tools = self.accounts.role_tools(&workspace_id, role).await?;
                Arc::new(Principal {
                    key_id: id.clone(),
                    workspace_id,
                    user_id: Some(user_id),
                    role,
                    scope: KeyScope::User,
                    requests_per_minute: None,
                    console_session: Some(id.clone()),
                    tools: super::ToolPolicy {
                        key: None,
                        role: role_tools,
                    },
                })
            }
            _ => return Ok(None),
        };
        Ok(Some(SessionInfo {
            kind: if principal.key_id == id { "oidc" } else { "key" },
            id,
            csrf_token,
            principal,
            expires_at_ms,
        }))
    }

    /// The first key of a user created at this session's sign-in, exactly
    /// once: it is erased as it is read.
    pub async fn take_first_key(&self, session_id: &str) -> anyhow::Result<Option<String>> {
        let sealed: Option<Option<String>> = sqlx::query_scalar("SELECT first_key FROM console_sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(&self.database.pool)
            .await?;
        let Some(sealed) = sealed.flatten() else {
            return Ok(None);
        };
        let cleared = sqlx::query("UPDATE console_sessions SET first_key = NULL WHERE id = $1 AND first_key = $2")
            .bind(session_id)
            .bind(&sealed)
            .execute(&self.database.pool)
            .await?;
        if cleared.rows_affected() != 1 {
            // Another request took it first.
            return Ok(None);
        }
        let key = self.sealing.open(&sealed, session_id.as_bytes())?;
        Ok(Some(String::from_utf8(key)?))
    }

    /// Ends the session (logout). Ending an ended one is not an error.
    pub async fn end(&self, session_id: &str) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE console_sessions SET ended_at_ms = $1, first_key = NULL WHERE id = $2 AND ended_at_ms IS NULL",
        )
        .bind(now_ms())
        .bind(session_id)
        .execute(&self.database.pool)
        .await?;
        Ok(())
    }

    /// How many sessions exist in all (the sign-in tests check that a refused
    /// sign-in made none).
    pub async fn count(&self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM console_sessions")
            .fetch_one(&self.database.pool)
            .await?)
    }

    pub fn ttl_secs(&self) -> i64 {
        self.ttl_ms / 1000
    }
}

/// 32 random bytes, base64url without padding.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// A cookie's value from the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// Whether the request came to a loopback host (`localhost`, 127.0.0.0/8,
/// `[::1]`): there cookies may go without `Secure`, since browsers treat
/// loopback as a secure context even over plain HTTP.
pub fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// When the session cookie may go without `Secure`: only where the browser
/// reaches the gateway over plain HTTP on loopback, which browsers treat as a
/// secure context. `public_url` decides when it is set; without it, only a
/// gateway listening on loopback alone trusts a loopback `Host` header (no
/// remote client can reach it to send one), and every other gateway sets
/// `Secure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainHttp {
    Never,
    Always,
    LoopbackHost,
}

impl PlainHttp {
    pub fn new(public_url: Option<&str>, listen: &str) -> Self {
        let loopback_name = |host: &str| {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
        };
        match public_url {
            Some(url) => match url::Url::parse(url) {
                Ok(url) if url.scheme() == "http" && url.host_str().is_some_and(loopback_name) => PlainHttp::Always,
                _ => PlainHttp::Never,
            },
            None => {
                let host = listen.rsplit_once(':').map_or(listen, |(host, _)| host);
                match loopback_name(host) {
                    true => PlainHttp::LoopbackHost,
                    false => PlainHttp::Never,
                }
            }
        }
    }
}

/// A `Set-Cookie` value: HttpOnly, SameSite as given, Secure unless
/// `loopback`; `max_age` 0 deletes it.
pub fn set_cookie(name: &str, value: &str, path: &str, same_site: &str, max_age: i64, loopback: bool) -> String {
    let secure = if loopback { "" } else { "; Secure" };
    format!("{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite={same_site}{secure}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cookies_and_tells_loopback_hosts() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; tg_session=abc ; b=2".parse().unwrap());
        assert_eq!(cookie(&headers, SESSION_COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&headers, "missing"), None);
        for (host, expected) in [
            ("127.0.0.1:8080", true),
            ("localhost:8080", true),
            ("[::1]:8080", true),
            ("127.0.0.2", true),
            ("gw.example.com", false),
            ("10.0.0.1:8080", false),
        ] {
            headers.insert(header::HOST, host.parse().unwrap());
            assert_eq!(loopback_host(&headers), expected, "{host}");
        }
        assert!(set_cookie("n", "v", "/", "Strict", 10, false).contains("; Secure"));
        assert!(!set_cookie("n", "v", "/", "Strict", 10, true).contains("Secure"));
    }

    #[test]
    fn the_session_cookie_is_secure_unless_the_gateway_is_plain_http_on_loopback() {
        // public_url decides when set, whatever the listen address.
        assert_eq!(
            PlainHttp::new(Some("https://gw.example.com"), "127.0.0.1:8080"),
            PlainHttp::Never
        );
        assert_eq!(
            PlainHttp::new(Some("http://gw.example.com"), "127.0.0.1:8080"),
            PlainHttp::Never
        );
        assert_eq!(
            PlainHttp::new(Some("https://localhost:8443"), "0.0.0.0:8443"),
            PlainHttp::Never
        );
        assert_eq!(
            PlainHttp::new(Some("http://127.0.0.1:8080"), "0.0.0.0:8080"),
            PlainHttp::Always
        );
        assert_eq!(
            PlainHttp::new(Some("http://[::1]:8080/"), "[::]:8080"),
            PlainHttp::Always
        );
        // Without it, a gateway others can reach always sets Secure, whatever Host says.
        assert_eq!(PlainHttp::new(None, "0.0.0.0:8080"), PlainHttp::Never);
        assert_eq!(PlainHttp::new(None, "[::]:8080"), PlainHttp::Never);
        assert_eq!(PlainHttp::new(None, "10.0.0.5:8080"), PlainHttp::Never);
        assert_eq!(PlainHttp::new(None, "127.0.0.1:8080"), PlainHttp::LoopbackHost);
        assert_eq!(PlainHttp::new(None, "[::1]:8080"), PlainHttp::LoopbackHost);
        assert_eq!(PlainHttp::new(None, "localhost:8080"), PlainHttp::LoopbackHost);
    }
}
