//! A fake Stripe, enough for a gateway's Checkout top-ups and subscriptions
//! to be tested offline: the Checkout Sessions and Events API as Stripe's
//! SDKs call it, and `/__stripe/` controls that play the customer, the bank
//! and the card network, delivering signed webhooks as Stripe does.
//!
//! # Stripe API (`Authorization: Bearer sk_…`, else 401)
//! - `POST /v1/checkout/sessions`: form-encoded in Stripe's bracket syntax
//!   (`form`), checked and answered as Stripe does (`checkout`); honours
//!   `Idempotency-Key` (a repeat replays the stored answer with
//!   `Idempotent-Replayed: true`; other parameters under the same key are a
//!   400 `idempotency_error`)
//! - `GET /v1/checkout/sessions/{id}`, `GET /v1/checkout/sessions[?payment_intent=pi_…]`
//! - `GET /v1/events/{id}`, `GET /v1/events[?type=…]` (lists newest first, as Stripe's)
//!
//! Requests to these are recorded with the others (`GET /__mock/requests`).
//!
//! # Test controls (JSON; every step takes `"deliver": false` to only record its events)
//! - `POST /__stripe/webhook_endpoints` `{"url", "secret", "secrets": [..]}`;
//!   `GET` lists them, `DELETE` removes them all
//! - `POST /__stripe/checkout/sessions/{id}/complete` `{"outcome": "paid" | "async_pending"}`
//! - `POST /__stripe/checkout/sessions/{id}/async` `{"succeeded": bool}`
//! - `POST /__stripe/charges/{payment_intent}/refund` `{"amount": cents}`
//! - `POST /__stripe/charges/{payment_intent}/dispute`
//! - `POST /__stripe/subscriptions/{id}/renew`, `…/cancel` `{"at_period_end": bool}`, `…/end_period`
//! - `GET /__stripe/events` (oldest first), `POST /__stripe/events/{id}/deliver`
//!
//! Steps answer `{"<session|charge|dispute|subscription>": {..}, "events":
//! [..], "deliveries": [{"event_id", "url", "status"}]}`; see `lifecycle` for
//! what each does and `webhooks` for signing.
//!
//! `GET /checkout/pay/{id}` (the session's `url`) is the hosted page: the
//! amount, a Pay button that completes the session as paid, delivers its
//! webhooks and then redirects to its `success_url`, and a Cancel link to its
//! `cancel_url`. A browser (or the console's tests) walks the flow there.

mod api;
mod checkout;
mod controls;
mod errors;
mod form;
mod lifecycle;
mod objects;
mod store;
mod webhooks;

use std::sync::{Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::routing::{get, post};

use self::store::Store;
use crate::Shared;

/// The fake's state, one per router.
pub(crate) struct Stripe {
    store: Mutex<Store>,
    http: reqwest::Client,
}

impl Default for Stripe {
    fn default() -> Self {
        Self {
            store: Mutex::new(Store::default()),
            http: webhooks::client(),
        }
    }
}

impl Stripe {
    fn lock(&self) -> MutexGuard<'_, Store> {
        // Every step checks before it changes anything, so a panic cannot
        // leave the store half-updated: keep going.
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route(
            "/v1/checkout/sessions",
            post(api::create_session).get(api::list_sessions),
        )
        .route("/v1/checkout/sessions/{id}", get(api::retrieve_session))
        .route("/v1/events", get(api::list_events))
        .route("/v1/events/{id}", get(api::retrieve_event))
        .route("/checkout/pay/{id}", get(controls::pay_page).post(controls::pay))
        .route(
            "/__stripe/webhook_endpoints",
            post(controls::add_endpoint)
                .get(controls::list_endpoints)
                .delete(controls::clear_endpoints),
        )
        .route("/__stripe/checkout/sessions/{id}/complete", post(controls::complete))
        .route("/__stripe/checkout/sessions/{id}/async", post(controls::settle))
        .route("/__stripe/charges/{payment_intent}/refund", post(controls::refund))
        .route("/__stripe/charges/{payment_intent}/dispute", post(controls::dispute))
        .route("/__stripe/subscriptions/{id}/renew", post(controls::renew))
        .route("/__stripe/subscriptions/{id}/cancel", post(controls::cancel))
        .route("/__stripe/subscriptions/{id}/end_period", post(controls::end_period))
        .route("/__stripe/events", get(controls::events))
        .route("/__stripe/events/{id}/deliver", post(controls::redeliver))
}
