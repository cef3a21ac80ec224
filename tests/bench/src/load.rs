//! Closed-loop load: N workers each send a request, wait for the whole
//! answer, and send the next, until the deadline or the request budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::Client;
use tokio::task::JoinSet;

use crate::target::Target;

pub struct LoadRun {
    /// Latencies of successful (2xx, fully read) requests, ascending, in ns.
    pub latencies: Vec<u64>,
    /// Non-2xx answers and transport failures.
    pub errors: u64,
    pub elapsed: Duration,
}

impl LoadRun {
    pub fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

pub async fn closed_loop(
    client: &Client,
    target: &Arc<Target>,
    concurrency: usize,
    duration: Duration,
    max_requests: usize,
) -> LoadRun {
    let start = Instant::now();
    let deadline = start + duration;
    let issued = Arc::new(AtomicUsize::new(0));
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (client, target, issued) = (client.clone(), target.clone(), issued.clone());
        workers.spawn(worker(client, target, deadline, issued, max_requests));
    }
    let mut run = LoadRun {
        latencies: Vec::new(),
        errors: 0,
        elapsed: Duration::ZERO,
    };
    while let Some(done) = workers.join_next().await {
        // A panicking worker is a bug in the harness: surface it.
        let (latencies, errors) = done.expect("load worker panicked");
        run.latencies.extend(latencies);
        run.errors += errors;
    }
    run.elapsed = start.elapsed();
    run.latencies.sort_unstable();
    run
}

async fn worker(
    client: Client,
    target: Arc<Target>,
    deadline: Instant,
    issued: Arc<AtomicUsize>,
    max_requests: usize,
) -> (Vec<u64>, u64) {
    let mut latencies = Vec::with_capacity(16 * 1024);
    let mut errors = 0;
    while Instant::now() < deadline && issued.fetch_add(1, Ordering::Relaxed) < max_requests {
        let sent = Instant::now();
        let ok = match target.request(&client, &target.body).send().await {
            // The body must be read for the connection to be reused, and a
            // gateway may fail mid-body.
            Ok(resp) => {
                let success = resp.status().is_success();
                resp.bytes().await.is_ok() && success
            }
            Err(_) => false,
        };
        if ok {
            latencies.push(sent.elapsed().as_nanos() as u64);
        } else {
            errors += 1;
        }
    }
    (latencies, errors)
}
