//! Auth's handler state ([`AuthState`]: the key resolver and the per-key rate
//! limiter) and the data plane's [`Caller`] extractor, which needs nothing
//! else. The control plane and the registry API resolve keys through
//! [`AuthState::resolve`]. A request without an `Authorization` header may
//! instead carry a console session cookie with its CSRF header
//! ([`AuthState::session`]); it resolves to the same kind of [`Principal`].

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};

use super::refusals::RefusalLog;
use super::sessions::{SessionRefusal, Sessions};
use super::{KeyResolver, Principal, ResolveError};
use tollgate_web::error::ApiError;
use tollgate_web::rate_limit::KeyRateLimiter;
use tollgate_web::server::RequestId;

pub struct AuthState {
    keys: KeyResolver,
    /// Per-key request rates (`[auth] key_requests_per_minute`).
    key_rates: KeyRateLimiter,
    /// The same rates across gateways sharing the database (Postgres).
    cluster_rates: Option<super::cluster_rates::ClusterRates>,
    /// Console sign-in: sessions, OIDC providers (`signin.rs`).
    pub(crate) signin: super::signin::SignIn,
    /// Request-log rows for refused callers; `None` with the ledger off.
    refusals: Option<RefusalLog>,
}

/// Why a request's session cookie was refused, as an HTTP error.
pub enum SessionError {
    Refused(SessionRefusal),
    Internal(anyhow::Error),
}

impl AuthState {
    pub fn new(
        keys: KeyResolver,
        key_rates: KeyRateLimiter,
        signin: super::signin::SignIn,
        refusals: Option<RefusalLog>,
    ) -> Self {
        Self {
            keys,
            key_rates,
            cluster_rates: None,
            signin,
            refusals,
        }
    }

    /// Holds per-key rates across every gateway on `pool`'s database too.
    pub fn with_cluster_rates(mut self, pool: sqlx::AnyPool) -> Self {
        self.cluster_rates = Some(super::cluster_rates::ClusterRates::new(pool));
        self
    }

    /// Counts one request by `principal` on this gateway and, when shared,
    /// across the gateways. `Err` holds how long to wait.
    async fn admit(&self, principal: &Principal) -> Result<(), std::time::Duration> {
        self.key_rates.check(&principal.key_id, principal.requests_per_minute)?;
        if let Some(shared) = &self.cluster_rates
            && let Some(rate) = tollgate_web::rate_limit::effective_per_minute(
                self.key_rates.default_per_minute(),
                principal.requests_per_minute,
            )
        {
            shared.admit(&principal.key_id, rate).await?;
        }
        Ok(())
    }

    /// Counts one more request by `principal` against its key's rate, for a
    /// request that carries several (an MCP batch's entries after the first,
    /// which the [`Caller`] extractor counted). `Err` holds how long to wait.
    pub fn count_request(&self, principal: &Principal) -> Result<(), std::time::Duration> {
        self.key_rates.check(&principal.key_id, principal.requests_per_minute)
    }

    /// The issuers of the OIDC sign-in providers (`[[auth.oidc]]`), in
    /// configuration order: the authorization servers the MCP endpoint's
    /// protected resource metadata names (docs/mcp.md, "Authorization").
    pub fn oidc_issuers(&self) -> Vec<String> {
        self.signin.issuers()
    }

    pub fn sessions(&self) -> &Sessions {
        &self.signin.sessions
    }

    /// The principal of the request's console session, with its CSRF header
    /// checked; `Ok(None)` when the request has no session cookie.
    pub async fn session(&self, headers: &axum::http::HeaderMap) -> Result<Option<Arc<Principal>>, SessionError> {
        match self.sessions().from_request(headers, true).await {
            Ok(None) => Ok(None),
            Ok(Some(Ok(info))) => Ok(Some(info.principal)),
            Ok(Some(Err(refusal))) => Err(SessionError::Refused(refusal)),
            Err(e) => Err(SessionError::Internal(e)),
        }
    }

    /// The principal a key stands for, whatever it may do; `None` for an
    /// unknown, revoked or malformed key.
    pub async fn resolve(&self, secret: &str) -> Result<Option<Arc<Principal>>, ResolveError> {
        self.keys.resolve(secret).await
    }
}

impl ResolveError {
    /// The answer to a request whose key could not be checked: 503
    /// `auth_unavailable` (with `Retry-After`) while the database cannot be
    /// reached, since the key may well be valid and a 401 would tell its
    /// client to give it up; 500 otherwise.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            ResolveError::Unavailable(_) => {
                let mut error = ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "api_error",
                    "auth_unavailable",
                    "The API key could not be checked: the database is unreachable and this gateway has not seen this key yet. Retry shortly; keys it has already seen keep working.",
                );
                error.retry_after = Some(1);
                // The resolver logs these, at most once per ten seconds.
                error.quiet = true;
                error
            }
            ResolveError::Failed(e) => {
                tracing::error!(error = %e, "key lookup failed");
                ApiError::internal("Could not check the API key.")
            }
        }
    }
}

/// An authenticated caller within its key's request rate. Extracting it before
/// the body means unauthenticated or rate-limited requests are refused before
/// their body is read.
pub struct Caller(pub Arc<Principal>);

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Arc<AuthState>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let auth = Arc::<AuthState>::from_ref(state);
        match authenticate(parts, &auth).await {
            Ok(caller) => Ok(caller),
            Err((error, principal)) => {
                if let Some(refusals) = &auth.refusals {
                    refusals.record(&error, principal.as_deref()).await;
                }
                Err(error)
            }
        }
    }
}

/// Why [`authenticate`] refused, and whose key it was when the key is known.
type Refusal = (ApiError, Option<Arc<Principal>>);

/// Resolves the key, checks the role may infer, and counts the request against
/// the key's rate (in memory; no I/O on a cached key).
async fn authenticate(parts: &mut Parts, auth: &AuthState) -> Result<Caller, Refusal> {
    let request_id = RequestId::from_request_parts(parts, &())
        .await
        .unwrap_or_else(|e| match e {});
    let reject = |message: &str| (ApiError::unauthorized(message).with_request_id(&request_id.0), None);
    let refuse = |message: &str| (ApiError::invalid_token(message).with_request_id(&request_id.0), None);
    // Anthropic's clients send the key in `x-api-key`; everyone else as a
    // bearer token; the console's browser sends its session cookie.
    let resolved = match (parts.headers.get(header::AUTHORIZATION), parts.headers.get("x-api-key")) {
        (Some(value), _) => {
            let secret = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
                .map(str::trim)
                .ok_or_else(|| refuse("The Authorization header must be 'Bearer <API key>'."))?;
            auth.keys.resolve(secret).await
        }
        (None, Some(value)) => {
            let secret = value
                .to_str()
                .map(str::trim)
                .map_err(|_| refuse("The x-api-key header must hold the API key."))?;
            auth.keys.resolve(secret).await
        }
        (None, None) => match auth.session(&parts.headers).await {
            Ok(Some(principal)) => Ok(Some(principal)),
            Ok(None) => {
                return Err(reject(
                    "Missing API key: send 'Authorization: Bearer tg_live_…' (or 'x-api-key: tg_live_…').",
                ));
            }
            Err(SessionError::Refused(SessionRefusal::Invalid)) => {
                return Err(refuse("The console session has expired or ended; sign in again."));
            }
            Err(SessionError::Refused(SessionRefusal::Csrf)) => {
                return Err((ApiError::csrf_failed().with_request_id(&request_id.0), None));
            }
            Err(SessionError::Internal(e)) => {
                tracing::error!(error = %e, "session lookup failed");
                return Err((
                    ApiError::internal("Could not check the console session.").with_request_id(&request_id.0),
                    None,
                ));
            }
        },
    };
    match resolved {
        // The same role table as the control plane: viewers may not call the data plane.
        Ok(Some(principal)) if !principal.role.allows(super::permissions::Permission::Inference) => {
            let error = ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                "permission_denied",
                format!(
                    "This key's role '{}' may not call the data plane.",
                    principal.role.as_str()
                ),
            )
            .with_request_id(&request_id.0);
            Err((error, Some(principal)))
        }
        Ok(Some(principal)) => match auth.admit(&principal).await {
            Ok(()) => Ok(Caller(principal)),
            Err(wait) => Err((rate_limited(&principal, auth, wait, &request_id), Some(principal))),
        },
        Ok(None) => Err(refuse("Invalid API key.")),
        // The resolver logs an outage's refusals itself, rate-limited.
        Err(e) => Err((e.to_api_error().with_request_id(&request_id.0), None)),
    }
}

/// 429 for a key over its request rate, with `Retry-After`.
fn rate_limited(
    principal: &Principal,
    auth: &AuthState,
    wait: std::time::Duration,
    request_id: &RequestId,
) -> ApiError {
    let per_minute = tollgate_web::rate_limit::effective_per_minute(
        auth.key_rates.default_per_minute(),
        principal.requests_per_minute,
    )
    .map_or(0, std::num::NonZeroU32::get);
    let secs = tollgate_web::rate_limit::retry_after_secs(wait);
    ApiError::key_rate_limited(
        format!("This API key is limited to {per_minute} requests per minute; retry after {secs} s."),
        u32::try_from(secs).unwrap_or(u32::MAX),
    )
    .with_request_id(&request_id.0)
}
