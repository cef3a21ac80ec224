//! The fake Stripe: Checkout Sessions with idempotency keys, the `/__stripe/`
//! controls, and webhooks delivered to a receiver inside the test and
//! verified here as a gateway would verify them.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing;
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tollgate_mock_upstream::{MockOptions, serve};

pub(crate) const KEY: &str = "Bearer sk_test_123";

pub(crate) async fn start() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, MockOptions::default()));
    format!("http://{addr}")
}

/// Deliveries received: (Stripe-Signature, body).
pub(crate) type Inbox = Arc<Mutex<Vec<(String, Bytes)>>>;

/// A webhook receiver answering 200 to everything it is sent.
pub(crate) async fn receiver() -> (String, Inbox) {
    let inbox = Inbox::default();
    let app = axum::Router::new()
        .route(
            "/v1/billing/stripe/webhook",
            routing::post(
                |State(inbox): State<Inbox>, headers: HeaderMap, body: Bytes| async move {
                    assert_eq!(headers["content-type"], "application/json; charset=utf-8");
                    let signature = headers["stripe-signature"].to_str().unwrap().to_owned();
                    inbox.lock().unwrap().push((signature, body));
                    "ok"
                },
            ),
        )
        .with_state(inbox.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1/billing/stripe/webhook"), inbox)
}

/// Verifies a delivery as Stripe's libraries do; returns the event.
pub(crate) fn verify(signature: &str, payload: &[u8], secret: &str) -> Value {
    let t = signature.split(',').find_map(|p| p.strip_prefix("t=")).unwrap();
    let mut mac = <hmac::Hmac<sha2_hmac::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(payload);
    let expected = hex::encode(mac.finalize().into_bytes());
    assert!(
        signature.split(',').any(|p| p == format!("v1={expected}")),
        "{signature} is not signed with {secret}"
    );
    serde_json::from_slice(payload).unwrap()
}

fn payment_form(amount: u32) -> String {
    format!(
        "mode=payment&success_url=http%3A%2F%2Fapp%2Fok&cancel_url=http%3A%2F%2Fapp%2Fno\
         &client_reference_id=ws_1&metadata%5Bworkspace_id%5D=ws_1\
         &line_items[0][price_data][currency]=USD&line_items[0][price_data][unit_amount]={amount}\
         &line_items[0][price_data][product_data][name]=Top-up&line_items[0][quantity]=2"
    )
}

pub(crate) async fn create(http: &reqwest::Client, base: &str, form: String, key: Option<&str>) -> reqwest::Response {
    let mut request = http
        .post(format!("{base}/v1/checkout/sessions"))
        .header("authorization", KEY)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.send().await.unwrap()
}

pub(crate) async fn post(http: &reqwest::Client, url: String, body: Value) -> Value {
    let response = http.post(url).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn payment_session_with_idempotency_and_a_signed_webhook() {
    let base = start().await;
    let http = reqwest::Client::new();

    let first = create(&http, &base, payment_form(1000), Some("key-1")).await;
    assert_eq!(first.status(), 200);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first_bytes = first.bytes().await.unwrap();
    let session: Value = serde_json::from_slice(&first_bytes).unwrap();
    let id = session["id"].as_str().unwrap();
    assert!(id.starts_with("cs_test_") && id.len() >= 8 + 24, "{id}");
    assert_eq!(session["object"], "checkout.session");
    assert_eq!(session["status"], "open");
    assert_eq!(session["payment_status"], "unpaid");
    assert_eq!(session["amount_total"], 2000);
    assert_eq!(session["amount_subtotal"], 2000);
    assert_eq!(session["currency"], "usd");
    assert_eq!(session["metadata"], json!({"workspace_id": "ws_1"}));
    assert_eq!(session["client_reference_id"], "ws_1");
    assert_eq!(session["url"], format!("{}/checkout/pay/{id}", base));
    assert_eq!(
        session["expires_at"].as_i64().unwrap(),
        session["created"].as_i64().unwrap() + 86_400
    );
    assert!(session["payment_intent"].is_null() && session["subscription"].is_null());
    // The hosted page says what is paid and links back to cancel_url.
    let hosted = http.get(session["url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(hosted.status(), 200);
    let hosted = hosted.text().await.unwrap();
    assert!(hosted.contains("<strong>20.00 USD</strong> once"), "{hosted}");
    assert!(hosted.contains(r#"<a href="http://app/no">Cancel</a>"#), "{hosted}");
    let unknown = http
        .get(format!("{base}/checkout/pay/cs_test_unknown"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    // The same key and body: the stored answer, byte for byte.
    let replay = create(&http, &base, payment_form(1000), Some("key-1")).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.bytes().await.unwrap(), first_bytes);

    // The same key, other parameters.
    let conflict = create(&http, &base, payment_form(500), Some("key-1")).await;
    assert_eq!(conflict.status(), 400);
    let error: Value = conflict.json().await.unwrap();
    assert_eq!(error["error"]["type"], "idempotency_error");

    // Concurrent requests under one new key create one session.
    let racers = (0..8).map(|_| create(&http, &base, payment_form(700), Some("key-race")));
    let answers = futures_util::future::join_all(racers).await;
    let mut ids = Vec::new();
    for answer in answers {
        let body: Value = answer.json().await.unwrap();
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let listed: Value = http
        .get(format!("{base}/v1/checkout/sessions"))
        .header("authorization", KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["object"], "list");
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);

    // Deliveries, signed with both secrets during a rotation.
    let (url, inbox) = receiver().await;
    let endpoint = json!({"url": url, "secret": "whsec_old", "secrets": ["whsec_new"]});
    post(&http, format!("{base}/__stripe/webhook_endpoints"), endpoint).await;
    let done = post(
        &http,
        format!("{base}/__stripe/checkout/sessions/{id}/complete"),
        json!({}),
    )
    .await;
    assert_eq!(done["session"]["status"], "complete");
    assert_eq!(done["session"]["payment_status"], "paid");
    assert_eq!(
        done["deliveries"],
        json!([{"event_id": done["events"][0]["id"], "url": url, "status": 200}])
    );
    let (signature, payload) = inbox.lock().unwrap()[0].clone();
    assert_eq!(signature.matches("v1=").count(), 2);
    verify(&signature, &payload, "whsec_new");
    let event = verify(&signature, &payload, "whsec_old");
    assert_eq!(event["type"], "checkout.session.completed");
    assert_eq!(event["api_version"], "2024-06-20");
    assert_eq!(event["data"]["object"], done["session"]);
    let pi = event["data"]["object"]["payment_intent"].as_str().unwrap().to_owned();
    assert!(pi.starts_with("pi_"));

    let again = http
        .post(format!("{base}/__stripe/checkout/sessions/{id}/complete"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 400, "a session completes once");

    // Partial refunds accumulate up to the amount.
    let refund = |amount: i64| {
        post(
            &http,
            format!("{base}/__stripe/charges/{pi}/refund"),
            json!({"amount": amount}),
        )
    };
    let partial = refund(500).await;
    assert_eq!(partial["charge"]["amount_refunded"], 500);
    assert_eq!(partial["charge"]["refunded"], false);
    let full = refund(5000).await;
    assert_eq!(full["charge"]["amount_refunded"], 2000);
    assert_eq!(full["charge"]["refunded"], true);
    assert_eq!(full["events"][0]["type"], "charge.refunded");

    let by_intent: Value = http
        .get(format!("{base}/v1/checkout/sessions?payment_intent={pi}"))
        .header("authorization", KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(by_intent["data"].as_array().unwrap().len(), 1);
    assert_eq!(by_intent["data"][0]["id"], id);

    // Everything, oldest first, and readable through the API.
    let events: Value = http
        .get(format!("{base}/__stripe/events"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["checkout.session.completed", "charge.refunded", "charge.refunded"]
    );
    let fetched: Value = http
        .get(format!("{base}/v1/events/{}", events[0]["id"].as_str().unwrap()))
        .header("authorization", KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched, events[0]);

    // The recorder saw the key the client sent.
    let recorded: Value = http
        .get(format!("{base}/__mock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(recorded[0]["path"], "/v1/checkout/sessions");
    assert_eq!(recorded[0]["headers"]["idempotency-key"], "key-1");
}

#[tokio::test]
async fn errors_are_shaped_as_stripe_shapes_them() {
    let base = start().await;
    let http = reqwest::Client::new();
    let anonymous = http
        .post(format!("{base}/v1/checkout/sessions"))
        .body("mode=payment")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let error: Value = anonymous.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");

    let no_mode = create(&http, &base, payment_form(1).replace("mode=payment&", ""), None).await;
    assert_eq!(no_mode.status(), 400);
    let error: Value = no_mode.json().await.unwrap();
    assert_eq!(error["error"]["param"], "mode");

    let no_items = create(&http, &base, "mode=payment".to_owned(), Some("k")).await;
    assert_eq!(no_items.status(), 400);
    let error: Value = no_items.json().await.unwrap();
    assert_eq!(error["error"]["param"], "line_items");
    // A refused request saves nothing under its key: a corrected retry works.
    assert_eq!(create(&http, &base, payment_form(1), Some("k")).await.status(), 200);

    let missing = http
        .get(format!("{base}/v1/checkout/sessions/cs_test_nope"))
        .header("authorization", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let error: Value = missing.json().await.unwrap();
    assert_eq!(error["error"]["code"], "resource_missing");
    assert_eq!(error["error"]["message"], "No such checkout.session: 'cs_test_nope'");
}
