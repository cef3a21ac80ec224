//! The Stripe API routes: create, retrieve and list Checkout Sessions, and
//! retrieve and list Events. Every request is recorded (so tests can see the
//! `Idempotency-Key` a gateway sent) before its key is checked.

use std::collections::HashMap;

use axum::body::{Bytes, to_bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use sha2_hmac::{Digest, Sha256};

use super::errors::{self, ParamError};
use super::objects::list;
use super::store::{Saved, Session};
use super::{checkout, form};
use crate::Shared;

/// Checkout bodies are small; this only stops a runaway client.
const MAX_BODY: usize = 1 << 20;

/// `POST /v1/checkout/sessions`.
pub(crate) async fn create_session(State(app): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, MAX_BODY).await else {
        return ParamError::new("The request body is too large.", "").into_response();
    };
    let key = text_header(&parts.headers, "idempotency-key");
    let host = text_header(&parts.headers, "host").unwrap_or_else(|| "localhost".to_owned());
    let fingerprint = Sha256::new()
        .chain_update(parts.method.as_str())
        .chain_update(b" ")
        .chain_update(parts.uri.path())
        .chain_update(b"\n")
        .chain_update(&body)
        .finalize()
        .to_vec();
    if let Some(refused) = checked(&app, parts, body.clone()) {
        return refused;
    }
    // Held from the lookup to the insert, so concurrent requests under one
    // key create one session: the second finds the first's answer.
    let mut store = app.stripe.lock();
    if let Some(key) = &key
        && let Some(saved) = store.idempotent.get(key)
    {
        if saved.fingerprint != fingerprint {
            return errors::idempotency_mismatch(key);
        }
        let mut replay = errors::json_response(saved.status, saved.body.clone());
        replay
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
        return with_key(replay, key);
    }
    // Parameter errors are not saved: Stripe keeps only results of requests
    // that got as far as executing, so a corrected retry may reuse the key.
    let form = match form::decode(&body) {
        Ok(form) => form,
        Err(message) => {
            return ParamError {
                message,
                param: None,
                code: None,
            }
            .into_response();
        }
    };
    let now = store.now();
    let (session, draft) = match checkout::create(&form, &host, now) {
        Ok(created) => created,
        Err(error) => return error.into_response(),
    };
    let answer = Bytes::from(session.to_string());
    store.sessions.push(Session {
        object: session,
        draft,
        async_pending: false,
    });
    let Some(key) = key else {
        return errors::json_response(StatusCode::OK, answer);
    };
    store.idempotent.insert(
        key.clone(),
        Saved {
            fingerprint,
            status: StatusCode::OK,
            body: answer.clone(),
        },
    );
    drop(store);
    with_key(errors::json_response(StatusCode::OK, answer), &key)
}

/// `GET /v1/checkout/sessions/{id}`.
pub(crate) async fn retrieve_session(State(app): State<Shared>, Path(id): Path<String>, request: Request) -> Response {
    if let Some(refused) = checked(&app, request.into_parts().0, Bytes::new()) {
        return refused;
    }
    let store = app.stripe.lock();
    match store.session_index(&id) {
        Some(i) => errors::object_response(&store.sessions[i].object),
        None => errors::missing("checkout.session", &id),
    }
}

/// `GET /v1/checkout/sessions[?payment_intent=…]`, newest first.
pub(crate) async fn list_sessions(
    State(app): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    if let Some(refused) = checked(&app, request.into_parts().0, Bytes::new()) {
        return refused;
    }
    let store = app.stripe.lock();
    let wanted = query.get("payment_intent");
    let data = store
        .sessions
        .iter()
        .rev()
        .filter(|s| wanted.is_none_or(|pi| s.object["payment_intent"] == pi.as_str()))
        .map(|s| s.object.clone())
        .collect();
    errors::object_response(&list(data, "/v1/checkout/sessions"))
}

/// `GET /v1/events/{id}`.
pub(crate) async fn retrieve_event(State(app): State<Shared>, Path(id): Path<String>, request: Request) -> Response {
    if let Some(refused) = checked(&app, request.into_parts().0, Bytes::new()) {
        return refused;
    }
    let store = app.stripe.lock();
    match store.event(&id) {
        Some(event) => errors::object_response(event),
        None => errors::missing("event", &id),
    }
}

/// `GET /v1/events[?type=…]`, newest first.
pub(crate) async fn list_events(
    State(app): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    if let Some(refused) = checked(&app, request.into_parts().0, Bytes::new()) {
        return refused;
    }
    let store = app.stripe.lock();
    let wanted = query.get("type");
    let data: Vec<Value> = store
        .events
        .iter()
        .rev()
        .filter(|e| wanted.is_none_or(|kind| e["type"] == kind.as_str()))
        .cloned()
        .collect();
    errors::object_response(&list(data, "/v1/events"))
}

/// Records the request, then checks its key: `Some(401)` when it has none
/// or one that is not a secret key.
fn checked(app: &Shared, parts: Parts, body: Bytes) -> Option<Response> {
    let presented = text_header(&parts.headers, "authorization");
    app.recorder.record(parts, body);
    let value = presented.as_deref().map(str::trim).unwrap_or_default();
    if value.is_empty() {
        return Some(errors::unauthorized(None));
    }
    match value.strip_prefix("Bearer ").map(str::trim) {
        Some(key) if key.starts_with("sk_") => None,
        Some(key) => Some(errors::unauthorized(Some(key))),
        None => Some(errors::unauthorized(Some(value))),
    }
}

fn text_header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// Stripe echoes the key on the answers to idempotent requests.
fn with_key(mut response: Response, key: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(key) {
        response
            .headers_mut()
            .insert(header::HeaderName::from_static("idempotency-key"), value);
    }
    response
}
