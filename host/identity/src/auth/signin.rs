//! Console sign-in over HTTP (docs/console.md), `[auth]` configuration, and
//! owner of the `oidc_identities` and `oidc_logins` tables:
//! - `GET /auth/providers`: the sign-in choices;
//! - `POST /auth/session` `{"api_key"}`: sign in with an API key;
//! - `GET /auth/session`: the signed-in caller, the CSRF token, and a new
//!   user's first key (once); `DELETE /auth/session`: sign out;
//! - `GET /auth/oidc/{name}/login` and `…/callback`: the OIDC code flow
//!   (protocol in `oidc.rs`). A first sign-in creates the user, a workspace
//!   and its first key, as `accounts.signup` does.
//!
//! Nothing here grants more than a key would: a session resolves to a
//! [`Principal`](super::Principal) and every call is checked as one.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRef, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use subtle::ConstantTimeEq;

use super::oidc::{Claims, Login, OidcError, OidcProviderConfig, Providers};
use super::permissions::Permission;
use super::sessions::{self, NewSession, PlainHttp, SESSION_COOKIE, Sessions};
use super::{AuthState, KeyResolver};
use crate::accounts::{AccountError, Accounts};
use tollgate_audit::{Actor, ActorKind, AuditLog, Change};
use tollgate_core::db::{Database, now_ms};
use tollgate_core::money::Nanos;
use tollgate_web::error::ApiError;
use tollgate_web::rate_limit::TrustedProxy;
use tollgate_web::server::RequestId;

/// `[auth]`: console sign-in.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// How long a console session lasts after sign-in.
    pub session_ttl_secs: u64,
    /// Identity providers for federated sign-in, `[[auth.oidc]]`.
    pub oidc: Vec<OidcProviderConfig>,
    /// Data-plane requests each API key may make per minute, per gateway
    /// process (bursts of as many); over it, 429 with `Retry-After`. 0: no
    /// limit. A key created with its own `requests_per_minute` gets the lower
    /// of the two. Formerly `[limits] key_requests_per_minute`.
    pub key_requests_per_minute: u32,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            session_ttl_secs: 12 * 3600,
            oidc: Vec::new(),
            key_requests_per_minute: 0,
        }
    }
}

const STATE_COOKIE: &str = "tg_oidc_state";
const STATE_COOKIE_PATH: &str = "/auth/oidc/";
/// A sign-in must come back from the provider within this long.
const LOGIN_TTL_MS: i64 = 10 * 60 * 1000;

/// Sign-in's part of auth's state.
pub struct SignIn {
    pub(crate) sessions: Sessions,
    providers: Providers,
    accounts: Accounts,
    database: Database,
    /// `control_plane.public_url`: the base of the OIDC redirect URI.
    public_url: Option<String>,
    /// `control_plane.signup_credit_usd`: a first sign-in's opening credit.
    signup_credit: Nanos,
    /// When a session cookie may go without `Secure` (docs/console.md).
    plain_http: PlainHttp,
    /// Sign-ins and sign-outs are recorded there.
    audit: AuditLog,
    /// `control_plane.trusted_proxies`: whose `X-Forwarded-For` names the
    /// client an audit row records.
    trusted_proxies: Vec<TrustedProxy>,
}

impl SignIn {
    pub fn new(
        config: &AuthConfig,
        database: Database,
        keys: KeyResolver,
        sealing: tollgate_core::sealed::SealingKey,
        public_url: Option<String>,
        signup_credit: Nanos,
        plain_http: PlainHttp,
        trusted_proxies: Vec<TrustedProxy>,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            sessions: Sessions::new(database.clone(), keys.clone(), sealing, config.session_ttl_secs),
            providers: Providers::new(&config.oidc, http)?,
            accounts: Accounts::new(database.clone(), keys),
            audit: AuditLog::new(database.clone()),
            database,
            public_url,
            signup_credit,
            plain_http,
            trusted_proxies,
        })
    }

    fn client_ip(&self, peer: Option<Extension<ConnectInfo<SocketAddr>>>, headers: &HeaderMap) -> Option<IpAddr> {
        tollgate_web::rate_limit::client_ip(
            peer.map(|Extension(ConnectInfo(address))| address.ip()),
            headers,
            &self.trusted_proxies,
        )
    }

    /// Records a session's start or end (`auth.signin`, `auth.signout`).
    async fn audit(
        &self,
        op: &str,
        actor: Actor,
        workspace_id: &str,
        session_id: &str,
        how: serde_json::Value,
        ip: Option<IpAddr>,
    ) {
        let mut target = json!({ "session_id": session_id });
        if let (Some(target), Some(how)) = (target.as_object_mut(), how.as_object()) {
            target.extend(how.clone());
        }
        let change = Change::new(op, actor).workspace(workspace_id).target(target).ip(ip);
        self.audit.record(change).await;
    }

    /// Whether this request's session cookie may go without `Secure`.
    pub fn plain_http_cookie(&self, headers: &HeaderMap) -> bool {
        match self.plain_http {
            PlainHttp::Never => false,
            PlainHttp::Always => true,
            PlainHttp::LoopbackHost => sessions::loopback_host(headers),
        }
    }

    pub(crate) fn issuers(&self) -> Vec<String> {
        self.providers
            .iter()
            .map(|provider| provider.issuer().to_string())
            .collect()
    }

    fn base_url(&self, headers: &HeaderMap) -> String {
        if let Some(url) = &self.public_url {
            return url.trim_end_matches('/').to_string();
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        format!("http://{host}")
    }

    fn redirect_uri(&self, headers: &HeaderMap, provider: &str) -> String {
        format!("{}/auth/oidc/{provider}/callback", self.base_url(headers))
    }
}

pub fn routes<S>() -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<AuthState>: FromRef<S>,
{
    axum::Router::new()
        .route("/auth/providers", get(providers))
        .route(
            "/auth/session",
            get(session_info).post(sign_in_with_key).delete(sign_out),
        )
        .route("/auth/oidc/{name}/login", get(oidc_login))
        .route("/auth/oidc/{name}/callback", get(oidc_callback))
}

fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn providers(State(auth): State<Arc<AuthState>>) -> Response {
    let list: Vec<_> = auth
        .signin
        .providers
        .iter()
        .map(|p| {
            json!({
                "name": p.config.name,
                "display_name": p.display_name(),
                "login_url": format!("/auth/oidc/{}/login", p.config.name),
            })
        })
        .collect();
    no_store(Json(json!({ "api_key": true, "oidc": list })).into_response())
}

#[derive(Deserialize)]
struct KeySignIn {
    api_key: String,
}

/// The session cookie for `new`, and its CSRF token in the body.
fn session_response(auth: &AuthState, headers: &HeaderMap, new: &NewSession, status: StatusCode) -> Response {
    let cookie = sessions::set_cookie(
        SESSION_COOKIE,
        &new.token,
        "/",
        "Strict",
        auth.sessions().ttl_secs(),
        auth.signin.plain_http_cookie(headers),
    );
    let mut response = (
        status,
        Json(json!({ "session_id": new.id, "csrf_token": new.csrf_token })),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    no_store(response)
}

async fn sign_in_with_key(
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    body: Result<Json<KeySignIn>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let fail = |error: ApiError| error.with_request_id(&request_id.0).into_response();
    let Ok(Json(body)) = body else {
        return fail(ApiError::invalid_request("Send {\"api_key\": \"tg_live_…\"} as JSON."));
    };
    let secret = body.api_key.trim();
    let principal = match auth.resolve(secret).await {
        Ok(Some(principal)) => principal,
        Ok(None) => return fail(ApiError::invalid_token("Invalid API key.")),
        Err(e) => return fail(e.to_api_error()),
    };
    match auth.signin.accounts.requires_sso(&principal.workspace_id).await {
        Ok(false) => {}
        Ok(true) => {
            return fail(ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                "sso_required",
                "This workspace requires signing in through its identity provider; use the sign-in button for it instead of an API key.",
            ));
        }
        Err(e) => {
            tracing::error!(error = %e, "reading the workspace's SSO rule failed");
            return fail(ApiError::internal("Could not check the workspace's sign-in rule."));
        }
    }
    match auth.sessions().create_for_key(&super::hash_key(secret)).await {
        Ok(new) => {
            let ip = auth.signin.client_ip(peer, &headers);
            auth.signin
                .audit(
                    "auth.signin",
                    super::audit_actor(&principal),
                    &principal.workspace_id,
                    &new.id,
                    json!({"method": "key"}),
                    ip,
                )
                .await;
            session_response(&auth, &headers, &new, StatusCode::CREATED)
        }
        Err(e) => {
            tracing::error!(error = %e, "creating a session failed");
            fail(ApiError::internal("Could not create the session."))
        }
    }
}

/// The signed-in caller. Needs only the cookie: it is how the page learns
/// its CSRF token, and it changes nothing (save erasing the first key as it
/// is shown).
async fn session_info(State(auth): State<Arc<AuthState>>, request_id: RequestId, headers: HeaderMap) -> Response {
    let fail = |error: ApiError| error.with_request_id(&request_id.0).into_response();
    let info = match auth.sessions().from_request(&headers, false).await {
        Ok(Some(Ok(info))) => info,
        // Not an error for the page, which asks on every load.
        Ok(None) | Ok(Some(Err(_))) => return no_store(Json(json!({ "signed_in": false })).into_response()),
        Err(e) => {
            tracing::error!(error = %e, "session lookup failed");
            return fail(ApiError::internal("Could not read the session."));
        }
    };
    let first_key = match auth.sessions().take_first_key(&info.id).await {
        Ok(key) => key,
        Err(e) => {
            tracing::error!(error = %e, "reading a first key failed");
            None
        }
    };
    let principal = &info.principal;
    let permissions: Vec<&str> = Permission::ALL
        .into_iter()
        .filter(|p| principal.role.allows(*p))
        .map(Permission::as_str)
        .collect();
    // Each role's permissions, from the one table both planes check, so the
    // page can hide what the caller's role in any workspace may not do.
    let roles: serde_json::Map<String, serde_json::Value> = super::permissions::Role::ALL
        .into_iter()
        .map(|role| {
            let allowed: Vec<&str> = Permission::ALL
                .into_iter()
                .filter(|p| role.allows(*p))
                .map(Permission::as_str)
                .collect();
            (role.as_str().to_string(), json!(allowed))
        })
        .collect();
    no_store(
        Json(json!({
            "signed_in": true,
            "roles": roles,
            "session_id": info.id,
            "kind": info.kind,
            "csrf_token": info.csrf_token,
            "expires_at_ms": info.expires_at_ms,
            "workspace_id": principal.workspace_id,
            "user_id": principal.user_id,
            "role": principal.role.as_str(),
            "scope": principal.scope.as_str(),
            "permissions": permissions,
            "first_key": first_key,
        }))
        .into_response(),
    )
}

async fn sign_out(
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> Response {
    let fail = |error: ApiError| error.with_request_id(&request_id.0).into_response();
    let info = match auth.sessions().from_request(&headers, true).await {
        Ok(Some(Ok(info))) => Some(info),
        Ok(Some(Err(sessions::SessionRefusal::Csrf))) => return fail(ApiError::csrf_failed()),
        Ok(_) => None,
        Err(e) => {
            tracing::error!(error = %e, "session lookup failed");
            return fail(ApiError::internal("Could not read the session."));
        }
    };
    if let Some(info) = info {
        if let Err(e) = auth.sessions().end(&info.id).await {
            tracing::error!(error = %e, "ending a session failed");
            return fail(ApiError::internal("Could not end the session."));
        }
        let ip = auth.signin.client_ip(peer, &headers);
        auth.signin
            .audit(
                "auth.signout",
                super::audit_actor(&info.principal),
                &info.principal.workspace_id,
                &info.id,
                json!({"method": info.kind}),
                ip,
            )
            .await;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let clear = sessions::set_cookie(
        SESSION_COOKIE,
        "",
        "/",
        "Strict",
        0,
        auth.signin.plain_http_cookie(&headers),
    );
    if let Ok(value) = HeaderValue::from_str(&clear) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    no_store(response)
}

async fn oidc_login(
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let fail = |error: ApiError| error.with_request_id(&request_id.0).into_response();
    let signin = &auth.signin;
    let Some(provider) = signin.providers.get(&name) else {
        return fail(ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "not_found",
            format!("No identity provider '{name}' is configured."),
        ));
    };
    let discovery = match provider.discovery().await {
        Ok(discovery) => discovery,
        Err(e) => return fail(provider_error(&e)),
    };
    let login = Login::new();
    if let Err(e) = save_login(&signin.database, &name, &login).await {
        tracing::error!(error = %e, "saving a sign-in failed");
        return fail(ApiError::internal("Could not start the sign-in."));
    }
    let url = provider.authorize_url(&discovery, &signin.redirect_uri(&headers, &name), &login);
    let cookie = sessions::set_cookie(
        STATE_COOKIE,
        &login.state,
        STATE_COOKIE_PATH,
        // Lax: the provider's redirect back is a cross-site top-level GET.
        "Lax",
        LOGIN_TTL_MS / 1000,
        auth.signin.plain_http_cookie(&headers),
    );
    let mut response = (StatusCode::FOUND, [(header::LOCATION, url)]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    no_store(response)
}

#[derive(Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn oidc_callback(
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    Path(name): Path<String>,
    Query(query): Query<Callback>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> Response {
    let ip = auth.signin.client_ip(peer, &headers);
    let outcome = callback(&auth, &name, query, &headers, ip).await;
    // The state cookie has done its job either way.
    let clear = sessions::set_cookie(
        STATE_COOKIE,
        "",
        STATE_COOKIE_PATH,
        "Lax",
        0,
        auth.signin.plain_http_cookie(&headers),
    );
    let mut response = match outcome {
        Ok((new, first_key)) => {
            let landing = if first_key { "/console/#/welcome" } else { "/console/" };
            let mut response = session_response(&auth, &headers, &new, StatusCode::SEE_OTHER);
            if let Ok(value) = HeaderValue::from_str(landing) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            response
        }
        Err(error) => {
            tracing::info!(provider = %name, error = %error.message, "OIDC sign-in refused");
            // A browser is sent back to the console, which says why and offers
            // the sign-in again; other clients get the documented JSON error.
            let browser = headers
                .get(header::ACCEPT)
                .and_then(|accept| accept.to_str().ok())
                .is_some_and(|accept| accept.contains("text/html"));
            if browser {
                let encode = |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
                let location = format!(
                    "/console/#/signin-failed?reason={}&request_id={}",
                    encode(&error.message),
                    encode(&request_id.0)
                );
                no_store((StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response())
            } else {
                no_store(error.with_request_id(&request_id.0).into_response())
            }
        }
    };
    if let Ok(value) = HeaderValue::from_str(&clear) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// The callback's checks, in order: the provider's own error, the state (in
/// the URL, in this browser's cookie, and one not yet used), the code
/// exchange and the ID token, then the user. Any failure creates no session.
async fn callback(
    auth: &AuthState,
    name: &str,
    query: Callback,
    headers: &HeaderMap,
    ip: Option<IpAddr>,
) -> Result<(NewSession, bool), ApiError> {
    let signin = &auth.signin;
    let provider = signin
        .providers
        .get(name)
        .ok_or_else(|| ApiError::sign_in_failed(format!("No identity provider '{name}' is configured.")))?;
    if let Some(error) = query.error {
        let detail = query.error_description.unwrap_or_default();
        return Err(ApiError::sign_in_failed(format!(
            "The identity provider refused the sign-in: {error} {detail}"
        )));
    }
    let (Some(code), Some(state)) = (query.code, query.state) else {
        return Err(ApiError::sign_in_failed("The callback lacks code or state."));
    };
    let cookie = sessions::cookie(headers, STATE_COOKIE).unwrap_or_default();
    if !bool::from(cookie.as_bytes().ct_eq(state.as_bytes())) {
        return Err(ApiError::sign_in_failed(
            "The sign-in state does not match this browser's; start the sign-in again.",
        ));
    }
    let login = take_login(&signin.database, name, &state)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::sign_in_failed("Unknown, used or expired sign-in state; start the sign-in again."))?;
    let discovery = provider.discovery().await.map_err(|e| provider_error(&e))?;
    let claims = provider
        .exchange(&discovery, &code, &signin.redirect_uri(headers, name), &login)
        .await
        .map_err(|e| provider_error(&e))?;
    let (user_id, workspace_id, first_key) = user_for(signin, name, &claims).await?;
    let new = signin
        .sessions
        .create_for_user(&user_id, &workspace_id, first_key.as_deref())
        .await
        .map_err(internal)?;
    let actor = Actor {
        user_id: Some(user_id),
        session_id: Some(new.id.clone()),
        ..Actor::of_kind(ActorKind::Oidc)
    };
    let how = json!({"method": "oidc", "provider": name, "first_sign_in": first_key.is_some()});
    signin
        .audit("auth.signin", actor, &workspace_id, &new.id, how, ip)
        .await;
    Ok((new, first_key.is_some()))
}

fn internal(e: anyhow::Error) -> ApiError {
    tracing::error!(error = %e, "OIDC sign-in failed");
    ApiError::internal("The sign-in failed inside the gateway; it has been logged.")
}

fn provider_error(error: &OidcError) -> ApiError {
    match error {
        OidcError::Token(_) => ApiError::sign_in_failed(error.to_string()),
        OidcError::Provider(_) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "api_error",
            "identity_provider_error",
            error.to_string(),
        ),
    }
}

/// The user the identity stands for, creating it (with a workspace and a
/// first key) on the first sign-in. An e-mail already registered is linked
/// only when the provider says it is verified. Returns the user, the
/// workspace the session acts in, and the new first key, if one was made.
async fn user_for(
    signin: &SignIn,
    provider: &str,
    claims: &Claims,
) -> Result<(String, String, Option<String>), ApiError> {
    let known: Option<String> =
        sqlx::query_scalar("SELECT user_id FROM oidc_identities WHERE provider = $1 AND subject = $2")
            .bind(provider)
            .bind(&claims.sub)
            .fetch_optional(&signin.database.pool)
            .await
            .map_err(|e| internal(e.into()))?;
    let existing = match known {
        Some(user_id) => Some(user_id),
        None => match (&claims.email, claims.email_verified) {
            (Some(email), Some(true)) => {
                let email = crate::accounts::normalize_email(email).ok();
                match email {
                    Some(email) => signin
                        .accounts
                        .user_by_email(&email)
                        .await
                        .map_err(|e| internal(e.into()))?,
                    None => None,
                }
            }
            _ => None,
        },
    };
    if let Some(user_id) = existing {
        link(&signin.database, provider, &claims.sub, &user_id).await?;
        let workspaces = signin
            .accounts
            .workspaces_of(&user_id)
            .await
            .map_err(|e| internal(e.into()))?;
        let workspace = workspaces
            .first()
            .ok_or_else(|| ApiError::sign_in_failed("This user belongs to no workspace."))?;
        return Ok((user_id, workspace.workspace_id.clone(), None));
    }
    let email = claims
        .email
        .as_deref()
        .and_then(|e| crate::accounts::normalize_email(e).ok());
    let display = claims
        .name
        .clone()
        .filter(|n| !n.trim().is_empty())
        .or_else(|| email.clone())
        .unwrap_or_else(|| "user".into());
    let created = crate::accounts::signup(&signin.database, &display, email.as_deref(), signin.signup_credit)
        .await
        .map_err(|e| match e {
            AccountError::EmailTaken(email) => ApiError::sign_in_failed(format!(
                "A user with e-mail '{email}' exists, and the identity provider does not say the address is verified."
            )),
            other => internal(other.into()),
        })?;
    link(&signin.database, provider, &claims.sub, &created.user_id).await?;
    Ok((created.user_id, created.workspace_id, Some(created.api_key)))
}

async fn link(database: &Database, provider: &str, subject: &str, user_id: &str) -> Result<(), ApiError> {
    sqlx::query(
        "INSERT INTO oidc_identities (provider, subject, user_id, created_at_ms) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (provider, subject) DO NOTHING",
    )
    .bind(provider)
    .bind(subject)
    .bind(user_id)
    .bind(now_ms())
    .execute(&database.pool)
    .await
    .map_err(|e| internal(e.into()))?;
    Ok(())
}

async fn save_login(database: &Database, provider: &str, login: &Login) -> anyhow::Result<()> {
    let now = now_ms();
    sqlx::query("DELETE FROM oidc_logins WHERE created_at_ms < $1")
        .bind(now - LOGIN_TTL_MS)
        .execute(&database.pool)
        .await?;
    sqlx::query(
        "INSERT INTO oidc_logins (state, provider, nonce, pkce_verifier, created_at_ms) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&login.state)
    .bind(provider)
    .bind(&login.nonce)
    .bind(&login.pkce_verifier)
    .bind(now)
    .execute(&database.pool)
    .await?;
    Ok(())
}

/// The sign-in `state` started, consumed: a second callback with the same
/// state finds nothing.
async fn take_login(database: &Database, provider: &str, state: &str) -> anyhow::Result<Option<Login>> {
    let row: Option<(String, String, i64)> = sqlx::query_as(
        "SELECT nonce, pkce_verifier, created_at_ms FROM oidc_logins WHERE state = $1 AND provider = $2",
    )
    .bind(state)
    .bind(provider)
    .fetch_optional(&database.pool)
    .await?;
    let Some((nonce, pkce_verifier, created_at_ms)) = row else {
        return Ok(None);
    };
    let deleted = sqlx::query("DELETE FROM oidc_logins WHERE state = $1")
        .bind(state)
        .execute(&database.pool)
        .await?;
    if deleted.rows_affected() != 1 || now_ms() - created_at_ms > LOGIN_TTL_MS {
        return Ok(None);
    }
    Ok(Some(Login {
        state: state.to_string(),
        nonce,
        pkce_verifier,
    }))
}
