//! The chat operation of the pipeline, in its stages: read the envelope and
//! resolve the candidates (`model`, then `models`/`fallbacks`); admit (the
//! plan, then budgets and the wallet hold over the candidates' worst case);
//! try the candidates in order until one answers (`attempts`); settle and
//! record; answer with provenance, whole or as a stream (`stream`).
//!
//! A candidate is abandoned for the next on 429, 5xx, rate-limit/overload
//! errors, connect errors, timeouts and adapter faults; a request the upstream
//! calls invalid (other 4xx) is not retried elsewhere. Failing over before the
//! answer starts is invisible to the caller apart from `service.attempts`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::DataPlane;
use super::Routes;
use super::attempts::{Call, NativeBody, exchange_error, final_error, first_answer, output_cap};
use super::billing::{Bill, Demand};
use super::envelope::ChatEnvelope;
use super::pipeline::{Answer, CallSite, ChatCall, Completion, NativeRequest, StreamFailure};
use super::provenance::{Attempt, Metered, Service, Trail};
use super::stream::{self, Failover};
use super::upstream::response_head;
use tollgate_identity::auth::Caller;
use tollgate_plugin_host::Session;
use tollgate_routing::catalog::ModelRoute;
use tollgate_routing::select::Decision;
use tollgate_routing::traffic::InFlight;
use tollgate_web::error::ApiError;

/// The chat operation, start to end.
pub async fn run(
    data: &Arc<DataPlane>,
    call: ChatCall,
    caller: &Caller,
    site: &CallSite<'_>,
) -> Result<Answer, ApiError> {
    let body = call.body;
    if data.limits.log_prompts {
        tracing::info!(body = %String::from_utf8_lossy(&body), "chat request body (telemetry.log_prompts is on)");
    }
    let envelope = match ChatEnvelope::parse(&body) {
        Ok(envelope) => envelope,
        Err(error) => return Err(refused(data, site, caller, None, error).await),
    };
    let routes = data.routes();
    let (candidates, decision) = match candidates(data, &routes, &envelope, &body, caller, call.native.as_ref()) {
        Ok(selected) => selected,
        Err(error) => return Err(refused(data, site, caller, Some(&envelope.model), error).await),
    };
    let caps = OutputCaps::of(&envelope, &candidates, data.limits.default_max_output_tokens);
    let bill = match admit(
        data,
        caller,
        site,
        &envelope,
        &body,
        &candidates,
        &caps,
        routes.snapshot_id,
    )
    .await
    {
        Ok(bill) => bill,
        Err(Admission::Refused(error)) => return Err(refused(data, site, caller, Some(&envelope.model), error).await),
        Err(Admission::Failed(error)) => return Err(error),
    };
    let sent = envelope
        .provider
        .and_then(|preferences| crate::envelope::without_provider(&body, preferences))
        .map_or_else(|| body.clone(), Bytes::from);
    let attempts = Attempts {
        data,
        site,
        body: &sent,
        native: call.native.as_ref(),
        stream: envelope.stream,
        continuation: envelope.continuation,
        injected_cap: caps.injected,
    };
    attempts.run(candidates, decision, bill).await
}

/// The candidates that may serve the request, in the order to try them, and
/// the routing decision when routing chose (`crate::routing`); then only
/// those taking a required native dialect, none whose maximum output is
/// below the caller's limit.
fn candidates(
    data: &DataPlane,
    routes: &Routes,
    envelope: &ChatEnvelope<'_>,
    body: &[u8],
    caller: &Caller,
    native: Option<&NativeRequest>,
) -> Result<(Vec<Arc<ModelRoute>>, Option<Decision>), ApiError> {
    let workspace = &caller.0.workspace_id;
    let (mut candidates, decision) = crate::routing::select(data, routes, envelope, body, workspace)?;
    if let Some(route) = candidates.iter().find(|route| !route.serves("chat")) {
        // An embedding model, say: its provider would refuse the request.
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "operation_not_supported",
            format!("{}.", route.not_serving("chat")),
        )
        .with_param(if route.id == envelope.model { "model" } else { "models" }));
    }
    if let Some(native) = native.filter(|n| n.required) {
        // Only an adapter that takes the dialect natively can carry the request.
        candidates.retain(|route| {
            data.adapters
                .get(&route.provider.adapter)
                .is_some_and(|adapter| adapter.takes_natively(native.dialect))
        });
        if candidates.is_empty() {
            return Err(ApiError::invalid_request(format!(
                "This request has content that only a provider taking '{}' natively can serve \
                 (e.g. 'document' blocks), and no candidate model's provider does.",
                native.dialect
            ))
            .with_param("messages"));
        }
    }
    // A limit above a candidate's maximum output is one its provider refuses:
    // refused here, before anything is held for it.
    if let Some(limit) = envelope.max_output_tokens
        && let Some(route) = candidates
            .iter()
            .find(|route| route.max_output_tokens.is_some_and(|max| limit > max))
    {
        return Err(ApiError::invalid_request(format!(
            "The output limit {limit} exceeds the maximum output of model '{}' ({} tokens).",
            route.id,
            route.max_output_tokens.unwrap_or_default()
        ))
        .with_param("max_tokens"));
    }
    Ok((candidates, decision))
}

/// The output the request may produce. Without a caller-set limit the
/// gateway sends each model's own maximum (the gateway default where the
/// catalog does not know it), so the cost cannot outgrow the reservation,
/// which holds the largest of them.
struct OutputCaps {
    /// The cap the gateway sends when the caller set none.
    injected: Option<u32>,
    /// The output tokens held for.
    held: u64,
}

impl OutputCaps {
    fn of(envelope: &ChatEnvelope<'_>, candidates: &[Arc<ModelRoute>], default_cap: u32) -> Self {
        let held = envelope.max_output_tokens.unwrap_or_else(|| {
            candidates
                .iter()
                .map(|route| u64::from(output_cap(route, default_cap)))
                .max()
                .unwrap_or(u64::from(default_cap))
        });
        OutputCaps {
            injected: envelope.max_output_tokens.is_none().then_some(default_cap),
            held,
        }
    }
}

/// Why a request was not admitted.
enum Admission {
    /// The plan refused it before anything was held: logged as refused.
    Refused(ApiError),
    /// The hold failed (budgets, the wallet); the bill logged it itself.
    Failed(ApiError),
}

/// Admission, one stage: the plan's monthly limit first (with the ledger
/// off nothing is limited or billed), then the budgets and the wallet hold
/// of the worst case over every candidate.
#[allow(clippy::too_many_arguments)]
async fn admit(
    data: &DataPlane,
    caller: &Caller,
    site: &CallSite<'_>,
    envelope: &ChatEnvelope<'_>,
    body: &Bytes,
    candidates: &[Arc<ModelRoute>],
    caps: &OutputCaps,
    snapshot_id: i64,
) -> Result<Bill, Admission> {
    let admitted = data
        .admit(&caller.0)
        .await
        .map_err(|error| Admission::Refused(plan_error(error)))?;
    let demand = Demand {
        request_id: &site.request_id.0,
        parent_request_id: site.parent,
        requested_model: &envelope.model,
        kind: tollgate_ledger::RequestKind::Chat,
        streamed: envelope.stream,
        body_bytes: body.len(),
        messages: envelope.messages,
        max_output_tokens: caps.held,
        may_continue: envelope.stream && envelope.continuation && candidates.len() > 1,
        ceiling: site.ceiling,
        units: None,
        fixed_cost: tollgate_core::money::Nanos::ZERO,
        admitted,
    };
    Bill::open(
        data.ledger.as_ref(),
        &data.request_log,
        &caller.0,
        candidates,
        snapshot_id,
        demand,
    )
    .await
    .map_err(Admission::Failed)
}

/// The attempts stage: what every attempt of one request shares.
struct Attempts<'a> {
    data: &'a Arc<DataPlane>,
    site: &'a CallSite<'a>,
    body: &'a Bytes,
    native: Option<&'a NativeRequest>,
    stream: bool,
    continuation: bool,
    injected_cap: Option<u32>,
}

impl Attempts<'_> {
    /// Tries the candidates until one answers; a whole answer is read,
    /// settled and recorded here, a stream by its pump.
    async fn run(
        &self,
        candidates: Vec<Arc<ModelRoute>>,
        decision: Option<Decision>,
        mut bill: Bill,
    ) -> Result<Answer, ApiError> {
        let request_id = self.site.request_id;
        let mut trail = Trail::routed(decision);
        let mut remaining: VecDeque<Arc<ModelRoute>> = candidates.into();
        let call = Call {
            request_id: &request_id.0,
            body: self.body,
            native: self.native.map(|n| NativeBody {
                dialect: n.dialect,
                body: &n.body,
                headers: &n.headers,
            }),
            stream: self.stream,
            injected_cap: self.injected_cap,
            continuation: None,
            operation: None,
        };
        let mut attempt = 0;
        let first = first_answer(self.data, &mut remaining, &call, &mut attempt, &mut bill, &mut trail).await;
        if let (Ok(answered), Some(conversation)) = (&first, trail.decision().and_then(|d| d.conversation)) {
            // The next turn goes where this one's prompt is now cached.
            self.data.affinity.record(&conversation, &answered.route.id);
        }
        match first {
            Ok(answered) if self.stream => {
                let failover = Failover {
                    remaining,
                    body: self.body.clone(),
                    injected_cap: self.injected_cap,
                    enabled: self.continuation,
                    attempt,
                };
                let stream = stream::respond(self.data.clone(), answered, bill, trail, failover, request_id.clone());
                Ok(Answer::Stream(stream))
            }
            Ok(answered) => {
                let exchange = Exchange {
                    data: self.data,
                    route: &answered.route,
                    request_id: &request_id.0,
                    started: answered.started,
                };
                let completion = exchange
                    .whole(answered.session, answered.response, answered.flight, bill, trail)
                    .await?;
                Ok(Answer::Whole(completion))
            }
            Err(error) => self.all_failed(error, bill, trail).await,
        }
    }

    /// Every candidate failed before answering: settle what the attempts
    /// cost, and answer with the error (a stream, as one error chunk).
    async fn all_failed(&self, error: ApiError, mut bill: Bill, trail: Trail) -> Result<Answer, ApiError> {
        let status = trail.0.last().and_then(|a| a.status);
        // A request the upstream rejected as invalid keeps its 4xx.
        let upstream_failed = error.is_retryable();
        let error = final_error(error, &trail);
        let billed = bill.close(None, &trail, error.code, status).await;
        if self.stream && upstream_failed && self.site.stream_failure == StreamFailure::Chunk {
            let last = trail
                .0
                .last()
                .expect("a failed candidate is in the trail")
                .route
                .clone();
            let snapshot_id = bill.snapshot_id();
            let stream = stream::failed(self.site.request_id, last, trail, billed, snapshot_id, error);
            return Ok(Answer::Stream(stream));
        }
        Err(error.with_attempts(trail.to_json()))
    }
}

/// Logs a request refused before anything was reserved (a body that could
/// not be read or parsed, an unknown or unpriced model) and hands its error
/// back: every authenticated request leaves a trace, refused or not. The row
/// bills nothing, and no usage event is made of it (see metering's feed).
pub async fn refused(
    data: &DataPlane,
    site: &CallSite<'_>,
    caller: &Caller,
    model: Option<&str>,
    error: ApiError,
) -> ApiError {
    refused_as(data, site, caller, tollgate_ledger::RequestKind::Chat, model, error).await
}

/// [`refused`], for a request of `kind` (an operation besides chat).
pub async fn refused_as(
    data: &DataPlane,
    site: &CallSite<'_>,
    caller: &Caller,
    kind: tollgate_ledger::RequestKind,
    model: Option<&str>,
    error: ApiError,
) -> ApiError {
    let request_id = &site.request_id.0;
    let row = tollgate_ledger::RequestLogRow {
        outcome: error.code.to_string(),
        status: Some(error.status.as_u16()),
        started_at_ms: tollgate_core::db::now_ms(),
        parent_request_id: site.parent.map(str::to_string),
        ..tollgate_ledger::RequestLogRow::unbilled(
            kind,
            request_id.to_string(),
            caller.0.key_id.clone(),
            caller.0.workspace_id.clone(),
            model.unwrap_or_default().to_string(),
        )
    };
    if let Err(failure) = data.request_log().log(row).await {
        tracing::warn!(%request_id, %failure, "could not log a refused request");
    }
    error
}

/// A request the workspace's plan refuses: 429 `plan_limit_reached` past the
/// monthly limit; a plan this gateway does not define is a configuration error.
pub(crate) fn plan_error(error: tollgate_billing::BillingError) -> ApiError {
    use tollgate_billing::BillingError;
    match error {
        BillingError::LimitReached { .. } => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "billing_error",
            "plan_limit_reached",
            error.to_string(),
        ),
        BillingError::UnknownPlan { .. } => {
            tracing::error!(%error, "workspace on an undefined plan");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                "unknown_plan",
                error.to_string(),
            )
        }
        BillingError::Database(_) | BillingError::Other(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            "ledger_unavailable",
            format!("The plan's request counter could not be read or written: {error}"),
        ),
    }
}

/// A request body that could not be read: too large, or cut off.
pub fn body_error(data: &DataPlane, rejection: &BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::body_too_large(data.limits.max_body_bytes)
    } else {
        ApiError::invalid_request(format!("Could not read the request body: {rejection}"))
    }
}

/// One upstream attempt of a request.
struct Exchange<'a> {
    data: &'a Arc<DataPlane>,
    route: &'a Arc<ModelRoute>,
    request_id: &'a str,
    started: Instant,
}

impl Exchange<'_> {
    /// Reads and translates a whole response, settles, and answers.
    async fn whole(
        &self,
        session: Session,
        response: reqwest::Response,
        flight: InFlight,
        mut bill: Bill,
        mut trail: Trail,
    ) -> Result<Completion, ApiError> {
        let status = Some(response.status().as_u16());
        let native = session.is_native();
        let (mut object, usage) = match self.translate(session, response).await {
            Ok(parts) => parts,
            Err(error) => {
                if error.is_health_failure() {
                    self.data.health.failed_after_answer(&self.route.id);
                    flight.failed();
                }
                // The upstream answered, so it may have charged us: bill a local estimate.
                let metered = bill.meter(self.route, None, 1);
                trail.push(self.attempt(error.code, status, metered));
                bill.close(Some(self.route), &trail, error.code, status).await;
                return Err(error.with_attempts(trail.to_json()));
            }
        };
        let metered = bill.meter(self.route, usage, 1);
        if let Some(usage) = metered.usage {
            flight.finished(usage.input + usage.output, usage.output);
        }
        trail.push(self.attempt("success", status, metered));
        let billed = bill.close(Some(self.route), &trail, "success", status).await;
        let service = Service {
            route: self.route.clone(),
            request_id: self.request_id.to_string(),
            billed,
            trail,
            snapshot_id: Some(bill.snapshot_id()),
        };
        if native {
            service.annotate_native(&mut object);
            // The id the caller asked for; the upstream's name is in `service`.
            object.insert("model".into(), Value::String(self.route.id.clone()));
        } else {
            service.annotate(&mut object);
        }
        Ok(Completion {
            object,
            service,
            native,
        })
    }

    /// The upstream's whole body, translated by the adapter into one JSON
    /// object, with the usage it reports.
    async fn translate(
        &self,
        mut session: Session,
        response: reqwest::Response,
    ) -> Result<(Map<String, Value>, Option<tollgate_plugin_host::Usage>), ApiError> {
        let provider = &self.route.provider;
        let head = response_head(&response);
        let body = self
            .data
            .upstream
            .read_body(provider, response, self.data.limits.max_upstream_body_bytes)
            .await?;
        let translated = {
            let _span = tollgate_telemetry::adapter_span(&provider.adapter, "response").entered();
            session
                .response(&head, &body)
                .map_err(|e| exchange_error(self.route, e))?
        };
        let object: Map<String, Value> = serde_json::from_slice(&translated)
            .map_err(|e| ApiError::adapter_refused(&provider.adapter, format!("output is not a JSON object: {e}")))?;
        let usage = session.usage().map_err(|fault| crate::adapter_errors::fault(&fault))?;
        Ok((object, usage))
    }

    fn attempt(&self, outcome: &str, status: Option<u16>, metered: Metered) -> Attempt {
        Attempt {
            route: self.route.clone(),
            outcome: outcome.to_string(),
            status,
            latency: self.started.elapsed(),
            metered,
        }
    }
}
