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
    pub load: Vec<Level>,
    pub stream: Stream,
    /// VmHWM of the gateway process at the end, when its pid is known.
    pub gateway_peak_rss_kib: Option<u64>,
}

#[derive(Serialize)]
pub struct Level {
    pub concurrency: usize,
    pub direct: PathStats,
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

#[derive(Serialize)]
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

impl Report {
    pub fn print_table(&self) {
        println!(
            "\nmode: {}, {} s per run, {} cores (load generator, mock and gateway share them)\n",
            self.mode, self.duration_secs, self.cores
        );
        println!(
            "{:>5} | {:>10} {:>9} {:>9} | {:>10} {:>9} {:>9} | {:>6} | {:>9} {:>9} | {:>9}",
            "conc",
            "direct r/s",
            "p50 µs",
            "p99 µs",
            "gw r/s",
            "p50 µs",
            "p99 µs",
            "ratio",
            "+p50 µs",
            "+p99 µs",
            "errors d/g"
        );
        for l in &self.load {
            println!(
                "{:>5} | {:>10.1} {:>9.1} {:>9.1} | {:>10.1} {:>9.1} {:>9.1} | {:>6.3} | {:>9.1} {:>9.1} | {:>4}/{:<4}",
                l.concurrency,
                l.direct.rps,
                l.direct.p50_us,
                l.direct.p99_us,
                l.gateway.rps,
                l.gateway.p50_us,
                l.gateway.p99_us,
                l.throughput_ratio,
                l.added_p50_us,
                l.added_p99_us,
                l.direct.errors,
                l.gateway.errors,
            );
        }
        let s = &self.stream;
        println!("\nstreaming, c=1, {} words:", s.words);
        for (name, p) in [("direct", &s.direct), ("gateway", &s.gateway)] {
            println!(
                "  {name:>7}: ttfb p50 {:.1} µs, p99 {:.1} µs; per chunk p50 {:.2} µs; {} frames; {}/{} errors",
                p.ttfb_p50_us, p.ttfb_p99_us, p.per_chunk_p50_us, p.frames_per_stream, p.errors, p.requests
            );
        }
        println!(
            "    added: ttfb p50 {:+.1} µs, per chunk p50 {:+.2} µs",
            s.added_ttfb_p50_us, s.added_per_chunk_p50_us
        );
        match self.gateway_peak_rss_kib {
            Some(kib) => println!("\ngateway peak RSS (VmHWM): {kib} KiB ({:.1} MiB)", kib as f64 / 1024.0),
            None => println!("\ngateway peak RSS: unknown (no gateway pid)"),
        }
    }
}
