//! The Stripe objects the fake hands out, built as JSON in the shapes of API
//! version 2024-06-20 (the fields a billing integration reads; Stripe's many
//! others are left out).

use rand::Rng;
use rand::distr::Alphanumeric;
use serde_json::{Value, json};

/// The API version events carry.
pub(crate) const API_VERSION: &str = "2024-06-20";
/// A subscription period; the fake bills every 30 days whatever the interval.
pub(crate) const PERIOD_SECS: i64 = 30 * 86_400;

/// `prefix` + `len` random alphanumerics, as Stripe's ids look.
pub(crate) fn random_id(prefix: &str, len: usize) -> String {
    let tail: String = rand::rng()
        .sample_iter(Alphanumeric)
        .take(len)
        .map(char::from)
        .collect();
    format!("{prefix}{tail}")
}

/// A line item as the session was created with it.
#[derive(Clone, Debug)]
pub(crate) struct LineItem {
    pub unit_amount: i64,
    pub quantity: i64,
    pub currency: String,
    /// `recurring[interval]`, for subscription prices.
    pub interval: Option<String>,
}

impl LineItem {
    pub fn amount(&self) -> i64 {
        self.unit_amount * self.quantity
    }
}

pub(crate) fn charge(payment_intent: &str, amount: i64, currency: &str, status: &str, created: i64) -> Value {
    json!({
        "id": random_id("ch_", 24),
        "object": "charge",
        "amount": amount,
        "amount_captured": if status == "succeeded" { amount } else { 0 },
        "amount_refunded": 0,
        "currency": currency,
        "payment_intent": payment_intent,
        "paid": status == "succeeded",
        "status": status,
        "refunded": false,
        "disputed": false,
        "created": created,
        "livemode": false,
        "metadata": {},
    })
}

pub(crate) fn dispute(charge: &Value, created: i64) -> Value {
    json!({
        "id": random_id("dp_", 24),
        "object": "dispute",
        "charge": charge["id"],
        "payment_intent": charge["payment_intent"],
        "amount": charge["amount"],
        "currency": charge["currency"],
        "reason": "fraudulent",
        "status": "needs_response",
        "created": created,
        "livemode": false,
        "metadata": {},
    })
}

/// A new active subscription for the recurring `items`, its first period
/// starting at `now`. `latest_invoice` is set when the invoice is made.
pub(crate) fn subscription(customer: &str, items: &[LineItem], metadata: &Value, now: i64) -> Value {
    let data: Vec<Value> = items
        .iter()
        .map(|item| {
            json!({
                "id": random_id("si_", 24),
                "object": "subscription_item",
                "price": {
                    "id": random_id("price_", 24),
                    "object": "price",
                    "unit_amount": item.unit_amount,
                    "currency": item.currency,
                    "product": random_id("prod_", 14),
                    "recurring": {"interval": item.interval.as_deref().unwrap_or("month"), "interval_count": 1},
                    "type": "recurring",
                },
                "quantity": item.quantity,
            })
        })
        .collect();
    json!({
        "id": random_id("sub_", 24),
        "object": "subscription",
        "customer": customer,
        "status": "active",
        "cancel_at_period_end": false,
        "cancel_at": null,
        "canceled_at": null,
        "ended_at": null,
        "current_period_start": now,
        "current_period_end": now + PERIOD_SECS,
        "metadata": metadata,
        "items": {"object": "list", "data": data, "has_more": false},
        "latest_invoice": null,
        "created": now,
        "livemode": false,
    })
}

/// What a subscription bills each period: Σ unit_amount × quantity.
pub(crate) fn subscription_amount(subscription: &Value) -> i64 {
    let items = subscription["items"]["data"].as_array().map_or(&[][..], Vec::as_slice);
    items
        .iter()
        .map(|item| item["price"]["unit_amount"].as_i64().unwrap_or(0) * item["quantity"].as_i64().unwrap_or(1))
        .sum()
}

/// A paid invoice for the subscription's current period, paid by `charge`.
/// The period is on the invoice and on its line (Stripe's own top-level
/// period is the previous one; integrations read the line's).
pub(crate) fn invoice(subscription: &Value, charge: &Value, billing_reason: &str, now: i64) -> Value {
    let period = json!({
        "start": subscription["current_period_start"],
        "end": subscription["current_period_end"],
    });
    json!({
        "id": random_id("in_", 24),
        "object": "invoice",
        "subscription": subscription["id"],
        "customer": subscription["customer"],
        "status": "paid",
        "paid": true,
        "billing_reason": billing_reason,
        "amount_due": charge["amount"],
        "amount_paid": charge["amount"],
        "amount_remaining": 0,
        "currency": charge["currency"],
        "charge": charge["id"],
        "payment_intent": charge["payment_intent"],
        "period_start": period["start"],
        "period_end": period["end"],
        "lines": {"object": "list", "has_more": false, "data": [{
            "object": "line_item",
            "type": "subscription",
            "subscription": subscription["id"],
            "amount": charge["amount"],
            "currency": charge["currency"],
            "period": period,
        }]},
        "subscription_details": {"metadata": subscription["metadata"]},
        "metadata": {},
        "created": now,
        "livemode": false,
    })
}

pub(crate) fn event(kind: &str, object: &Value, created: i64) -> Value {
    json!({
        "id": random_id("evt_", 24),
        "object": "event",
        "api_version": API_VERSION,
        "created": created,
        "type": kind,
        "livemode": false,
        "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": null},
        "data": {"object": object},
    })
}

/// Stripe's list envelope.
pub(crate) fn list(data: Vec<Value>, url: &str) -> Value {
    json!({"object": "list", "data": data, "has_more": false, "url": url})
}

/// `metadata` as given (`metadata[k]=v`), or `{}`; an empty string clears it,
/// as in Stripe.
pub(crate) fn metadata(value: Option<&Value>, param: &str) -> Result<Value, super::errors::ParamError> {
    match value {
        None => Ok(json!({})),
        Some(Value::String(s)) if s.is_empty() => Ok(json!({})),
        Some(Value::Object(map)) if map.values().all(Value::is_string) => Ok(Value::Object(map.clone())),
        Some(_) => Err(super::errors::ParamError::new(
            format!("Invalid hash: {param} takes string keys and string values"),
            param,
        )),
    }
}
