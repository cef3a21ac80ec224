//! Live traffic per route (`provider/model`), measured from real requests:
//! what routing ranks on (latency, throughput, load, recent 429s, the
//! per-deployment request and token windows) and what `/v1/models` shows.
//!
//! Breakers ([`crate::health`]) decide whether a model may be called at all;
//! this decides which of the callable ones is best. The two are kept apart so
//! a listing or a ranking never takes the breakers' lock.
//!
//! Latency figures are floats: they are measurements, never money.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How much one new sample moves an average: about the last 10 requests count.
const EWMA_WEIGHT: f64 = 0.2;
/// Samples kept for the medians `/v1/models` shows.
const SAMPLES: usize = 128;
/// How long a 429 counts against a deployment in ranking (its breaker holds
/// it back only when the upstream said how long).
const RATE_LIMIT_MEMORY: Duration = Duration::from_secs(5);
/// The window per-deployment `rpm` and `tpm` limits count in.
const WINDOW: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct Traffic {
    routes: RwLock<HashMap<String, Arc<RouteTraffic>>>,
}

impl Traffic {
    /// The live figures of one route, created on first use.
    pub fn route(&self, id: &str) -> Arc<RouteTraffic> {
        if let Some(found) = self.routes.read().expect("traffic lock poisoned").get(id) {
            return found.clone();
        }
        let mut routes = self.routes.write().expect("traffic lock poisoned");
        routes.entry(id.to_string()).or_default().clone()
    }

    /// The figures of a route that has seen traffic, for a listing.
    pub fn snapshot(&self, id: &str) -> Option<Snapshot> {
        let route = self.routes.read().expect("traffic lock poisoned").get(id)?.clone();
        Some(route.snapshot())
    }
}

#[derive(Default)]
pub struct RouteTraffic {
    in_flight: AtomicU32,
    measured: Mutex<Measured>,
}

#[derive(Default)]
struct Measured {
    /// Time to the response head, whole answers and streams alike.
    latency_ms: Ewma,
    /// Time to the first streamed byte (the head, for streams).
    ttft_ms: Ewma,
    /// Output tokens per second of generation, after the head.
    tokens_per_second: Ewma,
    latencies: Samples,
    ttfts: Samples,
    throughputs: Samples,
    successes: u64,
    failures: u64,
    /// 1.0 for a success, 0.0 for a failure, averaged over recent requests.
    success_rate: Ewma,
    rate_limited_at: Option<Instant>,
    window: Window,
}

#[derive(Default)]
struct Ewma(Option<f64>);

impl Ewma {
    fn add(&mut self, sample: f64) {
        self.0 = Some(match self.0 {
            Some(mean) => mean + EWMA_WEIGHT * (sample - mean),
            None => sample,
        });
    }
}

#[derive(Default)]
struct Samples(VecDeque<f64>);

impl Samples {
    fn add(&mut self, sample: f64) {
        if self.0.len() == SAMPLES {
            self.0.pop_front();
        }
        self.0.push_back(sample);
    }

    fn median(&self) -> Option<f64> {
        let mut sorted: Vec<f64> = self.0.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied()
    }
}

/// Requests sent and tokens used in the current fixed window.
#[derive(Default)]
struct Window {
    started: Option<Instant>,
    requests: u32,
    tokens: u64,
}

impl Window {
    fn current(&mut self, now: Instant) -> &mut Self {
        if self.started.is_none_or(|started| now.duration_since(started) >= WINDOW) {
            *self = Window {
                started: Some(now),
                ..Window::default()
            };
        }
        self
    }
}

/// What ranking reads of a route, in one lock.
#[derive(Clone, Copy, Debug, Default)]
pub struct Live {
    pub in_flight: u32,
    /// Mean time to the response head, once measured.
    pub latency_ms: Option<f64>,
    pub tokens_per_second: Option<f64>,
    /// Whether the route answered 429 within the last few seconds.
    pub recently_rate_limited: bool,
}

/// A route's figures as `/v1/models` shows them.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub requests: u64,
    pub success_rate: Option<f64>,
    pub p50_latency_ms: Option<f64>,
    pub p50_ttft_ms: Option<f64>,
    pub p50_tokens_per_second: Option<f64>,
    pub in_flight: u32,
}

impl RouteTraffic {
    /// One request leaving for this route: counted in flight until the guard
    /// drops, and against the route's request window now.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.lock().window.current(Instant::now()).requests += 1;
        InFlight {
            route: self.clone(),
            head_at: None,
        }
    }

    pub fn live(&self) -> Live {
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let measured = self.lock();
        Live {
            in_flight,
            latency_ms: measured.latency_ms.0,
            tokens_per_second: measured.tokens_per_second.0,
            recently_rate_limited: measured
                .rate_limited_at
                .is_some_and(|at| at.elapsed() < RATE_LIMIT_MEMORY),
        }
    }

    /// Whether another request fits this minute's `rpm` and `tpm` (the tokens
    /// of requests already settled in the window).
    pub fn within(&self, rpm: Option<u32>, tpm: Option<u64>) -> bool {
        if rpm.is_none() && tpm.is_none() {
            return true;
        }
        let mut measured = self.lock();
        let window = measured.window.current(Instant::now());
        rpm.is_none_or(|limit| window.requests < limit) && tpm.is_none_or(|limit| window.tokens < limit)
    }

    fn snapshot(&self) -> Snapshot {
        let measured = self.lock();
        let requests = measured.successes + measured.failures;
        Snapshot {
            requests,
            success_rate: (requests > 0).then_some(measured.success_rate.0).flatten(),
            p50_latency_ms: measured.latencies.median(),
            p50_ttft_ms: measured.ttfts.median(),
            p50_tokens_per_second: measured.throughputs.median(),
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Measured> {
        self.measured.lock().expect("traffic lock poisoned")
    }
}

/// One request to a route, from sending until its answer ends (the whole
/// body read, or the stream's last byte). Report what happened; dropping it
/// without a report counts the request out of flight and nothing else.
pub struct InFlight {
    route: Arc<RouteTraffic>,
    head_at: Option<Instant>,
}

impl InFlight {
    /// The upstream answered with a 2xx head after `latency`.
    pub fn answered(&mut self, latency: Duration, streamed: bool) {
        self.head_at = Some(Instant::now());
        let ms = latency.as_secs_f64() * 1000.0;
        let mut measured = self.route.lock();
        measured.latency_ms.add(ms);
        measured.latencies.add(ms);
        if streamed {
            measured.ttft_ms.add(ms);
            measured.ttfts.add(ms);
        }
    }

    /// The answer ended well, with `tokens` used in all and `output_tokens`
    /// written since the head.
    pub fn finished(&self, tokens: u64, output_tokens: u64) {
        let mut measured = self.route.lock();
        measured.successes += 1;
        measured.success_rate.add(1.0);
        measured.window.current(Instant::now()).tokens += tokens;
        let generating = self.head_at.map(|at| at.elapsed().as_secs_f64());
        // Below a millisecond the rate says more about the clock than the model.
        if let Some(seconds) = generating.filter(|s| *s >= 0.001)
            && output_tokens > 0
        {
            let rate = output_tokens as f64 / seconds;
            measured.tokens_per_second.add(rate);
            measured.throughputs.add(rate);
        }
    }

    /// The route failed this request (an error answer, a broken stream).
    pub fn failed(&self) {
        let mut measured = self.route.lock();
        measured.failures += 1;
        measured.success_rate.add(0.0);
    }

    /// The route answered 429: ranked last for a few seconds.
    pub fn rate_limited(&self) {
        let mut measured = self.route.lock();
        measured.rate_limited_at = Some(Instant::now());
        measured.failures += 1;
        measured.success_rate.add(0.0);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.route.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_latency_throughput_and_load() {
        let traffic = Traffic::default();
        let route = traffic.route("p/m");
        assert!(traffic.snapshot("q/m").is_none(), "unseen routes have no figures");
        let mut flight = route.start();
        assert_eq!(route.live().in_flight, 1);
        flight.answered(Duration::from_millis(40), true);
        std::thread::sleep(Duration::from_millis(20));
        flight.finished(30, 10);
        drop(flight);
        let live = route.live();
        assert_eq!(live.in_flight, 0);
        assert!((live.latency_ms.unwrap() - 40.0).abs() < 0.01);
        let rate = live.tokens_per_second.unwrap();
        assert!(rate > 50.0 && rate <= 500.0, "10 tokens in ≥ 20 ms: {rate}");
        let snapshot = traffic.snapshot("p/m").unwrap();
        assert_eq!(snapshot.requests, 1);
        assert_eq!(snapshot.success_rate, Some(1.0));
        assert_eq!(snapshot.p50_ttft_ms, Some(40.0));
        let second = route.start();
        second.failed();
        assert_eq!(traffic.snapshot("p/m").unwrap().success_rate, Some(0.8));
    }

    #[test]
    fn the_window_holds_rpm_and_tpm() {
        let route = Arc::new(RouteTraffic::default());
        assert!(route.within(Some(2), None));
        route.start().finished(100, 1);
        assert!(route.within(Some(2), Some(101)));
        assert!(!route.within(None, Some(100)), "100 tokens used of 100");
        route.start();
        assert!(!route.within(Some(2), None), "2 requests sent of 2");
        assert!(route.within(None, None));
    }

    #[test]
    fn a_429_is_remembered_for_a_few_seconds() {
        let route = Arc::new(RouteTraffic::default());
        route.start().rate_limited();
        assert!(route.live().recently_rate_limited);
    }
}
