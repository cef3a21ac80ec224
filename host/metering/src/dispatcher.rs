//! One dispatcher per sink: hold the sink's cursor, read the settled requests
//! after it, deliver them as events, and move the cursor past the delivered
//! prefix. A failed delivery is retried from the same place with exponential
//! backoff and jitter. Settlements wake it at once; otherwise it polls, so rows
//! settled by another gateway, or left by a crashed one, are found too.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::Notify;

use super::config::MeteringConfig;
use super::event::{self, Identity};
use super::feed::{self, Position, SettledRequest};
use super::sinks::{Delivery, Sink, StoredEvent};
use tollgate_core::db::{Database, now_ms};

pub struct Dispatcher {
    pub database: Database,
    /// Where the settled requests are read.
    pub feed: feed::Reader,
    pub sink_name: String,
    pub sink: Arc<dyn Sink>,
    pub identity: Identity,
    pub wake: Arc<Notify>,
    pub config: MeteringConfig,
    /// Unique per process and sink: the cursor's lease owner.
    pub owner: String,
}

/// Events built per turn on the runtime (about 15 µs each).
const EVENTS_PER_TURN: usize = 16;

/// What became of a cursor write.
enum Recorded {
    Stored,
    /// Another gateway holds the cursor now; what it delivers is its own.
    TakenOver,
    /// The database did not take the write.
    Failed,
}

/// The cursor while this dispatcher holds it.
struct Held {
    position: Position,
    lease_until_ms: i64,
}

impl Dispatcher {
    pub async fn run(self) {
        let poll = Duration::from_millis(self.config.poll_interval_ms.max(10));
        let linger = Duration::from_millis(self.config.linger_ms);
        let batch_size = self.config.batch_size.max(1);
        let mut held: Option<Held> = None;
        let mut failures: u32 = 0;
        // Delivered, but the cursor write failed (the database was away).
        // Stored before anything is read again, so an outage longer than the
        // sink's duplicate window does not deliver the batch twice.
        let mut unrecorded: Option<Position> = None;
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            // Register interest before looking, so a settlement committed between
            // the read and the wait still wakes us.
            notified.as_mut().enable();

            let mut position = match self.hold(&mut held).await {
                Ok(Some(position)) => position,
                Ok(None) => {
                    // Another gateway delivers this sink; take over if it stops.
                    tokio::time::sleep(poll).await;
                    continue;
                }
                Err(error) => {
                    tracing::warn!(sink = %self.sink_name, %error, "cannot lease the metering cursor");
                    tokio::time::sleep(poll).await;
                    continue;
                }
            };
            if let Some(delivered) = unrecorded.take()
                && delivered > position
            {
                match self.record(&mut held, delivered, None).await {
                    Recorded::Stored => position = delivered,
                    Recorded::TakenOver => continue,
                    Recorded::Failed => {
                        unrecorded = Some(delivered);
                        tokio::time::sleep(poll).await;
                        continue;
                    }
                }
            }
            let batch = match self.feed.read(position, batch_size).await {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(sink = %self.sink_name, %error, "cannot read the usage feed");
                    tokio::time::sleep(poll).await;
                    continue;
                }
            };
            if batch.is_empty() {
                tokio::select! {
                    _ = &mut notified => {}
                    _ = tokio::time::sleep(poll) => {}
                }
                if !linger.is_zero() {
                    tokio::time::sleep(linger).await;
                }
                continue;
            }

            // An event that cannot be built stops the batch there, like a failed
            // delivery: it is retried, never skipped.
            let events = self.events(&batch).await;
            let mut delivery = match events.is_empty() {
                true => Delivery::failed_at(0, "cannot build the next usage event"),
                false => self.sink.deliver(&events).await,
            };
            if delivery.error.is_none() && events.len() < batch.len() {
                delivery.error = Some("cannot build the next usage event".into());
            }
            let delivered = delivery.delivered.min(events.len());
            let reached = delivered.checked_sub(1).map_or(position, |last| batch[last].position());
            let backoff = match &delivery.error {
                None => {
                    failures = 0;
                    Duration::ZERO
                }
                Some(error) => {
                    failures = failures.saturating_add(1);
                    let backoff = self.backoff(failures);
                    tracing::warn!(
                        sink = %self.sink_name,
                        %error,
                        delivered,
                        undelivered = batch.len() - delivered,
                        retry_in_ms = backoff.as_millis() as u64,
                        "metering sink delivery failed; will retry"
                    );
                    backoff
                }
            };
            if let Recorded::Failed = self.record(&mut held, reached, delivery.error.as_deref()).await
                && reached > position
            {
                unrecorded = Some(reached);
            }

            if !backoff.is_zero() {
                tokio::time::sleep(backoff).await;
            } else if batch.len() < batch_size && !linger.is_zero() {
                // Caught up: let events gather, so one delivery and one cursor
                // write cover many requests. A full batch means a backlog, which
                // drains without pause.
                tokio::time::sleep(linger).await;
            }
        }
    }

    /// The cursor position, leasing (or renewing) the cursor when this
    /// dispatcher does not hold it for at least half a lease more.
    async fn hold(&self, held: &mut Option<Held>) -> sqlx::Result<Option<Position>> {
        let now = now_ms();
        let lease_ms = self.config.lease_ms.max(1);
        if let Some(current) = held
            && current.lease_until_ms - now > (lease_ms / 2) as i64
        {
            return Ok(Some(current.position));
        }
        let leased = feed::lease(&self.database, &self.sink_name, &self.owner, now, lease_ms).await?;
        *held = leased.map(|position| Held {
            position,
            lease_until_ms: now + lease_ms as i64,
        });
        Ok(leased)
    }

    /// Stores how far delivery got. If the lease was lost, or the process
    /// ends before a failed write is retried, the cursor stays behind and
    /// those events are delivered again: at least once.
    async fn record(&self, held: &mut Option<Held>, reached: Position, error: Option<&str>) -> Recorded {
        let now = now_ms();
        let lease_ms = self.config.lease_ms.max(1);
        match feed::advance(
            &self.database,
            &self.sink_name,
            &self.owner,
            reached,
            error,
            now,
            lease_ms,
        )
        .await
        {
            Ok(true) => {
                *held = Some(Held {
                    position: reached,
                    lease_until_ms: now + lease_ms as i64,
                });
                Recorded::Stored
            }
            Ok(false) => {
                tracing::warn!(sink = %self.sink_name, "the metering cursor was taken over; another gateway delivers this sink");
                *held = None;
                Recorded::TakenOver
            }
            Err(error) => {
                tracing::warn!(sink = %self.sink_name, %error, "could not record a metering delivery");
                *held = None;
                Recorded::Failed
            }
        }
    }

    /// The batch's events, up to the first that cannot be built. A caught-up
    /// batch holds every request of the last `linger_ms`, hundreds at a
    /// thousand requests a second: built in one go, they kept a runtime
    /// thread for milliseconds, and the requests whose tasks waited behind
    /// it set the gateway's p99. So the runtime gets a turn between chunks.
    async fn events(&self, batch: &[SettledRequest]) -> Vec<StoredEvent> {
        let mut events = Vec::with_capacity(batch.len());
        for chunk in batch.chunks(EVENTS_PER_TURN) {
            for request in chunk {
                match self.event(request) {
                    Some(event) => events.push(event),
                    None => return events,
                }
            }
            tokio::task::yield_now().await;
        }
        events
    }

    fn event(&self, request: &SettledRequest) -> Option<StoredEvent> {
        let json = event::structured_json(&self.identity, request).or_else(|error| {
            // The row's own `source` (from an older configuration) is not a valid
            // URI reference: send the event under this gateway's instead.
            tracing::error!(request_id = %request.request_id, %error, "usage event rebuilt with this gateway's source");
            let request = SettledRequest {
                source: None,
                ..request.clone()
            };
            event::structured_json(&self.identity, &request)
        });
        match json {
            Ok(json) => Some(StoredEvent {
                id: request.request_id.clone(),
                json,
            }),
            Err(error) => {
                tracing::error!(request_id = %request.request_id, %error, "cannot build the usage event");
                None
            }
        }
    }

    /// `retry_base_ms · 2^(failures−1)`, capped at `retry_max_ms`, with jitter
    /// over its upper half so many gateways do not retry in step.
    fn backoff(&self, failures: u32) -> Duration {
        let base = self.config.retry_base_ms.max(1);
        let max = self.config.retry_max_ms.max(base);
        let delay = base.saturating_mul(1u64 << (failures - 1).min(32)).min(max);
        let jittered = rand::rng().random_range(delay / 2..=delay);
        Duration::from_millis(jittered)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Instant;

    use super::*;
    use crate::sinks::DeliveryFuture;
    use tollgate_core::db::{SqliteSync, sqlite_url};

    /// Accepts the first `accept_first` events of its first delivery, then
    /// fails that delivery; accepts everything afterwards.
    struct FlakySink {
        accept_first: usize,
        deliveries: Mutex<usize>,
        received: Mutex<Vec<String>>,
    }

    impl Sink for FlakySink {
        fn deliver<'a>(&'a self, events: &'a [StoredEvent]) -> DeliveryFuture<'a> {
            Box::pin(async move {
                let first = {
                    let mut deliveries = self.deliveries.lock().unwrap();
                    *deliveries += 1;
                    *deliveries == 1
                };
                let accepted = if first {
                    self.accept_first.min(events.len())
                } else {
                    events.len()
                };
                self.received
                    .lock()
                    .unwrap()
                    .extend(events[..accepted].iter().map(|e| e.id.clone()));
                match first {
                    true => Delivery::failed_at(accepted, "503 from the test sink"),
                    false => Delivery::all(accepted),
                }
            })
        }
    }

    async fn insert(database: &Database, request_id: &str) {
        sqlx::query(
            "INSERT INTO request_log (request_id, key_id, workspace_id, model, streamed, outcome, status, usage_source, \
             cost_nano, reserved_nano, attempts, attempt_count, started_at_ms, duration_ms, settled_at_ms, source) \
             VALUES ($1, 'key_t', 'ws_t', 'mock/small', 0, 'success', 200, 'upstream', 7, 10, '[]', 1, 1, 1, 2, \
             'urn:tollgate:instance:t')",
        )
        .bind(request_id)
        .execute(&database.pool)
        .await
        .unwrap();
    }

    fn dispatcher(database: &Database, sink_name: &str, sink: Arc<dyn Sink>) -> Dispatcher {
        let config = MeteringConfig {
            linger_ms: 0,
            poll_interval_ms: 10,
            retry_base_ms: 10,
            retry_max_ms: 20,
            lease_ms: 60_000,
            ..MeteringConfig::default()
        };
        Dispatcher {
            feed: feed::Reader::open(database).unwrap(),
            database: database.clone(),
            sink_name: sink_name.into(),
            sink,
            identity: Identity {
                source: "urn:tollgate:instance:t".into(),
                dataschema: "http://t/schemas/usage.v1.json".into(),
            },
            wake: Arc::new(Notify::new()),
            config,
            owner: "test-owner".into(),
        }
    }

    async fn open_database(dir: &tempfile::TempDir) -> Database {
        Database::open(&sqlite_url(&dir.path().join("t.db")), SqliteSync::Normal)
            .await
            .unwrap()
    }

    async fn wait_for(received: &Mutex<Vec<String>>, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while received.lock().unwrap().len() < count && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    async fn cursor_seq(database: &Database, sink: &str) -> i64 {
        sqlx::query_scalar("SELECT seq FROM metering_cursors WHERE sink = $1")
            .bind(sink)
            .fetch_one(&database.pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_partial_delivery_moves_the_cursor_past_the_delivered_prefix_only() {
        let dir = tempfile::tempdir().unwrap();
        let database = open_database(&dir).await;
        feed::ensure_cursor(&database, "flaky", now_ms()).await.unwrap();
        let ids: Vec<String> = (0..10).map(|n| format!("req_{n:02}")).collect();
        for id in &ids {
            insert(&database, id).await;
        }
        let sink = Arc::new(FlakySink {
            accept_first: 3,
            deliveries: Mutex::new(0),
            received: Mutex::new(Vec::new()),
        });
        let running = tokio::spawn(dispatcher(&database, "flaky", sink.clone()).run());
        wait_for(&sink.received, ids.len()).await;
        running.abort();

        // The three accepted before the failure are not sent again; the rest
        // follow in order, each once.
        assert_eq!(*sink.received.lock().unwrap(), ids);
        assert_eq!(*sink.deliveries.lock().unwrap(), 2, "one failed delivery, one retry");
        let (seq, failures, last_error): (i64, i64, Option<String>) =
            sqlx::query_as("SELECT seq, failures, last_error FROM metering_cursors WHERE sink = 'flaky'")
                .fetch_one(&database.pool)
                .await
                .unwrap();
        assert_eq!(seq, 10, "the cursor is at the last row");
        assert_eq!((failures, last_error), (0, None), "a success clears the failure record");
    }

    /// Accepts everything; during its first delivery the cursor table goes
    /// away, as a database does in an outage, so the cursor write after it
    /// fails.
    struct CursorLosingSink {
        database: Database,
        received: Mutex<Vec<String>>,
    }

    impl Sink for CursorLosingSink {
        fn deliver<'a>(&'a self, events: &'a [StoredEvent]) -> DeliveryFuture<'a> {
            Box::pin(async move {
                let first = self.received.lock().unwrap().is_empty();
                if first {
                    sqlx::query("ALTER TABLE metering_cursors RENAME TO metering_cursors_away")
                        .execute(&self.database.pool)
                        .await
                        .unwrap();
                }
                self.received
                    .lock()
                    .unwrap()
                    .extend(events.iter().map(|e| e.id.clone()));
                Delivery::all(events.len())
            })
        }
    }

    #[tokio::test]
    async fn a_delivery_whose_cursor_write_failed_is_recorded_not_sent_again() {
        let dir = tempfile::tempdir().unwrap();
        let database = open_database(&dir).await;
        feed::ensure_cursor(&database, "nats", now_ms()).await.unwrap();
        let mut ids: Vec<String> = (0..10).map(|n| format!("req_{n:02}")).collect();
        for id in &ids {
            insert(&database, id).await;
        }
        let sink = Arc::new(CursorLosingSink {
            database: database.clone(),
            received: Mutex::new(Vec::new()),
        });
        let running = tokio::spawn(dispatcher(&database, "nats", sink.clone()).run());
        wait_for(&sink.received, ids.len()).await;

        // The database comes back, with the cursor where it was before.
        sqlx::query("ALTER TABLE metering_cursors_away RENAME TO metering_cursors")
            .execute(&database.pool)
            .await
            .unwrap();
        let later: Vec<String> = (10..15).map(|n| format!("req_{n:02}")).collect();
        for id in &later {
            insert(&database, id).await;
        }
        ids.extend(later);
        wait_for(&sink.received, ids.len()).await;
        running.abort();

        assert_eq!(*sink.received.lock().unwrap(), ids, "each event once, in order");
        assert_eq!(cursor_seq(&database, "nats").await, 15);
    }
}
