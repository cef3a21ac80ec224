//! Event sinks behind one small trait. A sink receives a batch of events in
//! feed order (commit order) and reports how many, from the front, it delivered; the
//! dispatcher retries the rest later.

mod file;
mod http;
mod nats;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::config::SinkConfig;

/// One event as stored: its id and its structured-mode CloudEvents JSON.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub id: String,
    pub json: String,
}

/// What a delivery achieved: the first `delivered` events arrived; `error`
/// says why the rest did not.
#[derive(Debug, Default)]
pub struct Delivery {
    pub delivered: usize,
    pub error: Option<String>,
}

impl Delivery {
    pub fn all(count: usize) -> Self {
        Self {
            delivered: count,
            error: None,
        }
    }

    pub fn failed_at(delivered: usize, error: impl Into<String>) -> Self {
        Self {
            delivered,
            error: Some(error.into()),
        }
    }
}

pub type DeliveryFuture<'a> = Pin<Box<dyn Future<Output = Delivery> + Send + 'a>>;

pub trait Sink: Send + Sync {
    /// Delivers `events` in order. Must not return before the delivered ones
    /// are durable at the destination (acknowledged, flushed, 2xx).
    fn deliver<'a>(&'a self, events: &'a [StoredEvent]) -> DeliveryFuture<'a>;
}

/// Builds the sink a configuration entry describes; `batch_size` is the most
/// events one delivery carries.
pub fn build(config: &SinkConfig, data_dir: &Path, batch_size: usize) -> anyhow::Result<Arc<dyn Sink>> {
    Ok(match config {
        SinkConfig::Http {
            url,
            mode,
            headers,
            timeout_ms,
            ..
        } => Arc::new(http::HttpSink::new(url, *mode, headers, *timeout_ms)?),
        SinkConfig::Nats {
            url,
            subject,
            stream,
            duplicate_window_secs,
            ..
        } => Arc::new(nats::NatsSink::new(
            url,
            subject,
            stream.as_deref(),
            Duration::from_secs(*duplicate_window_secs),
        )),
        SinkConfig::File {
            path,
            max_bytes,
            rotate_daily,
            keep,
            compress,
            ..
        } => Arc::new(file::FileSink::new(
            super::config::file_path(path.as_deref(), data_dir),
            file::Rotation {
                max_bytes: *max_bytes,
                rotate_daily: *rotate_daily,
                keep: *keep,
                compress: *compress,
            },
            // A redelivery repeats at most one batch.
            batch_size.max(1),
            wall_clock(),
        )),
    })
}

/// The time rotation goes by. Test builds (the `test-clock` feature) shift it
/// by `TOLLGATE_TEST_CLOCK_OFFSET_MS`, so a test crosses midnight without
/// waiting for it.
fn wall_clock() -> file::Clock {
    #[cfg(feature = "test-clock")]
    if let Some(offset) = std::env::var("TOLLGATE_TEST_CLOCK_OFFSET_MS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
    {
        return Arc::new(move || tollgate_core::db::now_ms() + offset);
    }
    Arc::new(tollgate_core::db::now_ms)
}
