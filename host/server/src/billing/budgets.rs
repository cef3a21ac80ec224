//! Spend controls (docs/billing.md, "Spend controls"): a workspace's budget
//! and per-key budgets, each a daily or monthly (UTC) USD limit with an
//! optional cap on one request's worst case and alert thresholds. The only
//! code that issues SQL against `budgets` and `budget_usage`.
//!
//! A request's worst case is held against every budget that applies (its
//! workspace's and its key's) before the wallet is asked. As with the plan's
//! request counter (`quota.rs`), the database decides: a gateway *claims*
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

use chrono::{DateTime, Datelike, TimeZone, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::quota::Clock;
use tollgate_core::db::{Database, new_id, now_ms};
use tollgate_core::money::Nanos;
use tollgate_ledger::{Ledger, RequestKind, RequestLogRow};

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

/// A budget's period: the UTC calendar day or month.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Daily,
    Monthly,
}

impl Period {
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Daily => "daily",
            Period::Monthly => "monthly",
        }
    }

    fn parse(text: &str) -> Option<Period> {
        match text {
            "daily" => Some(Period::Daily),
            "monthly" => Some(Period::Monthly),
            _ => None,
        }
    }

    /// The period `now` falls in, as its row key: `YYYY-MM-DD` or `YYYY-MM`.
    pub fn key(self, now: DateTime<Utc>) -> String {
        match self {
            Period::Daily => format!("{:04}-{:02}-{:02}", now.year(), now.month(), now.day()),
            Period::Monthly => format!("{:04}-{:02}", now.year(), now.month()),
        }
    }

    /// The start (inclusive) and end (exclusive) of the period `now` falls in.
    pub fn bounds(self, now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
        let day = Utc
            .with_ymd_and_hms(now.year(), now.month(), now.day(), 0, 0, 0)
            .single()
            .expect("midnight UTC exists");
        match self {
            Period::Daily => (day, day + chrono::Days::new(1)),
            Period::Monthly => {
                let start = day - chrono::Days::new(u64::from(now.day() - 1));
                (start, start + chrono::Months::new(1))
            }
        }
    }
}

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

/// Whether `spent` reaches `percent`% of `limit`, exactly.
pub fn crossed(spent: Nanos, limit: Nanos, percent: u32) -> bool {
    i128::from(spent.0) * 100 >= i128::from(limit.0) * i128::from(percent)
}

/// `percent`% of `limit`, rounded up to the nano-USD (the least spend that
/// crosses it).
pub fn threshold(limit: Nanos, percent: u32) -> Nanos {
    let scaled = i128::from(limit.0) * i128::from(percent);
    Nanos(i64::try_from((scaled + 99) / 100).unwrap_or(i64::MAX))
}

/// How much to claim at once for a request of `amount`, given what the
/// period had claimed when last seen; the claim is never less than what the
/// request needs.
fn slice_size(limit: Nanos, seen: i64, amount: i64) -> i64 {
    (limit.0.saturating_sub(seen) / HEADROOM)
        .min(amount.saturating_mul(SLICE_REQUESTS))
        .max(0)
}

/// Checks and normalises alert thresholds: 1 to 100 percent, at most
/// [`MAX_ALERTS`], sorted without repeats.
pub fn alert_thresholds(given: Option<Vec<u32>>) -> Result<Vec<u32>, String> {
    let mut thresholds = given.unwrap_or_else(|| DEFAULT_ALERTS.to_vec());
    if let Some(bad) = thresholds.iter().find(|p| !(1..=100).contains(*p)) {
        return Err(format!("alert threshold {bad} is not a percent from 1 to 100"));
    }
    thresholds.sort_unstable();
    thresholds.dedup();
    if thresholds.len() > MAX_ALERTS {
        return Err(format!("at most {MAX_ALERTS} alert thresholds"));
    }
    Ok(thresholds)
}

#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// The request does not fit a budget: the message names it.
    #[error("{0}")]
    Exceeded(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// This gateway's claimed-but-unheld nano-USD of one budget's period.
struct Slice {
    left: i64,
    /// The period's claimed total after this gateway's last claim.
    seen: i64,
    used: Instant,
    /// Held while claiming, so concurrent requests share one claim.
    claiming: Arc<tokio::sync::Mutex<()>>,
}

impl Slice {
    fn new() -> Self {
        Slice {
            left: 0,
            seen: 0,
            used: Instant::now(),
            claiming: Arc::default(),
        }
    }

    fn take(&mut self, amount: i64) -> bool {
        if self.left < amount {
            return false;
        }
        self.left -= amount;
        self.used = Instant::now();
        true
    }
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
    slices: Mutex<HashMap<Key, Slice>>,
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

impl Budgets {
    pub fn new(database: Database, clock: Arc<dyn Clock>) -> Self {
        Budgets(Arc::new(Inner {
            database,
            clock,
            cache: Mutex::default(),
            slices: Mutex::default(),
            pending: Mutex::default(),
            alerted: Mutex::default(),
            ledger: OnceLock::new(),
        }))
    }

    fn slices(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Slice>> {
        self.0.slices.lock().expect("budget slices poisoned")
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
    /// costs a request no I/O.
    pub async fn applying(&self, workspace_id: &str, key_id: &str) -> sqlx::Result<Vec<Arc<Budget>>> {
        let cached = self
            .0
            .cache
            .lock()
            .expect("budget cache poisoned")
            .get(workspace_id)
            .filter(|(_, read)| read.elapsed() < BUDGETS_TTL)
            .map(|(budgets, _)| budgets.clone());
        let all = match cached {
            Some(all) => all,
            None => {
                let all: Arc<Vec<Arc<Budget>>> =
                    Arc::new(self.list(workspace_id).await?.into_iter().map(Arc::new).collect());
                self.0
                    .cache
                    .lock()
                    .expect("budget cache poisoned")
                    .insert(workspace_id.to_string(), (all.clone(), Instant::now()));
                all
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
        let claiming = {
            let mut slices = self.slices();
            let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
            if slice.take(amount) {
                return Ok(true);
            }
            slice.claiming.clone()
        };
        let _claiming = claiming.lock().await;
        loop {
            // A claim made while this request waited may have filled the slice.
            let (left, seen) = {
                let mut slices = self.slices();
                let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
                if slice.take(amount) {
                    return Ok(true);
                }
                (slice.left, slice.seen)
            };
            let need = amount - left;
            let size = need.max(slice_size(budget.limit, seen, amount));
            let mut claimed = self
                .claim(&budget.id, period, size, budget.limit)
                .await?
                .map(|c| (c, size));
            if claimed.is_none() && size > need {
                claimed = self
                    .claim(&budget.id, period, need, budget.limit)
                    .await?
                    .map(|c| (c, need));
            }
            let mut slices = self.slices();
            let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
            match claimed {
                Some((count, size)) => {
                    slice.left += size;
                    slice.seen = slice.seen.max(count);
                }
                None => {
                    slice.seen = budget.limit.0;
                    // What settlements gave back meanwhile may still cover it.
                    return Ok(slice.take(amount));
                }
            }
        }
    }

    /// Claims `size` of the period if its claimed total stays within
    /// `limit`: the new total, or `None` when it does not fit.
    async fn claim(&self, budget_id: &str, period: &str, size: i64, limit: Nanos) -> sqlx::Result<Option<i64>> {
        if size > limit.0 {
            return Ok(None);
        }
        let _turn = self.0.database.write_turn().await;
        sqlx::query_scalar(
            "INSERT INTO budget_usage (budget_id, period, claimed_nano) VALUES ($1, $2, $3) \
             ON CONFLICT (budget_id, period) DO UPDATE SET claimed_nano = budget_usage.claimed_nano + $3 \
             WHERE budget_usage.claimed_nano + $3 <= $4 RETURNING claimed_nano",
        )
        .bind(budget_id)
        .bind(period)
        .bind(size)
        .bind(limit.0)
        .fetch_optional(&self.0.database.pool)
        .await
    }

    fn give_back(&self, budget: &Budget, period: &str, amount: i64) {
        if amount <= 0 {
            return;
        }
        let mut slices = self.slices();
        let slice = slices
            .entry((budget.id.clone(), period.to_string(), budget.limit.0))
            .or_insert_with(Slice::new);
        slice.left += amount;
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
        let unused: i64 = self
            .slices()
            .iter()
            .filter(|(key, _)| ours(key))
            .map(|(_, s)| s.left)
            .sum();
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
            let spent: sqlx::Result<Option<i64>> = {
                let _turn = self.0.database.write_turn().await;
                sqlx::query_scalar(
                    "UPDATE budget_usage SET spent_nano = spent_nano + $3 WHERE budget_id = $1 AND period = $2 \
                     RETURNING spent_nano",
                )
                .bind(&budget_id)
                .bind(&period)
                .bind(amount)
                .fetch_optional(&self.0.database.pool)
                .await
            };
            match spent {
                Ok(Some(spent)) => self.alert(&budget, &period, Nanos(spent)).await,
                // The budget was removed meanwhile.
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, %budget_id, "could not add settled spend to a budget; retrying");
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
    async fn return_slices(&self, idle: Option<Duration>) {
        let returned: Vec<(Key, i64)> = {
            let mut slices = self.slices();
            let done: Vec<Key> = slices
                .iter()
                .filter(|(_, s)| idle.is_none_or(|idle| s.used.elapsed() >= idle))
                .map(|(key, _)| key.clone())
                .collect();
            done.into_iter()
                .filter_map(|key| slices.remove(&key).map(|s| (key, s.left)))
                .filter(|(_, left)| *left > 0)
                .collect()
        };
        for ((budget_id, period, _), left) in returned {
            let _turn = self.0.database.write_turn().await;
            let done = sqlx::query(
                "UPDATE budget_usage SET claimed_nano = claimed_nano - $3 \
                 WHERE budget_id = $1 AND period = $2 AND claimed_nano >= $3",
            )
            .bind(&budget_id)
            .bind(&period)
            .bind(left)
            .execute(&self.0.database.pool)
            .await;
            if let Err(error) = done {
                tracing::warn!(%error, %budget_id, "could not hand back an unused budget slice");
            }
        }
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
        detail: Some(detail.to_string()),
        ..RequestLogRow::unbilled(
            RequestKind::BudgetAlert,
            id.to_string(),
            budget.key_id.clone().unwrap_or_default(),
            budget.workspace_id.clone(),
            String::new(),
        )
    }
}

/// The bounds of the period whose key is `key`.
fn period_bounds(period: Period, key: &str) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let day = match period {
        Period::Daily => format!("{key}T00:00:00Z"),
        Period::Monthly => format!("{key}-01T00:00:00Z"),
    };
    let at = DateTime::parse_from_rfc3339(&day).ok()?.with_timezone(&Utc);
    Some(period.bounds(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn periods_are_utc_calendar_days_and_months() {
        assert_eq!(Period::Daily.key(at("2026-11-15T23:59:59Z")), "2026-11-15");
        assert_eq!(Period::Daily.key(at("2026-11-16T00:00:00Z")), "2026-11-16");
        // 00:30 on the 16th in Paris is still the 15th in UTC.
        assert_eq!(Period::Daily.key(at("2026-11-16T00:30:00+01:00")), "2026-11-15");
        assert_eq!(Period::Monthly.key(at("2026-12-31T23:59:59Z")), "2026-12");
        assert_eq!(Period::Monthly.key(at("2027-01-01T00:30:00+01:00")), "2026-12");
        assert_eq!(
            Period::Daily.bounds(at("2026-12-31T18:00:00Z")),
            (at("2026-12-31T00:00:00Z"), at("2027-01-01T00:00:00Z"))
        );
        assert_eq!(
            Period::Monthly.bounds(at("2028-02-29T12:00:00Z")),
            (at("2028-02-01T00:00:00Z"), at("2028-03-01T00:00:00Z"))
        );
        assert_eq!(
            period_bounds(Period::Monthly, "2026-12"),
            Some((at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00Z")))
        );
        assert_eq!(
            period_bounds(Period::Daily, "2026-02-28"),
            Some((at("2026-02-28T00:00:00Z"), at("2026-03-01T00:00:00Z")))
        );
    }

    #[test]
    fn thresholds_are_exact_integer_arithmetic() {
        let limit = Nanos::from_usd("0.000000003").unwrap();
        // 80% of 3 nano-USD is 2.4: 2 has not reached it, 3 has.
        assert!(!crossed(Nanos(2), limit, 80));
        assert!(crossed(Nanos(3), limit, 80));
        assert_eq!(threshold(limit, 80), Nanos(3));
        let limit = Nanos::from_usd("1").unwrap();
        assert!(!crossed(Nanos(799_999_999), limit, 80));
        assert!(crossed(Nanos(800_000_000), limit, 80));
        assert_eq!(threshold(limit, 50).usd_decimal(), "0.5");
        assert!(crossed(Nanos(i64::MAX), Nanos(i64::MAX), 100), "no overflow");
    }

    #[test]
    fn alert_thresholds_default_sort_and_refuse_nonsense() {
        assert_eq!(alert_thresholds(None).unwrap(), vec![50, 80, 100]);
        assert_eq!(alert_thresholds(Some(vec![90, 10, 90])).unwrap(), vec![10, 90]);
        assert!(alert_thresholds(Some(vec![0])).is_err());
        assert!(alert_thresholds(Some(vec![101])).is_err());
        assert!(alert_thresholds(Some((1..=11).collect())).is_err());
    }

    #[test]
    fn slices_shrink_to_exact_claims_near_the_limit() {
        let limit = Nanos::from_usd("64").unwrap();
        let request = Nanos::from_usd("1").unwrap().0;
        assert_eq!(slice_size(limit, 0, request), 1_000_000_000, "a 64th of what is left");
        assert_eq!(slice_size(limit, 0, 1_000), 64_000, "64 requests' worth");
        assert_eq!(slice_size(limit, limit.0 - 63, request), 0);
        assert_eq!(slice_size(limit, limit.0 + 5, request), 0);
    }

    struct Fixed(Mutex<DateTime<Utc>>);

    impl Clock for Fixed {
        fn now(&self) -> DateTime<Utc> {
            *self.0.lock().unwrap()
        }
    }

    async fn database(dir: &tempfile::TempDir) -> Database {
        let url = tollgate_core::db::sqlite_url(&dir.path().join("b.db"));
        Database::open(&url, Default::default()).await.unwrap()
    }

    fn spec(limit: &str) -> BudgetSpec {
        BudgetSpec {
            key_id: Some("key_a".into()),
            period: Period::Daily,
            limit: Nanos::from_usd(limit).unwrap(),
            max_request: None,
            alert_thresholds: vec![50, 80, 100],
        }
    }

    async fn claimed(database: &Database) -> i64 {
        sqlx::query_scalar("SELECT CAST(COALESCE(SUM(claimed_nano), 0) AS BIGINT) FROM budget_usage")
            .fetch_one(&database.pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn holds_fit_the_limit_settle_what_was_billed_and_a_new_day_starts_again() {
        let dir = tempfile::tempdir().unwrap();
        let database = database(&dir).await;
        let clock = Arc::new(Fixed(Mutex::new(at("2026-11-15T23:59:00Z"))));
        let budgets = Budgets::new(database.clone(), clock.clone());
        budgets.set("ws", spec("1")).await.unwrap();
        assert!(
            budgets.applying("ws", "key_b").await.unwrap().is_empty(),
            "another key's"
        );
        let applying = budgets.applying("ws", "key_a").await.unwrap();
        assert_eq!(applying.len(), 1);
        let quarter = Nanos::from_usd("0.25").unwrap();
        let holds: Vec<BudgetHold> = futures_util::future::join_all((0..4).map(|_| budgets.hold(&applying, quarter)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let refused = budgets.hold(&applying, Nanos(1)).await;
        let Err(BudgetError::Exceeded(message)) = refused else {
            panic!("a fifth request past the limit fits")
        };
        assert!(
            message.contains("key key_a's daily budget") && message.contains("2026-11-15"),
            "{message}"
        );
        // Each request billed a tenth of its hold: the rest goes back.
        for hold in holds {
            hold.settle(Nanos::from_usd("0.025").unwrap());
        }
        budgets.flush().await;
        let usage = budgets.usage(&applying[0], "2026-11-15").await.unwrap();
        assert_eq!(usage.spent, Nanos::from_usd("0.1").unwrap());
        let full = budgets.hold(&applying, Nanos::from_usd("0.9").unwrap()).await.unwrap();
        assert!(budgets.hold(&applying, Nanos(1)).await.is_err(), "exactly the limit");
        full.settle(Nanos::from_usd("0.9").unwrap());
        assert!(budgets.hold(&applying, Nanos(1)).await.is_err(), "all of it billed");
        // A dropped hold (nothing billed) goes back whole.
        clock.0.lock().unwrap().clone_from(&at("2026-11-16T00:00:00Z"));
        let hold = budgets.hold(&applying, Nanos::from_usd("1").unwrap()).await.unwrap();
        drop(hold);
        assert!(budgets.hold(&applying, Nanos::from_usd("1").unwrap()).await.is_ok());
        budgets.return_slices(None).await;
        assert!(claimed(&database).await <= Nanos::from_usd("2").unwrap().0);
    }

    #[tokio::test]
    async fn a_lowered_limit_is_not_passed_with_a_slice_claimed_under_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let database = database(&dir).await;
        let clock: Arc<dyn Clock> = Arc::new(Fixed(Mutex::new(at("2026-11-15T12:00:00Z"))));
        let budgets = Budgets::new(database.clone(), clock);
        let usd = |s: &str| Nanos::from_usd(s).unwrap();
        budgets.set("ws", spec("1")).await.unwrap();
        let applying = budgets.applying("ws", "key_a").await.unwrap();
        // Far from the limit: a slice (a 64th of 1 USD) is claimed.
        budgets
            .hold(&applying, usd("0.001"))
            .await
            .unwrap()
            .settle(usd("0.001"));
        assert_eq!(claimed(&database).await, usd("1").0 / 64);
        let lowered = budgets.set("ws", spec("0.005")).await.unwrap();
        assert_eq!(lowered.id, applying[0].id, "a replaced budget keeps its id");
        let applying = budgets.applying("ws", "key_a").await.unwrap();
        assert_eq!(applying[0].limit, usd("0.005"));
        assert!(
            budgets.hold(&applying, usd("0.004")).await.is_err(),
            "what the old slice holds unused counts until it goes back"
        );
        budgets.return_slices(None).await;
        budgets
            .hold(&applying, usd("0.004"))
            .await
            .unwrap()
            .settle(usd("0.004"));
        assert!(
            budgets.hold(&applying, Nanos(1)).await.is_err(),
            "0.001 + 0.004 is the new limit"
        );
        budgets.flush().await;
        let usage = budgets.usage(&applying[0], "2026-11-15").await.unwrap();
        assert_eq!((usage.spent, usage.held), (usd("0.005"), Nanos::ZERO));
    }

    #[tokio::test]
    async fn max_request_refuses_a_worst_case_above_it_naming_max_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let budgets = Budgets::new(database(&dir).await, Arc::new(super::super::quota::SystemClock));
        let mut spec = spec("10");
        spec.key_id = None;
        spec.max_request = Some(Nanos::from_usd("0.01").unwrap());
        budgets.set("ws", spec).await.unwrap();
        let applying = budgets.applying("ws", "any").await.unwrap();
        assert!(budgets.hold(&applying, Nanos::from_usd("0.01").unwrap()).await.is_ok());
        let Err(BudgetError::Exceeded(message)) = budgets.hold(&applying, Nanos::from_usd("0.011").unwrap()).await
        else {
            panic!("above max_request")
        };
        assert!(
            message.contains("max_tokens") && message.contains("workspace's daily budget"),
            "{message}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_gateways_with_slices_never_claim_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let database = database(&dir).await;
        let clock: Arc<dyn Clock> = Arc::new(Fixed(Mutex::new(at("2026-11-15T12:00:00Z"))));
        let (a, b) = (
            Budgets::new(database.clone(), clock.clone()),
            Budgets::new(database.clone(), clock),
        );
        a.set("ws", spec("1")).await.unwrap();
        let applying = a.applying("ws", "key_a").await.unwrap();
        let cost = Nanos::from_usd("0.003").unwrap();
        let takes = (0..800).map(|n| {
            let (gateway, applying) = (if n % 2 == 0 { a.clone() } else { b.clone() }, applying.clone());
            tokio::spawn(async move {
                match gateway.hold(&applying, cost).await {
                    Ok(hold) => {
                        hold.settle(cost);
                        1
                    }
                    Err(_) => 0,
                }
            })
        });
        let admitted: i64 = futures_util::future::join_all(takes)
            .await
            .into_iter()
            .map(Result::unwrap)
            .sum();
        assert!(
            admitted * cost.0 <= Nanos::from_usd("1").unwrap().0,
            "{admitted} admitted"
        );
        a.return_slices(None).await;
        b.return_slices(None).await;
        // Once the slices are back, what is left is exactly the limit's remainder.
        let mut more = 0;
        while a.hold(&applying, cost).await.map(|h| h.settle(cost)).is_ok() {
            more += 1;
        }
        assert_eq!((admitted + more) * cost.0, Nanos::from_usd("0.999").unwrap().0);
        assert!(claimed(&database).await <= Nanos::from_usd("1").unwrap().0);
    }
}
