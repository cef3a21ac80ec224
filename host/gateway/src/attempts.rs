//! The attempt loop, once for both answers: tries a request's candidates in
//! order until one answers with a 2xx head, records every failed or skipped
//! candidate in the trail, and reports each outcome to the model's health.
//!
//! A candidate held back by its breaker is skipped without a call, unless every
//! candidate left is open: then the one open longest is called anyway. A
//! candidate held back by a `Retry-After` is skipped with a 429 outcome. The
//! search stops at the first failure that another candidate would repeat (the
//! caller's request was refused).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;

use super::DataPlane;
use super::billing::Bill;
use super::provenance::{Attempt, Metered, Trail};
use super::upstream::response_head;
use tollgate_plugin_host::{CallContext, ExchangeError, Operation, OperationBody, Session};
use tollgate_routing::catalog::ModelRoute;
use tollgate_routing::health::{Held, Permit};
use tollgate_routing::traffic::InFlight;
use tollgate_web::error::{ApiError, Failure};

/// The caller's request in a provider's own dialect, for candidates whose
/// adapter takes that dialect natively (WIT 0.2.0).
#[derive(Clone, Copy)]
pub struct NativeBody<'a> {
    /// E.g. `anthropic-messages`.
    pub dialect: &'static str,
    /// The caller's body with the gateway's own fields removed.
    pub body: &'a [u8],
    /// Caller headers the native request carries, added by the host after
    /// the adapter built it (`anthropic-beta`).
    pub headers: &'a [(String, String)],
}

/// What every attempt of one request shares.
pub struct Call<'a> {
    pub request_id: &'a str,
    /// The chat-completions body, for adapters in translated mode.
    pub body: &'a [u8],
    /// The native body, for adapters that take its dialect (never set when
    /// continuing a broken stream).
    pub native: Option<NativeBody<'a>>,
    pub stream: bool,
    /// The gateway's output cap for a model whose maximum output is not
    /// known, when the caller set none (see [`output_cap`]).
    pub injected_cap: Option<u32>,
    /// The answer text already relayed, when continuing a broken stream.
    pub continuation: Option<String>,
    /// An operation besides chat, and the caller's request for it: then
    /// `body` and `native` are unused.
    pub operation: Option<(Operation, &'a OperationBody)>,
}

/// A candidate that answered with a 2xx head.
pub struct Answered {
    pub route: Arc<ModelRoute>,
    pub session: Session,
    pub response: reqwest::Response,
    pub started: Instant,
    /// The request in the route's live traffic until the answer ends:
    /// report [`InFlight::finished`] or [`InFlight::failed`] then.
    pub flight: InFlight,
}

/// Tries `remaining` in order (popping each as it is tried). `attempt` is the
/// number the next attempt gets. On failure, returns the error that ended the
/// search; every attempt is in `trail` either way.
pub async fn first_answer(
    data: &DataPlane,
    remaining: &mut VecDeque<Arc<ModelRoute>>,
    call: &Call<'_>,
    attempt: &mut u32,
    bill: &mut Bill,
    trail: &mut Trail,
) -> Result<Answered, ApiError> {
    let mut last_error = None;
    let mut forced = data
        .health
        .longest_open(remaining.iter().map(|route| route.id.as_str()))
        .map(str::to_string);
    while let Some(route) = remaining.pop_front() {
        let started = Instant::now();
        let number = *attempt;
        let permit = match forced.as_deref() {
            Some(id) if id == route.id => {
                forced = None;
                Ok(data.health.force(&route.id))
            }
            _ => data.health.admit(&route.id),
        };
        let outcome = match permit {
            Err(held) => Err((held_error(&route, held), None)),
            Ok(permit) => {
                *attempt += 1;
                let ctx = CallContext {
                    request_id: call.request_id.to_string(),
                    upstream_model: route.upstream_model.clone(),
                    base_url: route.provider.base_url.clone(),
                    stream: call.stream,
                    attempt: number,
                    max_output_tokens: call.injected_cap.map(|default| output_cap(&route, default)),
                    continuation: call.continuation.clone(),
                };
                bill.calling(&route);
                let mut flight = data.traffic.route(&route.id).start();
                let sent = match call.operation {
                    Some(operation) => send(data, &route, &ctx, Opening::Operation(operation)).await,
                    None => send(data, &route, &ctx, Opening::Chat(call.body, call.native)).await,
                };
                bill.landed();
                report(permit, &mut flight, &sent, started, call.stream);
                sent.map(|(session, response)| (session, response, flight))
            }
        };
        match outcome {
            Ok((session, response, flight)) => {
                return Ok(Answered {
                    route,
                    session,
                    response,
                    started,
                    flight,
                });
            }
            Err((error, status)) => {
                trail.push(Attempt {
                    route,
                    outcome: error.code.to_string(),
                    status,
                    latency: started.elapsed(),
                    metered: Metered::NOTHING,
                });
                let retryable = error.is_retryable();
                last_error = Some(error);
                if !retryable {
                    break;
                }
            }
        }
    }
    Err(last_error.unwrap_or_else(|| ApiError::internal("no candidate was left to try")))
}

/// The error of a failed search as the caller sees it: the last candidate's own
/// error when it ended the search or was the only one; a 429 when every
/// candidate was rate-limited; else a summary of every attempt.
pub fn final_error(error: ApiError, trail: &Trail) -> ApiError {
    if !error.is_retryable() || trail.0.len() <= 1 {
        return error;
    }
    if error.failure == Failure::RateLimited && trail.0.iter().all(|a| a.outcome == "upstream_rate_limited") {
        return ApiError {
            message: format!("Every candidate is rate limiting: {}", error.message),
            ..error
        };
    }
    let summary: Vec<String> = trail
        .0
        .iter()
        .map(|a| format!("{}/{}: {}", a.route.provider.id, a.route.upstream_model, a.outcome))
        .collect();
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "upstream_error",
        "all_candidates_failed",
        format!("Every candidate failed ({}).", summary.join("; ")),
    )
    .failing(Failure::Upstream)
}

fn held_error(route: &ModelRoute, held: Held) -> ApiError {
    match held {
        Held::Open { .. } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "provider_circuit_open",
            format!(
                "model '{}' is skipped after repeated failures; it is retried after a cooldown",
                route.id
            ),
        )
        .failing(Failure::Unavailable),
        Held::RateLimited { remaining } => {
            let mut error = ApiError::upstream_rate_limited(
                &route.provider.id,
                &format!("model '{}' asked to wait before the next request", route.id),
            );
            error.retry_after = Some(remaining.as_secs_f64().ceil().max(1.0) as u32);
            error
        }
    }
}

/// Tells the model's health and its live traffic how the call went.
fn report(
    permit: Permit<'_>,
    flight: &mut InFlight,
    sent: &Result<(Session, reqwest::Response), (ApiError, Option<u16>)>,
    started: Instant,
    stream: bool,
) {
    match sent {
        Ok(_) => {
            permit.succeeded();
            flight.answered(started.elapsed(), stream);
        }
        Err((error, _)) => match error.failure {
            Failure::RateLimited => {
                flight.rate_limited();
                permit.rate_limited(
                    error
                        .retry_after
                        .map(|secs| std::time::Duration::from_secs(u64::from(secs))),
                )
            }
            _ if error.is_health_failure() => {
                flight.failed();
                permit.failed()
            }
            // Not the model's fault: the permit is dropped, a trial given back.
            _ => {}
        },
    }
}

/// The output limit sent to `route` when the caller set none: the model's
/// own maximum from the catalog, else the gateway's `default`.
pub fn output_cap(route: &ModelRoute, default: u32) -> u32 {
    route
        .max_output_tokens
        .map_or(default, |max| u32::try_from(max).unwrap_or(u32::MAX))
}

/// How an adapter session is opened: for a chat body (natively when the
/// adapter takes the native body's dialect), or for an operation.
pub(crate) enum Opening<'a> {
    Chat(&'a [u8], Option<NativeBody<'a>>),
    Operation((Operation, &'a OperationBody)),
}

/// Opens the adapter session for `route` and sends the request; a non-2xx
/// answer is classified by the adapter. Errors carry the upstream status, if
/// any.
pub(crate) async fn send(
    data: &DataPlane,
    route: &Arc<ModelRoute>,
    ctx: &CallContext,
    opening: Opening<'_>,
) -> Result<(Session, reqwest::Response), (ApiError, Option<u16>)> {
    let provider = &route.provider;
    if let Some(reason) = provider.unavailable_reason() {
        let error = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "provider_not_configured",
            format!("provider '{}' is not configured: {reason}", provider.id),
        )
        .failing(Failure::Unavailable);
        return Err((error, None));
    }
    let adapter = data.adapters.get(&provider.adapter).ok_or_else(|| {
        let message = format!(
            "provider '{}' uses adapter '{}', which is not loaded",
            provider.id, provider.adapter
        );
        (ApiError::internal(message), None)
    })?;
    let (opened, native) = match opening {
        Opening::Operation((operation, body)) => (adapter.open_operation(ctx, operation, body), None),
        Opening::Chat(body, native) => match native.filter(|n| adapter.takes_natively(n.dialect)) {
            Some(native) => (adapter.open_native(ctx, native.dialect, native.body), Some(native)),
            None => (adapter.open(ctx, body), None),
        },
    };
    let mut session = opened.map_err(|fault| (crate::adapter_errors::fault(&fault), None))?;
    let mut outbound = {
        let _span = tollgate_telemetry::adapter_span(&provider.adapter, "request").entered();
        session.request().map_err(|e| (exchange_error(route, e), None))?
    };
    if let Some(native) = native {
        forward_headers(&mut outbound.headers, native.headers);
    }
    let response = data.upstream.send(provider, outbound).await.map_err(|e| (e, None))?;
    if response.status().is_success() {
        return Ok((session, response));
    }
    let head = response_head(&response);
    let body = data
        .upstream
        .read_body(provider, response, 64 << 10)
        .await
        .unwrap_or_default();
    let classified = session
        .classify_error(&head, &body)
        .map_err(|fault| (crate::adapter_errors::fault(&fault), Some(head.status)))?;
    let mut error = crate::adapter_errors::from_upstream(&provider.id, &classified);
    if error.failure == Failure::RateLimited && error.retry_after.is_none() {
        // The adapter may not read it; the header is the upstream's word.
        error.retry_after = retry_after_header(&head.headers);
    }
    Err((error, Some(head.status)))
}

/// Adds the caller's forwarded headers (comma-separated lists such as
/// `anthropic-beta`) to a native request; where the adapter set the same
/// header, the caller's values follow its own.
pub fn forward_headers(headers: &mut Vec<(String, String)>, forwarded: &[(String, String)]) {
    for (name, value) in forwarded {
        match headers.iter_mut().find(|(set, _)| set.eq_ignore_ascii_case(name)) {
            Some((_, set)) => {
                set.push(',');
                set.push_str(value);
            }
            None => headers.push((name.clone(), value.clone())),
        }
    }
}

fn retry_after_header(headers: &[(String, String)]) -> Option<u32> {
    headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, value)| value.trim().parse::<u32>().ok())
}

/// An adapter failure, or an error the adapter reported about the upstream.
pub fn exchange_error(route: &ModelRoute, error: ExchangeError) -> ApiError {
    match error {
        ExchangeError::Fault(fault) => crate::adapter_errors::fault(&fault),
        ExchangeError::Reported(reported) => crate::adapter_errors::from_upstream(&route.provider.id, &reported),
    }
}
