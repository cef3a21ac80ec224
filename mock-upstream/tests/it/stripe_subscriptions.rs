//! The fake Stripe's subscription flow: events in Stripe's order from
//! Checkout to renewal and cancellation, each delivered signed.

use serde_json::{Value, json};

use crate::stripe::{create, post, receiver, start, verify};

const SUBSCRIPTION_FORM: &str = "mode=subscription&success_url=http%3A%2F%2Fapp%2Fok\
    &metadata[workspace_id]=ws_9&subscription_data[metadata][plan]=pro\
    &line_items[0][price_data][currency]=usd&line_items[0][price_data][unit_amount]=2500\
    &line_items[0][price_data][product_data][name]=Pro&line_items[0][price_data][recurring][interval]=month\
    &line_items[0][quantity]=1";

fn kinds(events: &Value) -> Vec<&str> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn subscription_created_completed_paid_renewed_and_cancelled() {
    let base = start().await;
    let http = reqwest::Client::new();
    let (url, inbox) = receiver().await;
    post(
        &http,
        format!("{base}/__stripe/webhook_endpoints"),
        json!({"url": url, "secret": "whsec_sub"}),
    )
    .await;

    let session: Value = create(&http, &base, SUBSCRIPTION_FORM.to_owned(), None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(session["mode"], "subscription");
    assert_eq!(session["amount_total"], 2500);
    let id = session["id"].as_str().unwrap();

    let done = post(
        &http,
        format!("{base}/__stripe/checkout/sessions/{id}/complete"),
        json!({"outcome": "paid"}),
    )
    .await;
    assert_eq!(
        kinds(&done["events"]),
        [
            "customer.subscription.created",
            "checkout.session.completed",
            "invoice.paid"
        ]
    );
    let statuses: Vec<&Value> = done["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["status"])
        .collect();
    assert_eq!(statuses, [200, 200, 200]);
    // Delivered in the order emitted, each verifiable.
    let delivered: Vec<Value> = inbox
        .lock()
        .unwrap()
        .iter()
        .map(|(signature, payload)| verify(signature, payload, "whsec_sub"))
        .collect();
    assert_eq!(Value::Array(delivered.clone()), done["events"]);
    let created: Vec<i64> = delivered.iter().map(|e| e["created"].as_i64().unwrap()).collect();
    assert!(created.windows(2).all(|w| w[0] <= w[1]), "{created:?}");

    let session = &done["session"];
    let subscription = &done["events"][0]["data"]["object"];
    let invoice = &done["events"][2]["data"]["object"];
    let sub_id = subscription["id"].as_str().unwrap();
    assert!(sub_id.starts_with("sub_"));
    assert_eq!(session["subscription"], sub_id);
    assert_eq!(session["customer"], subscription["customer"]);
    assert_eq!(session["payment_status"], "paid");
    assert_eq!(subscription["status"], "active");
    assert_eq!(subscription["metadata"], json!({"plan": "pro"}));
    assert_eq!(subscription["items"]["data"][0]["price"]["unit_amount"], 2500);
    assert_eq!(
        subscription["items"]["data"][0]["price"]["recurring"]["interval"],
        "month"
    );
    let start_at = subscription["current_period_start"].as_i64().unwrap();
    assert_eq!(
        subscription["current_period_end"].as_i64().unwrap(),
        start_at + 30 * 86_400
    );
    assert_eq!(subscription["latest_invoice"], invoice["id"]);
    assert_eq!(invoice["subscription"], sub_id);
    assert_eq!(invoice["status"], "paid");
    assert_eq!(invoice["amount_paid"], 2500);
    assert_eq!(invoice["subscription_details"]["metadata"], json!({"plan": "pro"}));
    assert_eq!(
        invoice["lines"]["data"][0]["period"]["end"],
        subscription["current_period_end"]
    );

    let renewed = post(
        &http,
        format!("{base}/__stripe/subscriptions/{sub_id}/renew"),
        json!({}),
    )
    .await;
    assert_eq!(
        kinds(&renewed["events"]),
        ["invoice.paid", "customer.subscription.updated"]
    );
    assert_eq!(
        renewed["subscription"]["current_period_start"],
        subscription["current_period_end"]
    );
    assert_ne!(renewed["subscription"]["latest_invoice"], invoice["id"]);

    let cancel = format!("{base}/__stripe/subscriptions/{sub_id}/cancel");
    let cancelled = post(&http, cancel, json!({"at_period_end": true, "deliver": false})).await;
    assert_eq!(kinds(&cancelled["events"]), ["customer.subscription.updated"]);
    assert_eq!(cancelled["subscription"]["cancel_at_period_end"], true);
    assert_eq!(cancelled["deliveries"], json!([]));

    let ended = post(
        &http,
        format!("{base}/__stripe/subscriptions/{sub_id}/end_period"),
        json!({}),
    )
    .await;
    assert_eq!(kinds(&ended["events"]), ["customer.subscription.deleted"]);
    assert_eq!(ended["subscription"]["status"], "canceled");

    // An undelivered event can be delivered later, freshly signed.
    let skipped = cancelled["events"][0]["id"].as_str().unwrap();
    let redelivered = post(&http, format!("{base}/__stripe/events/{skipped}/deliver"), json!({})).await;
    assert_eq!(redelivered["deliveries"][0]["status"], 200);
    let (signature, payload) = inbox.lock().unwrap().last().unwrap().clone();
    assert_eq!(verify(&signature, &payload, "whsec_sub")["id"], skipped);

    let all: Value = http
        .get(format!("{base}/__stripe/events"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        kinds(&all),
        [
            "customer.subscription.created",
            "checkout.session.completed",
            "invoice.paid",
            "invoice.paid",
            "customer.subscription.updated",
            "customer.subscription.updated",
            "customer.subscription.deleted",
        ]
    );
}

#[tokio::test]
async fn async_payment_settles_later() {
    let base = start().await;
    let http = reqwest::Client::new();
    let form = "mode=payment&line_items[0][price_data][currency]=eur&line_items[0][price_data][unit_amount]=300\
        &line_items[0][price_data][product_data][name]=Top-up&line_items[0][quantity]=1";
    let session: Value = create(&http, &base, form.to_owned(), None).await.json().await.unwrap();
    let id = session["id"].as_str().unwrap();
    let complete = format!("{base}/__stripe/checkout/sessions/{id}/complete");
    let pending = post(&http, complete, json!({"outcome": "async_pending"})).await;
    assert_eq!(pending["session"]["status"], "complete");
    assert_eq!(pending["session"]["payment_status"], "unpaid");
    // No endpoint registered: nothing to deliver to.
    assert_eq!(pending["deliveries"], json!([]));
    let pi = pending["session"]["payment_intent"].as_str().unwrap();

    let refund = http
        .post(format!("{base}/__stripe/charges/{pi}/refund"))
        .json(&json!({"amount": 100}))
        .send()
        .await
        .unwrap();
    assert_eq!(refund.status(), 400, "a pending charge cannot be refunded");

    let settled = post(
        &http,
        format!("{base}/__stripe/checkout/sessions/{id}/async"),
        json!({"succeeded": true}),
    )
    .await;
    assert_eq!(kinds(&settled["events"]), ["checkout.session.async_payment_succeeded"]);
    assert_eq!(settled["session"]["payment_status"], "paid");

    let disputed = post(&http, format!("{base}/__stripe/charges/{pi}/dispute"), json!({})).await;
    assert_eq!(kinds(&disputed["events"]), ["charge.dispute.created"]);
    assert_eq!(disputed["dispute"]["payment_intent"], pi);
    assert_eq!(disputed["dispute"]["amount"], 300);
    assert_eq!(disputed["dispute"]["currency"], "eur");
    assert_eq!(disputed["dispute"]["status"], "needs_response");
}
