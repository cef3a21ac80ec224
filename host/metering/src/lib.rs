//! Usage metering: one CloudEvents 1.0 usage event per metered request, and
//! the audit log's rows as events to the same sinks (`audit_feed.rs`).
//!
//! The event is not a separate write. The ledger's settle transaction writes the
//! request log row, and that row is the event's only record, so an event exists
//! exactly when its charge does and metering adds no write to the request path.
//! A dispatcher per sink reads the log after the sink's cursor and delivers at
//! least once ([`Metering::start`], `feed.rs`): a sink that is down delays
//! events, a gateway crash leaves the cursor behind for the next start, and
//! nothing is lost. Redeliveries are the same event (its id is the request id).
//! See docs/metering.md.
#![forbid(unsafe_code)]

mod audit_feed;
mod config;
mod dispatcher;
mod event;
mod feed;
mod sinks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

pub use audit_feed::{
    AUDIT_EVENT_TYPE, AUDIT_SCHEMA, AUDIT_SCHEMA_PATH, delivered_everywhere as audit_delivered_everywhere,
};
pub use config::{HttpMode, MeteringConfig, SinkConfig};
pub use event::{BUDGET_SCHEMA, BUDGET_SCHEMA_PATH, BUDGET_THRESHOLD_EVENT_TYPE, EVENT_TYPE, SCHEMA, SCHEMA_PATH};
pub use feed::{Backlog, Position, Reader as FeedReader, SettledRequest, backlog, delivered_everywhere};

use tollgate_core::db::{Database, now_ms};

/// This gateway's CloudEvents `source`, stored on every request log row so that
/// whichever gateway delivers the event names the one that served it.
pub fn instance_source(config: &MeteringConfig) -> String {
    config
        .source
        .clone()
        .unwrap_or_else(|| format!("urn:tollgate:instance:{}", hostname()))
}

/// The metering service: one dispatcher per sink, and the backlog monitor.
pub struct Metering {
    /// Unique per process: with a sink's name, the owner of its cursor lease.
    process: String,
    identity: event::Identity,
    wake: Arc<Notify>,
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
        let default_sink = [SinkConfig::file(None)];
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
            sinks.push((name, sinks::build(sink, data_dir, config.batch_size)?));
        }
        let public_url = config.public_url.clone().unwrap_or_else(|| format!("http://{listen}"));
        let identity = event::Identity {
            source: instance_source(config),
            dataschema: format!("{}{SCHEMA_PATH}", public_url.trim_end_matches('/')),
        };
        // Fail at startup, not at delivery, on a `source` or `public_url` that
        // cannot make a valid event.
        event::structured_json(&identity, &event::probe())
            .map_err(|e| anyhow::anyhow!("metering.source / metering.public_url make no valid CloudEvent: {e}"))?;
        Ok(Some(Self {
            process: tollgate_core::db::new_id("disp"),
            identity,
            wake: Arc::new(Notify::new()),
            sinks,
            config: config.clone(),
            backlog_total: Arc::new(AtomicI64::new(0)),
        }))
    }

    /// For the ledger writer: wakes the dispatchers when settlements commit.
    pub fn notifier(&self) -> tollgate_ledger::SettleNotifier {
        tollgate_ledger::SettleNotifier::new(self.wake.clone())
    }

    /// Undelivered events across sinks, as last measured (for metrics).
    pub fn backlog_gauge(&self) -> Arc<AtomicI64> {
        self.backlog_total.clone()
    }

    /// Gives every sink a cursor, then starts the dispatchers and the backlog
    /// monitor on the current runtime. Call before serving: a sink's first
    /// cursor is placed at the head of the feed.
    pub async fn start(&self, database: &Database) -> anyhow::Result<()> {
        for (name, _) in &self.sinks {
            feed::ensure_cursor(database, name, now_ms())
                .await
                .map_err(|e| anyhow::anyhow!("cannot create the metering cursor of sink '{name}': {e}"))?;
            audit_feed::ensure_cursor(database, name)
                .await
                .map_err(|e| anyhow::anyhow!("cannot create the audit cursor of sink '{name}': {e}"))?;
        }
        for (name, sink) in &self.sinks {
            let dispatcher = dispatcher::Dispatcher {
                feed: feed::Reader::open(database)
                    .map_err(|e| anyhow::anyhow!("cannot open the usage feed for sink '{name}': {e:#}"))?,
                database: database.clone(),
                sink_name: name.clone(),
                sink: sink.clone(),
                identity: self.identity.clone(),
                wake: self.wake.clone(),
                config: self.config.clone(),
                owner: self.owner(name),
            };
            tokio::spawn(dispatcher.run());
            tokio::spawn(
                audit_feed::AuditDispatcher {
                    database: database.clone(),
                    sink_name: name.clone(),
                    sink: sink.clone(),
                    identity: self.identity.clone(),
                    config: self.config.clone(),
                    owner: self.owner(name),
                }
                .run(),
            );
        }
        tokio::spawn(monitor_backlog(
            database.clone(),
            self.sinks.iter().map(|(name, _)| name.clone()).collect(),
            Duration::from_secs(self.config.backlog_log_interval_secs.max(1)),
            self.backlog_total.clone(),
        ));
        Ok(())
    }

    fn owner(&self, sink: &str) -> String {
        format!("{}:{sink}", self.process)
    }

    /// Hands the sinks' cursors back on a graceful shutdown, so the next start
    /// (or another gateway) delivers at once rather than after `lease_ms`. A
    /// delivery still in flight then fails to move the cursor and is repeated:
    /// at least once.
    pub async fn release(&self, database: &Database) {
        for (name, _) in &self.sinks {
            if let Err(error) = feed::release(database, name, &self.owner(name)).await {
                tracing::warn!(sink = %name, %error, "cannot release the metering cursor; it frees itself after lease_ms");
            }
            if let Err(error) = audit_feed::release(database, name, &self.owner(name)).await {
                tracing::warn!(sink = %name, %error, "cannot release the audit cursor; it frees itself after lease_ms");
            }
        }
    }
}

/// Backlog older than this is logged as a warning.
const STALE_BACKLOG_SECS: i64 = 10;

/// Measures and logs the backlog: events settled but not yet delivered.
async fn monitor_backlog(database: Database, sinks: Vec<String>, every: Duration, total: Arc<AtomicI64>) {
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        match backlog(&database, &sinks).await {
            Ok(rows) => {
                total.store(rows.iter().map(|b| b.events).sum(), Ordering::Relaxed);
                for row in rows {
                    let Some(oldest) = row.oldest_settled_at_ms else {
                        continue;
                    };
                    let oldest_age_s = (now_ms() - oldest) / 1000;
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
