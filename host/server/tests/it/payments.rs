//! Payments with two gateways sharing one Postgres (the Python suite,
//! `test_payments.py`, covers the flows on SQLite): the fake Stripe in
//! mock-upstream delivers every event to both gateways at once, many times
//! over and out of order, and each top-up is credited exactly once.

use crate::common;
use crate::control_plane::helpers::method;

use common::{Gateway, PgSchema, nanos, standard_config, start_mock};
use serde_json::{Value, json};

const WEBHOOK_SECRET: &str = "whsec_it_payments";

async fn fake(mock: std::net::SocketAddr, path: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("http://{mock}/__stripe/{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{path}: {}", response.text().await.unwrap());
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deliveries_to_two_gateways_on_postgres_credit_each_top_up_once() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let config = format!(
        "database_url = \"{}\"\n{}",
        schema.url,
        standard_config(
            mock,
            &format!(
                "[billing.stripe]\napi_base = \"http://{mock}\"\nsecret_key = \"sk_test_it\"\nwebhook_secret = \"{WEBHOOK_SECRET}\"\n"
            )
        )
    );
    let first = Gateway::start_with(&config, "1").await;
    let second = first.another().await;
    for gateway in [&first, &second] {
        let url = format!("{}/v1/billing/stripe/webhook", gateway.url);
        fake(mock, "webhook_endpoints", json!({"url": url, "secret": WEBHOOK_SECRET})).await;
    }
    let initial = nanos(first.wallet()["posted_usd"].as_str().unwrap());

    // 24 top-ups of 5.01 … 5.24 USD: half paid at once, half paid by a method
    // that settles later (completed unpaid, then async_payment_succeeded).
    let mut expected = 0;
    let mut events = Vec::new();
    for i in 1..=24 {
        let amount = format!("5.{i:02}");
        expected += nanos(&amount);
        let opened = method(&first, Some(&first.api_key), "billing.topups.create", json!({"amount_usd": amount}))
            .await
            .unwrap();
        let session = opened["session_id"].as_str().unwrap().to_string();
        let outcome = if i % 2 == 0 { "paid" } else { "async_pending" };
        let done = fake(
            mock,
            &format!("checkout/sessions/{session}/complete"),
            json!({"outcome": outcome, "deliver": false}),
        )
        .await;
        events.push(done["events"][0]["id"].as_str().unwrap().to_string());
        if outcome == "async_pending" {
            let settled = fake(
                mock,
                &format!("checkout/sessions/{session}/async"),
                json!({"succeeded": true, "deliver": false}),
            )
            .await;
            events.push(settled["events"][0]["id"].as_str().unwrap().to_string());
        }
    }

    // Every event five times over, all at once, newest first: each delivery
    // goes to both gateways.
    let deliveries = events.iter().rev().flat_map(|id| std::iter::repeat_n(id.clone(), 5)).map(|id| {
        tokio::spawn(async move { fake(mock, &format!("events/{id}/deliver"), json!({})).await })
    });
    for delivered in futures_util::future::join_all(deliveries).await {
        let delivered = delivered.unwrap();
        for delivery in delivered["deliveries"].as_array().unwrap() {
            assert_eq!(delivery["status"], 200, "{delivered}");
        }
    }

    assert_eq!(
        nanos(second.wallet()["posted_usd"].as_str().unwrap()) - initial,
        expected,
        "each top-up credited exactly once"
    );
    let listed = method(&second, Some(&second.api_key), "billing.topups.list", json!({}))
        .await
        .unwrap();
    let states: Vec<&str> = listed["checkouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["paid"; 24]);
    assert!(first.admin(&["ledger-verify"]).contains("verified"));
}
