//! What each processor event does. An event is handled in one write
//! transaction together with its row in `payment_events`: either both commit
//! or neither does, so a redelivery finds the row and changes nothing, and a
//! refused event can be delivered again later.
//!
//! State moves are conditional updates on the checkout's row (`open` →
//! `paid`, …), so of two concurrent deliveries about one checkout (a
//! `completed` and an `async_payment_succeeded`, say) only one credits.

use serde::Deserialize;
use serde_json::Value;

use super::store::{self, CENT, Checkout, SubscriptionState, Tx};
use crate::plans::Plans;
use tollgate_core::db::Database;
use tollgate_core::money::Nanos;

/// The plan a workspace returns to when its subscription ends.
const PLAN_AFTER_SUBSCRIPTION: &str = "free";

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// Not genuine or not ours: 400, and nothing changed.
    #[error("{0}")]
    Refused(String),
    /// About a payment the gateway has not seen complete yet (delivered out
    /// of order): 409, so the processor delivers it again later.
    #[error("{0}")]
    RetryLater(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for WebhookError {
    fn from(error: sqlx::Error) -> Self {
        WebhookError::Internal(error.into())
    }
}

/// What a delivery did.
#[derive(Debug, serde::Serialize)]
pub struct Handled {
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    /// `credited`, `duplicate`, `ignored`, …
    pub outcome: &'static str,
    /// The workspace whose plan this event may have changed.
    #[serde(skip)]
    pub plan_changed: Option<String>,
    /// The workspace whose wallet, hold or plan this event changed.
    #[serde(skip)]
    pub workspace_id: Option<String>,
}

#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    created: i64,
    data: EventData,
}

#[derive(Deserialize)]
struct EventData {
    object: Value,
}

struct Outcome {
    what: &'static str,
    plan_changed: Option<String>,
    /// The workspace whose wallet or hold the event changed.
    changed: Option<String>,
}

impl From<&'static str> for Outcome {
    fn from(what: &'static str) -> Self {
        Outcome {
            what,
            plan_changed: None,
            changed: None,
        }
    }
}

impl Outcome {
    fn changed(what: &'static str, workspace_id: &str) -> Self {
        Outcome {
            changed: Some(workspace_id.to_string()),
            ..what.into()
        }
    }
}

pub async fn handle(database: &Database, payload: &[u8], plans: &Plans) -> Result<Handled, WebhookError> {
    let event: Event =
        serde_json::from_slice(payload).map_err(|e| WebhookError::Refused(format!("not a processor event: {e}")))?;
    let _turn = database.write_turn().await;
    let mut tx = database.begin_write().await?;
    let handled = |outcome: Outcome| Handled {
        event_id: event.id.clone(),
        event_type: event.event_type.clone(),
        outcome: outcome.what,
        workspace_id: outcome.changed.or_else(|| outcome.plan_changed.clone()),
        plan_changed: outcome.plan_changed,
    };
    if !store::claim_event(&mut tx, &event.id, &event.event_type).await? {
        return Ok(handled("duplicate".into()));
    }
    let object = &event.data.object;
    let outcome: Outcome = match event.event_type.as_str() {
        "checkout.session.completed" => session_completed(&mut tx, object, false).await?,
        "checkout.session.async_payment_succeeded" => session_completed(&mut tx, object, true).await?,
        "checkout.session.async_payment_failed" => session_ended(&mut tx, object, "failed").await?,
        "checkout.session.expired" => session_ended(&mut tx, object, "expired").await?,
        "charge.refunded" => refunded(&mut tx, object).await?,
        "charge.dispute.created" => disputed(&mut tx, object).await?,
        "customer.subscription.created" | "customer.subscription.updated" | "customer.subscription.deleted" => {
            let deleted = event.event_type.ends_with("deleted");
            subscription(&mut tx, object, event.created, deleted, plans).await?
        }
        "invoice.paid" => invoice_paid(&mut tx, object).await?,
        _ => "ignored".into(),
    };
    tx.commit().await?;
    Ok(handled(outcome))
}

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn required<'a>(object: &'a Value, pointer: &str, what: &str) -> Result<&'a str, WebhookError> {
    text(object, pointer).ok_or_else(|| WebhookError::Refused(format!("the {what} has no {pointer}")))
}

/// The checkout a Checkout Session event is about, if the gateway created it.
async fn session_checkout(tx: &mut Tx, session: &Value) -> Result<Checkout, WebhookError> {
    let session_id = required(session, "/id", "checkout session")?;
    let ours = text(session, "/metadata/tollgate_checkout_id");
    store::by_session(tx, session_id, ours).await?.ok_or_else(|| {
        WebhookError::Refused(format!(
            "checkout session '{session_id}' was not created by this gateway"
        ))
    })
}

async fn session_completed(tx: &mut Tx, session: &Value, async_succeeded: bool) -> Result<Outcome, WebhookError> {
    let checkout = session_checkout(tx, session).await?;
    let total = session.get("amount_total").and_then(Value::as_i64);
    let currency = text(session, "/currency").unwrap_or_default();
    if total != Some(checkout.amount_cents) || !currency.eq_ignore_ascii_case(&checkout.currency) {
        return Err(WebhookError::Refused(format!(
            "checkout session '{}' totals {} {currency}, but the gateway opened it for {} {}",
            checkout.session_id.as_deref().unwrap_or_default(),
            total.map_or("no amount".into(), |t| t.to_string()),
            checkout.amount_cents,
            checkout.currency
        )));
    }
    let payment_intent = text(session, "/payment_intent");
    let paid = async_succeeded || text(session, "/payment_status") == Some("paid");
    if checkout.kind == "subscription" {
        let moved = store::transition(tx, &checkout.id, &["creating", "open", "processing"], "paid", None).await?;
        return Ok(match moved {
            true => Outcome::changed("subscribed", &checkout.workspace_id),
            false => "already_paid".into(),
        });
    }
    if !paid {
        // Paid by a method that settles later: async_payment_* follows.
        let moved = store::transition(tx, &checkout.id, &["creating", "open"], "processing", payment_intent).await?;
        return Ok(if moved { "processing" } else { "unchanged" }.into());
    }
    if !store::transition(
        tx,
        &checkout.id,
        &["creating", "open", "processing"],
        "paid",
        payment_intent,
    )
    .await?
    {
        return Ok("already_paid".into());
    }
    tollgate_ledger::credit_in(tx, &checkout.workspace_id, Nanos(checkout.amount_nano)).await?;
    tracing::info!(checkout = %checkout.id, workspace = %checkout.workspace_id, amount_usd = %Nanos(checkout.amount_nano).usd_decimal(), "top-up credited");
    Ok(Outcome::changed("credited", &checkout.workspace_id))
}

async fn session_ended(tx: &mut Tx, session: &Value, to: &'static str) -> Result<Outcome, WebhookError> {
    let checkout = session_checkout(tx, session).await?;
    let from: &[&str] = if to == "expired" {
        &["creating", "open"]
    } else {
        &["creating", "open", "processing"]
    };
    let moved = store::transition(tx, &checkout.id, from, to, None).await?;
    Ok(if moved { to } else { "unchanged" }.into())
}

/// The paid top-up a charge event is about.
async fn charged_checkout(tx: &mut Tx, object: &Value, what: &str) -> Result<Checkout, WebhookError> {
    let payment_intent = required(object, "/payment_intent", what)?;
    match store::by_payment_intent(tx, payment_intent).await? {
        Some(checkout) if checkout.state == "paid" => Ok(checkout),
        _ => Err(WebhookError::RetryLater(format!(
            "payment '{payment_intent}' is not a top-up this gateway has seen paid (yet); deliver this event again later"
        ))),
    }
}

/// A refund takes the refunded amount back out of the wallet. Charges carry
/// the running total refunded, so the debit is what it grew by.
async fn refunded(tx: &mut Tx, charge: &Value) -> Result<Outcome, WebhookError> {
    let checkout = charged_checkout(tx, charge, "charge").await?;
    let total = charge
        .get("amount_refunded")
        .and_then(Value::as_i64)
        .ok_or_else(|| WebhookError::Refused("the charge has no amount_refunded".into()))?;
    let total = total.clamp(0, checkout.amount_cents);
    let increase = store::raise_refunded(tx, &checkout.id, total).await?;
    if increase == 0 {
        return Ok("unchanged".into());
    }
    tollgate_ledger::debit_in(tx, &checkout.workspace_id, Nanos(increase * CENT)).await?;
    tracing::warn!(checkout = %checkout.id, workspace = %checkout.workspace_id, cents = increase, "top-up refunded: wallet debited");
    Ok(Outcome::changed("debited", &checkout.workspace_id))
}

/// A dispute holds the workspace's further top-ups until an operator looks.
async fn disputed(tx: &mut Tx, dispute: &Value) -> Result<Outcome, WebhookError> {
    let checkout = charged_checkout(tx, dispute, "dispute").await?;
    let reason = format!(
        "payment '{}' of checkout '{}' is disputed ({})",
        checkout.payment_intent.as_deref().unwrap_or_default(),
        checkout.id,
        text(dispute, "/reason").unwrap_or("no reason given")
    );
    store::hold(tx, &checkout.workspace_id, &reason).await?;
    tracing::warn!(workspace = %checkout.workspace_id, %reason, "top-ups held");
    Ok(Outcome::changed("held", &checkout.workspace_id))
}

/// A subscription's state decides the workspace's plan: active (or retrying
/// a failed renewal) puts it on the plan bought; ended returns it to Free,
/// if it is still on the plan the subscription paid for.
async fn subscription(
    tx: &mut Tx,
    object: &Value,
    created: i64,
    deleted: bool,
    plans: &Plans,
) -> Result<Outcome, WebhookError> {
    let subscription_id = required(object, "/id", "subscription")?;
    let checkout = match text(object, "/metadata/tollgate_checkout_id") {
        Some(id) => store::by_id(tx, id).await?,
        None => None,
    };
    let Some(checkout) = checkout.filter(|c| c.kind == "subscription") else {
        return Err(WebhookError::Refused(format!(
            "subscription '{subscription_id}' was not bought through this gateway"
        )));
    };
    let plan = checkout.plan.clone().unwrap_or_default();
    if plans.get(&plan).is_none() {
        return Err(WebhookError::Refused(format!(
            "subscription '{subscription_id}' is for plan '{plan}', which this gateway no longer defines"
        )));
    }
    let status = if deleted {
        "canceled"
    } else {
        required(object, "/status", "subscription")?
    };
    let period_end = object
        .get("current_period_end")
        .or_else(|| object.pointer("/items/data/0/current_period_end"))
        .and_then(Value::as_i64);
    let applied = store::apply_subscription(
        tx,
        &SubscriptionState {
            subscription_id,
            checkout: &checkout,
            plan: &plan,
            status,
            cancel_at_period_end: object.get("cancel_at_period_end").and_then(Value::as_bool) == Some(true),
            current_period_end: period_end,
            event_created: created,
        },
    )
    .await?;
    if !applied {
        return Ok("stale".into());
    }
    let workspace = checkout.workspace_id.clone();
    let outcome = match status {
        "active" | "trialing" | "past_due" => {
            store::transition(tx, &checkout.id, &["creating", "open", "processing"], "paid", None).await?;
            tollgate_identity::accounts::set_plan_in(tx, &workspace, &plan, None).await?;
            "plan_set"
        }
        "canceled" | "unpaid" | "incomplete_expired" => {
            tollgate_identity::accounts::set_plan_in(tx, &workspace, PLAN_AFTER_SUBSCRIPTION, Some(&plan)).await?;
            "plan_ended"
        }
        _ => "recorded",
    };
    Ok(Outcome {
        what: outcome,
        plan_changed: Some(workspace),
        changed: None,
    })
}

/// A paid invoice renews the subscription's period and keeps its plan on.
async fn invoice_paid(tx: &mut Tx, invoice: &Value) -> Result<Outcome, WebhookError> {
    let Some(subscription_id) =
        text(invoice, "/subscription").or_else(|| text(invoice, "/parent/subscription_details/subscription"))
    else {
        return Ok("ignored".into());
    };
    let Some((workspace, plan, status)) = store::subscription_status(tx, subscription_id).await? else {
        let ours = text(invoice, "/subscription_details/metadata/tollgate_checkout_id").is_some();
        return Err(if ours {
            WebhookError::RetryLater(format!(
                "subscription '{subscription_id}' is not known here yet; deliver this invoice again later"
            ))
        } else {
            WebhookError::Refused(format!(
                "subscription '{subscription_id}' was not bought through this gateway"
            ))
        });
    };
    let period_end = invoice
        .pointer("/lines/data/0/period/end")
        .or_else(|| invoice.get("period_end"))
        .and_then(Value::as_i64);
    if let Some(end) = period_end {
        store::renew_subscription(tx, subscription_id, end).await?;
    }
    if status == "canceled" {
        return Ok("unchanged".into());
    }
    tollgate_identity::accounts::set_plan_in(tx, &workspace, &plan, None).await?;
    Ok(Outcome {
        what: "renewed",
        plan_changed: Some(workspace),
        changed: None,
    })
}
