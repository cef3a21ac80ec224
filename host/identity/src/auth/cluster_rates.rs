//! Per-key request rates across gateways that share a Postgres database.
//!
//! Each gateway's own limiter (`tollgate_web::rate_limit`: GCRA in memory)
//! holds a key to its rate on that gateway; this one holds it across all of
//! them. The shared state is the same algorithm's one number per key, kept
//! in the database (`key_rate_cells.tat_us`, the theoretical arrival time in
//! microseconds): a gateway claims a slice of admissions from it with one
//! conditional upsert, so gateways together cannot pass the rate, and spends
//! the slice from memory. A slice is a second's worth of the key's rate (at
//! least one request) and lapses a second after it was claimed, unused
//! admissions lost: an admission is counted at most a second before it
//! happens, so over any span a key gets at most its burst, plus its rate
//! over the span, plus a second's worth per gateway (less than one request
//! for rates under 60 a minute). A gateway that dies loses its slice: the
//! limit may then refuse early, never late.
//!
//! Clocks of the hosts are assumed in sync (NTP); skew shifts a host's
//! share by the skew's worth of rate. When the database cannot be reached,
//! the shared limit is skipped (logged, at most once per
//! `tollgate_core::outage::WARN_EVERY`) and each gateway's own still holds;
//! a claim waits at most `FALLBACK_WAIT` for the database, and while it is
//! down only one claim per `RETRY_AFTER` is sent at all.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tollgate_core::outage::Outage;

/// How long a claimed slice may be spent.
const SLICE_LIFETIME: Duration = Duration::from_secs(1);
/// The burst is the rate itself (as the local limiter's): a minute's worth.
const BURST_US: i64 = 60_000_000;
/// Forget lapsed slices every this many admissions.
const HOUSEKEEPING_EVERY: u64 = 4096;

struct Slice {
    left: u32,
    until: Instant,
    /// Held while claiming, so concurrent requests of one key wait for one
    /// claim instead of each claiming a slice.
    claiming: Arc<tokio::sync::Mutex<()>>,
}

pub struct ClusterRates {
    pool: sqlx::AnyPool,
    slices: Mutex<HashMap<String, Slice>>,
    admissions: AtomicU64,
    outage: Outage,
}

/// Admissions in one slice: a second's worth of `per_minute`, at least one.
fn slice_size(per_minute: NonZeroU32) -> u32 {
    (per_minute.get() / 60).max(1)
}

/// Microseconds between two admissions at `per_minute`.
fn interval_us(per_minute: NonZeroU32) -> i64 {
    BURST_US / i64::from(per_minute.get())
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

impl ClusterRates {
    pub fn new(pool: sqlx::AnyPool) -> Self {
        Self {
            pool,
            slices: Mutex::default(),
            admissions: AtomicU64::new(0),
            outage: Outage::new("shared key rates"),
        }
    }

    /// Counts one request by `key_id`, held to `per_minute` across every
    /// gateway on the database. `Err` holds how long until it may call again.
    pub async fn admit(&self, key_id: &str, per_minute: NonZeroU32) -> Result<(), Duration> {
        if self.admissions.fetch_add(1, Ordering::Relaxed) % HOUSEKEEPING_EVERY == HOUSEKEEPING_EVERY - 1 {
            let now = Instant::now();
            self.slices.lock().expect("rates poisoned").retain(|_, s| s.until > now);
        }
        let claiming = match self.take(key_id) {
            Ok(()) => return Ok(()),
            Err(claiming) => claiming,
        };
        let _claiming = claiming.lock().await;
        if self.take(key_id).is_ok() {
            return Ok(());
        }
        let mut size = slice_size(per_minute);
        loop {
            match self.outage.revalidate(self.claim(key_id, per_minute, size)).await {
                Ok(true) => {
                    if let Some(slice) = self.slices.lock().expect("rates poisoned").get_mut(key_id) {
                        slice.left = size - 1;
                        slice.until = Instant::now() + SLICE_LIFETIME;
                    }
                    return Ok(());
                }
                // Near the limit, exactly what this request needs.
                Ok(false) if size > 1 => size = 1,
                Ok(false) => return Err(self.wait(key_id, per_minute).await),
                Err(e) => {
                    // This gateway's own limit, checked before, still holds.
                    self.outage.note(true, &e);
                    return Ok(());
                }
            }
        }
    }

    /// Takes one admission from this gateway's slice of `key_id`, or hands
    /// back the lock to claim a new slice under.
    fn take(&self, key_id: &str) -> Result<(), Arc<tokio::sync::Mutex<()>>> {
        let mut slices = self.slices.lock().expect("rates poisoned");
        // Looked up before inserting: the key's id is copied only the first
        // time, not on every admission.
        if !slices.contains_key(key_id) {
            let fresh = Slice {
                left: 0,
                until: Instant::now(),
                claiming: Arc::default(),
            };
            slices.insert(key_id.to_string(), fresh);
        }
        let slice = slices.get_mut(key_id).expect("inserted above");
        if slice.left > 0 && slice.until > Instant::now() {
            slice.left -= 1;
            return Ok(());
        }
        Err(slice.claiming.clone())
    }

    /// Claims `size` admissions if the key's cell allows them now.
    async fn claim(&self, key_id: &str, per_minute: NonZeroU32, size: u32) -> sqlx::Result<bool> {
        let now = now_us();
        let cost = interval_us(per_minute) * i64::from(size);
        // GCRA: the cell moves `cost` past max(cell, now), and may run at
        // most a burst ahead of now.
        let claimed: Option<i64> = sqlx::query_scalar(
            "INSERT INTO key_rate_cells (key_id, tat_us) VALUES ($1, $2 + $3) \
             ON CONFLICT (key_id) DO UPDATE SET tat_us = \
               (CASE WHEN key_rate_cells.tat_us > $2 THEN key_rate_cells.tat_us ELSE $2 END) + $3 \
             WHERE (CASE WHEN key_rate_cells.tat_us > $2 THEN key_rate_cells.tat_us ELSE $2 END) + $3 - $2 <= $4 \
             RETURNING tat_us",
        )
        .bind(key_id)
        .bind(now)
        .bind(cost)
        .bind(BURST_US)
        .fetch_optional(&self.pool)
        .await?;
        Ok(claimed.is_some())
    }

    /// How long until one more admission fits, after a refused claim.
    async fn wait(&self, key_id: &str, per_minute: NonZeroU32) -> Duration {
        let read = sqlx::query_scalar("SELECT tat_us FROM key_rate_cells WHERE key_id = $1")
            .bind(key_id)
            .fetch_optional(&self.pool);
        let cell: Option<i64> = self.outage.revalidate(read).await.unwrap_or(None);
        let fits_at = cell.unwrap_or(0) + interval_us(per_minute) - BURST_US;
        Duration::from_micros(u64::try_from(fits_at - now_us()).unwrap_or(0).max(1_000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn rates_on(url: &str) -> ClusterRates {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(url).await.unwrap();
        sqlx::query("CREATE TABLE IF NOT EXISTS key_rate_cells (key_id TEXT PRIMARY KEY, tat_us BIGINT NOT NULL)")
            .execute(&pool)
            .await
            .unwrap();
        ClusterRates::new(pool)
    }

    /// Two gateways' limiters on one database admit the key's rate between
    /// them, not each.
    #[tokio::test]
    async fn gateways_on_one_database_share_a_keys_rate() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("rates.db").display());
        let first = rates_on(&url).await;
        let second = rates_on(&url).await;
        let ten = NonZeroU32::new(10).unwrap();
        let mut admitted = 0;
        let mut waits = Vec::new();
        for i in 0..30 {
            let gateway = if i % 2 == 0 { &first } else { &second };
            match gateway.admit("key_a", ten).await {
                Ok(()) => admitted += 1,
                Err(wait) => waits.push(wait),
            }
        }
        assert_eq!(admitted, 10);
        // The next admission fits 6 s (one interval) after the first.
        assert!(
            waits
                .iter()
                .all(|w| *w <= Duration::from_secs(6) && *w > Duration::from_secs(4)),
            "{waits:?}"
        );
        // Another key has its own rate.
        assert!(first.admit("key_b", ten).await.is_ok());
    }

    /// A fast key claims a second's worth at once and spends it from memory.
    #[tokio::test]
    async fn a_fast_key_claims_slices() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("rates.db").display());
        let rates = rates_on(&url).await;
        let rate = NonZeroU32::new(6_000).unwrap();
        for _ in 0..250 {
            rates.admit("fast", rate).await.unwrap();
        }
        let cell: i64 = sqlx::query_scalar("SELECT tat_us FROM key_rate_cells WHERE key_id = 'fast'")
            .fetch_one(&rates.pool)
            .await
            .unwrap();
        // Three slices of 100 (10 ms apart each request) were claimed.
        let ahead = cell - now_us();
        assert!(
            (2_500_000..=3_000_000).contains(&ahead),
            "claimed {ahead} µs ahead, three slices' worth"
        );
    }
}
