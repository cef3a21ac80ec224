//! The monthly request counter of limited plans: the only code that issues SQL
//! against `plan_usage`. One row per workspace and calendar month (UTC),
//! `YYYY-MM`; a new month is a new row, so counters reset at the boundary
//! with nothing to sweep.
//!
//! The row counts the requests gateways have *claimed*. A claim is one
//! conditional upsert (`requests + k ≤ limit`): the database decides, never a
//! read followed by a write, so gateways sharing a database cannot together
//! pass the limit. Like the wallet's leases (docs/ledger.md), a gateway claims
//! a slice of several requests while the month is far from its limit (at
//! least [`HEADROOM`] slices left) and admits them from memory, with no I/O;
//! near the limit it claims one request at a time. A slice unused for
//! [`IDLE`] goes back, and every slice at a graceful shutdown. A gateway that
//! dies loses its unused slice for that month: the workspace may then be
//! admitted up to one slice fewer than its limit, never more.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, Utc};

use tollgate_core::db::Database;

/// The largest slice one gateway claims at once.
const MAX_SLICE: u64 = 100;
/// A slice is at most this fraction of what is left of the month's limit.
const HEADROOM: u64 = 64;
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
fn slice_size(limit: u64, seen: u64) -> u64 {
    (limit.saturating_sub(seen) / HEADROOM).clamp(1, MAX_SLICE)
}

/// This gateway's claimed-but-unused requests of one workspace and month.
struct Slice {
    left: u64,
    /// The row's count after this gateway's last claim.
    seen: u64,
    used: Instant,
    /// Held while claiming, so concurrent requests wait for one claim and
    /// share its slice instead of each claiming a slice of its own.
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

    /// Admits one request from the slice, if anything is left.
    fn admit(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        self.used = Instant::now();
        true
    }
}

type Key = (String, String);

/// The owner of `plan_usage`, with this gateway's slices.
#[derive(Clone)]
pub struct Quota {
    database: Database,
    slices: Arc<Mutex<HashMap<Key, Slice>>>,
}

impl Quota {
    pub fn new(database: Database) -> Self {
        Self {
            database,
            slices: Arc::default(),
        }
    }

    fn slices(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Slice>> {
        self.slices.lock().expect("quota slices poisoned")
    }

    /// Admits one request of `period` if the workspace's month has room under
    /// `limit`: from this gateway's slice, else by a claim.
    pub async fn take(&self, workspace_id: &str, period: &str, limit: u64) -> sqlx::Result<bool> {
        if limit == 0 {
            return Ok(false);
        }
        let key = (workspace_id.to_string(), period.to_string());
        let claiming = {
            let mut slices = self.slices();
            let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
            if slice.admit() {
                return Ok(true);
            }
            slice.claiming.clone()
        };
        let _claiming = claiming.lock().await;
        // A claim made while this request waited may have filled the slice.
        let seen = {
            let mut slices = self.slices();
            let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
            if slice.admit() {
                return Ok(true);
            }
            slice.seen
        };
        let mut size = slice_size(limit, seen);
        loop {
            let claimed = self.claim(workspace_id, period, size, limit).await?;
            let mut slices = self.slices();
            let slice = slices.entry(key.clone()).or_insert_with(Slice::new);
            match claimed {
                Some(count) => {
                    slice.left += size - 1;
                    slice.seen = slice.seen.max(count);
                    slice.used = Instant::now();
                    return Ok(true);
                }
                None if size > 1 => size = 1,
                None => {
                    slice.seen = limit;
                    // A refused request may still find what was given back.
                    return Ok(slice.admit());
                }
            }
        }
    }

    /// Claims `size` requests if the row stays within `limit`; the row's new
    /// count, or `None` when they do not fit.
    async fn claim(&self, workspace_id: &str, period: &str, size: u64, limit: u64) -> sqlx::Result<Option<u64>> {
        let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let _turn = self.database.write_turn().await;
        let count: Option<i64> = sqlx::query_scalar(
            "INSERT INTO plan_usage (workspace_id, period, requests) VALUES ($1, $2, $3) \
             ON CONFLICT (workspace_id, period) DO UPDATE SET requests = plan_usage.requests + $3 \
             WHERE plan_usage.requests + $3 <= $4 RETURNING requests",
        )
        .bind(workspace_id)
        .bind(period)
        .bind(as_i64(size))
        .bind(as_i64(limit))
        .fetch_optional(&self.database.pool)
        .await?;
        Ok(count.map(|n| u64::try_from(n).unwrap_or(0)))
    }

    /// Uncounts a request [`Quota::take`] admitted that was then refused for
    /// another reason (the wallet was short): it goes back into this
    /// gateway's slice, with no I/O.
    pub fn give_back(&self, workspace_id: &str, period: &str) {
        let mut slices = self.slices();
        let slice = slices
            .entry((workspace_id.to_string(), period.to_string()))
            .or_insert_with(Slice::new);
        slice.left += 1;
    }

    /// Hands back the unused part of every slice idle for `idle` (`None`:
    /// every slice, at shutdown).
    pub async fn return_slices(&self, idle: Option<Duration>) {
        let returned: Vec<(Key, u64)> = {
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
        for ((workspace_id, period), left) in returned {
            let _turn = self.database.write_turn().await;
            let done = sqlx::query(
                "UPDATE plan_usage SET requests = requests - $3 WHERE workspace_id = $1 AND period = $2 AND requests >= $3",
            )
            .bind(&workspace_id)
            .bind(&period)
            .bind(i64::try_from(left).unwrap_or(i64::MAX))
            .execute(&self.database.pool)
            .await;
            if let Err(error) = done {
                tracing::warn!(%error, %workspace_id, "could not hand back an unused request slice");
            }
        }
    }

    /// Requests counted in `period`, less this gateway's unused slice (other
    /// gateways' unused slices, at most one each, are still in it).
    pub async fn counted(&self, workspace_id: &str, period: &str) -> sqlx::Result<u64> {
        let requests: Option<i64> =
            sqlx::query_scalar("SELECT requests FROM plan_usage WHERE workspace_id = $1 AND period = $2")
                .bind(workspace_id)
                .bind(period)
                .fetch_optional(&self.database.pool)
                .await?;
        let unused = self
            .slices()
            .get(&(workspace_id.to_string(), period.to_string()))
            .map_or(0, |s| s.left);
        Ok(requests
            .map_or(0, |n| u64::try_from(n).unwrap_or(0))
            .saturating_sub(unused))
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
    async fn two_gateways_with_slices_admit_exactly_the_limit_once_idle_slices_go_back() {
        let dir = tempfile::tempdir().unwrap();
        let database = database(&dir).await;
        let (a, b) = (Quota::new(database.clone()), Quota::new(database));
        let (limit, key) = (1_000, ("ws".to_string(), "2026-11".to_string()));
        // `a` admits from slices (15 at first, fewer as the month fills up).
        for _ in 0..700 {
            assert!(a.take("ws", "2026-11", limit).await.unwrap());
        }
        let a_left = a.slices().get(&key).map_or(0, |s| s.left);
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
