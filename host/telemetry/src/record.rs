//! What a settled request reports: one `<operation> <model>` client span per
//! upstream attempt (`chat`, `embeddings`, …) (parented to the request's server span) and the GenAI and gateway
//! metrics. Spans are recorded after the fact from the attempt trail, with the
//! attempts' own start and end times, so the request path holds no span state.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::trace::{Span, SpanKind, Status, Tracer};
use opentelemetry::{Context, KeyValue, global};

use super::exporting;
use super::semconv::*;

/// One upstream attempt, as the trail recorded it.
pub struct AttemptRecord<'a> {
    pub provider: &'a str,
    pub response_model: &'a str,
    pub started: SystemTime,
    pub ended: SystemTime,
    /// `None` for a success; else the error code that ended the attempt.
    pub error_type: Option<&'a str>,
    pub status: Option<u16>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_nano: i64,
    /// From the attempt's start to its first streamed chunk.
    pub time_to_first_chunk: Option<Duration>,
}

/// A settled request.
pub struct RequestRecord<'a> {
    pub parent: &'a Context,
    /// `gen_ai.operation.name`: `chat`, `embeddings`, or the gateway's own
    /// name for an operation GenAI names none for (`image_generation`, …).
    pub operation: &'static str,
    pub request_id: &'a str,
    pub requested_model: &'a str,
    pub outcome: &'a str,
    pub status: Option<u16>,
    pub cost_nano: i64,
    pub attempts: Vec<AttemptRecord<'a>>,
    /// The routing decision that ordered the attempts, when one was made.
    pub route: Option<RouteRecord<'a>>,
}

/// What routing decided, as attributes of every attempt span of the request.
pub struct RouteRecord<'a> {
    /// `weighted`, `sort:price`, …
    pub strategy: &'a str,
    pub group: Option<&'a str>,
    /// Why the first candidate was first.
    pub reason: &'a str,
    /// Candidates considered, before preferences excluded any.
    pub considered: usize,
    /// What named the conversation when affinity chose.
    pub conversation: Option<&'a str>,
}

struct Instruments {
    token_usage: Histogram<u64>,
    duration: Histogram<f64>,
    time_to_first_chunk: Histogram<f64>,
    requests: Counter<u64>,
    cost: Counter<u64>,
    reserve_duration: Histogram<f64>,
}

fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = global::meter("tollgate");
        Instruments {
            token_usage: meter
                .u64_histogram(METRIC_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Tokens used per upstream attempt, by token type")
                .with_boundaries(vec![
                    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
                ])
                .build(),
            duration: meter
                .f64_histogram(METRIC_OPERATION_DURATION)
                .with_unit("s")
                .with_description("Duration of upstream attempts")
                .build(),
            time_to_first_chunk: meter
                .f64_histogram(METRIC_TIME_TO_FIRST_CHUNK)
                .with_unit("s")
                .with_description("Time from an attempt's start to its first streamed chunk")
                .build(),
            requests: meter
                .u64_counter(METRIC_REQUESTS)
                .with_unit("{request}")
                .with_description("Chat requests settled, by status and outcome")
                .build(),
            cost: meter
                .u64_counter(METRIC_COST)
                .with_unit("nUSD")
                .with_description("Cost billed to wallets, in nano-USD")
                .build(),
            reserve_duration: meter
                .f64_histogram(METRIC_RESERVE_DURATION)
                .with_unit("s")
                .with_description("Latency of wallet reservations")
                .build(),
        }
    })
}

/// Records a settled request's attempt spans and metrics. Does nothing unless
/// exporting.
pub fn record(request: RequestRecord<'_>) {
    if !exporting() {
        return;
    }
    let instruments = instruments();
    let tracer = global::tracer("tollgate");
    for (index, attempt) in request.attempts.iter().enumerate() {
        let common = [
            KeyValue::new(GEN_AI_OPERATION_NAME, request.operation),
            KeyValue::new(GEN_AI_PROVIDER_NAME, attempt.provider.to_string()),
            KeyValue::new(GEN_AI_REQUEST_MODEL, request.requested_model.to_string()),
            KeyValue::new(GEN_AI_RESPONSE_MODEL, attempt.response_model.to_string()),
        ];
        let mut attributes = common.to_vec();
        attributes.push(KeyValue::new(TOLLGATE_REQUEST_ID, request.request_id.to_string()));
        attributes.push(KeyValue::new(TOLLGATE_ATTEMPT, index as i64));
        attributes.push(KeyValue::new(TOLLGATE_COST_NANO_USD, attempt.cost_nano));
        if let Some(route) = &request.route {
            attributes.push(KeyValue::new(TOLLGATE_ROUTE_STRATEGY, route.strategy.to_string()));
            attributes.push(KeyValue::new(TOLLGATE_ROUTE_REASON, route.reason.to_string()));
            attributes.push(KeyValue::new(TOLLGATE_ROUTE_CONSIDERED, route.considered as i64));
            if let Some(group) = route.group {
                attributes.push(KeyValue::new(TOLLGATE_ROUTE_GROUP, group.to_string()));
            }
            if let Some(conversation) = route.conversation {
                attributes.push(KeyValue::new(TOLLGATE_ROUTE_AFFINITY, conversation.to_string()));
            }
        }
        if let Some(tokens) = attempt.input_tokens {
            attributes.push(KeyValue::new(GEN_AI_USAGE_INPUT_TOKENS, tokens as i64));
        }
        if let Some(tokens) = attempt.output_tokens {
            attributes.push(KeyValue::new(GEN_AI_USAGE_OUTPUT_TOKENS, tokens as i64));
        }
        if let Some(status) = attempt.status {
            attributes.push(KeyValue::new(HTTP_RESPONSE_STATUS_CODE, i64::from(status)));
        }
        if let Some(ttfc) = attempt.time_to_first_chunk {
            attributes.push(KeyValue::new(GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, ttfc.as_secs_f64()));
        }
        if let Some(error) = attempt.error_type {
            attributes.push(KeyValue::new(ERROR_TYPE, error.to_string()));
        }
        let mut span = tracer
            .span_builder(format!("{} {}", request.operation, attempt.response_model))
            .with_kind(SpanKind::Client)
            .with_start_time(attempt.started)
            .with_attributes(attributes)
            .start_with_context(&tracer, request.parent);
        if let Some(error) = attempt.error_type {
            span.set_status(Status::error(error.to_string()));
        }
        span.end_with_timestamp(attempt.ended);

        let mut by_outcome = common.to_vec();
        if let Some(error) = attempt.error_type {
            by_outcome.push(KeyValue::new(ERROR_TYPE, error.to_string()));
        }
        let seconds = attempt.ended.duration_since(attempt.started).unwrap_or_default();
        instruments.duration.record(seconds.as_secs_f64(), &by_outcome);
        if let Some(ttfc) = attempt.time_to_first_chunk {
            instruments.time_to_first_chunk.record(ttfc.as_secs_f64(), &common);
        }
        for (kind, tokens) in [("input", attempt.input_tokens), ("output", attempt.output_tokens)] {
            if let Some(tokens) = tokens {
                let mut typed = common.to_vec();
                typed.push(KeyValue::new(GEN_AI_TOKEN_TYPE, kind));
                instruments.token_usage.record(tokens, &typed);
            }
        }
    }
    let status = request.status.map_or(0, i64::from);
    instruments.requests.add(
        1,
        &[
            KeyValue::new(HTTP_RESPONSE_STATUS_CODE, status),
            KeyValue::new(TOLLGATE_OUTCOME, request.outcome.to_string()),
        ],
    );
    if request.cost_nano > 0 {
        instruments.cost.add(
            request.cost_nano as u64,
            &[KeyValue::new(GEN_AI_REQUEST_MODEL, request.requested_model.to_string())],
        );
    }
}

/// Records how long a wallet reservation took.
pub fn record_reserve_latency(elapsed: Duration) {
    if exporting() {
        instruments().reserve_duration.record(elapsed.as_secs_f64(), &[]);
    }
}

/// Exports the metering backlog (events settled but not yet delivered) as a gauge read from `backlog`.
/// Exports the ledger journal's lag (answered settlements not yet in the
/// database) and whether the database is reachable, read from `health` as
/// `(lag, reachable)` at each collection.
pub fn watch_ledger_journal(health: impl Fn() -> (u64, bool) + Send + Sync + 'static) {
    if !exporting() {
        return;
    }
    static GAUGES: OnceLock<[opentelemetry::metrics::ObservableGauge<i64>; 2]> = OnceLock::new();
    let health = Arc::new(health);
    let meter = global::meter("tollgate");
    let lag = meter
        .i64_observable_gauge(METRIC_JOURNAL_LAG)
        .with_unit("{settlement}")
        .with_description("Answered settlements in the ledger's journal, not yet in the database")
        .with_callback({
            let health = health.clone();
            move |observer| observer.observe(i64::try_from(health().0).unwrap_or(i64::MAX), &[])
        })
        .build();
    let reachable = meter
        .i64_observable_gauge(METRIC_DATABASE_REACHABLE)
        .with_unit("1")
        .with_description("1 while the ledger writer's last database transaction succeeded, else 0")
        .with_callback(move |observer| observer.observe(i64::from(health().1), &[]))
        .build();
    let _ = GAUGES.set([lag, reachable]);
}

pub fn watch_outbox_backlog(backlog: Arc<AtomicI64>) {
    if !exporting() {
        return;
    }
    static GAUGE: OnceLock<opentelemetry::metrics::ObservableGauge<i64>> = OnceLock::new();
    let gauge = global::meter("tollgate")
        .i64_observable_gauge(METRIC_OUTBOX_BACKLOG)
        .with_unit("{event}")
        .with_description("Usage events not yet delivered, across sinks")
        .with_callback(move |observer| observer.observe(backlog.load(Ordering::Relaxed), &[]))
        .build();
    let _ = GAUGE.set(gauge);
}
