//! What the test controls make happen, as Stripe would: a customer paying
//! (or starting an async payment), the bank settling it, refunds, disputes,
//! and subscriptions renewing or being cancelled. Each step changes the
//! store and emits the events Stripe sends for it, in Stripe's order.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::objects::{self, PERIOD_SECS, random_id};
use super::store::Store;

/// The object a step changed (under `name` in the answer) and its events.
pub(crate) struct Outcome {
    pub name: &'static str,
    pub object: Value,
    pub events: Vec<Value>,
}

pub(crate) type Refused = (StatusCode, String);

fn refuse<T>(message: impl Into<String>) -> Result<T, Refused> {
    Err((StatusCode::BAD_REQUEST, message.into()))
}

fn id(object: &Value) -> &str {
    object["id"].as_str().unwrap_or_default()
}

fn not_found(kind: &str, id: &str) -> Refused {
    (StatusCode::NOT_FOUND, format!("No such {kind}: '{id}'"))
}

/// The customer finishes Checkout: `paid`, or `async_pending` (a bank
/// debit that settles later; payment mode only).
pub(crate) fn complete(store: &mut Store, id: &str, outcome: &str) -> Result<Outcome, Refused> {
    let i = store
        .session_index(id)
        .ok_or_else(|| not_found("checkout.session", id))?;
    let status = store.sessions[i].object["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if status != "open" {
        return refuse(format!("Checkout Session {id} is already {status}"));
    }
    let pending = match outcome {
        "paid" => false,
        "async_pending" => true,
        _ => return refuse("outcome must be \"paid\" or \"async_pending\""),
    };
    let now = store.now();
    let session = &store.sessions[i];
    let draft = session.draft.clone();
    let amount = session.object["amount_total"].as_i64().unwrap_or(0);
    let currency = session.object["currency"].as_str().unwrap_or("usd").to_owned();
    let mut object = session.object.clone();
    object["status"] = "complete".into();
    object["url"] = Value::Null;
    if draft.mode == "payment" {
        let payment_intent = random_id("pi_", 24);
        let charge_status = if pending { "pending" } else { "succeeded" };
        store
            .charges
            .push(objects::charge(&payment_intent, amount, &currency, charge_status, now));
        object["payment_status"] = if pending { "unpaid" } else { "paid" }.into();
        object["payment_intent"] = payment_intent.into();
        store.sessions[i].object = object.clone();
        store.sessions[i].async_pending = pending;
        let completed = store.emit("checkout.session.completed", &object, None);
        return Ok(Outcome {
            name: "session",
            object,
            events: vec![completed],
        });
    }
    if pending {
        return refuse("async_pending is only modelled for mode=payment sessions");
    }
    let customer = draft.customer.clone().unwrap_or_else(|| random_id("cus_", 14));
    let recurring: Vec<_> = draft
        .items
        .iter()
        .filter(|item| item.interval.is_some())
        .cloned()
        .collect();
    let mut subscription = objects::subscription(&customer, &recurring, &draft.subscription_metadata, now);
    // The first invoice also carries any one-time items of the session.
    let invoice = bill(store, &mut subscription, amount, "subscription_create", now);
    object["payment_status"] = "paid".into();
    object["subscription"] = subscription["id"].clone();
    object["customer"] = customer.into();
    store.sessions[i].object = object.clone();
    store.subscriptions.push(subscription.clone());
    let events = vec![
        store.emit("customer.subscription.created", &subscription, None),
        store.emit("checkout.session.completed", &object, None),
        store.emit("invoice.paid", &invoice, None),
    ];
    Ok(Outcome {
        name: "session",
        object,
        events,
    })
}

/// The bank settles (or rejects) an `async_pending` payment.
pub(crate) fn settle(store: &mut Store, id: &str, succeeded: bool) -> Result<Outcome, Refused> {
    let i = store
        .session_index(id)
        .ok_or_else(|| not_found("checkout.session", id))?;
    if !store.sessions[i].async_pending {
        return refuse(format!(
            "Checkout Session {id} has no pending async payment (complete it with outcome async_pending first)"
        ));
    }
    let mut object = store.sessions[i].object.clone();
    let payment_intent = object["payment_intent"].as_str().unwrap_or_default().to_owned();
    if let Some(c) = store.charge_index(&payment_intent) {
        let charge = &mut store.charges[c];
        charge["status"] = if succeeded { "succeeded" } else { "failed" }.into();
        charge["paid"] = succeeded.into();
        charge["amount_captured"] = if succeeded { charge["amount"].clone() } else { 0.into() };
    }
    if succeeded {
        object["payment_status"] = "paid".into();
    }
    store.sessions[i].object = object.clone();
    store.sessions[i].async_pending = false;
    let kind = if succeeded {
        "checkout.session.async_payment_succeeded"
    } else {
        "checkout.session.async_payment_failed"
    };
    let event = store.emit(kind, &object, None);
    Ok(Outcome {
        name: "session",
        object,
        events: vec![event],
    })
}

/// Refunds `amount` (default: what is left) of the intent's charge.
pub(crate) fn refund(store: &mut Store, payment_intent: &str, amount: Option<i64>) -> Result<Outcome, Refused> {
    let c = store
        .charge_index(payment_intent)
        .ok_or_else(|| not_found("payment_intent", payment_intent))?;
    let charge = &mut store.charges[c];
    if charge["status"] != "succeeded" {
        return refuse(format!(
            "Charge {} has not succeeded: it cannot be refunded",
            id(charge)
        ));
    }
    let total = charge["amount"].as_i64().unwrap_or(0);
    let refunded = charge["amount_refunded"].as_i64().unwrap_or(0);
    let left = total - refunded;
    if left == 0 {
        return refuse(format!("Charge {} has already been refunded.", id(charge)));
    }
    let amount = amount.unwrap_or(left);
    if amount <= 0 {
        return refuse("amount must be a positive number of cents");
    }
    let refunded = refunded + amount.min(left);
    charge["amount_refunded"] = refunded.into();
    charge["refunded"] = (refunded == total).into();
    let object = charge.clone();
    let event = store.emit("charge.refunded", &object, None);
    Ok(Outcome {
        name: "charge",
        object,
        events: vec![event],
    })
}

/// The cardholder disputes the intent's charge (once).
pub(crate) fn dispute(store: &mut Store, payment_intent: &str) -> Result<Outcome, Refused> {
    let c = store
        .charge_index(payment_intent)
        .ok_or_else(|| not_found("payment_intent", payment_intent))?;
    if store.charges[c]["disputed"] == true {
        return refuse(format!("Charge {} is already disputed", id(&store.charges[c])));
    }
    store.charges[c]["disputed"] = true.into();
    let now = store.now();
    let object = objects::dispute(&store.charges[c], now);
    let event = store.emit("charge.dispute.created", &object, None);
    Ok(Outcome {
        name: "dispute",
        object,
        events: vec![event],
    })
}

fn live_subscription(store: &Store, id: &str) -> Result<usize, Refused> {
    let s = store
        .subscription_index(id)
        .ok_or_else(|| not_found("subscription", id))?;
    if store.subscriptions[s]["status"] == "canceled" {
        return refuse(format!("Subscription {id} is canceled"));
    }
    Ok(s)
}

/// The next period starts and is paid: `invoice.paid`, then
/// `customer.subscription.updated`.
pub(crate) fn renew(store: &mut Store, id: &str) -> Result<Outcome, Refused> {
    let s = live_subscription(store, id)?;
    let now = store.now();
    let mut subscription = store.subscriptions[s].clone();
    let previous = json!({
        "current_period_start": subscription["current_period_start"],
        "current_period_end": subscription["current_period_end"],
        "latest_invoice": subscription["latest_invoice"],
    });
    let start = subscription["current_period_end"].as_i64().unwrap_or(now);
    subscription["current_period_start"] = start.into();
    subscription["current_period_end"] = (start + PERIOD_SECS).into();
    let amount = objects::subscription_amount(&subscription);
    let invoice = bill(store, &mut subscription, amount, "subscription_cycle", now);
    store.subscriptions[s] = subscription.clone();
    let events = vec![
        store.emit("invoice.paid", &invoice, None),
        store.emit("customer.subscription.updated", &subscription, Some(previous)),
    ];
    Ok(Outcome {
        name: "subscription",
        object: subscription,
        events,
    })
}

/// The customer cancels: at the period's end (`updated`) or now (`deleted`).
pub(crate) fn cancel(store: &mut Store, id: &str, at_period_end: bool) -> Result<Outcome, Refused> {
    let s = live_subscription(store, id)?;
    let now = store.now();
    let subscription = &mut store.subscriptions[s];
    let event = if at_period_end {
        let previous = json!({
            "cancel_at_period_end": subscription["cancel_at_period_end"],
            "cancel_at": subscription["cancel_at"],
            "canceled_at": subscription["canceled_at"],
        });
        subscription["cancel_at_period_end"] = true.into();
        subscription["cancel_at"] = subscription["current_period_end"].clone();
        subscription["canceled_at"] = now.into();
        let object = subscription.clone();
        store.emit("customer.subscription.updated", &object, Some(previous))
    } else {
        subscription["status"] = "canceled".into();
        subscription["canceled_at"] = now.into();
        subscription["ended_at"] = now.into();
        let object = subscription.clone();
        store.emit("customer.subscription.deleted", &object, None)
    };
    Ok(Outcome {
        name: "subscription",
        object: store.subscriptions[s].clone(),
        events: vec![event],
    })
}

/// The current period ends: a subscription set to cancel ends, any other renews.
pub(crate) fn end_period(store: &mut Store, id: &str) -> Result<Outcome, Refused> {
    let s = live_subscription(store, id)?;
    if store.subscriptions[s]["cancel_at_period_end"] != true {
        return renew(store, id);
    }
    let now = store.now();
    let subscription = &mut store.subscriptions[s];
    subscription["status"] = "canceled".into();
    subscription["ended_at"] = now.into();
    let object = subscription.clone();
    let event = store.emit("customer.subscription.deleted", &object, None);
    Ok(Outcome {
        name: "subscription",
        object,
        events: vec![event],
    })
}

/// Charges `amount` for the subscription's current period: a payment intent,
/// its charge and a paid invoice, which becomes `latest_invoice`.
fn bill(store: &mut Store, subscription: &mut Value, amount: i64, reason: &str, now: i64) -> Value {
    let currency = subscription["items"]["data"][0]["price"]["currency"]
        .as_str()
        .unwrap_or("usd")
        .to_owned();
    let payment_intent = random_id("pi_", 24);
    let charge = objects::charge(&payment_intent, amount, &currency, "succeeded", now);
    let invoice = objects::invoice(subscription, &charge, reason, now);
    store.charges.push(charge);
    subscription["latest_invoice"] = invoice["id"].clone();
    invoice
}
