//! What an adapter's failures mean to a caller: the `ApiError` (status, code)
//! and the [`Failure`] that fallback and provider health decide on. The web
//! kit's `ApiError` knows nothing of adapters; this is where the two meet.

use axum::http::StatusCode;
use tollgate_plugin_host::{AdapterError, AdapterFault, ErrorClass};

use tollgate_web::error::{ApiError, Failure};

/// The sandbox failed the adapter itself (a trap, fuel, memory, bad output).
pub fn fault(fault: &AdapterFault) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "upstream_error",
        "adapter_failed",
        fault.to_string(),
    )
    .failing(Failure::Adapter)
}

/// Maps an adapter's classification of an upstream failure. Problems with the
/// caller's request keep a 4xx; everything else is the gateway's upstream
/// failing, so 502.
pub fn from_upstream(provider: &str, error: &AdapterError) -> ApiError {
    let mut mapped = answer(provider, error);
    mapped.failure = match error.class {
        ErrorClass::InvalidRequest | ErrorClass::ContextLength => Failure::Request,
        ErrorClass::Auth => Failure::Unavailable,
        ErrorClass::RateLimited(retry_after) => {
            mapped.retry_after = retry_after;
            Failure::RateLimited
        }
        ErrorClass::Overloaded => Failure::Overloaded,
        ErrorClass::Upstream(_) => Failure::Upstream,
        ErrorClass::Internal => Failure::Adapter,
    };
    mapped
}

fn answer(provider: &str, error: &AdapterError) -> ApiError {
    let detail = &error.message;
    let upstream = |code, message| ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", code, message);
    match error.class {
        ErrorClass::InvalidRequest => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "upstream_rejected_request",
            format!("provider '{provider}' rejected the request: {detail}"),
        ),
        ErrorClass::ContextLength => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "context_length_exceeded",
            format!("provider '{provider}': {detail}"),
        ),
        ErrorClass::Auth => upstream(
            "upstream_auth_failed",
            format!("provider '{provider}' rejected the gateway's credentials: {detail}"),
        ),
        ErrorClass::RateLimited(_) => ApiError::upstream_rate_limited(provider, detail),
        ErrorClass::Overloaded => upstream(
            "upstream_overloaded",
            format!("provider '{provider}' is overloaded: {detail}"),
        ),
        ErrorClass::Upstream(status) => upstream(
            "upstream_error",
            format!("provider '{provider}' failed with HTTP {status}: {detail}"),
        ),
        ErrorClass::Internal => upstream(
            "invalid_upstream_response",
            format!("provider '{provider}' gave an answer the adapter could not use: {detail}"),
        ),
    }
}
