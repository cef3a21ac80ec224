//! The monthly request counter of limited plans: the only code that issues SQL
//! against `plan_usage`. One row per workspace and calendar month (UTC),
//! `YYYY-MM`; a new month is a new row, so counters reset at the boundary
//! with nothing to sweep.
//!
//! The row counts the requests gateways have *claimed*, leased in slices
//! (`leased.rs`): a claim is one conditional upsert (`requests + k ≤ limit`),
//! so gateways sharing a database cannot together pass the limit. A gateway
//! claims a slice of several requests while the month is far from its limit
//! (at least [`HEADROOM`] slices left) and admits them from memory, with no
//! I/O; near the limit it claims one request at a time. A slice unused for
//! [`IDLE`] goes back, and every slice at a graceful shutdown. A gateway that
//! dies loses its unused slice for that month: the workspace may then be
//! admitted up to one slice fewer than its limit, never more.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Datelike, Utc};

use crate::leased::{Claims, Leased};
use tollgate_core::db::Database;

/// The largest slice one gateway claims at once.
const MAX_SLICE: i64 = 100;
/// A slice is at most this fraction of what is left of the month's limit.
const HEADROOM: i64 = 64;
/// An unused slice goes back after this long without a request.
pub const IDLE: Duration = Duration::from_secs(2);

/// What time it is, for choosing the month. Tests inject one through
/// `billing.test_clock_file`; production uses the system clock.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock read from a file holding an RFC 3339 time, re-read on every call so
/// a test can move it while the gateway runs. A missing or unreadable file
/// reads as the system time.
pub struct FileClock(pub PathBuf);

impl Clock for FileClock {
    fn now(&self) -> DateTime<Utc> {
        std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|text| DateTime::parse_from_rfc3339(text.trim()).ok())
            .map_or_else(Utc::now, |t| t.with_timezone(&Utc))
    }
}

/// The counter's period for `now`: its calendar month in UTC.
pub fn period(now: DateTime<Utc>) -> String {
    format!("{:04}-{:02}", now.year(), now.month())
}

/// How many requests to claim at once, given the count last seen.
fn slice_size(limit: i64, seen: i64) -> i64 {
    (limit.saturating_sub(seen) / HEADROOM).clamp(1, MAX_SLICE)
}

/// A workspace's month: one `plan_usage` row.
type Key = (String, String);

/// The `plan_usage` rows, claimed a slice at a time.
struct PlanUsage {
    database: Database,
}

impl Claims for PlanUsage {
    type Key = Key;

    async fn claim(&self, (workspace_id, period): &Key, size: i64, limit: i64) -> sqlx::Result<Option<i64>> {
        let _turn = self.database.write_turn().await;
        sqlx::query_scalar(
            "INSERT INTO plan_usage (workspace_id, period, requests) VALUES ($1, $2, $3) \
             ON CONFLICT (workspace_id, period) DO UPDATE SET requests = plan_usage.requests + $3 \
             WHERE plan_usage.requests + $3 <= $4 RETURNING requests",
        )
        .bind(workspace_id)
        .bind(period)
        .bind(size)
        .bind(limit)
        .fetch_optional(&self.database.pool)
        .await
    }

    async fn unclaim(&self, (workspace_id, period): &Key, amount: i64) -> sqlx::Result<()> {
        let _turn = self.database.write_turn().await;
        sqlx::query(
            "UPDATE plan_usage SET requests = requests - $3 WHERE workspace_id = $1 AND period = $2 AND requests >= $3",
        )
        .bind(workspace_id)
        .bind(period)
        .bind(amount)
        .execute(&self.database.pool)
        .await?;
        Ok(())
    }
}

/// The owner of `plan_usage`, with this gateway's slices.
#[derive(Clone)]
pub struct Quota(Arc<Leased<PlanUsage>>);

impl Quota {
    pub fn new(database: Database) -> Self {
        Self(Arc::new(Leased::new(PlanUsage { database }, "plan request slices")))
    }

    /// Admits one request of `period` if the workspace's month has room under
    /// `limit`: from this gateway's slice, else by a claim.
    pub async fn take(&self, workspace_id: &str, period: &str, limit: u64) -> sqlx::Result<bool> {
        if limit == 0 {
            return Ok(false);
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let key = (workspace_id.to_string(), period.to_string());
        self.0.take(&key, 1, limit, |seen| slice_size(limit, seen)).await
    }

    /// Uncounts a request [`Quota::take`] admitted that was then refused for
    /// another reason (the wallet was short): it goes back into this
    /// gateway's slice, with no I/O.
    pub fn give_back(&self, workspace_id: &str, period: &str) {
        self.0.give_back(&(workspace_id.to_string(), period.to_string()), 1);
    }

    /// Hands back the unused part of every slice idle for `idle` (`None`:
    /// every slice, at shutdown).
    pub async fn return_slices(&self, idle: Option<Duration>) {
        self.0.return_idle(idle).await;
    }

    /// Requests counted in `period`, less this gateway's unused slice (other
    /// gateways' unused slices, at most one each, are still in it).
    pub async fn counted(&self, workspace_id: &str, period: &str) -> sqlx::Result<u64> {
        let requests: Option<i64> =
            sqlx::query_scalar("SELECT requests FROM plan_usage WHERE workspace_id = $1 AND period = $2")
                .bind(workspace_id)
                .bind(period)
                .fetch_optional(&self.0.claims().database.pool)
                .await?;
        let unused = self.0.unused(|(w, p)| w == workspace_id && p == period);
        Ok(u64::try_from(requests.unwrap_or(0).saturating_sub(unused)).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_is_the_utc_calendar_month() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(period(at("2026-11-30T23:59:59Z")), "2026-11");
        assert_eq!(period(at("2026-12-01T00:00:00Z")), "2026-12");
        // 00:30 on the 1st in Paris is still the previous month in UTC.
        assert_eq!(period(at("2027-01-01T00:30:00+01:00")), "2026-12");
    }

    #[test]
    fn slices_shrink_to_single_requests_near_the_limit() {
        assert_eq!(slice_size(5, 0), 1);
        assert_eq!(slice_size(1_000, 0), 15);
        assert_eq!(slice_size(1_000, 900), 1);
        assert_eq!(slice_size(100_000_000, 0), MAX_SLICE);
        assert_eq!(slice_size(10, 20), 1);
    }

    async fn database(dir: &tempfile::TempDir) -> Database {
        let url = tollgate_core::db::sqlite_url(&dir.path().join("q.db"));
        Database::open(&url, Default::default()).await.unwrap()
    }

    #[tokio::test]
    async fn counts_up_to_the_limit_per_month_and_gives_back() {
        let dir = tempfile::tempdir().unwrap();
        let quota = Quota::new(database(&dir).await);
        for _ in 0..3 {
            assert!(quota.take("ws_a", "2026-11", 3).await.unwrap());
        }
        assert!(!quota.take("ws_a", "2026-11", 3).await.unwrap());
        assert_eq!(quota.counted("ws_a", "2026-11").await.unwrap(), 3);
        assert!(
            quota.take("ws_a", "2026-12", 3).await.unwrap(),
            "a new month starts at 0"
        );
        assert!(quota.take("ws_b", "2026-11", 3).await.unwrap(), "per workspace");
        quota.give_back("ws_a", "2026-11");
        assert!(quota.take("ws_a", "2026-11", 3).await.unwrap());
        assert!(!quota.take("ws_c", "2026-11", 0).await.unwrap());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_requests_share_a_claim_instead_of_each_claiming_a_slice() {
        let dir = tempfile::tempdir().unwrap();
        let database = database(&dir).await;
        let quota = Quota::new(database.clone());
        let takes = (0..300).map(|_| {
            let quota = quota.clone();
            tokio::spawn(async move { quota.take("ws", "2026-11", 1_000).await.unwrap() })
        });
        for admitted in futures_util::future::join_all(takes).await {
            assert!(admitted.unwrap());
        }
        let claimed: i64 = sqlx::query_scalar("SELECT requests FROM plan_usage WHERE workspace_id = 'ws'")
            .fetch_one(&database.pool)
            .await
            .unwrap();
        assert!(claimed < 300 + 15, "claimed {claimed} for 300 requests");
        assert_eq!(quota.counted("ws", "2026-11").await.unwrap(), 300);
    }

    #[tokio::test]
    async fn through_an_outage_the_claimed_slice_is_spent_and_nothing_past_it_is_admitted() {
        let dir = tempfile::tempdir().unwrap();
        let database = database(&dir).await;
        let quota = Quota::new(database.clone());
        let rename = |from: &'static str, to: &'static str| {
            let pool = database.pool.clone();
            async move {
                sqlx::query(sqlx::AssertSqlSafe(format!("ALTER TABLE {from} RENAME TO {to}")))
                    .execute(&pool)
                    .await
                    .unwrap();
            }
        };
        // A slice of 15 (a 64th of 1,000) claimed by the first request.
        assert!(quota.take("ws", "2026-11", 1_000).await.unwrap());
        rename("plan_usage", "plan_usage_away").await;
        for _ in 0..14 {
            assert!(quota.take("ws", "2026-11", 1_000).await.unwrap(), "from the slice");
        }
        assert!(
            quota.take("ws", "2026-11", 1_000).await.is_err(),
            "past the slice a claim is needed, and it cannot be made"
        );
        // A request given back is admitted again; an idle slice that cannot
        // be handed back stays here rather than being lost.
        quota.give_back("ws", "2026-11");
        quota.give_back("ws", "2026-11");
        quota.return_slices(None).await;
        assert!(quota.take("ws", "2026-11", 1_000).await.unwrap());
        assert!(quota.take("ws", "2026-11", 1_000).await.unwrap());
        assert!(quota.take("ws", "2026-11", 1_000).await.is_err());

        rename("plan_usage_away", "plan_usage").await;
        tokio::time::sleep(tollgate_core::outage::RETRY_AFTER).await;
        assert!(
            quota.take("ws", "2026-11", 1_000).await.unwrap(),
            "the database is back"
        );
        assert_eq!(quota.counted("ws", "2026-11").await.unwrap(), 16);
    }

    #[tokio::test]
    async fn two_gateways_with_slices_admit_exactly_the_limit_once_idle_slices_go_back() {
        let dir = tempfile::tempdir().unwrap();
        let database = database(&dir).await;
        let (a, b) = (Quota::new(database.clone()), Quota::new(database));
        let limit = 1_000;
        // `a` admits from slices (15 at first, fewer as the month fills up).
        for _ in 0..700 {
            assert!(a.take("ws", "2026-11", limit).await.unwrap());
        }
        let a_left = a.0.unused(|(w, p)| w == "ws" && p == "2026-11") as u64;
        let mut by_b = 0;
        while b.take("ws", "2026-11", limit).await.unwrap() {
            by_b += 1;
        }
        assert_eq!(700 + by_b + a_left, limit, "what a holds unused is not b's to spend");
        // a's slice goes back (idle, or at shutdown), and b may use it.
        a.return_slices(None).await;
        let mut after = 0;
        while b.take("ws", "2026-11", limit).await.unwrap() {
            after += 1;
        }
        assert_eq!(after, a_left);
        assert_eq!(b.counted("ws", "2026-11").await.unwrap(), limit);
    }
}
