//! Logs, traces and metrics.
//!
//! - **Logs** go to stderr: compact, coloured text when stderr is a terminal,
//!   JSON lines otherwise ([`LogFormat`]; `--log-format json|text` or
//!   `TOLLGATE_LOG_FORMAT=json|text` overrides). Lines logged while
//!   serving a request carry its `request_id` through the server span. `RUST_LOG`
//!   selects levels (default `info`). Prompts are never logged unless
//!   `telemetry.log_prompts` is on.
//! - **Traces and metrics** are exported over OTLP/HTTP (protobuf) when the
//!   standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or the per-signal
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `…_METRICS_ENDPOINT`) is set; the
//!   exporter reads the other `OTEL_*` variables itself. With none set nothing
//!   is built, and the request path skips all span and metric work
//!   ([`exporting`]). Inbound `traceparent` headers are honoured.
//!
//! Per request: a server span (`server_span`), an `adapter <name>` span around
//! the request translation, and, when the request settles, one `chat <model>`
//! client span per upstream attempt plus the GenAI metrics ([`record`]).
//! Per server: open connections, requests in flight, refused connections,
//! shed requests and timeouts (`serving.rs`).
//!
//! It knows no route, wallet, provider or plugin: callers hand it plain
//! records ([`RequestRecord`], [`AttemptRecord`]) and counters, and it depends
//! on no other workspace crate.
#![forbid(unsafe_code)]

mod record;
pub mod semconv;
mod serving;

use std::io::IsTerminal;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::global;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use record::{
    AttemptRecord, RequestRecord, RouteRecord, record, record_reserve_latency, watch_ledger_journal,
    watch_outbox_backlog,
};
pub use serving::{count_refused_connection, count_shed, count_timeout, watch_serving};

/// `[telemetry]` configuration; OTLP itself is configured by `OTEL_*` variables.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Log each chat request body (prompts!) at info level. Off by default:
    /// prompts are customer data.
    pub log_prompts: bool,
}

/// The span target of everything exported; logs do not repeat these spans.
pub const SPAN_TARGET: &str = "tollgate::otel";

static EXPORTING: AtomicBool = AtomicBool::new(false);
static PROVIDERS: OnceLock<(Option<SdkTracerProvider>, Option<SdkMeterProvider>)> = OnceLock::new();

/// Whether traces or metrics are being exported; when not, callers skip
/// building spans and attributes.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Text on a terminal, JSON otherwise (or as `TOLLGATE_LOG_FORMAT` says).
    #[default]
    Auto,
    /// Compact human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl LogFormat {
    /// Whether to write JSON: an explicit choice wins, then
    /// `TOLLGATE_LOG_FORMAT`, then whether stderr is a terminal.
    fn json(self, env: Option<&str>, terminal: bool) -> bool {
        match (self, env) {
            (LogFormat::Json, _) => true,
            (LogFormat::Text, _) => false,
            (LogFormat::Auto, Some("json")) => true,
            (LogFormat::Auto, Some("text")) => false,
            (LogFormat::Auto, _) => !terminal,
        }
    }
}

/// Sets up logging and, when configured, OTLP export. Call once, before the
/// async runtime starts (the exporters' HTTP clients are blocking ones, run on
/// their own threads).
pub fn init(format: LogFormat) {
    let tracer_provider = otlp_configured("TRACES").then(build_tracer_provider).flatten();
    let meter_provider = otlp_configured("METRICS").then(build_meter_provider).flatten();
    global::set_text_map_propagator(TraceContextPropagator::new());
    if let Some(provider) = &tracer_provider {
        global::set_tracer_provider(provider.clone());
    }
    if let Some(provider) = &meter_provider {
        global::set_meter_provider(provider.clone());
    }
    EXPORTING.store(tracer_provider.is_some() || meter_provider.is_some(), Ordering::Relaxed);

    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,wasmtime=warn,cranelift=warn"))
    };
    // Exported spans are for the collector, not the log. The level hint lets
    // `log` records below the filter's levels stop at the `log` crate: without
    // one, every `log::trace!` of wasmtime's instantiation (one per request)
    // was turned into a tracing event only for the filter to drop it.
    let level_hint = filter().max_level_hint();
    let not_exported = || {
        let filter = tracing_subscriber::filter::filter_fn(|meta| meta.target() != SPAN_TARGET);
        match level_hint {
            Some(level) => filter.with_max_level_hint(level),
            None => filter,
        }
    };
    let terminal = std::io::stderr().is_terminal();
    let json = format.json(std::env::var("TOLLGATE_LOG_FORMAT").ok().as_deref(), terminal);
    let log_layer = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(filter())
            .with_filter(not_exported())
            .boxed()
    } else {
        // Compact: level, target and message on one line, colours only
        // where a terminal will show them.
        tracing_subscriber::fmt::layer()
            .compact()
            .with_ansi(terminal)
            .with_writer(std::io::stderr)
            .with_filter(filter())
            .with_filter(not_exported())
            .boxed()
    };
    let otel_layer = tracer_provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("tollgate"))
            .with_filter(Targets::new().with_target("tollgate", tracing::Level::INFO))
    });
    let _ = tracing_subscriber::registry()
        .with(log_layer)
        .with(otel_layer)
        .try_init();
    let _ = PROVIDERS.set((tracer_provider, meter_provider));
}

/// Flushes and stops the exporters. Call after the runtime has stopped.
pub fn shutdown() {
    if let Some((traces, metrics)) = PROVIDERS.get() {
        if let Some(provider) = traces {
            let _ = provider.shutdown();
        }
        if let Some(provider) = metrics {
            let _ = provider.shutdown();
        }
    }
}

/// The span a request is served in. Its parent is the caller's `traceparent`,
/// if any.
pub fn server_span(method: &str, path: &str, request_id: &str, headers: &http::HeaderMap) -> tracing::Span {
    if !exporting() {
        // The log's JSON layer formats a span's fields when the span opens,
        // for every request: without an exporter only the fields a log line
        // needs are given.
        return tracing::info_span!(
            target: "tollgate::http",
            "request",
            http.request.method = %method,
            url.path = %path,
            request_id = %request_id,
        );
    }
    let span = tracing::info_span!(
        target: "tollgate::http",
        "request",
        otel.name = %format_args!("{method} {path}"),
        otel.kind = "server",
        http.request.method = %method,
        url.path = %path,
        request_id = %request_id,
        http.response.status_code = tracing::field::Empty,
    );
    let parent =
        global::get_text_map_propagator(|propagator| propagator.extract(&opentelemetry_http::HeaderExtractor(headers)));
    let _ = span.set_parent(parent);
    span
}

/// The span around one adapter call.
pub fn adapter_span(adapter: &str, call: &'static str) -> tracing::Span {
    if !exporting() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: SPAN_TARGET,
        "adapter",
        otel.name = %format_args!("adapter {adapter} {call}"),
        otel.kind = "internal",
        tollgate.adapter = %adapter,
    )
}

/// The span around one guardrail check; its verdict is recorded on it
/// (`tollgate.guardrail.verdict`) when the check ends.
pub fn guardrail_span(guardrail: &str, stage: &'static str, route: &'static str) -> tracing::Span {
    if !exporting() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: SPAN_TARGET,
        "guardrail",
        otel.name = %format_args!("guardrail {guardrail} {stage}"),
        otel.kind = "internal",
        tollgate.guardrail.name = %guardrail,
        tollgate.guardrail.stage = stage,
        tollgate.guardrail.route = route,
        tollgate.guardrail.verdict = tracing::field::Empty,
    )
}

/// The current span's OpenTelemetry context, to parent spans recorded later.
pub fn current_context() -> opentelemetry::Context {
    if !exporting() {
        return opentelemetry::Context::new();
    }
    tracing::Span::current().context()
}

/// True when `OTEL_EXPORTER_OTLP_ENDPOINT` or the signal's own endpoint is set
/// and the SDK is not disabled.
fn otlp_configured(signal: &str) -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")))
}

fn resource() -> Resource {
    Resource::builder().with_service_name("tollgate").build()
}

fn build_tracer_provider() -> Option<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| eprintln!("warning: OTLP trace export disabled: {e}"))
        .ok()?;
    Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource())
            .build(),
    )
}

fn build_meter_provider() -> Option<SdkMeterProvider> {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .build()
        .map_err(|e| eprintln!("warning: OTLP metric export disabled: {e}"))
        .ok()?;
    Some(
        SdkMeterProvider::builder()
            .with_periodic_exporter(exporter)
            .with_resource(resource())
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::LogFormat;

    #[test]
    fn text_on_a_terminal_json_otherwise_unless_told() {
        assert!(!LogFormat::Auto.json(None, true));
        assert!(LogFormat::Auto.json(None, false));
        assert!(LogFormat::Auto.json(Some("json"), true));
        assert!(!LogFormat::Auto.json(Some("text"), false));
        assert!(
            LogFormat::Json.json(Some("text"), true),
            "the flag wins over the variable"
        );
        assert!(!LogFormat::Text.json(None, false));
    }
}
