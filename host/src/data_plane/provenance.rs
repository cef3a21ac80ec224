//! What the gateway adds to every answer: `provider`, `usage.cost` and the
//! `service` object (request id, route, attempts). Shared by the whole-body and
//! the streamed paths so both report the same facts the same way.

use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::catalog::ModelRoute;
use crate::money::{Nanos, TokenCounts};
use crate::plugins::Usage;

/// One upstream attempt, as listed in `service.attempts`.
pub struct Attempt {
    pub outcome: &'static str,
    pub status: Option<u16>,
    pub latency: Duration,
}

/// Token counts and their exact cost, priced from the route's frozen price.
pub struct Metered {
    pub usage: Option<Usage>,
    pub cost: Nanos,
}

impl Metered {
    pub fn price(route: &ModelRoute, usage: Option<Usage>) -> Self {
        let tokens = usage.map_or_else(TokenCounts::default, |u| TokenCounts {
            input: u.input,
            output: u.output,
        });
        Self {
            usage,
            cost: route.price.cost(tokens),
        }
    }
}

/// Sets `usage` (keeping the upstream's own fields) and `service`. `usage.cost`
/// is added by [`render`], which writes it as an exact decimal.
pub fn annotate(
    object: &mut Map<String, Value>,
    route: &ModelRoute,
    request_id: &str,
    metered: &Metered,
    attempt: &Attempt,
) {
    let usage = object.entry("usage").or_insert(Value::Null);
    if !usage.is_object() {
        *usage = match metered.usage {
            Some(u) => json!({
                "prompt_tokens": u.input,
                "completion_tokens": u.output,
                "total_tokens": u.input + u.output,
            }),
            None => json!({}),
        };
    }
    object.insert("provider".into(), Value::String(route.provider.id.clone()));
    object.insert("service".into(), service(route, request_id, metered, attempt));
}

fn service(route: &ModelRoute, request_id: &str, metered: &Metered, attempt: &Attempt) -> Value {
    json!({
        "request_id": request_id,
        "provider": route.provider.id,
        "model": route.id,
        "upstream_model": route.upstream_model,
        "cost_usd": metered.cost.usd_string(),
        "attempts": [{
            "provider": route.provider.id,
            "model": route.upstream_model,
            "outcome": attempt.outcome,
            "status": attempt.status,
            "latency_ms": attempt.latency.as_millis() as u64,
            "input_tokens": metered.usage.map(|u| u.input),
            "output_tokens": metered.usage.map(|u| u.output),
            "cost_usd": metered.cost.usd_string(),
        }],
    })
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
