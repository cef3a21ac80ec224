//! Bounded ring of recent API requests, for tests to assert on what a gateway
//! actually sent upstream. It sits on the benchmark's hot path, so recording
//! takes the request head by value and the body as refcounted `Bytes`, under
//! a lock held for a push; JSON is built only when a test lists the requests.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{Map, Value, json};

use crate::Shared;

const CAPACITY: usize = 64;

struct Recorded {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Default)]
pub struct Recorder {
    ring: Mutex<VecDeque<Recorded>>,
}

impl Recorder {
    pub fn record(&self, head: Parts, body: Bytes) {
        let Parts {
            method,
            uri,
            headers,
            extensions,
            ..
        } = head;
        // Freed before taking the lock.
        drop(extensions);
        let entry = Recorded {
            method,
            uri,
            headers,
            body,
        };
        let evicted = {
            let mut ring = self.lock();
            let evicted = if ring.len() == CAPACITY { ring.pop_front() } else { None };
            ring.push_back(entry);
            evicted
        };
        // Freed after releasing it.
        drop(evicted);
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Recorded>> {
        // A panic elsewhere cannot leave the ring inconsistent: keep going.
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `GET /__mock/requests`: recorded requests, oldest first.
pub async fn list(State(app): State<Shared>) -> Json<Value> {
    let ring = app.recorder.lock();
    Json(ring.iter().map(to_json).collect())
}

/// `DELETE /__mock/requests`.
pub async fn clear(State(app): State<Shared>) -> StatusCode {
    let drained: VecDeque<Recorded> = std::mem::take(&mut *app.recorder.lock());
    drop(drained);
    StatusCode::NO_CONTENT
}

fn to_json(r: &Recorded) -> Value {
    let mut headers = Map::new();
    for (name, value) in &r.headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        // Repeated headers are joined the way HTTP allows folding them.
        match headers.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::from(value.into_owned()));
            }
        }
    }
    let body = if r.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&r.body).unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&r.body).into_owned()))
    };
    let path = r.uri.path_and_query().map_or(r.uri.path(), |pq| pq.as_str());
    json!({"method": r.method.as_str(), "path": path, "headers": headers, "body": body})
}
