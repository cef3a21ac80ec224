//! The background side of budgets: settled spend added to `spent_nano`
//! every [`FLUSH`], the alert rows of thresholds crossed, and idle slices
//! handed back.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use tollgate_core::db::now_ms;
use tollgate_core::money::Nanos;
use tollgate_ledger::{Ledger, RequestKind, RequestLogRow};

use super::period::{crossed, period_bounds, threshold};
use super::{Budget, Budgets, FLUSH, IDLE, Key};

impl Budgets {
    /// Adds settled spend to `spent_nano` and hands back idle slices, every
    /// [`FLUSH`], for the life of the runtime; threshold crossings are logged
    /// through `ledger`.
    pub fn start(&self, ledger: Ledger) {
        let _ = self.0.ledger.set(ledger);
        let budgets = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(FLUSH);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                budgets.flush().await;
                budgets.return_slices(Some(IDLE)).await;
            }
        });
    }

    /// Flushes the spend and hands back every slice: at a graceful shutdown,
    /// once requests have drained.
    pub async fn shutdown(&self) {
        self.flush().await;
        self.return_slices(None).await;
    }

    /// Adds this gateway's settled spend to each period's `spent_nano` and
    /// logs every alert threshold the new total has reached. A threshold is
    /// checked against the total (not only the step that crossed it), so a
    /// crossing whose row was lost (a crash between the two writes) is
    /// written by the period's next flush on any gateway; the row's
    /// deterministic id keeps it one.
    pub async fn flush(&self) {
        let pending: Vec<(Key, (Arc<Budget>, i64))> = {
            let mut pending = self.0.pending.lock().expect("budget spend poisoned");
            pending.drain().collect()
        };
        for ((budget_id, period, limit), (budget, amount)) in pending {
            let was_down = self.0.outage.is_down();
            let spent: sqlx::Result<Option<i64>> = {
                let _turn = self.0.database.write_turn().await;
                let update = sqlx::query_scalar(
                    "UPDATE budget_usage SET spent_nano = spent_nano + $3 WHERE budget_id = $1 AND period = $2 \
                     RETURNING spent_nano",
                )
                .bind(&budget_id)
                .bind(&period)
                .bind(amount)
                .fetch_optional(&self.0.database.pool);
                self.0.outage.ask(update).await
            };
            match spent {
                Ok(Some(spent)) => self.alert(&budget, &period, Nanos(spent)).await,
                // The budget was removed meanwhile.
                Ok(None) => {}
                Err(error) => {
                    // Once per outage, not on every flush.
                    if !was_down {
                        tracing::warn!(%error, %budget_id, "could not add settled spend to a budget; retrying");
                    }
                    let mut pending = self.0.pending.lock().expect("budget spend poisoned");
                    let entry = pending.entry((budget_id, period, limit)).or_insert_with(|| (budget, 0));
                    entry.1 = entry.1.saturating_add(amount);
                }
            }
        }
    }

    async fn alert(&self, budget: &Budget, period: &str, spent: Nanos) {
        let Some(ledger) = self.0.ledger.get() else { return };
        for &percent in &budget.alert_thresholds {
            if spent.0 <= 0 || !crossed(spent, budget.limit, percent) {
                continue;
            }
            let id = format!("budget_{}_{period}_{percent}", budget.id);
            if self.0.alerted.lock().expect("budget alerts poisoned").contains(&id) {
                continue;
            }
            let row = alert_row(budget, period, percent, spent, &id);
            match ledger.log(row).await {
                Ok(_) => {
                    let mut alerted = self.0.alerted.lock().expect("budget alerts poisoned");
                    // Forgetting only costs a repeated (ignored) insert.
                    if alerted.len() > 10_000 {
                        alerted.clear();
                    }
                    alerted.insert(id);
                }
                Err(error) => {
                    tracing::warn!(%error, alert = %id, "could not log a budget alert; the next flush retries")
                }
            }
        }
    }

    /// Hands back the unused part of every slice idle for `idle` (`None`:
    /// every slice).
    pub(super) async fn return_slices(&self, idle: Option<Duration>) {
        self.0.slices.return_idle(idle).await;
    }
}

/// The request-log row of a crossed threshold: kind `budget_alert`, its
/// event's data in `detail`.
fn alert_row(budget: &Budget, period: &str, percent: u32, spent: Nanos, id: &str) -> RequestLogRow {
    let bounds = period_bounds(budget.period, period);
    let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let detail = serde_json::json!({
        "budget_id": budget.id,
        "scope": budget.scope(),
        "period": budget.period.as_str(),
        "period_start": bounds.map(|(s, _)| at(s)),
        "period_end": bounds.map(|(_, e)| at(e)),
        "threshold_percent": percent,
        "threshold_usd": threshold(budget.limit, percent).usd_decimal(),
        "limit_usd": budget.limit.usd_decimal(),
        "spent_usd": spent.usd_decimal(),
        "currency": "USD",
    });
    RequestLogRow {
        outcome: "threshold_reached".into(),
        started_at_ms: now_ms(),
        detail: tollgate_ledger::JsonText::of(&detail),
        ..RequestLogRow::unbilled(
            RequestKind::BudgetAlert,
            id.to_string(),
            budget.key_id.clone().unwrap_or_default(),
            budget.workspace_id.clone(),
            String::new(),
        )
    }
}
