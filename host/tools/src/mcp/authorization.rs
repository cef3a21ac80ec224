//! MCP authorization for clients: the OAuth 2.0 Protected Resource Metadata
//! (RFC 9728) of the MCP endpoint, and the `resource_metadata` parameter its
//! 401 answers carry so that a client can find it (MCP 2025-06-18,
//! "Authorization"). The metadata names the gateway's OIDC sign-in issuers
//! (`[[auth.oidc]]`) as authorization servers. Which bearer tokens the
//! endpoint accepts is the caller extractor's business, not this module's:
//! a Tollgate key, as before.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use tollgate_web::server::Origins;

/// Where the metadata lives (RFC 9728 §3); the resource's own path follows it.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The MCP endpoint's path, the protected resource.
const RESOURCE_PATH: &str = "/v1/mcp";

/// The resource a request names: `/v1/mcp`, or `/v1/mcp/{install}`.
fn resource_path(install: Option<&str>) -> String {
    match install {
        Some(install) => format!("{RESOURCE_PATH}/{install}"),
        None => RESOURCE_PATH.to_string(),
    }
}

/// The metadata document of `/v1/mcp` (or `/v1/mcp/{install}`). `resource`
/// is the URL a client connects to, built from the gateway's base URL
/// (`control_plane.public_url`, else the `Host` header, as the Agent Card's).
pub fn metadata(origins: &Origins, headers: &HeaderMap, install: Option<&str>, issuers: Vec<String>) -> Response {
    let base = origins.public_url(Some(headers));
    let document = json!({
        "resource": format!("{base}{}", resource_path(install)),
        "authorization_servers": issuers,
        "bearer_methods_supported": ["header"],
        "resource_name": "Tollgate MCP",
    });
    // Public and the same for every caller; a short cache spares clients
    // asking again on every connection without pinning a config change.
    (
        StatusCode::OK,
        [(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"))],
        axum::Json(document),
    )
        .into_response()
}

/// Adds `resource_metadata="<metadata URL>"` to a 401's `WWW-Authenticate`
/// challenge (the realm and any `error` stay), pointing at the metadata of
/// the resource the request was for. Other answers pass unchanged.
pub fn challenge(mut response: Response, origins: &Origins, headers: &HeaderMap, install: Option<&str>) -> Response {
    if response.status() != StatusCode::UNAUTHORIZED {
        return response;
    }
    let url = format!(
        "{}{METADATA_PATH}{}",
        origins.public_url(Some(headers)),
        resource_path(install)
    );
    // A Host header that would break the quoted string leaves the challenge
    // as it was: the client still gets its 401.
    if url.contains('"') {
        return response;
    }
    let value = match response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
    {
        Some(existing) => format!("{existing}, resource_metadata=\"{url}\""),
        None => format!("Bearer resource_metadata=\"{url}\""),
    };
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}
