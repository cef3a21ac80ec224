//! Turns raw runs into the result table and its JSON twin.

use serde::Serialize;

use crate::load::LoadRun;
use crate::stats::{mean, micros, percentile};
use crate::stream::StreamRun;

#[derive(Serialize)]
pub struct Report {
    /// `spawned`, `external` or `self-test`.
    pub mode: &'static str,
    pub duration_secs: u64,
    pub cores: usize,
    pub concurrency: Vec<usize>,
    /// One entry per measured configuration, in the order they ran; the
    /// floor row (`--floor`) and the LiteLLM row, when measured, are the last.
    pub configs: Vec<ConfigResult>,
    /// Present when `--litellm` was given, whether or not its row exists.
    pub litellm: Option<LitellmInfo>,
    pub acceptance: Acceptance,
}

/// One gateway (or LiteLLM) against the direct mock, measured side by side.
#[derive(Serialize)]
pub struct ConfigResult {
    pub name: String,
    /// `gateway`, `floor`, `litellm`, `self-test` or `external`.
    pub kind: &'static str,
    /// What the configuration changes (`KEY=value`, or LiteLLM's pin).
    pub settings: Vec<String>,
    pub load: Vec<Level>,
    pub stream: Stream,
    /// VmHWM of the process (summed over its process group) at the end of
    /// its run; unknown without a pid, or if it died.
    pub peak_rss_kib: Option<u64>,
    /// Set if the process under test ended during its run (its exit status;
    /// the log's tail goes to stderr).
    pub exited: Option<String>,
}

#[derive(Serialize)]
pub struct LitellmInfo {
    pub version: &'static str,
    pub workers: usize,
    /// `measured`, or why the row is missing.
    pub status: String,
}

/// The targets for the default configuration, next to the figures.
#[derive(Serialize)]
pub struct Acceptance {
    /// The configuration the checks read (`default`), if it was measured.
    pub configuration: Option<String>,
    pub checks: Vec<Check>,
}

#[derive(Serialize)]
pub struct Check {
    pub what: &'static str,
    /// e.g. `<= 150 µs`.
    pub target: String,
    pub value: Option<f64>,
    pub unit: &'static str,
    /// None when the figure was not measured in this run.
    pub met: Option<bool>,
    /// Another reading of the same figure, when one helps.
    pub note: Option<String>,
}

#[derive(Serialize)]
pub struct Level {
    pub concurrency: usize,
    pub direct: PathStats,
    /// The path under test: the gateway, or LiteLLM on its row.
    pub gateway: PathStats,
    /// Gateway req/s over direct req/s.
    pub throughput_ratio: f64,
    pub added_p50_us: f64,
    pub added_p99_us: f64,
}

#[derive(Serialize)]
pub struct PathStats {
    pub requests: u64,
    pub errors: u64,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
}

#[derive(Serialize)]
pub struct Stream {
    pub words: usize,
    pub direct: StreamStats,
    pub gateway: StreamStats,
    pub added_ttfb_p50_us: f64,
    pub added_per_chunk_p50_us: f64,
}

#[derive(Clone, Serialize)]
pub struct StreamStats {
    pub requests: u64,
    pub errors: u64,
    pub frames_per_stream: u64,
    pub ttfb_p50_us: f64,
    pub ttfb_p99_us: f64,
    pub per_chunk_p50_us: f64,
}

impl PathStats {
    pub fn from_run(run: &LoadRun) -> Self {
        Self {
            requests: run.latencies.len() as u64,
            errors: run.errors,
            rps: (run.throughput() * 10.0).round() / 10.0,
            p50_us: micros(percentile(&run.latencies, 50.0) as f64),
            p99_us: micros(percentile(&run.latencies, 99.0) as f64),
            mean_us: micros(mean(&run.latencies)),
        }
    }
}

impl Level {
    pub fn new(concurrency: usize, direct: &LoadRun, gateway: &LoadRun) -> Self {
        let (direct, gateway) = (PathStats::from_run(direct), PathStats::from_run(gateway));
        let ratio = if direct.rps > 0.0 {
            gateway.rps / direct.rps
        } else {
            0.0
        };
        Self {
            concurrency,
            throughput_ratio: (ratio * 1000.0).round() / 1000.0,
            added_p50_us: round1(gateway.p50_us - direct.p50_us),
            added_p99_us: round1(gateway.p99_us - direct.p99_us),
            direct,
            gateway,
        }
    }
}

impl StreamStats {
    pub fn from_run(run: &StreamRun) -> Self {
        Self {
            requests: run.requests,
            errors: run.errors,
            frames_per_stream: run.frames,
            ttfb_p50_us: micros(percentile(&run.ttfb, 50.0) as f64),
            ttfb_p99_us: micros(percentile(&run.ttfb, 99.0) as f64),
            // Per-chunk costs are around a microsecond: keep two decimals.
            per_chunk_p50_us: (percentile(&run.per_chunk, 50.0) as f64 / 10.0).round() / 100.0,
        }
    }
}

impl Stream {
    pub fn new(words: usize, direct: &StreamRun, gateway: &StreamRun) -> Self {
        let (direct, gateway) = (StreamStats::from_run(direct), StreamStats::from_run(gateway));
        Self {
            words,
            added_ttfb_p50_us: round1(gateway.ttfb_p50_us - direct.ttfb_p50_us),
            added_per_chunk_p50_us: ((gateway.per_chunk_p50_us - direct.per_chunk_p50_us) * 100.0).round() / 100.0,
            direct,
            gateway,
        }
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
