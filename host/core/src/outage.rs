//! What a cache on the request path does while its database cannot be
//! reached (docs/operations.md, "Database outages"): it still asks the
//! database first, and only when the database cannot answer does it serve
//! what it last read, instead of failing every request.
//!
//! An [`Outage`] (one per cache) keeps the requests of an outage from each
//! waiting on a dead database: after a read fails for want of the database,
//! the next [`RETRY_AFTER`] of reads are not sent at all (they fail at once,
//! as unreachable), then one read probes again. A read that has a last-known
//! answer to fall back on waits at most [`FALLBACK_WAIT`] for the database;
//! one without waits as long as the pool lets it while the database is up.
//! Warnings are rate-limited to one per [`WARN_EVERY`], with a count of what
//! happened in between, so an outage under load does not flood the log.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// After a failed read, how long reads are not sent before one probes again.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long a read with a last-known answer to fall back on may wait.
pub const FALLBACK_WAIT: Duration = Duration::from_secs(2);
/// At most one warning per cache this often.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Whether `error` says the database could not answer (it could not be
/// reached, the connection broke, the pool gave up, or the server itself
/// failed the statement), as opposed to an answer this gateway could not
/// use (a type it cannot decode: a bug, not an outage).
pub fn unreachable(error: &sqlx::Error) -> bool {
    use sqlx::Error::*;
    matches!(
        error,
        Io(_) | Tls(_) | Protocol(_) | PoolTimedOut | PoolClosed | WorkerCrashed | Database(_)
    )
}

/// The database as one cache last found it.
pub struct Outage {
    /// What the cache holds, for the log ("API keys", "plans").
    what: &'static str,
    /// Monotonic origin of the millisecond times below.
    origin: Instant,
    /// When the database stopped answering (ms since `origin`, plus one); 0: it answers.
    down_since: AtomicU64,
    /// Before this time (ms since `origin`) no read is sent while down.
    next_probe: AtomicU64,
    /// When the last warning went out (ms since `origin`, plus one); 0: never.
    warned: AtomicU64,
    /// Requests served from the last known state (or refused) since the last warning…
    unlogged: AtomicU64,
    /// …and since the database went down.
    during: AtomicU64,
}

impl Outage {
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            origin: Instant::now(),
            down_since: AtomicU64::new(0),
            next_probe: AtomicU64::new(0),
            warned: AtomicU64::new(0),
            unlogged: AtomicU64::new(0),
            during: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Whether the last read failed for want of the database.
    pub fn is_down(&self) -> bool {
        self.down_since.load(Ordering::Acquire) != 0
    }

    /// Asks the database through `read`, having a last-known answer to fall
    /// back on: waits at most [`FALLBACK_WAIT`]. While the database is down,
    /// only one read per [`RETRY_AFTER`] is sent; the others fail at once.
    pub async fn revalidate<T>(&self, read: impl Future<Output = sqlx::Result<T>>) -> sqlx::Result<T> {
        self.send(read, true).await
    }

    /// Asks the database through `read`, with nothing to fall back on: waits
    /// as long as the pool lets it while the database answers, and as
    /// [`Outage::revalidate`] while it is down.
    pub async fn ask<T>(&self, read: impl Future<Output = sqlx::Result<T>>) -> sqlx::Result<T> {
        self.send(read, false).await
    }

    async fn send<T>(&self, read: impl Future<Output = sqlx::Result<T>>, bounded: bool) -> sqlx::Result<T> {
        let down = self.is_down();
        if down && !self.probe_due() {
            return Err(not_asked(self.what));
        }
        let result = if bounded || down {
            match tokio::time::timeout(FALLBACK_WAIT, read).await {
                Ok(result) => result,
                Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the database did not answer within {FALLBACK_WAIT:?}"),
                ))),
            }
        } else {
            read.await
        };
        self.observe(&result);
        result
    }

    /// Claims the next probe of a down database: one caller per [`RETRY_AFTER`].
    fn probe_due(&self) -> bool {
        let now = self.now_ms();
        let due = self.next_probe.load(Ordering::Acquire);
        now >= due
            && self
                .next_probe
                .compare_exchange(
                    due,
                    now + RETRY_AFTER.as_millis() as u64,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
    }

    fn observe<T>(&self, result: &sqlx::Result<T>) {
        match result {
            Ok(_) => {
                let since = self.down_since.swap(0, Ordering::AcqRel);
                if since != 0 {
                    let requests = self.during.swap(0, Ordering::AcqRel);
                    tracing::warn!(
                        cache = self.what,
                        down_for_ms = self.now_ms().saturating_sub(since - 1),
                        requests,
                        "the database answers again; {} are read from it again",
                        self.what
                    );
                }
            }
            Err(error) if unreachable(error) => {
                let now = self.now_ms();
                let _ = self
                    .down_since
                    .compare_exchange(0, now + 1, Ordering::AcqRel, Ordering::Acquire);
                self.next_probe
                    .fetch_max(now + RETRY_AFTER.as_millis() as u64, Ordering::AcqRel);
            }
            Err(_) => {}
        }
    }

    /// Notes one request served from the last known state (`served`) or
    /// refused for want of it, because of `error`; logs at most one warning
    /// per [`WARN_EVERY`].
    pub fn note(&self, served: bool, error: &sqlx::Error) {
        self.unlogged.fetch_add(1, Ordering::AcqRel);
        self.during.fetch_add(1, Ordering::AcqRel);
        let now = self.now_ms();
        let last = self.warned.load(Ordering::Acquire);
        if last != 0 && now.saturating_sub(last - 1) < WARN_EVERY.as_millis() as u64 {
            return;
        }
        if self
            .warned
            .compare_exchange(last, now + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let count = self.unlogged.swap(0, Ordering::AcqRel);
        match served {
            true => tracing::warn!(
                cache = self.what,
                %error,
                requests = count,
                "the database is unreachable; serving the last known {} (at most one warning per {:?})",
                self.what,
                WARN_EVERY
            ),
            false => tracing::warn!(
                cache = self.what,
                %error,
                requests = count,
                "the database is unreachable and nothing is known of these {} yet; refusing (at most one warning per {:?})",
                self.what,
                WARN_EVERY
            ),
        }
    }
}

/// The error of a read that was not sent: the database is known down and
/// another request probes it.
fn not_asked(what: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        format!("the database is unreachable (not asked again for {what} for up to {RETRY_AFTER:?})"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn refused() -> sqlx::Error {
        sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
    }

    #[test]
    fn only_failures_to_answer_count_as_unreachable() {
        assert!(unreachable(&refused()));
        assert!(unreachable(&sqlx::Error::PoolTimedOut));
        assert!(unreachable(&sqlx::Error::PoolClosed));
        assert!(!unreachable(&sqlx::Error::RowNotFound));
        assert!(!unreachable(&sqlx::Error::ColumnNotFound("x".into())));
    }

    #[tokio::test]
    async fn a_down_database_is_probed_once_per_interval_and_its_return_noticed() {
        let outage = Outage::new("things");
        let sent = AtomicUsize::new(0);
        let failing = || async {
            sent.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(refused())
        };
        assert!(outage.ask(failing()).await.is_err());
        assert!(outage.is_down());
        for _ in 0..10 {
            let error = outage.revalidate(failing()).await.unwrap_err();
            assert!(unreachable(&error), "a read not sent is unreachable too");
        }
        assert_eq!(sent.load(Ordering::SeqCst), 1, "no read sent within the retry interval");
        // The outage reads the system's monotonic clock: wait for real.
        std::thread::sleep(RETRY_AFTER);
        assert!(outage.revalidate(failing()).await.is_err());
        assert_eq!(sent.load(Ordering::SeqCst), 2, "one probe after the interval");
        std::thread::sleep(RETRY_AFTER);
        assert_eq!(outage.revalidate(async { Ok(7) }).await.unwrap(), 7);
        assert!(!outage.is_down());
        assert!(outage.ask(failing()).await.is_err(), "up again: every read is sent");
        assert_eq!(sent.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_read_with_a_fallback_waits_a_bounded_time() {
        let outage = Outage::new("things");
        let hung = std::future::pending::<sqlx::Result<()>>();
        let started = Instant::now();
        let error = outage.revalidate(hung).await.unwrap_err();
        assert!(unreachable(&error));
        assert!(outage.is_down());
        assert!(started.elapsed() < FALLBACK_WAIT + Duration::from_secs(1));
    }

    #[test]
    fn other_errors_leave_the_database_up() {
        let outage = Outage::new("things");
        outage.observe::<()>(&Err(sqlx::Error::ColumnNotFound("x".into())));
        assert!(!outage.is_down());
    }
}
