//! Webhook delivery, signed as Stripe signs: the payload is the event's JSON
//! bytes, and `Stripe-Signature: t=<unix secs>,v1=<hex HMAC-SHA256(secret,
//! "<t>.<payload>")>` with one `v1=` per endpoint secret (while a secret is
//! rotated both verify). Deliveries go one after another, so an endpoint sees
//! events in the order they were emitted; a failed delivery is reported, not
//! retried, and never fails the control that caused it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{KeyInit, Mac};
use serde_json::{Value, json};

use super::store::Endpoint;

type Tag = hmac::Hmac<sha2_hmac::Sha256>;

/// Hex HMAC-SHA256 of `<timestamp>.<payload>` keyed by the whole secret
/// string (`whsec_…` included), as Stripe's libraries verify it.
pub(crate) fn sign(secret: &str, timestamp: i64, payload: &[u8]) -> String {
    let mut mac = <Tag as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(payload);
    hex::encode(mac.finalize().into_bytes())
}

/// The `Stripe-Signature` value: `t=…` and one `v1=…` per secret.
pub(crate) fn signature_header(secrets: &[String], timestamp: i64, payload: &[u8]) -> String {
    let mut header = format!("t={timestamp}");
    for secret in secrets {
        header.push_str(",v1=");
        header.push_str(&sign(secret, timestamp, payload));
    }
    header
}

/// The client deliveries use: a 10 s timeout, and no proxy from the
/// environment, since endpoints are on this machine.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .expect("a plain HTTP client builds")
}

/// Sends each event to each endpoint, in order, freshly signed. Returns
/// `[{"event_id", "url", "status"}]`, with `status: 0` and `error` when the
/// endpoint could not be reached.
pub(crate) async fn deliver(http: &reqwest::Client, endpoints: &[Endpoint], events: &[Value]) -> Vec<Value> {
    let mut deliveries = Vec::new();
    for event in events {
        let payload = serde_json::to_vec(event).expect("events serialize");
        for endpoint in endpoints {
            let timestamp = unix_now();
            let sent = http
                .post(&endpoint.url)
                .header("content-type", "application/json; charset=utf-8")
                .header(
                    "stripe-signature",
                    signature_header(&endpoint.secrets, timestamp, &payload),
                )
                .body(payload.clone())
                .send()
                .await;
            let mut delivery = json!({"event_id": event["id"], "url": endpoint.url});
            match sent {
                Ok(response) => {
                    delivery["status"] = response.status().as_u16().into();
                    // Read the answer so the connection can be reused.
                    let _ = response.bytes().await;
                }
                Err(e) => {
                    delivery["status"] = 0.into();
                    delivery["error"] = error_chain(&e).into();
                }
            }
            deliveries.push(delivery);
        }
    }
    deliveries
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// reqwest's top-level message is "error sending request"; the cause
/// ("connection refused") is what a test wants to see.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{sign, signature_header};

    // Computed independently with Python's hmac module:
    // hmac.new(b"whsec_test", b'1700000000.{"id":"evt_1"}', hashlib.sha256).hexdigest()
    const EXPECTED: &str = "c89214b5b5da833daed6f0b8c5bb6bd58cea9022bd80ccc78230f3942d632925";

    #[test]
    fn signs_as_stripe_does() {
        assert_eq!(sign("whsec_test", 1_700_000_000, br#"{"id":"evt_1"}"#), EXPECTED);
    }

    #[test]
    fn one_v1_per_secret() {
        let secrets = ["whsec_test".to_owned(), "whsec_next".to_owned()];
        let header = signature_header(&secrets, 1_700_000_000, br#"{"id":"evt_1"}"#);
        let next = sign("whsec_next", 1_700_000_000, br#"{"id":"evt_1"}"#);
        assert_eq!(header, format!("t=1700000000,v1={EXPECTED},v1={next}"));
    }
}
