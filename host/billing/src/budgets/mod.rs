//! Spend controls (docs/billing.md, "Spend controls"): a workspace's budget
//! and per-key budgets, each a daily or monthly (UTC) USD limit with an
//! optional cap on one request's worst case and alert thresholds. The only
//! code that issues SQL against `budgets` and `budget_usage`.
//!
//! A request's worst case is held against every budget that applies (its
//! workspace's and its key's) before the wallet is asked. Like the plan's
//! request counter (`quota.rs`), a budget's period is a counter leased in
//! slices (`leased.rs`), and the database decides: a gateway *claims*
//! nano-USD of a budget's period with one conditional upsert
//! (`claimed + x ≤ limit`), never a read followed by a write, so gateways
//! sharing a database can never together claim past the limit. Far from the
//! limit a gateway claims a slice (a 64th of what is left, at most 64
//! requests' worth) and holds
//! requests' worst cases out of it in memory; near it, it claims exactly what
//! each request needs. At settlement the part of the hold that was not billed
//! goes back into the slice, and a slice unused for [`IDLE`] goes back to the
//! database, as does every slice at a graceful shutdown. A gateway that dies
//! loses its unused slice and its requests' holds for that period: the budget
//! may then refuse early, never let spend pass it.
//!
//! Alert thresholds are crossed on the exact billed spend (`spent_nano`),
//! added at settlement off the response path (batched every [`FLUSH`]). A
//! crossing is written as a request-log row of kind `budget_alert` with the
//! id `budget_{id}_{period}_{percent}`: the log's `ON CONFLICT (request_id)
//! DO NOTHING` makes it one row whichever gateways see it, and the metering
//! feed delivers it to every sink as `dev.tollgate.budget.threshold.v1`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::quota::Clock;
use crate::leased::{Claims, Leased};
use tollgate_core::db::{Database, new_id, now_ms};
use tollgate_core::money::Nanos;
use tollgate_core::outage::{self, Outage};
use tollgate_ledger::Ledger;

/// A slice is at most this fraction of what is left of a budget's period...
const HEADROOM: i64 = 64;
/// ...and at most this many times the worst case of the request claiming it.
const SLICE_REQUESTS: i64 = 64;
/// An unused slice goes back after this long without a request.
pub const IDLE: Duration = Duration::from_secs(2);
/// How often settled spend is added to `spent_nano` (and thresholds checked).
pub const FLUSH: Duration = Duration::from_millis(250);
/// How long a workspace's budgets (or that it has none) are trusted before
/// they are read again: a budget set on another gateway applies here within
/// this long.
const BUDGETS_TTL: Duration = Duration::from_secs(1);
/// The alert thresholds of a budget set without any.
pub const DEFAULT_ALERTS: [u32; 3] = [50, 80, 100];
/// Most alert thresholds one budget may have.
const MAX_ALERTS: usize = 10;

mod background;
mod period;
#[cfg(test)]
mod tests;

pub use period::{Period, alert_thresholds, crossed, threshold};

/// One budget as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub id: String,
    pub workspace_id: String,
    /// The key of a key budget; `None` for the workspace's own.
    pub key_id: Option<String>,
    pub period: Period,
    pub limit: Nanos,
    /// The most one request's worst case may be.
    pub max_request: Option<Nanos>,
    /// Percent of `limit`, ascending.
    pub alert_thresholds: Vec<u32>,
}

impl Budget {
    pub fn scope(&self) -> &'static str {
        if self.key_id.is_some() { "key" } else { "workspace" }
    }

    /// "the workspace's daily budget bud_…" / "key key_…'s monthly budget bud_…".
    fn named(&self) -> String {
        match &self.key_id {
            Some(key) => format!("key {key}'s {} budget {}", self.period.as_str(), self.id),
            None => format!("the workspace's {} budget {}", self.period.as_str(), self.id),
        }
    }
}

/// How much to claim at once for a request of `amount`, given what the
/// period had claimed when last seen; the claim is never less than what the
/// request needs.
fn slice_size(limit: Nanos, seen: i64, amount: i64) -> i64 {
    (limit.0.saturating_sub(seen) / HEADROOM)
        .min(amount.saturating_mul(SLICE_REQUESTS))
        .max(0)
}

#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// The request does not fit a budget: the message names it.
    #[error("{0}")]
    Exceeded(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// (budget id, period key, the limit its slice was claimed under): a budget
/// whose limit changes starts a new slice, claimed against the new limit,
/// while the old one drains and goes back.
type Key = (String, String, i64);

/// A workspace's budgets, and when they were read.
type Cached = (Arc<Vec<Arc<Budget>>>, Instant);

struct Inner {
    database: Database,
    clock: Arc<dyn Clock>,
    cache: Mutex<HashMap<String, Cached>>,
    /// Whether the database answers budget reads, and the outage's warnings.
    outage: Outage,
    slices: Leased<BudgetUsage>,
    /// Settled spend not yet added to `spent_nano`.
    pending: Mutex<HashMap<Key, (Arc<Budget>, i64)>>,
    /// Alert rows this gateway has written (or found written).
    alerted: Mutex<HashSet<String>>,
    ledger: OnceLock<Ledger>,
}

/// The owner of `budgets` and `budget_usage`, with this gateway's slices.
#[derive(Clone)]
pub struct Budgets(Arc<Inner>);

/// A request's worst case held against its budgets; settled with what was
/// billed. Dropped unsettled (nothing was billed), it all goes back.
pub struct BudgetHold {
    budgets: Budgets,
    held: Vec<(Arc<Budget>, String, i64)>,
}

impl BudgetHold {
    /// The billed cost becomes the budgets' spend; the rest of the hold goes
    /// back into this gateway's slices. No I/O.
    pub fn settle(mut self, billed: Nanos) {
        self.release(billed.0.max(0));
    }

    fn release(&mut self, billed: i64) {
        for (budget, period, amount) in self.held.drain(..) {
            let billed = billed.min(amount);
            self.budgets.give_back(&budget, &period, amount - billed);
            if billed > 0 {
                let mut pending = self.budgets.0.pending.lock().expect("budget spend poisoned");
                let entry = pending
                    .entry((budget.id.clone(), period, budget.limit.0))
                    .or_insert_with(|| (budget.clone(), 0));
                entry.0 = budget;
                entry.1 = entry.1.saturating_add(billed);
            }
        }
    }
}

impl Drop for BudgetHold {
    fn drop(&mut self) {
        self.release(0);
    }
}

/// What a budget's period looks like now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeriodUsage {
    /// Billed, exact (this gateway's not yet flushed spend included).
    pub spent: Nanos,
    /// Claimed beyond the spend: requests in flight and other gateways'
    /// unused slices.
    pub held: Nanos,
}

/// A budget to set.
pub struct BudgetSpec {
    pub key_id: Option<String>,
    pub period: Period,
    pub limit: Nanos,
    pub max_request: Option<Nanos>,
    pub alert_thresholds: Vec<u32>,
}

type Row = (String, String, String, String, i64, Option<i64>, String);

fn budget_of(row: Row) -> Budget {
    let (id, workspace_id, key_id, period, limit, max_request, alerts) = row;
    Budget {
        id,
        workspace_id,
        key_id: (!key_id.is_empty()).then_some(key_id),
        period: Period::parse(&period).unwrap_or(Period::Monthly),
        limit: Nanos(limit),
        max_request: max_request.map(Nanos),
        alert_thresholds: alerts.split(',').filter_map(|p| p.trim().parse().ok()).collect(),
    }
}

/// The `budget_usage` rows, claimed a slice at a time.
struct BudgetUsage {
    database: Database,
}

impl Claims for BudgetUsage {
    type Key = Key;

    async fn claim(&self, (budget_id, period, _): &Key, size: i64, limit: i64) -> sqlx::Result<Option<i64>> {
        // A first claim inserts the row, which the upsert's condition does not check.
        if size > limit {
            return Ok(None);
        }
        let _turn = self.database.write_turn().await;
        sqlx::query_scalar(
            "INSERT INTO budget_usage (budget_id, period, claimed_nano) VALUES ($1, $2, $3) \
             ON CONFLICT (budget_id, period) DO UPDATE SET claimed_nano = budget_usage.claimed_nano + $3 \
             WHERE budget_usage.claimed_nano + $3 <= $4 RETURNING claimed_nano",
        )
        .bind(budget_id)
        .bind(period)
        .bind(size)
        .bind(limit)
        .fetch_optional(&self.database.pool)
        .await
    }

    async fn unclaim(&self, (budget_id, period, _): &Key, amount: i64) -> sqlx::Result<()> {
        let _turn = self.database.write_turn().await;
        sqlx::query(
            "UPDATE budget_usage SET claimed_nano = claimed_nano - $3 \
             WHERE budget_id = $1 AND period = $2 AND claimed_nano >= $3",
        )
        .bind(budget_id)
        .bind(period)
        .bind(amount)
        .execute(&self.database.pool)
        .await?;
        Ok(())
    }
}

impl Budgets {
    pub fn new(database: Database, clock: Arc<dyn Clock>) -> Self {
        Budgets(Arc::new(Inner {
            database: database.clone(),
            clock,
            cache: Mutex::default(),
            outage: Outage::new("budgets"),
            slices: Leased::new(BudgetUsage { database }, "budget slices"),
            pending: Mutex::default(),
            alerted: Mutex::default(),
            ledger: OnceLock::new(),
        }))
    }

    /// Every budget of the workspace (its own first, then its keys').
    pub async fn list(&self, workspace_id: &str) -> sqlx::Result<Vec<Budget>> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, workspace_id, key_id, period, limit_nano, max_request_nano, alert_thresholds \
             FROM budgets WHERE workspace_id = $1 ORDER BY key_id",
        )
        .bind(workspace_id)
        .fetch_all(&self.0.database.pool)
        .await?;
        Ok(rows.into_iter().map(budget_of).collect())
    }

    /// The budgets that apply to a request of `key_id` in the workspace,
    /// from a cache trusted for [`BUDGETS_TTL`]: a workspace without budgets
    /// costs a request no I/O. While the database cannot answer, the last
    /// list read stands.
    pub async fn applying(&self, workspace_id: &str, key_id: &str) -> sqlx::Result<Vec<Arc<Budget>>> {
        let cached = self
            .0
            .cache
            .lock()
            .expect("budget cache poisoned")
            .get(workspace_id)
            .map(|(budgets, read)| (budgets.clone(), read.elapsed() < BUDGETS_TTL));
        let all = match cached {
            Some((all, true)) => all,
            last_known => {
                let read = match &last_known {
                    Some(_) => self.0.outage.revalidate(self.list(workspace_id)).await,
                    None => self.0.outage.ask(self.list(workspace_id)).await,
                };
                match read {
                    Ok(list) => {
                        let all: Arc<Vec<Arc<Budget>>> = Arc::new(list.into_iter().map(Arc::new).collect());
                        self.0
                            .cache
                            .lock()
                            .expect("budget cache poisoned")
                            .insert(workspace_id.to_string(), (all.clone(), Instant::now()));
                        all
                    }
                    Err(error) if outage::unreachable(&error) => {
                        self.0.outage.note(last_known.is_some(), &error);
                        match last_known {
                            Some((all, _)) => all,
                            None => return Err(error),
                        }
                    }
                    Err(error) => return Err(error),
                }
            }
        };
        Ok(all
            .iter()
            .filter(|b| b.key_id.as_deref().is_none_or(|k| k == key_id))
            .cloned()
            .collect())
    }

    /// Holds `worst_case` against every budget in `budgets`, all or none.
    pub async fn hold(&self, budgets: &[Arc<Budget>], worst_case: Nanos) -> Result<BudgetHold, BudgetError> {
        let mut hold = BudgetHold {
            budgets: self.clone(),
            held: Vec::new(),
        };
        if budgets.is_empty() {
            return Ok(hold);
        }
        let now = self.0.clock.now();
        for budget in budgets {
            if let Some(max) = budget.max_request
                && worst_case.0 > max.0
            {
                return Err(BudgetError::Exceeded(format!(
                    "Budget exceeded: {} allows at most {} USD per request, and this request may cost up to {} USD. Lower max_tokens (or send a shorter request) so that its worst case fits, or raise the budget's max_request_usd (`billing.limits.set`).",
                    budget.named(),
                    max.usd_decimal(),
                    worst_case.usd_decimal()
                )));
            }
        }
        for budget in budgets {
            let period = budget.period.key(now);
            if !self.take(budget, &period, worst_case.0).await? {
                // `hold` gives back what it already took when it drops.
                let usage = self.usage(budget, &period).await.unwrap_or_default();
                let (_, end) = budget.period.bounds(now);
                return Err(BudgetError::Exceeded(format!(
                    "Budget exceeded: {} allows {} USD for {period} (UTC); {} USD of it is spent and {} USD more is held by requests in flight, and this request may cost up to {} USD. Raise the budget (`billing.limits.set`), lower max_tokens, or wait for the next period ({}).",
                    budget.named(),
                    budget.limit.usd_decimal(),
                    usage.spent.usd_decimal(),
                    usage.held.usd_decimal(),
                    worst_case.usd_decimal(),
                    end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )));
            }
            hold.held.push((budget.clone(), period, worst_case.0));
        }
        Ok(hold)
    }

    /// Takes `amount` of the budget's period: from this gateway's slice, else
    /// by a claim. `false`: it does not fit.
    async fn take(&self, budget: &Budget, period: &str, amount: i64) -> sqlx::Result<bool> {
        if amount <= 0 {
            return Ok(true);
        }
        let key = (budget.id.clone(), period.to_string(), budget.limit.0);
        let size = |seen| slice_size(budget.limit, seen, amount);
        self.0.slices.take(&key, amount, budget.limit.0, size).await
    }

    fn give_back(&self, budget: &Budget, period: &str, amount: i64) {
        let key = (budget.id.clone(), period.to_string(), budget.limit.0);
        self.0.slices.give_back(&key, amount);
    }

    /// The period's spend and holds, as this gateway knows them.
    pub async fn usage(&self, budget: &Budget, period: &str) -> sqlx::Result<PeriodUsage> {
        let row: Option<(i64, i64)> =
            sqlx::query_as("SELECT claimed_nano, spent_nano FROM budget_usage WHERE budget_id = $1 AND period = $2")
                .bind(&budget.id)
                .bind(period)
                .fetch_optional(&self.0.database.pool)
                .await?;
        let (claimed, spent) = row.unwrap_or_default();
        let ours = |(id, p, _): &Key| *id == budget.id && p == period;
        let unflushed: i64 = self
            .0
            .pending
            .lock()
            .expect("budget spend poisoned")
            .iter()
            .filter(|(key, _)| ours(key))
            .map(|(_, (_, n))| *n)
            .sum();
        let unused = self.0.slices.unused(ours);
        let spent = spent.saturating_add(unflushed);
        Ok(PeriodUsage {
            spent: Nanos(spent),
            held: Nanos(claimed.saturating_sub(unused).saturating_sub(spent).max(0)),
        })
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.0.clock.now()
    }

    /// Creates or replaces the workspace's (or a key's) budget; its id stays
    /// when it is replaced, and so does what its period has spent.
    pub async fn set(&self, workspace_id: &str, spec: BudgetSpec) -> sqlx::Result<Budget> {
        let alerts: Vec<String> = spec.alert_thresholds.iter().map(u32::to_string).collect();
        let now = now_ms();
        let _turn = self.0.database.write_turn().await;
        let id: String = sqlx::query_scalar(
            "INSERT INTO budgets (id, workspace_id, key_id, period, limit_nano, max_request_nano, alert_thresholds, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
             ON CONFLICT (workspace_id, key_id) DO UPDATE SET period = excluded.period, limit_nano = excluded.limit_nano, \
             max_request_nano = excluded.max_request_nano, alert_thresholds = excluded.alert_thresholds, \
             updated_at = excluded.updated_at RETURNING id",
        )
        .bind(new_id("bud"))
        .bind(workspace_id)
        .bind(spec.key_id.clone().unwrap_or_default())
        .bind(spec.period.as_str())
        .bind(spec.limit.0)
        .bind(spec.max_request.map(|n| n.0))
        .bind(alerts.join(","))
        .bind(now)
        .fetch_one(&self.0.database.pool)
        .await?;
        self.forget(workspace_id);
        Ok(Budget {
            id,
            workspace_id: workspace_id.to_string(),
            key_id: spec.key_id,
            period: spec.period,
            limit: spec.limit,
            max_request: spec.max_request,
            alert_thresholds: spec.alert_thresholds,
        })
    }

    /// Removes the workspace's (or a key's) budget and its periods' counts;
    /// `false` when there was none.
    pub async fn remove(&self, workspace_id: &str, key_id: Option<&str>) -> sqlx::Result<bool> {
        let _turn = self.0.database.write_turn().await;
        let mut tx = self.0.database.pool.begin().await?;
        let id: Option<String> =
            sqlx::query_scalar("DELETE FROM budgets WHERE workspace_id = $1 AND key_id = $2 RETURNING id")
                .bind(workspace_id)
                .bind(key_id.unwrap_or_default())
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(id) = &id {
            sqlx::query("DELETE FROM budget_usage WHERE budget_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.forget(workspace_id);
        Ok(id.is_some())
    }

    fn forget(&self, workspace_id: &str) {
        self.0.cache.lock().expect("budget cache poisoned").remove(workspace_id);
    }
}
