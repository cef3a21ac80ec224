//! What the gateway adds to every answer: `provider`, `usage.cost` and the
//! `service` object (request id, route, attempts). Shared by the whole-body and
//! the streamed paths so both report the same facts the same way.

use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::catalog::ModelRoute;
use crate::money::Nanos;
use crate::plugins::Usage;

/// One upstream attempt, as listed in `service.attempts`.
pub struct Attempt {
    pub outcome: &'static str,
    pub status: Option<u16>,
    pub latency: Duration,
}

/// Token counts and the exact cost billed for them.
#[derive(Clone, Copy, Debug)]
pub struct Metered {
    pub usage: Option<Usage>,
    pub cost: Nanos,
}

impl Metered {
    pub const NOTHING: Metered = Metered {
        usage: None,
        cost: Nanos::ZERO,
    };
}

/// Everything the gateway reports about how an answer was produced.
pub struct Provenance<'a> {
    pub route: &'a ModelRoute,
    pub request_id: &'a str,
    pub metered: Metered,
    pub attempt: Attempt,
    pub snapshot_id: Option<i64>,
}

impl Provenance<'_> {
    /// `service.attempts`, also stored in the request log.
    pub fn attempts(&self) -> Value {
        let (route, metered, attempt) = (self.route, &self.metered, &self.attempt);
        json!([{
            "provider": route.provider.id,
            "model": route.upstream_model,
            "outcome": attempt.outcome,
            "status": attempt.status,
            "latency_ms": attempt.latency.as_millis() as u64,
            "input_tokens": metered.usage.map(|u| u.input),
            "output_tokens": metered.usage.map(|u| u.output),
            "cost_usd": metered.cost.usd_string(),
        }])
    }

    /// Sets `usage` (keeping the upstream's own fields), `provider` and
    /// `service`. `usage.cost` is added by [`render`], which writes it as an
    /// exact decimal.
    pub fn annotate(&self, object: &mut Map<String, Value>) {
        let usage = object.entry("usage").or_insert(Value::Null);
        if !usage.is_object() {
            *usage = match self.metered.usage {
                Some(u) => json!({
                    "prompt_tokens": u.input,
                    "completion_tokens": u.output,
                    "total_tokens": u.input + u.output,
                }),
                None => json!({}),
            };
        }
        object.insert("provider".into(), Value::String(self.route.provider.id.clone()));
        let service = json!({
            "request_id": self.request_id,
            "provider": self.route.provider.id,
            "model": self.route.id,
            "upstream_model": self.route.upstream_model,
            "cost_usd": self.metered.cost.usd_string(),
            "pricing_snapshot_id": self.snapshot_id,
            "attempts": self.attempts(),
        });
        object.insert("service".into(), service);
    }
}

#[derive(Serialize)]
struct Rendered<'a> {
    #[serde(flatten)]
    fields: &'a Map<String, Value>,
    usage: RenderedUsage<'a>,
}

#[derive(Serialize)]
struct RenderedUsage<'a> {
    #[serde(flatten)]
    fields: &'a Map<String, Value>,
    cost: &'a RawValue,
}

/// Serialises an annotated object with `usage.cost` written as the exact decimal
/// amount (e.g. `0.000009`), not as a float's shortest form (`9e-6`).
pub fn render(mut object: Map<String, Value>, cost: Nanos) -> Vec<u8> {
    let usage = match object.remove("usage") {
        Some(Value::Object(usage)) => usage,
        _ => Map::new(),
    };
    let decimal = cost.usd_decimal();
    let cost = RawValue::from_string(decimal).expect("a decimal amount is a JSON number");
    serde_json::to_vec(&Rendered {
        fields: &object,
        usage: RenderedUsage {
            fields: &usage,
            cost: &cost,
        },
    })
    .expect("JSON values always serialise")
}
