//! One request's bill: the wallet hold taken before the upstream call and its
//! settlement afterwards, together with the request log row.
//!
//! The hold covers the worst case: every byte of the request body counted as an
//! input token, plus the output-token cap (the request's own, or the gateway's
//! default, which is then sent upstream), for the dearest candidate, or summed
//! over the candidates when a stream may continue on them, plus the plan's
//! gateway fee. So the cost can never exceed it. The fee is billed once per
//! request that was metered (an upstream answered or spent tokens), on top of
//! the provider's cost. The same worst case is held against the request's
//! spend-control budgets (`tollgate_billing::budgets`) before the wallet, and
//! settled with what was billed.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;

use super::provenance::{Attempt, Metered, Trail};
use tollgate_core::db::now_ms;
use tollgate_core::money::{Nanos, TokenCounts};
use tollgate_core::units::UnitCounts;
use tollgate_identity::auth::Principal;
use tollgate_ledger::{Hold, Ledger, RequestKind, RequestLogRow, ReserveError, Settled, UsageSource};
use tollgate_plugin_host::Usage;
use tollgate_routing::catalog::ModelRoute;
use tollgate_web::error::ApiError;

/// Per-message framing tokens, on top of one token per body byte.
const TOKENS_PER_MESSAGE: u64 = 8;

pub struct Bill {
    /// The request log's writer, which settles the bill (taken at close).
    ledger: Option<Ledger>,
    hold: Option<Hold>,
    snapshot_id: i64,
    log: RequestLogRow,
    input_bytes: u64,
    started: Instant,
    /// The route an upstream call is waiting on, billed by estimate if the
    /// bill is dropped mid-call.
    in_flight: Option<Arc<ModelRoute>>,
    /// The request's trace context, for the attempt spans recorded at close.
    trace_parent: opentelemetry::Context,
    /// From the answering attempt's start to its first relayed chunk.
    time_to_first_chunk: Option<Duration>,
    /// The worst case held against a caller-side cap, settled with the bill.
    ceiling: Option<Box<dyn CeilingHold>>,
    /// The plan's gateway fee, added to a metered request's cost.
    fee: Nanos,
    /// The worst case held against the request's budgets, settled with the bill.
    budgets: Option<tollgate_billing::budgets::BudgetHold>,
}

/// A cap on what a request may cost on top of the wallet: a hosted actor's
/// run budget. The worst case is held against it before the wallet is asked,
/// so requests sharing one cap can never together spend past it.
pub trait CostCeiling: Send + Sync {
    /// Holds `worst_case`, or says (in a sentence) why it does not fit.
    fn hold(&self, worst_case: Nanos) -> Result<Box<dyn CeilingHold>, String>;
}

/// A held worst case; settled with what was billed. Dropped unsettled, it
/// counts in full.
pub trait CeilingHold: Send {
    fn settle(self: Box<Self>, billed: Nanos);
}

/// What the request asks of the wallet.
pub struct Demand<'a> {
    pub request_id: &'a str,
    /// The request this one runs inside: a skill run's, for its model calls.
    pub parent_request_id: Option<&'a str>,
    pub requested_model: &'a str,
    /// What the log row records the request as.
    pub kind: RequestKind,
    pub streamed: bool,
    pub body_bytes: usize,
    pub messages: usize,
    pub max_output_tokens: u64,
    /// A stream that may continue on later candidates after content was sent.
    pub may_continue: bool,
    pub ceiling: Option<&'a dyn CostCeiling>,
    /// An operation priced in its own units: what it asks for at most,
    /// held at each candidate's unit prices on top of its tokens.
    pub units: Option<&'a UnitDemand>,
    /// A price per request on top of tokens and units (a cache hit's).
    pub fixed_cost: Nanos,
    /// The request as its workspace's plan admitted it (`None` with the
    /// ledger off): its fee, and its count to give back if refused here.
    pub admitted: Option<tollgate_billing::Admitted>,
}

/// What an operation asks for in its own units, and the image kind its
/// images are priced as.
#[derive(Clone, Debug, Default)]
pub struct UnitDemand {
    pub counts: UnitCounts,
    pub quality: Option<String>,
    pub size: Option<String>,
}

impl UnitDemand {
    /// The price of one image of this request's kind on `route` (zero for a
    /// model that prices no images).
    pub fn image_price(&self, route: &ModelRoute) -> Nanos {
        route
            .units
            .image(self.quality.as_deref(), self.size.as_deref())
            .unwrap_or(Nanos::ZERO)
    }
}

/// The providers' worst case over the candidates: failed starts cost
/// nothing, so one paid attempt is the worst case, unless a stream may
/// continue on later candidates: then each candidate can be paid once.
fn provider_worst_case(candidates: &[Arc<ModelRoute>], demand: &Demand<'_>) -> Nanos {
    let input_bound = demand.body_bytes as u64 + TOKENS_PER_MESSAGE * demand.messages as u64;
    let per_candidate = candidates.iter().map(|route| {
        let input = route.context_length.map_or(input_bound, |limit| input_bound.min(limit));
        let tokens = route.price.worst_case(TokenCounts {
            input,
            output: demand.max_output_tokens,
            ..TokenCounts::default()
        });
        let units = demand.units.map_or(Nanos::ZERO, |units| {
            route.units.cost(units.counts, units.image_price(route))
        });
        Nanos(tokens.0.saturating_add(units.0).saturating_add(demand.fixed_cost.0))
    });
    if demand.may_continue {
        per_candidate.fold(Nanos::ZERO, |sum, cost| Nanos(sum.0.saturating_add(cost.0)))
    } else {
        per_candidate.max().unwrap_or(Nanos::ZERO)
    }
}

impl Bill {
    /// Reserves the worst-case cost over the candidates in `wallet` (`None`:
    /// the wallet is off, and the request is only logged through
    /// `request_log`), after the run's ceiling and the request's budgets
    /// hold it. A refusal is logged and answered with 402 (503 when the
    /// ledger is unavailable) before any upstream call, and the plan's count
    /// goes back.
    pub async fn open(
        wallet: Option<&Ledger>,
        request_log: &Ledger,
        caller: &Principal,
        candidates: &[Arc<ModelRoute>],
        snapshot_id: i64,
        demand: Demand<'_>,
    ) -> Result<Self, ApiError> {
        let fee = demand.admitted.as_ref().map_or(Nanos::ZERO, |a| a.plan.request_fee);
        let worst_case = Nanos(provider_worst_case(candidates, &demand).0.saturating_add(fee.0));
        let mut bill = Bill::new(
            request_log,
            caller,
            &candidates[0],
            snapshot_id,
            &demand,
            worst_case,
            fee,
        );
        let admitted = demand.admitted;
        let held = match bill.hold_limits(demand.ceiling, admitted.as_ref(), worst_case).await {
            Ok(()) => match wallet {
                Some(ledger) => bill.hold_wallet(ledger, &caller.workspace_id, worst_case).await,
                None => {
                    bill.log.reserved = Nanos::ZERO;
                    Ok(())
                }
            },
            Err(error) => Err(error),
        };
        match held {
            Ok(()) => Ok(bill),
            Err(error) => {
                if let Some(admitted) = admitted {
                    admitted.give_back();
                }
                Err(error)
            }
        }
    }

    /// A bill for a request not yet held, its log row naming the first candidate.
    fn new(
        request_log: &Ledger,
        caller: &Principal,
        primary: &ModelRoute,
        snapshot_id: i64,
        demand: &Demand<'_>,
        worst_case: Nanos,
        fee: Nanos,
    ) -> Self {
        let log = RequestLogRow {
            request_id: demand.request_id.to_string(),
            key_id: caller.key_id.clone(),
            workspace_id: caller.workspace_id.clone(),
            model: demand.requested_model.to_string(),
            provider: Some(primary.provider.id.clone()),
            upstream_model: Some(primary.upstream_model.clone()),
            streamed: demand.streamed,
            outcome: String::new(),
            status: None,
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            reasoning_tokens: None,
            usage_source: UsageSource::None,
            reserved: worst_case,
            fee: Nanos::ZERO,
            snapshot_id: Some(snapshot_id),
            attempts: tollgate_ledger::JsonText::empty_array(),
            attempt_count: 0,
            started_at_ms: now_ms(),
            duration_ms: 0,
            kind: demand.kind,
            parent_request_id: demand.parent_request_id.map(str::to_string),
            provenance: None,
            detail: None,
        };
        Bill {
            ledger: Some(request_log.clone()),
            hold: None,
            snapshot_id,
            log,
            input_bytes: demand.body_bytes as u64,
            started: Instant::now(),
            in_flight: None,
            trace_parent: tollgate_telemetry::current_context(),
            time_to_first_chunk: None,
            ceiling: None,
            fee,
            budgets: None,
        }
    }

    /// Holds the worst case against the run's ceiling (an actor run's
    /// budget), then the request's budgets: either refusing is a logged 402.
    async fn hold_limits(
        &mut self,
        ceiling: Option<&dyn CostCeiling>,
        admitted: Option<&tollgate_billing::Admitted>,
        worst_case: Nanos,
    ) -> Result<(), ApiError> {
        if let Some(ceiling) = ceiling {
            match ceiling.hold(worst_case) {
                Ok(held) => self.ceiling = Some(held),
                Err(message) => return Err(self.refuse("budget_exceeded", message).await),
            }
        }
        let Some(admitted) = admitted else {
            return Ok(());
        };
        match admitted.hold_budgets(worst_case).await {
            Ok(held) => {
                self.budgets = Some(held);
                Ok(())
            }
            Err(tollgate_billing::budgets::BudgetError::Exceeded(message)) => {
                Err(self.refuse("budget_exceeded", message).await)
            }
            Err(tollgate_billing::budgets::BudgetError::Database(error)) => {
                tracing::error!(%error, "could not hold a request against its budgets");
                Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "api_error",
                    "ledger_unavailable",
                    "The spend-control budgets are unavailable; try again shortly.",
                ))
            }
        }
    }

    /// Reserves the worst case in the workspace's wallet.
    async fn hold_wallet(&mut self, ledger: &Ledger, workspace_id: &str, worst_case: Nanos) -> Result<(), ApiError> {
        let reserving = Instant::now();
        let reserved = ledger.reserve(workspace_id, worst_case, self.snapshot_id).await;
        tollgate_telemetry::record_reserve_latency(reserving.elapsed());
        match reserved {
            Ok(hold) => {
                self.hold = Some(hold);
                Ok(())
            }
            Err(ReserveError::Insufficient { needed, available }) => {
                let message = format!(
                    "Insufficient balance: this request may cost up to {} USD and {} USD is available. Top up the wallet or lower max_tokens.",
                    needed.usd_decimal(),
                    available.usd_decimal()
                );
                Err(self.refuse("insufficient_balance", message).await)
            }
            Err(ReserveError::Unavailable(reason)) => {
                if let Some(budgets) = self.budgets.take() {
                    budgets.settle(Nanos::ZERO);
                }
                Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "api_error",
                    "ledger_unavailable",
                    format!("The wallet ledger is unavailable: {reason}"),
                ))
            }
        }
    }

    /// Logs the request as refused with 402 `code`, holding nothing, and
    /// hands back its error.
    async fn refuse(&mut self, code: &'static str, message: String) -> ApiError {
        self.log.reserved = Nanos::ZERO;
        self.close(None, &Trail::default(), code, Some(402)).await;
        ApiError::new(StatusCode::PAYMENT_REQUIRED, "billing_error", code, message)
    }

    /// Marks `route` as being called; cleared by [`Bill::landed`].
    pub fn calling(&mut self, route: &Arc<ModelRoute>) {
        self.in_flight = Some(route.clone());
    }

    pub fn landed(&mut self) {
        self.in_flight = None;
    }

    /// Notes that the answer's first chunk went out, for the attempt that
    /// started at `attempt_started` (the first call counts).
    pub fn first_chunk_sent(&mut self, attempt_started: Instant) {
        self.time_to_first_chunk
            .get_or_insert_with(|| attempt_started.elapsed());
    }

    pub fn snapshot_id(&self) -> i64 {
        self.snapshot_id
    }

    /// Prices one attempt on `route`: from the upstream's usage when it reported
    /// any, else from a local count (`output_units` content pieces seen, body
    /// bytes / 4 for input), never zero tokens.
    pub fn meter(&mut self, route: &ModelRoute, usage: Option<Usage>, output_units: u64) -> Metered {
        let usage = match usage {
            Some(usage) => {
                self.log.usage_source = UsageSource::Upstream;
                usage
            }
            None => {
                self.log.usage_source = UsageSource::Estimated;
                Usage {
                    input: self.input_bytes.div_ceil(4).max(1),
                    output: output_units.max(1),
                    cache_read: None,
                    cache_write: None,
                    reasoning: None,
                }
            }
        };
        Metered {
            usage: Some(usage),
            cost: route.price.cost(token_counts(&usage)),
            fee: Nanos::ZERO,
        }
    }

    /// Meters an operation's answer: its tokens (as reported; a model priced
    /// by tokens that reported none is estimated, as [`meter`](Self::meter)
    /// does) plus its `units` at the route's unit prices, `reported` saying
    /// whether the upstream reported them or the gateway measured them.
    pub fn meter_operation(
        &mut self,
        route: &ModelRoute,
        usage: Option<Usage>,
        units: UnitCounts,
        image_price: Nanos,
        reported: bool,
    ) -> Metered {
        let token_priced = route.price.input.0 > 0 || route.price.output.0 > 0;
        let mut metered = match usage {
            Some(usage) => self.meter(route, Some(usage), 0),
            None if token_priced => self.meter(route, None, 0),
            None => {
                self.log.usage_source = UsageSource::Upstream;
                let nothing = Usage {
                    input: 0,
                    output: 0,
                    cache_read: None,
                    cache_write: None,
                    reasoning: None,
                };
                Metered {
                    usage: Some(nothing),
                    cost: route.price.cost(TokenCounts::default()),
                    fee: Nanos::ZERO,
                }
            }
        };
        if !reported {
            self.log.usage_source = UsageSource::Estimated;
        }
        let units = route.units.cost(units, image_price);
        metered.cost = Nanos(metered.cost.0.saturating_add(units.0));
        metered
    }

    /// Posts the trail's total cost plus the plan's fee when anything was
    /// metered (never above the hold; a zero total voids it) and writes the
    /// request log row naming `answered_by`. Returns what was actually billed,
    /// which is what the answer must show. Only the first call settles; later
    /// calls bill nothing.
    pub async fn close(
        &mut self,
        answered_by: Option<&ModelRoute>,
        trail: &Trail,
        outcome: &str,
        status: Option<u16>,
    ) -> Metered {
        let mut metered = trail.total();
        if metered.usage.is_some() {
            metered.fee = self.fee;
            metered.cost = Nanos(metered.cost.0.saturating_add(self.fee.0));
        }
        if let Some(hold) = &self.hold {
            // The hold covers the fee, so only the provider's part can be cut.
            metered.cost = metered.cost.min(hold.amount);
        }
        self.log.fee = metered.fee;
        let Some(ledger) = self.ledger.take() else {
            self.report(trail, outcome, status, metered.cost);
            if let Some(ceiling) = self.ceiling.take() {
                ceiling.settle(metered.cost);
            }
            if let Some(budgets) = self.budgets.take() {
                budgets.settle(metered.cost);
            }
            return metered;
        };
        let usage = metered.usage;
        if let Some(route) = answered_by.or_else(|| trail.0.last().map(|a| &*a.route)) {
            self.log.provider = Some(route.provider.id.clone());
            self.log.upstream_model = Some(route.upstream_model.clone());
        }
        self.log.outcome = outcome.to_string();
        self.log.status = status;
        self.log.input_tokens = usage.map(|u| u.input);
        self.log.output_tokens = usage.map(|u| u.output);
        self.log.cached_tokens = usage.and_then(|u| u.cache_read);
        self.log.reasoning_tokens = usage.and_then(|u| u.reasoning);
        self.log.attempts = trail.stored();
        self.log.attempt_count = trail.0.len() as u32;
        // Kept only when routing chose: a plain request's row stays as small as before.
        // The decision's own text, which the answer's `service.route` shows too.
        self.log.detail = trail.decision().and_then(|decision| {
            #[derive(serde::Serialize)]
            struct Detail<'a> {
                route: &'a serde_json::value::RawValue,
            }
            tollgate_ledger::JsonText::of(&Detail { route: decision.json() })
        });
        self.log.duration_ms = self.started.elapsed().as_millis() as i64;
        let request_id = self.log.request_id.clone();
        let settled = ledger.settle(self.hold.take(), metered.cost, self.log.clone()).await;
        let billed = match settled {
            Ok(Settled::Posted | Settled::NoHold) => metered,
            Ok(Settled::HoldGone) => {
                tracing::warn!(%request_id, "reservation expired before settlement; request not billed");
                Metered {
                    usage,
                    cost: Nanos::ZERO,
                    fee: Nanos::ZERO,
                }
            }
            Err(error) => {
                tracing::error!(%request_id, %error, "settlement failed; the hold will expire unbilled");
                Metered {
                    usage,
                    cost: Nanos::ZERO,
                    fee: Nanos::ZERO,
                }
            }
        };
        self.report(trail, outcome, status, billed.cost);
        if let Some(ceiling) = self.ceiling.take() {
            ceiling.settle(billed.cost);
        }
        if let Some(budgets) = self.budgets.take() {
            budgets.settle(billed.cost);
        }
        billed
    }

    /// Exports the request's attempt spans and metrics (when exporting), with
    /// each attempt's own start and end times.
    fn report(&self, trail: &Trail, outcome: &str, status: Option<u16>, billed: Nanos) {
        if !tollgate_telemetry::exporting() {
            return;
        }
        let (wall_now, now) = (SystemTime::now(), Instant::now());
        let last = trail.0.len().saturating_sub(1);
        let attempts = trail
            .0
            .iter()
            .enumerate()
            .map(|(index, attempt)| {
                let ago = trail
                    .ended_at(index)
                    .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
                let ended = wall_now.checked_sub(ago).unwrap_or(wall_now);
                let usage = attempt.metered.usage;
                let succeeded = attempt.outcome == "success";
                tollgate_telemetry::AttemptRecord {
                    provider: &attempt.route.provider.id,
                    response_model: &attempt.route.upstream_model,
                    started: ended.checked_sub(attempt.latency).unwrap_or(ended),
                    ended,
                    error_type: (!succeeded).then_some(attempt.outcome.as_str()),
                    status: attempt.status,
                    input_tokens: usage.map(|u| u.input),
                    output_tokens: usage.map(|u| u.output),
                    cost_nano: attempt.metered.cost.0,
                    time_to_first_chunk: self.time_to_first_chunk.filter(|_| index == last && succeeded),
                }
            })
            .collect();
        tollgate_telemetry::record(tollgate_telemetry::RequestRecord {
            parent: &self.trace_parent,
            operation: match self.log.kind {
                RequestKind::Chat => tollgate_telemetry::semconv::OPERATION_CHAT,
                kind => kind.as_str(),
            },
            request_id: &self.log.request_id,
            requested_model: &self.log.model,
            outcome,
            status,
            cost_nano: billed.0,
            attempts,
            route: trail.decision().map(|decision| tollgate_telemetry::RouteRecord {
                strategy: decision.strategy,
                group: decision.group.as_deref(),
                reason: &decision.reason,
                considered: decision.considered,
                conversation: decision.conversation.map(|c| c.source.name()),
            }),
        });
    }
}

/// An adapter's usage as the counts each kind is billed for.
pub fn token_counts(usage: &Usage) -> TokenCounts {
    TokenCounts {
        input: usage.input,
        output: usage.output,
        cache_read: usage.cache_read.unwrap_or(0),
        cache_write: usage.cache_write.unwrap_or(0),
        reasoning: usage.reasoning.unwrap_or(0),
    }
}

/// A bill dropped unsettled (the caller went away while an upstream was still
/// working) is settled in the background with a local estimate for the route
/// it was waiting on, so the hold is not left to expire and the tokens the
/// upstream spent are billed.
impl Drop for Bill {
    fn drop(&mut self) {
        // Closed bills have given their writer up; any other leaves a row.
        if self.ledger.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut orphan = Bill {
            ledger: self.ledger.take(),
            hold: self.hold.take(),
            snapshot_id: self.snapshot_id,
            log: self.log.clone(),
            input_bytes: self.input_bytes,
            started: self.started,
            in_flight: None,
            trace_parent: self.trace_parent.clone(),
            time_to_first_chunk: self.time_to_first_chunk,
            ceiling: self.ceiling.take(),
            fee: self.fee,
            budgets: self.budgets.take(),
        };
        let in_flight = self.in_flight.take();
        runtime.spawn(async move {
            let mut trail = Trail::default();
            if let Some(route) = in_flight {
                let metered = orphan.meter(&route, None, 1);
                trail.push(Attempt {
                    route,
                    outcome: "client_disconnected".into(),
                    status: None,
                    latency: orphan.started.elapsed(),
                    metered,
                });
            }
            orphan.close(None, &trail, "client_disconnected", None).await;
        });
    }
}
