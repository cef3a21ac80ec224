//! The `/__stripe/` test controls: JSON in and out. Each step changes the
//! store under the lock (`lifecycle`), then, with the lock released, delivers
//! the events it emitted unless the body says `"deliver": false`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::errors;
use super::lifecycle::{self, Outcome, Refused};
use super::objects::random_id;
use super::store::{Endpoint, Store};
use super::webhooks;
use crate::Shared;

fn yes() -> bool {
    true
}

/// A body that is empty or `{}` takes every default.
fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, String> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON body: {e}"))
}

fn bad_body(message: String) -> Response {
    errors::control(StatusCode::BAD_REQUEST, message)
}

#[derive(Deserialize)]
struct Deliver {
    #[serde(default = "yes")]
    deliver: bool,
}

/// Runs a step and delivers its events.
async fn run(app: &Shared, deliver: bool, step: impl FnOnce(&mut Store) -> Result<Outcome, Refused>) -> Response {
    let (outcome, endpoints) = {
        let mut store = app.stripe.lock();
        match step(&mut store) {
            Ok(outcome) => (outcome, store.endpoints.clone()),
            Err((status, message)) => return errors::control(status, message),
        }
    };
    let deliveries = if deliver {
        webhooks::deliver(&app.stripe.http, &endpoints, &outcome.events).await
    } else {
        Vec::new()
    };
    let mut answer = json!({"events": outcome.events, "deliveries": deliveries});
    answer[outcome.name] = outcome.object;
    Json(answer).into_response()
}

#[derive(Deserialize)]
struct NewEndpoint {
    url: String,
    secret: Option<String>,
    #[serde(default)]
    secrets: Vec<String>,
}

/// `POST /__stripe/webhook_endpoints`.
pub(crate) async fn add_endpoint(State(app): State<Shared>, bytes: Bytes) -> Response {
    let new: NewEndpoint = match body(&bytes) {
        Ok(new) => new,
        Err(message) => return bad_body(message),
    };
    let mut secrets: Vec<String> = new.secret.into_iter().collect();
    for extra in new.secrets {
        if !secrets.contains(&extra) {
            secrets.push(extra);
        }
    }
    if secrets.is_empty() {
        return errors::control(
            StatusCode::BAD_REQUEST,
            "give a \"secret\" (whsec_…) to sign deliveries with",
        );
    }
    let endpoint = Endpoint { url: new.url, secrets };
    let answer = endpoint_json(&endpoint, &random_id("we_", 24));
    app.stripe.lock().endpoints.push(endpoint);
    Json(answer).into_response()
}

fn endpoint_json(endpoint: &Endpoint, id: &str) -> Value {
    json!({"id": id, "object": "webhook_endpoint", "url": endpoint.url, "secrets": endpoint.secrets})
}

/// `GET /__stripe/webhook_endpoints`.
pub(crate) async fn list_endpoints(State(app): State<Shared>) -> Json<Value> {
    let store = app.stripe.lock();
    let endpoints = store.endpoints.iter();
    Json(endpoints.map(|e| json!({"url": e.url, "secrets": e.secrets})).collect())
}

/// `DELETE /__stripe/webhook_endpoints`.
pub(crate) async fn clear_endpoints(State(app): State<Shared>) -> StatusCode {
    app.stripe.lock().endpoints.clear();
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
struct Complete {
    #[serde(default = "paid")]
    outcome: String,
    #[serde(default = "yes")]
    deliver: bool,
}

fn paid() -> String {
    "paid".to_owned()
}

/// `POST /__stripe/checkout/sessions/{id}/complete`.
pub(crate) async fn complete(State(app): State<Shared>, Path(id): Path<String>, bytes: Bytes) -> Response {
    match body::<Complete>(&bytes) {
        Ok(c) => run(&app, c.deliver, |store| lifecycle::complete(store, &id, &c.outcome)).await,
        Err(message) => bad_body(message),
    }
}

#[derive(Deserialize)]
struct Settle {
    succeeded: bool,
    #[serde(default = "yes")]
    deliver: bool,
}

/// `POST /__stripe/checkout/sessions/{id}/async`.
pub(crate) async fn settle(State(app): State<Shared>, Path(id): Path<String>, bytes: Bytes) -> Response {
    match body::<Settle>(&bytes) {
        Ok(s) => run(&app, s.deliver, |store| lifecycle::settle(store, &id, s.succeeded)).await,
        Err(message) => bad_body(message),
    }
}

#[derive(Deserialize)]
struct Refund {
    amount: Option<i64>,
    #[serde(default = "yes")]
    deliver: bool,
}

/// `POST /__stripe/charges/{payment_intent}/refund`.
pub(crate) async fn refund(State(app): State<Shared>, Path(pi): Path<String>, bytes: Bytes) -> Response {
    match body::<Refund>(&bytes) {
        Ok(r) => run(&app, r.deliver, |store| lifecycle::refund(store, &pi, r.amount)).await,
        Err(message) => bad_body(message),
    }
}

/// `POST /__stripe/charges/{payment_intent}/dispute`.
pub(crate) async fn dispute(State(app): State<Shared>, Path(pi): Path<String>, bytes: Bytes) -> Response {
    match body::<Deliver>(&bytes) {
        Ok(d) => run(&app, d.deliver, |store| lifecycle::dispute(store, &pi)).await,
        Err(message) => bad_body(message),
    }
}

/// `POST /__stripe/subscriptions/{id}/renew`.
pub(crate) async fn renew(State(app): State<Shared>, Path(id): Path<String>, bytes: Bytes) -> Response {
    match body::<Deliver>(&bytes) {
        Ok(d) => run(&app, d.deliver, |store| lifecycle::renew(store, &id)).await,
        Err(message) => bad_body(message),
    }
}

#[derive(Deserialize)]
struct Cancel {
    #[serde(default)]
    at_period_end: bool,
    #[serde(default = "yes")]
    deliver: bool,
}

/// `POST /__stripe/subscriptions/{id}/cancel`.
pub(crate) async fn cancel(State(app): State<Shared>, Path(id): Path<String>, bytes: Bytes) -> Response {
    match body::<Cancel>(&bytes) {
        Ok(c) => run(&app, c.deliver, |store| lifecycle::cancel(store, &id, c.at_period_end)).await,
        Err(message) => bad_body(message),
    }
}

/// `POST /__stripe/subscriptions/{id}/end_period`.
pub(crate) async fn end_period(State(app): State<Shared>, Path(id): Path<String>, bytes: Bytes) -> Response {
    match body::<Deliver>(&bytes) {
        Ok(d) => run(&app, d.deliver, |store| lifecycle::end_period(store, &id)).await,
        Err(message) => bad_body(message),
    }
}

/// `GET /__stripe/events`: every event, oldest first.
pub(crate) async fn events(State(app): State<Shared>) -> Json<Value> {
    Json(Value::Array(app.stripe.lock().events.clone()))
}

/// `POST /__stripe/events/{id}/deliver`: `{"deliveries": [..]}`.
pub(crate) async fn redeliver(State(app): State<Shared>, Path(id): Path<String>) -> Response {
    let (event, endpoints) = {
        let store = app.stripe.lock();
        match store.event(&id) {
            Some(event) => (event.clone(), store.endpoints.clone()),
            None => return errors::control(StatusCode::NOT_FOUND, format!("No such event: '{id}'")),
        }
    };
    let deliveries = webhooks::deliver(&app.stripe.http, &endpoints, &[event]).await;
    Json(json!({ "deliveries": deliveries })).into_response()
}

/// `GET /checkout/pay/{id}`: the hosted page: what is paid for, a Pay
/// button, and a link back to the session's `cancel_url`, so a browser test
/// can walk the whole flow as a payer would.
pub(crate) async fn pay_page(State(app): State<Shared>, Path(id): Path<String>) -> Response {
    let session = {
        let store = app.stripe.lock();
        store.session_index(&id).map(|i| store.sessions[i].object.clone())
    };
    let Some(session) = session else {
        return errors::control(StatusCode::NOT_FOUND, format!("No such checkout session: '{id}'"));
    };
    let cents = session["amount_total"].as_i64().unwrap_or(0);
    let what = if session["mode"] == "subscription" {
        "a month"
    } else {
        "once"
    };
    let currency = session["currency"].as_str().unwrap_or("usd").to_uppercase();
    let cancel = session["cancel_url"].as_str().unwrap_or_default();
    Html(format!(
        "<!doctype html><html lang=en><meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width, initial-scale=1\">\
         <title>Fake Stripe Checkout</title>\
         <h1>Fake Stripe Checkout</h1><p>Session {}</p>\
         <p>Pay <strong>{}.{:02} {}</strong> {}.</p>\
         <form method=post><button>Pay</button></form>\
         <p><a href=\"{}\">Cancel</a></p>",
        escape(&id),
        cents / 100,
        cents % 100,
        escape(&currency),
        what,
        escape(cancel)
    ))
    .into_response()
}

/// Text and attribute values in the page are the caller's: escape them.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `POST /checkout/pay/{id}`: completes the session as paid, delivers, and
/// sends the browser to `success_url` (`{CHECKOUT_SESSION_ID}` filled in).
pub(crate) async fn pay(State(app): State<Shared>, Path(id): Path<String>) -> Response {
    let answer = run(&app, true, |store| lifecycle::complete(store, &id, "paid")).await;
    if !answer.status().is_success() {
        return answer;
    }
    let store = app.stripe.lock();
    let success = store
        .session_index(&id)
        .and_then(|i| store.sessions[i].object["success_url"].as_str().map(str::to_owned));
    match success {
        Some(url) => Redirect::to(&url.replace("{CHECKOUT_SESSION_ID}", &id)).into_response(),
        None => ([(header::CONTENT_TYPE, "text/plain")], "paid").into_response(),
    }
}
