//! `[metering]` configuration: the event identity and the sinks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MeteringConfig {
    /// Deliver a usage event for every metered request (needs the ledger: events
    /// are read from the request log its settlements write).
    pub enabled: bool,
    /// CloudEvents `source`; defaults to `urn:tollgate:instance:<hostname>`.
    pub source: Option<String>,
    /// The gateway's external base URL. `dataschema` points at
    /// `<public_url>/schemas/usage.v1.json`, served by the gateway; defaults to
    /// `http://<listen>`.
    pub public_url: Option<String>,
    /// Where events go. Empty means the embedded default: one file sink at
    /// `<data_dir>/events/usage.jsonl`.
    pub sinks: Vec<SinkConfig>,
    /// Most events one sink delivery carries.
    pub batch_size: usize,
    /// How long a dispatcher waits for more events before delivering, so one
    /// delivery (and one cursor write) covers many requests.
    pub linger_ms: u64,
    /// How often an idle dispatcher looks for due events (new events also wake it).
    pub poll_interval_ms: u64,
    /// First retry delay after a failed delivery; doubles per attempt, with jitter.
    pub retry_base_ms: u64,
    /// Longest retry delay.
    pub retry_max_ms: u64,
    /// How long a dispatcher holds a sink's cursor without renewing it; when a
    /// gateway dies, another one sharing the database takes the sink over after
    /// this.
    pub lease_ms: u64,
    /// How often the backlog (undelivered events per sink) is logged when non-zero.
    pub backlog_log_interval_secs: u64,
}

impl Default for MeteringConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            source: None,
            public_url: None,
            sinks: Vec::new(),
            batch_size: 256,
            linger_ms: 500,
            poll_interval_ms: 1_000,
            retry_base_ms: 500,
            retry_max_ms: 60_000,
            lease_ms: 30_000,
            backlog_log_interval_secs: 30,
        }
    }
}

/// One destination for usage events. The `kind` tag selects the transport.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SinkConfig {
    /// POST to an HTTP endpoint in a CloudEvents HTTP binding mode.
    Http {
        /// Names the sink's cursor and its logs; defaults to `http:<url>`.
        name: Option<String>,
        url: String,
        #[serde(default)]
        mode: HttpMode,
        /// Extra request headers, e.g. `Authorization`.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Per-request timeout.
        timeout_ms: Option<u64>,
    },
    /// Publish to a NATS JetStream subject (structured JSON, `Nats-Msg-Id` = event id).
    Nats {
        name: Option<String>,
        #[serde(default = "default_nats_url")]
        url: String,
        #[serde(default = "default_nats_subject")]
        subject: String,
        /// A stream to create (if missing) covering `subject`; without it the
        /// subject must already belong to a stream.
        stream: Option<String>,
        /// The created stream's duplicate window: a redelivery within it is
        /// dropped by `Nats-Msg-Id`. Longer than JetStream's 2-minute
        /// default, so events redelivered after a gateway died during a
        /// database outage are still caught.
        #[serde(default = "default_nats_duplicate_window_secs")]
        duplicate_window_secs: u64,
    },
    /// Append JSON lines (structured events) to a file, rotated by size and by
    /// UTC day, the rotated files compressed and only the newest `keep` kept.
    File {
        name: Option<String>,
        /// Defaults to `<data_dir>/events/usage.jsonl`.
        path: Option<PathBuf>,
        /// Rotate before a write would take the file past this many bytes; 0:
        /// no size limit.
        #[serde(default = "default_max_bytes")]
        max_bytes: u64,
        /// Rotate at the first write of a new UTC day.
        #[serde(default = "default_true")]
        rotate_daily: bool,
        /// Rotated files kept; older ones are deleted (0 keeps none).
        #[serde(default = "default_keep")]
        keep: usize,
        /// zstd-compress rotated files (`.zst`), off the delivery path.
        #[serde(default = "default_true")]
        compress: bool,
    },
}

/// The CloudEvents HTTP binding content modes.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HttpMode {
    /// One event per request, `application/cloudevents+json`.
    #[default]
    Structured,
    /// One event per request, attributes as `ce-*` headers, data as the body.
    Binary,
    /// Many events per request, `application/cloudevents-batch+json`.
    Batch,
}

/// 100 MiB: about 128,000 events (~820 bytes each) per file.
pub const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;
pub const DEFAULT_KEEP: usize = 30;

fn default_max_bytes() -> u64 {
    DEFAULT_MAX_BYTES
}

fn default_keep() -> usize {
    DEFAULT_KEEP
}

fn default_true() -> bool {
    true
}

fn default_nats_url() -> String {
    "nats://127.0.0.1:4222".into()
}

fn default_nats_duplicate_window_secs() -> u64 {
    3600
}

fn default_nats_subject() -> String {
    "tollgate.usage".into()
}

impl SinkConfig {
    /// A file sink with the documented defaults; `None` path: the default file.
    pub fn file(path: Option<PathBuf>) -> Self {
        SinkConfig::File {
            name: None,
            path,
            max_bytes: DEFAULT_MAX_BYTES,
            rotate_daily: true,
            keep: DEFAULT_KEEP,
            compress: true,
        }
    }

    /// The key of this sink's cursor: stable when sinks are reordered.
    pub fn name(&self, data_dir: &Path) -> String {
        match self {
            SinkConfig::Http { name: Some(n), .. }
            | SinkConfig::Nats { name: Some(n), .. }
            | SinkConfig::File { name: Some(n), .. } => n.clone(),
            SinkConfig::Http { url, .. } => format!("http:{url}"),
            SinkConfig::Nats { url, subject, .. } => format!("nats:{url}/{subject}"),
            SinkConfig::File { path, .. } => format!("file:{}", file_path(path.as_deref(), data_dir).display()),
        }
    }
}

pub(super) fn file_path(path: Option<&Path>, data_dir: &Path) -> PathBuf {
    path.map(Path::to_path_buf)
        .unwrap_or_else(|| data_dir.join("events").join("usage.jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_sink_shape() {
        let text = r#"
[[sinks]]
kind = "http"
url = "http://127.0.0.1:9999/events"
mode = "structured"
[[sinks]]
kind = "http"
url = "http://127.0.0.1:9999/batch"
mode = "batch"
headers = { Authorization = "Bearer x" }
[[sinks]]
kind = "nats"
subject = "usage.events"
[[sinks]]
kind = "file"
[[sinks]]
kind = "file"
path = "/var/log/u.jsonl"
max_bytes = 1000
rotate_daily = false
keep = 3
compress = false
"#;
        let config: MeteringConfig = toml::from_str(text).unwrap();
        assert_eq!(config.sinks.len(), 5);
        assert_eq!(config.sinks[3], SinkConfig::file(None), "the documented defaults");
        assert!(matches!(
            &config.sinks[4],
            SinkConfig::File {
                max_bytes: 1000,
                rotate_daily: false,
                keep: 3,
                compress: false,
                ..
            }
        ));
        assert!(
            matches!(&config.sinks[1], SinkConfig::Http { mode: HttpMode::Batch, headers, .. } if headers["Authorization"] == "Bearer x")
        );
        assert!(matches!(&config.sinks[2], SinkConfig::Nats { url, .. } if url == "nats://127.0.0.1:4222"));
        assert_eq!(config.sinks[3].name(Path::new("/d")), "file:/d/events/usage.jsonl");
        assert!(toml::from_str::<MeteringConfig>("[[sinks]]\nkind = \"http\"\nurl = \"x\"\nbogus = 1\n").is_err());
        assert!(toml::from_str::<MeteringConfig>("[[sinks]]\nkind = \"kafka\"\n").is_err());
    }
}
