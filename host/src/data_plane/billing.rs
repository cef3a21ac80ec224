//! One request's bill: the wallet hold taken before the upstream call and its
//! settlement afterwards, together with the request log row.
//!
//! The hold covers the worst case: every byte of the request body counted as an
//! input token, plus the output-token cap (the request's own, or the gateway's
//! default, which is then sent upstream). So the cost can never exceed it.

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use serde_json::Value;

use super::provenance::Metered;
use crate::auth::Principal;
use crate::catalog::ModelRoute;
use crate::db::now_ms;
use crate::error::ApiError;
use crate::ledger::{Hold, Ledger, RequestLogRow, ReserveError, Settled};
use crate::money::{Nanos, TokenCounts};
use crate::plugins::Usage;

/// Per-message framing tokens, on top of one token per body byte.
const TOKENS_PER_MESSAGE: u64 = 8;

pub struct Bill {
    ledger: Option<Ledger>,
    hold: Option<Hold>,
    route: Arc<ModelRoute>,
    snapshot_id: i64,
    log: RequestLogRow,
    input_bytes: u64,
    started: Instant,
}

/// What the request asks of the wallet.
pub struct Demand<'a> {
    pub request_id: &'a str,
    pub requested_model: &'a str,
    pub streamed: bool,
    pub body_bytes: usize,
    pub messages: usize,
    pub max_output_tokens: u64,
}

impl Bill {
    /// Reserves the worst-case cost. An insufficient balance is logged and
    /// answered with 402 before any upstream call.
    pub async fn open(
        ledger: Option<&Ledger>,
        caller: &Principal,
        route: Arc<ModelRoute>,
        snapshot_id: i64,
        demand: Demand<'_>,
    ) -> Result<Self, ApiError> {
        let input_bound = demand.body_bytes as u64 + TOKENS_PER_MESSAGE * demand.messages as u64;
        let input_bound = route.context_length.map_or(input_bound, |limit| input_bound.min(limit));
        let worst_case = route.price.cost(TokenCounts {
            input: input_bound,
            output: demand.max_output_tokens,
        });
        let log = RequestLogRow {
            request_id: demand.request_id.to_string(),
            key_id: caller.key_id.clone(),
            workspace_id: caller.workspace_id.clone(),
            model: demand.requested_model.to_string(),
            provider: Some(route.provider.id.clone()),
            upstream_model: Some(route.upstream_model.clone()),
            streamed: demand.streamed,
            outcome: String::new(),
            status: None,
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            reasoning_tokens: None,
            usage_source: "none",
            reserved: worst_case,
            snapshot_id: Some(snapshot_id),
            attempts: "[]".into(),
            started_at_ms: now_ms(),
            duration_ms: 0,
        };
        let mut bill = Bill {
            ledger: ledger.cloned(),
            hold: None,
            route,
            snapshot_id,
            log,
            input_bytes: demand.body_bytes as u64,
            started: Instant::now(),
        };
        let Some(ledger) = ledger else { return Ok(bill) };
        match ledger.reserve(&caller.workspace_id, worst_case, snapshot_id).await {
            Ok(hold) => {
                bill.hold = Some(hold);
                Ok(bill)
            }
            Err(ReserveError::Insufficient { needed, available }) => {
                let error = ApiError::new(
                    StatusCode::PAYMENT_REQUIRED,
                    "billing_error",
                    "insufficient_balance",
                    format!(
                        "Insufficient balance: this request may cost up to {} USD and {} USD is available. Top up the wallet or lower max_tokens.",
                        needed.usd_decimal(),
                        available.usd_decimal()
                    ),
                );
                bill.log.reserved = Nanos::ZERO;
                bill.close(
                    Metered::NOTHING,
                    "insufficient_balance",
                    Some(402),
                    Value::Array(Vec::new()),
                )
                .await;
                Err(error)
            }
            Err(ReserveError::Unavailable(reason)) => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "ledger_unavailable",
                format!("The wallet ledger is unavailable: {reason}"),
            )),
        }
    }

    pub fn snapshot_id(&self) -> i64 {
        self.snapshot_id
    }

    /// Prices the exchange: from the upstream's usage when it reported any, else
    /// from a local count (`output_units` content pieces seen, body bytes / 4
    /// for input), never zero tokens and never above the hold.
    pub fn meter(&mut self, usage: Option<Usage>, output_units: u64) -> Metered {
        let usage = match usage {
            Some(usage) => {
                self.log.usage_source = "upstream";
                usage
            }
            None => {
                self.log.usage_source = "estimated";
                Usage {
                    input: self.input_bytes.div_ceil(4).max(1),
                    output: output_units.max(1),
                    cache_read: None,
                    cache_write: None,
                    reasoning: None,
                }
            }
        };
        let mut cost = self.route.price.cost(TokenCounts {
            input: usage.input,
            output: usage.output,
        });
        if let Some(hold) = &self.hold {
            cost = cost.min(hold.amount);
        }
        Metered {
            usage: Some(usage),
            cost,
        }
    }

    /// Posts `metered.cost` (or voids the hold when it is zero) and writes the
    /// request log row. Returns what was actually billed, which is what the
    /// answer must show. Only the first call settles; later calls bill nothing.
    pub async fn close(&mut self, metered: Metered, outcome: &str, status: Option<u16>, attempts: Value) -> Metered {
        let Some(ledger) = self.ledger.take() else {
            return metered;
        };
        let usage = metered.usage;
        self.log.outcome = outcome.to_string();
        self.log.status = status;
        self.log.input_tokens = usage.map(|u| u.input);
        self.log.output_tokens = usage.map(|u| u.output);
        self.log.cached_tokens = usage.and_then(|u| u.cache_read);
        self.log.reasoning_tokens = usage.and_then(|u| u.reasoning);
        self.log.attempts = attempts.to_string();
        self.log.duration_ms = self.started.elapsed().as_millis() as i64;
        let request_id = self.log.request_id.clone();
        match ledger.settle(self.hold.take(), metered.cost, self.log.clone()).await {
            Ok(Settled::Posted | Settled::NoHold) => metered,
            Ok(Settled::HoldGone) => {
                tracing::warn!(%request_id, "reservation expired before settlement; request not billed");
                Metered {
                    usage,
                    cost: Nanos::ZERO,
                }
            }
            Err(error) => {
                tracing::error!(%request_id, %error, "settlement failed; the hold will expire unbilled");
                Metered {
                    usage,
                    cost: Nanos::ZERO,
                }
            }
        }
    }
}

/// A bill dropped unsettled (the caller went away while the upstream was still
/// working) is settled in the background from a local estimate, so the hold is
/// not left to expire and the tokens the upstream spent are billed.
impl Drop for Bill {
    fn drop(&mut self) {
        if self.ledger.is_none() || self.hold.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut orphan = Bill {
            ledger: self.ledger.take(),
            hold: self.hold.take(),
            route: self.route.clone(),
            snapshot_id: self.snapshot_id,
            log: self.log.clone(),
            input_bytes: self.input_bytes,
            started: self.started,
        };
        runtime.spawn(async move {
            let metered = orphan.meter(None, 1);
            orphan
                .close(metered, "client_disconnected", None, Value::Array(Vec::new()))
                .await;
        });
    }
}
