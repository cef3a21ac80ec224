//! Guardrails as stages of the pipeline: checks on a request's texts before
//! anything is held or sent, and on the answer's texts (whole, or window by
//! window on a stream) before the caller sees them.
//!
//! The data plane knows no component or install: the concern that installs
//! guardrails registers a [`Guardrails`] at wiring, and the pipeline asks it
//! which [`Guard`]s apply to a request. Requests go through them in order,
//! answers in reverse order (the last to rewrite a request is the first to
//! see its answer, so a redaction is undone where it was made). A guard in
//! `enforce` mode fails closed: its denial refuses the request
//! (`guardrail_denied`) and its fault too (`guardrail_failed`); in `monitor`
//! mode both are recorded and the request goes on. Every decision is in
//! `service.guardrails` and the log.

pub mod stream;
pub mod texts;

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tollgate_identity::auth::Principal;
use tollgate_web::error::ApiError;
use tracing::Instrument;

/// The kind of request a guard checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardRoute {
    Chat,
    Embeddings,
    /// A hosted actor's model calls.
    Actors,
    /// Tool calls (MCP and API).
    Tools,
}

impl GuardRoute {
    pub const ALL: [GuardRoute; 4] = [
        GuardRoute::Chat,
        GuardRoute::Embeddings,
        GuardRoute::Actors,
        GuardRoute::Tools,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GuardRoute::Chat => "chat",
            GuardRoute::Embeddings => "embeddings",
            GuardRoute::Actors => "actors",
            GuardRoute::Tools => "tools",
        }
    }
}

/// What a guard's denial or fault does to the request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardMode {
    /// Denials refuse; a fault refuses too (fail closed).
    #[default]
    Enforce,
    /// Denials and faults are recorded only (fail open); rewrites still apply.
    Monitor,
}

impl GuardMode {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardMode::Enforce => "enforce",
            GuardMode::Monitor => "monitor",
        }
    }
}

/// One text of a request: a message's (or text part's) content, an
/// embeddings input, a tool call's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardText {
    pub role: String,
    pub content: String,
}

pub enum RequestVerdict {
    Allow,
    Deny(String),
    /// The texts replaced one for one, and what the guard keeps for the answer.
    Rewrite {
        texts: Vec<String>,
        memo: Option<String>,
    },
}

pub enum ResponseVerdict {
    Allow,
    Deny(String),
    Rewrite(Vec<String>),
    /// Ask the model once more, telling it why.
    Retry(String),
}

/// What a guard is told about the request it checks.
#[derive(Clone)]
pub struct GuardCall {
    pub caller: Arc<Principal>,
    pub request_id: String,
    pub route: GuardRoute,
    /// `<provider>/<model>` or `<install>__<tool>`.
    pub target: String,
    /// The request as JSON, read-only.
    pub request: Arc<str>,
}

/// A guardrail the pipeline runs. A failure (`Err`) is the guard's own fault
/// (a trap, a limit, a rewrite of the wrong shape), described for the caller.
pub trait Guard: Send + Sync {
    fn name(&self) -> &str;
    fn mode(&self) -> GuardMode;
    fn checks_requests(&self) -> bool;
    fn checks_responses(&self) -> bool;
    fn check_request(
        &self,
        call: GuardCall,
        texts: Vec<GuardText>,
    ) -> BoxFuture<'static, Result<RequestVerdict, String>>;
    fn check_response(
        &self,
        call: GuardCall,
        memo: Option<String>,
        texts: Vec<String>,
        done: bool,
    ) -> BoxFuture<'static, Result<ResponseVerdict, String>>;
}

/// The guards that apply to a request, in order: registered at wiring by
/// the concern that installs them.
pub trait Guardrails: Send + Sync {
    /// Whether any guard may apply to `caller` at all: checked first, so a
    /// workspace without guardrails pays nothing else.
    fn any(&self, caller: &Principal) -> bool;
    fn select(&self, caller: &Principal, route: GuardRoute, target: &str) -> Vec<Arc<dyn Guard>>;
}

/// One guard's decision, as `service.guardrails` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    pub guardrail: String,
    pub stage: &'static str,
    pub verdict: &'static str,
    pub mode: GuardMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub duration_us: u64,
}

impl Decision {
    fn to_json(&self) -> Value {
        let mut shown = Map::new();
        shown.insert("duration_us".into(), self.duration_us.into());
        shown.insert("guardrail".into(), self.guardrail.as_str().into());
        shown.insert("mode".into(), self.mode.as_str().into());
        if let Some(reason) = &self.reason {
            shown.insert("reason".into(), reason.as_str().into());
        }
        shown.insert("stage".into(), self.stage.into());
        shown.insert("verdict".into(), self.verdict.into());
        Value::Object(shown)
    }
}

/// What an answer check decided, after every guard.
pub enum AnswerOutcome {
    /// The texts to show (rewritten or not).
    Pass(Vec<String>),
    /// Ask once more (whole answers only).
    Retry(String),
}

/// The guards of one request and what they decided: each guard's memo from
/// the request check, and every decision.
pub struct Checks {
    guards: Vec<Arc<dyn Guard>>,
    memos: Vec<Option<String>>,
    call: GuardCall,
    pub decisions: Vec<Decision>,
}

impl Checks {
    pub fn new(guards: Vec<Arc<dyn Guard>>, call: GuardCall) -> Self {
        Checks {
            memos: vec![None; guards.len()],
            guards,
            call,
            decisions: Vec::new(),
        }
    }

    pub fn checks_responses(&self) -> bool {
        self.guards.iter().any(|guard| guard.checks_responses())
    }

    /// The request's texts through every guard that checks requests, in
    /// order: `Some(texts)` when one rewrote them.
    pub async fn request(&mut self, mut texts: Vec<GuardText>) -> Result<Option<Vec<GuardText>>, ApiError> {
        let mut rewritten = false;
        for (index, guard) in self.guards.clone().iter().enumerate() {
            if !guard.checks_requests() {
                continue;
            }
            let started = Instant::now();
            let span = tollgate_telemetry::guardrail_span(guard.name(), "request", self.call.route.as_str());
            let verdict = guard
                .check_request(self.call.clone(), texts.clone())
                .instrument(span.clone())
                .await;
            let _entered = span.enter();
            match verdict {
                Ok(RequestVerdict::Allow) => self.decide(guard, "request", "allow", None, started),
                Ok(RequestVerdict::Rewrite { texts: new, memo }) => {
                    self.decide(guard, "request", "rewrite", None, started);
                    for (text, content) in texts.iter_mut().zip(new) {
                        text.content = content;
                    }
                    self.memos[index] = memo;
                    rewritten = true;
                }
                Ok(RequestVerdict::Deny(reason)) => {
                    self.decide(guard, "request", "deny", Some(reason.clone()), started);
                    if guard.mode() == GuardMode::Enforce {
                        return Err(denied(guard.name(), "request", &reason));
                    }
                }
                Err(fault) => {
                    self.decide(guard, "request", "fault", Some(fault.clone()), started);
                    if guard.mode() == GuardMode::Enforce {
                        return Err(failed(guard.name(), &fault));
                    }
                }
            }
        }
        Ok(rewritten.then_some(texts))
    }

    /// An answer's texts through every guard that checks answers, in reverse
    /// order. `whole` answers may be retried once (`retry_left`); a stream's
    /// window may not.
    pub async fn answer(
        &mut self,
        mut texts: Vec<String>,
        done: bool,
        retry_left: bool,
    ) -> Result<AnswerOutcome, ApiError> {
        for (index, guard) in self.guards.clone().iter().enumerate().rev() {
            if !guard.checks_responses() {
                continue;
            }
            let started = Instant::now();
            let memo = self.memos[index].clone();
            let span = tollgate_telemetry::guardrail_span(guard.name(), "response", self.call.route.as_str());
            let verdict = guard
                .check_response(self.call.clone(), memo, texts.clone(), done)
                .instrument(span.clone())
                .await;
            let _entered = span.enter();
            match verdict {
                Ok(ResponseVerdict::Allow) => self.decide(guard, "response", "allow", None, started),
                Ok(ResponseVerdict::Rewrite(new)) => {
                    self.decide(guard, "response", "rewrite", None, started);
                    texts = new;
                }
                Ok(ResponseVerdict::Retry(reason)) if retry_left && guard.mode() == GuardMode::Enforce => {
                    self.decide(guard, "response", "retry", Some(reason.clone()), started);
                    return Ok(AnswerOutcome::Retry(reason));
                }
                Ok(ResponseVerdict::Deny(reason) | ResponseVerdict::Retry(reason)) => {
                    self.decide(guard, "response", "deny", Some(reason.clone()), started);
                    if guard.mode() == GuardMode::Enforce {
                        return Err(denied(guard.name(), "answer", &reason));
                    }
                }
                Err(fault) => {
                    self.decide(guard, "response", "fault", Some(fault.clone()), started);
                    if guard.mode() == GuardMode::Enforce {
                        return Err(failed(guard.name(), &fault));
                    }
                }
            }
        }
        Ok(AnswerOutcome::Pass(texts))
    }

    /// The decisions as `service.guardrails` shows them, built directly:
    /// through serde's value serializer this cost a guarded request a few
    /// thousand instructions.
    pub fn to_json(&self) -> Value {
        self.decisions.iter().map(Decision::to_json).collect()
    }

    fn decide(
        &mut self,
        guard: &Arc<dyn Guard>,
        stage: &'static str,
        verdict: &'static str,
        reason: Option<String>,
        started: Instant,
    ) {
        let duration_us = started.elapsed().as_micros() as u64;
        // Denials, retries and faults are logged; allows and rewrites are in
        // `service.guardrails` and the span, and would cost a log line each.
        if matches!(verdict, "deny" | "retry" | "fault") {
            tracing::info!(
                request_id = %self.call.request_id,
                guardrail = guard.name(),
                stage,
                verdict,
                mode = ?guard.mode(),
                reason = reason.as_deref().unwrap_or(""),
                duration_us,
                "guardrail decision"
            );
        } else {
            tracing::debug!(request_id = %self.call.request_id, guardrail = guard.name(), stage, verdict, duration_us, "guardrail decision");
        }
        tracing::Span::current().record("tollgate.guardrail.verdict", verdict);
        self.decisions.push(Decision {
            guardrail: guard.name().to_string(),
            stage,
            verdict,
            mode: guard.mode(),
            reason,
            duration_us,
        });
    }
}

/// 400 `guardrail_denied`: a guard refused the request or its answer.
pub fn denied(guardrail: &str, what: &str, reason: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "guardrail_denied",
        format!("Guardrail '{guardrail}' denied the {what}: {reason}"),
    )
}

/// 502 `guardrail_failed`: an enforcing guard failed (trapped, ran out of
/// time or memory, answered out of shape), so the request is refused.
pub fn failed(guardrail: &str, fault: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "api_error",
        "guardrail_failed",
        format!("Guardrail '{guardrail}' failed, and it enforces, so the request is refused: {fault}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_shows_as_its_serialized_form() {
        for (mode, reason) in [
            (GuardMode::Enforce, None),
            (GuardMode::Monitor, Some("a \"quoted\" why")),
        ] {
            let decision = Decision {
                guardrail: "operator/pii".into(),
                stage: "request",
                verdict: "deny",
                mode,
                reason: reason.map(String::from),
                duration_us: 12,
            };
            assert_eq!(decision.to_json(), serde_json::to_value(&decision).unwrap());
        }
    }
}
