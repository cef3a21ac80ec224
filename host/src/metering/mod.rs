//! Usage metering: one CloudEvents 1.0 usage event per metered request.
//!
//! The event is written to a transactional outbox in the same database
//! transaction as the ledger settlement ([`Recorder::record`], called by the
//! ledger writer), so an event exists exactly when its charge does. A
//! dispatcher per sink delivers the outbox at least once ([`Metering::start`]);
//! a sink that is down delays events, a gateway crash leaves them in the
//! outbox for the next start, and nothing is lost. Redeliveries carry the
//! same event id (the request id). See docs/metering.md.

mod config;
mod dispatcher;
mod event;
mod outbox;
mod sinks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use sqlx::{Any, Transaction};
use tokio::sync::Notify;

pub use config::{HttpMode, MeteringConfig, SinkConfig};
pub use event::{EVENT_TYPE, SCHEMA, SCHEMA_PATH};
pub use outbox::{Backlog, backlog};

use crate::db::{Database, now_ms};
use crate::ledger::RequestLogRow;
use crate::money::Nanos;

/// Writes usage events into the outbox; held by the ledger writer.
#[derive(Clone)]
pub struct Recorder {
    identity: event::Identity,
    sinks: Arc<[String]>,
    wake: Arc<Notify>,
}

impl Recorder {
    /// Adds the request's usage event to the outbox, inside the settle
    /// transaction. Requests refused before any upstream call (402) are not
    /// metered.
    pub async fn record(
        &self,
        tx: &mut Transaction<'static, Any>,
        log: &RequestLogRow,
        cost: Nanos,
        outcome: &str,
        now: i64,
    ) -> sqlx::Result<()> {
        if log.status == Some(402) {
            return Ok(());
        }
        let json = match event::structured_json(&self.identity, log, cost, outcome, now) {
            Ok(json) => json,
            Err(error) => {
                // Only a misconfigured `source`/`public_url` can cause this; the
                // charge must still commit.
                tracing::error!(request_id = %log.request_id, %error, "cannot build the usage event");
                return Ok(());
            }
        };
        outbox::enqueue(tx, &log.request_id, &self.sinks, &json, cost, now).await
    }

    /// Tells the dispatchers that new events committed.
    pub fn wake(&self) {
        self.wake.notify_waiters();
    }
}

/// The metering service: the recorder plus one dispatcher per sink.
pub struct Metering {
    recorder: Recorder,
    sinks: Vec<(String, Arc<dyn sinks::Sink>)>,
    config: MeteringConfig,
    backlog_total: Arc<AtomicI64>,
}

impl Metering {
    /// `None` when metering is disabled. Sinks are built (and validated) here;
    /// nothing connects until [`Metering::start`].
    pub fn new(config: &MeteringConfig, data_dir: &Path, listen: &str) -> anyhow::Result<Option<Self>> {
        if !config.enabled {
            return Ok(None);
        }
        let default_sink = [SinkConfig::File { name: None, path: None }];
        let configured: &[SinkConfig] = if config.sinks.is_empty() {
            &default_sink
        } else {
            &config.sinks
        };
        let mut sinks = Vec::with_capacity(configured.len());
        for sink in configured {
            let name = sink.name(data_dir);
            anyhow::ensure!(
                sinks.iter().all(|(n, _)| n != &name),
                "two metering sinks are named '{name}'; give one a `name`"
            );
            sinks.push((name, sinks::build(sink, data_dir)?));
        }
        let public_url = config.public_url.clone().unwrap_or_else(|| format!("http://{listen}"));
        let identity = event::Identity {
            source: config
                .source
                .clone()
                .unwrap_or_else(|| format!("urn:tollgate:instance:{}", hostname())),
            dataschema: format!("{}{SCHEMA_PATH}", public_url.trim_end_matches('/')),
        };
        let recorder = Recorder {
            identity,
            sinks: sinks.iter().map(|(name, _)| name.clone()).collect(),
            wake: Arc::new(Notify::new()),
        };
        Ok(Some(Self {
            recorder,
            sinks,
            config: config.clone(),
            backlog_total: Arc::new(AtomicI64::new(0)),
        }))
    }

    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    /// Undelivered events across sinks, as last measured (for metrics).
    pub fn backlog_gauge(&self) -> Arc<AtomicI64> {
        self.backlog_total.clone()
    }

    /// Starts the dispatchers and the housekeeping task on the current runtime.
    pub fn start(&self, database: &Database) {
        let process = crate::db::new_id("disp");
        for (name, sink) in &self.sinks {
            let dispatcher = dispatcher::Dispatcher {
                database: database.clone(),
                sink_name: name.clone(),
                sink: sink.clone(),
                wake: self.recorder.wake.clone(),
                config: self.config.clone(),
                owner: format!("{process}:{name}"),
            };
            tokio::spawn(dispatcher.run());
        }
        tokio::spawn(housekeeping(
            database.clone(),
            self.config.clone(),
            self.backlog_total.clone(),
        ));
    }
}

/// Backlog older than this is logged as a warning.
const STALE_BACKLOG_SECS: i64 = 10;

/// Logs and measures the backlog, and deletes delivered events past retention.
async fn housekeeping(database: Database, config: MeteringConfig, total: Arc<AtomicI64>) {
    let mut interval = tokio::time::interval(Duration::from_secs(config.backlog_log_interval_secs.max(1)));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        match backlog(&database).await {
            Ok(rows) => {
                total.store(rows.iter().map(|b| b.events).sum(), Ordering::Relaxed);
                for row in rows {
                    let oldest_age_s = (now_ms() - row.oldest_created_at_ms) / 1000;
                    // Events a few seconds old are simply in flight; older ones
                    // mean a sink is failing.
                    if oldest_age_s >= STALE_BACKLOG_SECS {
                        tracing::warn!(sink = %row.sink, undelivered = row.events, oldest_age_s, "metering backlog");
                    } else {
                        tracing::debug!(sink = %row.sink, undelivered = row.events, oldest_age_s, "metering backlog");
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "cannot measure the metering backlog"),
        }
        let cutoff = now_ms() - (config.retention_secs as i64).saturating_mul(1000);
        match outbox::purge_delivered(&database, cutoff).await {
            Ok(0) => {}
            Ok(purged) => tracing::debug!(purged, "purged delivered usage events past retention"),
            Err(error) => tracing::warn!(%error, "cannot purge delivered usage events"),
        }
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The file the default sink writes, for docs and tests.
pub fn default_file_path(data_dir: &Path) -> PathBuf {
    config::file_path(None, data_dir)
}
