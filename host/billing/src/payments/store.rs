//! The only code that issues SQL against `checkouts`, `payment_events`,
//! `subscriptions` and `payment_holds` (migration 0018).

use schemars::JsonSchema;
use serde::Serialize;
use sqlx::{Any, Transaction};

use tollgate_core::db::{Database, now_ms};
use tollgate_core::money::Nanos;

pub type Tx = Transaction<'static, Any>;

/// A checkout as the gateway recorded it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Checkout {
    pub id: String,
    pub workspace_id: String,
    pub kind: String,
    pub session_id: Option<String>,
    pub amount_nano: i64,
    pub amount_cents: i64,
    pub currency: String,
    pub plan: Option<String>,
    pub state: String,
    pub checkout_url: Option<String>,
    pub payment_intent: Option<String>,
    pub refunded_cents: i64,
    pub created_at: i64,
}

/// `SELECT` of a whole [`Checkout`], followed by the literal rest of the query.
macro_rules! select_checkout {
    ($rest:literal) => {
        concat!(
            "SELECT id, workspace_id, kind, session_id, amount_nano, amount_cents, currency, plan, state, \
             checkout_url, payment_intent, refunded_cents, created_at FROM checkouts ",
            $rest
        )
    };
}

/// How a checkout is shown on the control plane.
#[derive(Serialize, JsonSchema)]
pub struct CheckoutShown {
    pub id: String,
    /// `topup` or `subscription`.
    pub kind: String,
    pub session_id: Option<String>,
    pub amount_usd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// `creating`, `open`, `processing` (paid asynchronously, not settled),
    /// `paid`, `failed` or `expired`.
    pub state: String,
    pub checkout_url: Option<String>,
    /// Refunded so far, exact USD.
    pub refunded_usd: String,
    pub created_at_ms: i64,
}

impl Checkout {
    pub fn shown(&self) -> CheckoutShown {
        CheckoutShown {
            id: self.id.clone(),
            kind: self.kind.clone(),
            session_id: self.session_id.clone(),
            amount_usd: Nanos(self.amount_nano).usd_string(),
            plan: self.plan.clone(),
            state: self.state.clone(),
            checkout_url: self.checkout_url.clone(),
            refunded_usd: Nanos(self.refunded_cents.saturating_mul(CENT)).usd_string(),
            created_at_ms: self.created_at,
        }
    }
}

/// One cent in nano-USD.
pub const CENT: i64 = 10_000_000;

pub struct NewCheckout<'a> {
    pub id: &'a str,
    pub workspace_id: &'a str,
    pub kind: &'a str,
    pub amount_nano: i64,
    pub amount_cents: i64,
    pub currency: &'a str,
    pub plan: Option<&'a str>,
    pub created_by: &'a str,
}

/// Records a checkout before the processor is asked, so a session the
/// processor opens is always one the gateway knows.
pub async fn insert(database: &Database, new: &NewCheckout<'_>) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    let now = now_ms();
    sqlx::query(
        "INSERT INTO checkouts (id, workspace_id, kind, amount_nano, amount_cents, currency, plan, state, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'creating', $8, $9, $9)",
    )
    .bind(new.id)
    .bind(new.workspace_id)
    .bind(new.kind)
    .bind(new.amount_nano)
    .bind(new.amount_cents)
    .bind(new.currency)
    .bind(new.plan)
    .bind(new.created_by)
    .bind(now)
    .execute(&database.pool)
    .await?;
    Ok(())
}

/// The processor opened the session: note its id and URL. A webhook that
/// already moved the checkout on (it can race this) keeps its state.
pub async fn opened(database: &Database, id: &str, session_id: &str, url: Option<&str>) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    sqlx::query(
        "UPDATE checkouts SET session_id = $2, checkout_url = $3, updated_at = $4, \
         state = CASE WHEN state = 'creating' THEN 'open' ELSE state END WHERE id = $1",
    )
    .bind(id)
    .bind(session_id)
    .bind(url)
    .bind(now_ms())
    .execute(&database.pool)
    .await?;
    Ok(())
}

/// The processor refused the create: the checkout will never be paid.
pub async fn create_failed(database: &Database, id: &str) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    sqlx::query("UPDATE checkouts SET state = 'failed', updated_at = $2 WHERE id = $1 AND state = 'creating'")
        .bind(id)
        .bind(now_ms())
        .execute(&database.pool)
        .await?;
    Ok(())
}

pub async fn list(database: &Database, workspace_id: &str, limit: u32) -> sqlx::Result<Vec<Checkout>> {
    sqlx::query_as(select_checkout!(
        "WHERE workspace_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
    ))
    .bind(workspace_id)
    .bind(i64::from(limit))
    .fetch_all(&database.pool)
    .await
}

/// Records an event as handled; false when it already was (a redelivery).
/// Concurrent deliveries of one event wait on each other here.
pub async fn claim_event(tx: &mut Tx, event_id: &str, event_type: &str) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO payment_events (event_id, type, received_at) VALUES ($1, $2, $3) ON CONFLICT (event_id) DO NOTHING",
    )
    .bind(event_id)
    .bind(event_type)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The checkout a session belongs to: by the session id recorded when it
/// opened, or by our id in its metadata when the gateway stopped between the
/// processor's answer and recording it.
pub async fn by_session(tx: &mut Tx, session_id: &str, our_id: Option<&str>) -> sqlx::Result<Option<Checkout>> {
    let found: Option<Checkout> = sqlx::query_as(select_checkout!("WHERE session_id = $1"))
        .bind(session_id)
        .fetch_optional(&mut **tx)
        .await?;
    if found.is_some() {
        return Ok(found);
    }
    let Some(our_id) = our_id else { return Ok(None) };
    let adopted = sqlx::query("UPDATE checkouts SET session_id = $2 WHERE id = $1 AND session_id IS NULL")
        .bind(our_id)
        .bind(session_id)
        .execute(&mut **tx)
        .await?;
    if adopted.rows_affected() == 0 {
        return Ok(None);
    }
    by_id(tx, our_id).await
}

pub async fn get(database: &Database, id: &str) -> sqlx::Result<Checkout> {
    sqlx::query_as(select_checkout!("WHERE id = $1"))
        .bind(id)
        .fetch_one(&database.pool)
        .await
}

pub async fn by_id(tx: &mut Tx, id: &str) -> sqlx::Result<Option<Checkout>> {
    sqlx::query_as(select_checkout!("WHERE id = $1"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await
}

pub async fn by_payment_intent(tx: &mut Tx, payment_intent: &str) -> sqlx::Result<Option<Checkout>> {
    sqlx::query_as(select_checkout!("WHERE payment_intent = $1"))
        .bind(payment_intent)
        .fetch_optional(&mut **tx)
        .await
}

/// Moves a checkout from one of `from` to `to`; false when it was in none of
/// them (another delivery got there first). The row lock makes concurrent
/// deliveries take turns, and the loser sees the winner's state.
pub async fn transition(
    tx: &mut Tx,
    id: &str,
    from: &[&'static str],
    to: &str,
    payment_intent: Option<&str>,
) -> sqlx::Result<bool> {
    let states = from.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(", ");
    // The states are this module's callers' literals, never input.
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE checkouts SET state = $2, payment_intent = COALESCE(payment_intent, $3), updated_at = $4 \
         WHERE id = $1 AND state IN ({states})"
    )))
    .bind(id)
    .bind(to)
    .bind(payment_intent)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Raises the refunded total to `refunded_cents` (refund events carry the
/// running total, so a late, older one changes nothing) and returns the
/// increase. The row is locked first, so concurrent deliveries of two refund
/// events see each other's total.
pub async fn raise_refunded(tx: &mut Tx, id: &str, refunded_cents: i64) -> sqlx::Result<i64> {
    sqlx::query("UPDATE checkouts SET updated_at = updated_at WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    let before: i64 = sqlx::query_scalar("SELECT refunded_cents FROM checkouts WHERE id = $1")
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
    if refunded_cents <= before {
        return Ok(0);
    }
    sqlx::query("UPDATE checkouts SET refunded_cents = $2, updated_at = $3 WHERE id = $1")
        .bind(id)
        .bind(refunded_cents)
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
    Ok(refunded_cents - before)
}

pub async fn hold(tx: &mut Tx, workspace_id: &str, reason: &str) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO payment_holds (workspace_id, reason, since) VALUES ($1, $2, $3) ON CONFLICT (workspace_id) DO NOTHING",
    )
    .bind(workspace_id)
    .bind(reason)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub async fn held(database: &Database, workspace_id: &str) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar("SELECT reason FROM payment_holds WHERE workspace_id = $1")
        .bind(workspace_id)
        .fetch_optional(&database.pool)
        .await
}

pub async fn release_hold(database: &Database, workspace_id: &str) -> sqlx::Result<bool> {
    let _turn = database.write_turn().await;
    let done = sqlx::query("DELETE FROM payment_holds WHERE workspace_id = $1")
        .bind(workspace_id)
        .execute(&database.pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// A subscription as one event describes it.
pub struct SubscriptionState<'a> {
    pub subscription_id: &'a str,
    pub checkout: &'a Checkout,
    pub plan: &'a str,
    pub status: &'a str,
    pub cancel_at_period_end: bool,
    pub current_period_end: Option<i64>,
    pub event_created: i64,
}

/// Applies `state` unless an event newer than it was applied already (at the
/// same second, an ended subscription stays ended); true when applied.
pub async fn apply_subscription(tx: &mut Tx, state: &SubscriptionState<'_>) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT INTO subscriptions (subscription_id, workspace_id, checkout_id, plan, status, cancel_at_period_end, \
         current_period_end, event_created, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (subscription_id) DO UPDATE SET status = $5, cancel_at_period_end = $6, \
         current_period_end = COALESCE($7, subscriptions.current_period_end), event_created = $8, updated_at = $9 \
         WHERE subscriptions.event_created < $8 \
            OR (subscriptions.event_created = $8 AND subscriptions.status <> 'canceled')",
    )
    .bind(state.subscription_id)
    .bind(&state.checkout.workspace_id)
    .bind(&state.checkout.id)
    .bind(state.plan)
    .bind(state.status)
    .bind(i64::from(state.cancel_at_period_end))
    .bind(state.current_period_end)
    .bind(state.event_created)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A paid invoice renews the period (never shortens it).
pub async fn renew_subscription(tx: &mut Tx, subscription_id: &str, period_end: i64) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "UPDATE subscriptions SET current_period_end = $2, updated_at = $3 \
         WHERE subscription_id = $1 AND (current_period_end IS NULL OR current_period_end < $2)",
    )
    .bind(subscription_id)
    .bind(period_end)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn subscription_status(tx: &mut Tx, subscription_id: &str) -> sqlx::Result<Option<(String, String, String)>> {
    sqlx::query_as("SELECT workspace_id, plan, status FROM subscriptions WHERE subscription_id = $1")
        .bind(subscription_id)
        .fetch_optional(&mut **tx)
        .await
}
