//! The web console (docs/console.md): static files under `/console/`,
//! embedded in the binary at build time (`build.rs` reads
//! `host/server/console/`). They are plain ES modules with no build step.
//! In the browser the console calls only public surfaces: the A2A endpoint
//! (`/a2a`), `/v1/models`, `/v1/chat/completions` (the Playground) and
//! sign-in (`/auth/…`), authenticated by the session cookie plus its CSRF
//! header. This module serves files and knows
//! nothing of accounts, keys or permissions.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

mod assets {
    include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));
}

pub const PATH: &str = "/console/";

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/", get(|| async { Redirect::to(PATH) }))
        .route("/console", get(|| async { Redirect::to(PATH) }))
        .route("/console/", get(|| async { file("index.html") }))
        .route(
            "/console/{*path}",
            get(|Path(path): Path<String>| async move { file(&path) }),
        )
}

/// The embedded file at `path`, or the documented 404.
pub fn asset(path: &str) -> Option<&'static [u8]> {
    assets::ASSETS
        .iter()
        .find(|(name, _)| *name == path)
        .map(|(_, bytes)| *bytes)
}

/// Every embedded path (the tests check each is served).
pub fn paths() -> impl Iterator<Item = &'static str> {
    assets::ASSETS.iter().map(|(name, _)| *name)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// The page may load only its own files and talk only to this origin; it is
/// never framed (clickjacking) and sends no referrer.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

fn file(path: &str) -> Response {
    let Some(bytes) = asset(path) else {
        return tollgate_web::error::ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "not_found",
            format!("No console file '{path}'."),
        )
        .into_response();
    };
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(path)));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Revalidate each load: a new gateway version brings new files.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_is_embedded() {
        assert!(asset("index.html").is_some());
        assert!(asset("app.js").is_some());
        assert!(paths().all(|p| !p.starts_with('/') && !p.contains("..")));
        assert_eq!(content_type("app.js"), "text/javascript; charset=utf-8");
    }
}
