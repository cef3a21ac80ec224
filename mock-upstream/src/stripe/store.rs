//! The fake's memory: sessions, charges, subscriptions, events, webhook
//! endpoints and idempotent results, for the life of the process. One lock
//! guards all of it and is never held across an await, so each API call and
//! each control is atomic (two concurrent requests with one
//! `Idempotency-Key` cannot both create a session).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::Value;

use super::checkout::Draft;
use super::objects;

pub(crate) struct Session {
    pub object: Value,
    pub draft: Draft,
    /// Completed with `async_pending` and not yet resolved by `/async`.
    pub async_pending: bool,
}

/// Where events go, and the secrets each delivery is signed with (several
/// while a secret is being rotated).
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    pub url: String,
    pub secrets: Vec<String>,
}

/// A POST answered under an `Idempotency-Key`, replayed for repeats.
pub(crate) struct Saved {
    /// SHA-256 of method, path and body: a repeat must match it.
    pub fingerprint: Vec<u8>,
    pub status: StatusCode,
    pub body: Bytes,
}

#[derive(Default)]
pub(crate) struct Store {
    pub sessions: Vec<Session>,
    /// Charges, found by their `payment_intent` (one charge per intent).
    pub charges: Vec<Value>,
    pub subscriptions: Vec<Value>,
    /// Every event, oldest first.
    pub events: Vec<Value>,
    pub endpoints: Vec<Endpoint>,
    pub idempotent: HashMap<String, Saved>,
    /// The newest `created` handed out: timestamps never go backwards, even
    /// if the wall clock does, because tests order events by them.
    last_created: i64,
}

impl Store {
    /// Unix seconds, never less than the last value returned.
    pub fn now(&mut self) -> i64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        self.last_created = self.last_created.max(wall);
        self.last_created
    }

    /// Records an event carrying a snapshot of `object` and returns it.
    pub fn emit(&mut self, kind: &str, object: &Value, previous: Option<Value>) -> Value {
        let created = self.now();
        let mut event = objects::event(kind, object, created);
        if let Some(previous) = previous {
            event["data"]["previous_attributes"] = previous;
        }
        self.events.push(event.clone());
        event
    }

    pub fn session_index(&self, id: &str) -> Option<usize> {
        self.sessions.iter().position(|s| s.object["id"] == id)
    }

    pub fn charge_index(&self, payment_intent: &str) -> Option<usize> {
        self.charges.iter().position(|c| c["payment_intent"] == payment_intent)
    }

    pub fn subscription_index(&self, id: &str) -> Option<usize> {
        self.subscriptions.iter().position(|s| s["id"] == id)
    }

    pub fn event(&self, id: &str) -> Option<&Value> {
        self.events.iter().find(|e| e["id"] == id)
    }
}
