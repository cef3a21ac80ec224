//! Streaming cost at concurrency 1: time to the first body byte, and the time
//! per SSE frame after it. The mock has every frame ready at once, so the
//! direct path shows the transfer floor and the gap is the gateway's
//! per-chunk work (parsing, metering, re-framing).

use std::time::{Duration, Instant};

use reqwest::Client;

use crate::target::Target;

pub struct StreamRun {
    pub requests: u64,
    pub errors: u64,
    /// Ascending, ns.
    pub ttfb: Vec<u64>,
    /// Per request: (total − ttfb) / (frames − 1), ascending, ns.
    pub per_chunk: Vec<u64>,
    /// `data:` frames in the last successful stream, `[DONE]` included.
    pub frames: u64,
}

pub async fn measure(client: &Client, target: &Target, requests: usize, budget: Duration) -> StreamRun {
    let deadline = Instant::now() + budget;
    let mut run = StreamRun {
        requests: 0,
        errors: 0,
        ttfb: Vec::with_capacity(requests),
        per_chunk: Vec::with_capacity(requests),
        frames: 0,
    };
    while run.requests < requests as u64 && Instant::now() < deadline {
        run.requests += 1;
        match one_stream(client, target).await {
            Some((ttfb, total, frames)) => {
                run.ttfb.push(ttfb.as_nanos() as u64);
                let gaps = frames.saturating_sub(1).max(1);
                run.per_chunk.push((total - ttfb).as_nanos() as u64 / gaps);
                run.frames = frames;
            }
            None => run.errors += 1,
        }
    }
    run.ttfb.sort_unstable();
    run.per_chunk.sort_unstable();
    run
}

/// (time to first body byte, total time, frames), or None on any failure
/// including a stream that ends without `[DONE]`.
async fn one_stream(client: &Client, target: &Target) -> Option<(Duration, Duration, u64)> {
    let sent = Instant::now();
    let mut resp = target.request(client, &target.stream_body).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let mut body = Vec::with_capacity(16 * 1024);
    let mut first = None;
    while let Some(chunk) = resp.chunk().await.ok()? {
        first.get_or_insert_with(|| sent.elapsed());
        body.extend_from_slice(&chunk);
    }
    let total = sent.elapsed();
    let text = std::str::from_utf8(&body).ok()?;
    let mut frames = 0;
    let mut done = false;
    for line in text.lines() {
        if let Some(data) = line.strip_prefix("data:") {
            frames += 1;
            done |= data.trim() == "[DONE]";
        }
    }
    done.then_some((first?, total, frames))
}
