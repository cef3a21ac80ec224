//! Metrics of the client side of the server: open connections and requests in
//! flight (gauges read from the server's own counters at export time, so the
//! request path pays nothing for them), and counters of refused connections,
//! shed requests and timeouts, which cost an atomic add when exporting and
//! nothing otherwise.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use opentelemetry::metrics::{Counter, ObservableGauge};
use opentelemetry::{KeyValue, global};

use super::exporting;
use super::semconv::*;

struct Counters {
    refused: Counter<u64>,
    shed: Counter<u64>,
    timeouts: Counter<u64>,
}

fn counters() -> &'static Counters {
    static COUNTERS: OnceLock<Counters> = OnceLock::new();
    COUNTERS.get_or_init(|| {
        let meter = global::meter("tollgate");
        Counters {
            refused: meter
                .u64_counter(METRIC_REFUSED_CONNECTIONS)
                .with_unit("{connection}")
                .with_description("Client connections refused at a connection cap, by reason")
                .build(),
            shed: meter
                .u64_counter(METRIC_SHED)
                .with_unit("{request}")
                .with_description("Requests refused with 503 without being served, by reason")
                .build(),
            timeouts: meter
                .u64_counter(METRIC_TIMEOUTS)
                .with_unit("{timeout}")
                .with_description("Client connections or requests that timed out, by what was awaited")
                .build(),
        }
    })
}

pub fn count_refused_connection(reason: &'static str) {
    if exporting() {
        counters().refused.add(1, &[KeyValue::new(TOLLGATE_REASON, reason)]);
    }
}

pub fn count_shed(reason: &'static str) {
    if exporting() {
        counters().shed.add(1, &[KeyValue::new(TOLLGATE_REASON, reason)]);
    }
}

pub fn count_timeout(kind: &'static str) {
    if exporting() {
        counters().timeouts.add(1, &[KeyValue::new(TOLLGATE_TIMEOUT, kind)]);
    }
}

/// Exports the open-connection and in-flight-request gauges, read from these
/// counters.
pub fn watch_serving(open_connections: Arc<AtomicUsize>, in_flight: Arc<AtomicUsize>) {
    if !exporting() {
        return;
    }
    static GAUGES: OnceLock<[ObservableGauge<u64>; 2]> = OnceLock::new();
    let meter = global::meter("tollgate");
    let gauge = |name: &'static str, unit: &'static str, description: &'static str, value: Arc<AtomicUsize>| {
        meter
            .u64_observable_gauge(name)
            .with_unit(unit)
            .with_description(description)
            .with_callback(move |observer| observer.observe(value.load(Ordering::Relaxed) as u64, &[]))
            .build()
    };
    let _ = GAUGES.set([
        gauge(
            METRIC_OPEN_CONNECTIONS,
            "{connection}",
            "Client connections open",
            open_connections,
        ),
        gauge(
            METRIC_IN_FLIGHT,
            "{request}",
            "Requests being served, streams until their end",
            in_flight,
        ),
    ]);
}
