//! The native lane (WIT 0.2.0): the caller's Messages request goes upstream
//! as it came, and the answer comes back as Anthropic sent it.
//!
//! The host has removed its own fields (fallback `models`, `continuation`);
//! this module sets `model` to the provider's model name, `stream` to the
//! host's decision and `max_tokens` when the caller set none, and passes
//! every other field through untouched: `system` and content blocks with
//! their `cache_control`, `thinking`, `document` blocks, `thinking` /
//! `redacted_thinking` blocks of earlier turns, server tools, `metadata`, …
//! The whole answer and every stream event are relayed as they are; the
//! adapter only reads the usage they report (input, output, cache read and
//! cache write) for billing, and turns an `error` event into an error.

use serde_json::{Map, Value};
use tollgate_plugin_sdk::{AdapterError, AuthSlot, CallContext, Event, OutboundRequest, Usage};

use crate::adapter::{ANTHROPIC_VERSION, API_KEY_HEADER};
use crate::request::DEFAULT_MAX_TOKENS;
use crate::{error, response};

/// The dialect this adapter takes natively: Anthropic's Messages API.
pub const DIALECT: &str = "anthropic-messages";

/// One native exchange.
pub struct Native {
    ctx: CallContext,
    body: Map<String, Value>,
    /// The latest usage counts: the whole answer's, or merged across stream
    /// events (`message_start` has the input and cache counts,
    /// `message_delta` the running output count).
    usage: Map<String, Value>,
    stopped: bool,
}

impl Native {
    pub fn new(ctx: CallContext, dialect: &str, body: &[u8]) -> Result<Self, AdapterError> {
        if dialect != DIALECT {
            return Err(AdapterError::invalid_request(format!(
                "the Anthropic adapter takes only '{DIALECT}' natively, not '{dialect}'"
            )));
        }
        let body = match serde_json::from_slice(body) {
            Ok(Value::Object(map)) => map,
            _ => return Err(AdapterError::invalid_request("request body must be a JSON object")),
        };
        Ok(Native {
            ctx,
            body,
            usage: Map::new(),
            stopped: false,
        })
    }

    pub fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        let model = self.ctx.upstream_model.as_str();
        if model.is_empty() || model.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(AdapterError::invalid_request(format!(
                "'{model}' is not an Anthropic model name"
            )));
        }
        if self.ctx.continuation.is_some() {
            return Err(AdapterError::invalid_request(
                "a native exchange cannot continue another candidate's answer",
            ));
        }
        let mut body = self.body.clone();
        body.insert("model".into(), Value::from(model));
        if self.ctx.stream {
            body.insert("stream".into(), Value::Bool(true));
        } else {
            body.remove("stream");
        }
        if !body.get("max_tokens").is_some_and(Value::is_u64) {
            let cap = self.ctx.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
            body.insert("max_tokens".into(), Value::from(cap));
        }
        Ok(OutboundRequest {
            method: "POST".to_owned(),
            url: format!("{}/v1/messages", self.ctx.base_url.trim_end_matches('/')),
            headers: vec![
                ("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body: serde_json::to_vec(&Value::Object(body)).map_err(|e| AdapterError::internal(e.to_string()))?,
            auth: AuthSlot::Header(API_KEY_HEADER.to_owned()),
        })
    }

    /// A whole answer: checked to be a `message`, its usage kept, and
    /// returned unchanged.
    pub fn response(&mut self, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let answer: Value =
            serde_json::from_slice(&body).map_err(|_| AdapterError::internal("Anthropic returned invalid JSON"))?;
        if let Some(error) = error::in_body(&answer) {
            return Err(error);
        }
        if answer.get("type").and_then(Value::as_str) != Some("message") {
            return Err(AdapterError::internal(
                "Anthropic returned something other than a message",
            ));
        }
        self.merge_usage(answer.get("usage"));
        Ok(body)
    }

    /// Stream events, relayed unchanged (but for empty ones, which carry
    /// nothing); usage and the end are noted.
    pub fn events(&mut self, mut events: Vec<Event>) -> Result<Vec<Event>, AdapterError> {
        events.retain(|event| !event.data.iter().all(u8::is_ascii_whitespace));
        for event in &events {
            let text = std::str::from_utf8(&event.data)
                .map_err(|_| AdapterError::internal("Anthropic sent a stream event that is not UTF-8"))?;
            let data: Value = serde_json::from_str(text)
                .map_err(|_| AdapterError::internal("Anthropic sent an invalid JSON stream event"))?;
            if let Some(error) = error::in_body(&data) {
                return Err(error);
            }
            match data.get("type").and_then(Value::as_str).unwrap_or("") {
                "message_start" => self.merge_usage(data.get("message").and_then(|m| m.get("usage"))),
                "message_delta" => self.merge_usage(data.get("usage")),
                "message_stop" => self.stopped = true,
                _ => {}
            }
        }
        Ok(events)
    }

    /// The stream ended: nothing is held back; a stream without
    /// `message_stop` was cut short.
    pub fn finish(&mut self) -> Result<Vec<Event>, AdapterError> {
        if !self.stopped {
            return Err(AdapterError::cut_short("Anthropic's stream ended before message_stop"));
        }
        Ok(Vec::new())
    }

    pub fn usage(&self) -> Option<Usage> {
        if self.usage.is_empty() {
            return None;
        }
        response::usage(&Value::Object(self.usage.clone()))
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        for (key, value) in usage.and_then(Value::as_object).into_iter().flatten() {
            if value.is_u64() {
                self.usage.insert(key.clone(), value.clone());
            }
        }
    }
}
