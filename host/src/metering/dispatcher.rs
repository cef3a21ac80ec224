//! One dispatcher per sink: claim due outbox rows, deliver them, mark the
//! delivered prefix and reschedule the rest with exponential backoff and jitter.
//! New events wake it at once; otherwise it polls, so rows left by a crashed
//! gateway (or an earlier run) are found too.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::Notify;

use super::config::MeteringConfig;
use super::outbox;
use super::sinks::{Sink, StoredEvent};
use crate::db::{Database, now_ms};

pub struct Dispatcher {
    pub database: Database,
    pub sink_name: String,
    pub sink: Arc<dyn Sink>,
    pub wake: Arc<Notify>,
    pub config: MeteringConfig,
    /// Unique per process and sink; claim tokens extend it.
    pub owner: String,
}

impl Dispatcher {
    pub async fn run(self) {
        let poll = Duration::from_millis(self.config.poll_interval_ms.max(10));
        let linger = Duration::from_millis(self.config.linger_ms);
        let mut claims: u64 = 0;
        let mut failures: u32 = 0;
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            // Register interest before looking, so an event committed between the
            // claim and the wait still wakes us.
            notified.as_mut().enable();
            claims += 1;
            let token = format!("{}:{claims}", self.owner);
            let batch = match outbox::claim(
                &self.database,
                &self.sink_name,
                &token,
                self.config.batch_size.max(1),
                now_ms(),
                self.config.lease_ms,
            )
            .await
            {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(sink = %self.sink_name, %error, "metering outbox claim failed");
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
            let events: Vec<StoredEvent> = batch
                .iter()
                .map(|row| StoredEvent {
                    id: row.event_id.clone(),
                    json: row.payload.clone(),
                })
                .collect();
            let delivery = self.sink.deliver(&events).await;
            let delivered = delivery.delivered.min(batch.len());
            let delivered_through = delivered.checked_sub(1).map(|last| batch[last].id);
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
            let now = now_ms();
            if let Err(error) = outbox::settle_claim(
                &self.database,
                &token,
                delivered_through,
                now,
                now + backoff.as_millis() as i64,
                delivery.error.as_deref(),
            )
            .await
            {
                // The lease expires and the rows are delivered again: at least once.
                tracing::warn!(sink = %self.sink_name, %error, "could not record a metering delivery");
            }
            if !backoff.is_zero() {
                tokio::time::sleep(backoff).await;
            } else if batch.len() < self.config.batch_size.max(1) && !linger.is_zero() {
                // Caught up: let events gather instead of claiming each one as it
                // commits, so outbox writes stay few and off the ledger's back. A
                // full batch means a backlog, which drains without pause.
                tokio::time::sleep(linger).await;
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
