//! What the gateway adds to every answer: `provider`, `usage.cost` and the
//! `service` object (request id, route, attempts). Shared by the whole-body and
//! the streamed paths so both report the same facts the same way.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use tollgate_core::money::{Kind, Nanos, PicoPerToken};
use tollgate_ledger::StoredAttempt;
use tollgate_plugin_host::Usage;
use tollgate_routing::catalog::ModelRoute;
use tollgate_routing::select::Decision;

/// Token counts and the exact cost billed for them.
#[derive(Clone, Copy, Debug)]
pub struct Metered {
    pub usage: Option<Usage>,
    /// Everything billed: the provider's part plus `fee`.
    pub cost: Nanos,
    /// The plan's gateway fee within `cost` (set once, at settlement; an
    /// attempt carries none).
    pub fee: Nanos,
}

impl Metered {
    pub const NOTHING: Metered = Metered {
        usage: None,
        cost: Nanos::ZERO,
        fee: Nanos::ZERO,
    };

    /// The sum of two attempts' usage and cost.
    pub fn plus(self, other: Metered) -> Metered {
        let usage = match (self.usage, other.usage) {
            (Some(a), Some(b)) => Some(Usage {
                input: a.input + b.input,
                output: a.output + b.output,
                cache_read: sum_opt(a.cache_read, b.cache_read),
                cache_write: sum_opt(a.cache_write, b.cache_write),
                reasoning: sum_opt(a.reasoning, b.reasoning),
            }),
            (a, b) => a.or(b),
        };
        Metered {
            usage,
            cost: Nanos(self.cost.0 + other.cost.0),
            fee: Nanos(self.fee.0 + other.fee.0),
        }
    }
}

fn sum_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

/// One upstream attempt (or a candidate skipped without a call).
#[derive(Clone, Debug)]
pub struct Attempt {
    pub route: Arc<ModelRoute>,
    /// `success`, the error code that ended it, or `skipped: <reason>`.
    pub outcome: String,
    pub status: Option<u16>,
    pub latency: Duration,
    pub metered: Metered,
}

/// Every attempt of a request, in order: `service.attempts` and the request log.
/// The second field stamps when each attempt was pushed (it ended), for its
/// span; the third is the routing decision that ordered them, if one was made.
#[derive(Clone, Debug, Default)]
pub struct Trail(pub Vec<Attempt>, Vec<Instant>, Option<Arc<Decision>>);

impl Trail {
    /// A trail for candidates that routing chose and ordered.
    pub fn routed(decision: Option<Decision>) -> Self {
        Trail(Vec::new(), Vec::new(), decision.map(Arc::new))
    }

    /// Why the candidates were tried in this order (`service.route`).
    pub fn decision(&self) -> Option<&Decision> {
        self.2.as_deref()
    }

    pub fn push(&mut self, attempt: Attempt) {
        self.0.push(attempt);
        self.1.push(Instant::now());
    }

    /// When attempt `index` ended (was pushed).
    pub fn ended_at(&self, index: usize) -> Option<Instant> {
        self.1.get(index).copied()
    }

    /// Usage and cost over all attempts.
    pub fn total(&self) -> Metered {
        self.0
            .iter()
            .fold(Metered::NOTHING, |total, attempt| total.plus(attempt.metered))
    }

    /// What each token kind cost over all attempts: tokens and exact USD
    /// (pico-USD precision, before the total is rounded up to whole nano-USD),
    /// plus providers' per-request prices (`request`). Kinds no attempt used
    /// are left out. `billed` adds `provider_usd` and `fee_usd` (the plan's
    /// gateway fee), which sum exactly to the cost shown.
    pub fn breakdown(&self, billed: Metered) -> Value {
        let mut kinds: BTreeMap<Kind, (u64, u128)> = BTreeMap::new();
        let mut fees = Nanos::ZERO;
        for attempt in &self.0 {
            let Some(usage) = attempt.metered.usage else { continue };
            let price = &attempt.route.price;
            for part in price.breakdown(super::billing::token_counts(&usage)) {
                let entry = kinds.entry(part.kind).or_default();
                entry.0 += part.tokens;
                entry.1 = entry.1.saturating_add(part.pico);
            }
            fees = Nanos(fees.0.saturating_add(price.per_request.0));
        }
        let mut out = Map::new();
        for (kind, (tokens, pico)) in kinds {
            if tokens == 0 {
                continue;
            }
            let usd = u64::try_from(pico).map_or_else(|_| "overflow".to_string(), |p| PicoPerToken(p).usd_per_token());
            out.insert(kind.name().into(), json!({"tokens": tokens, "cost_usd": usd}));
        }
        if fees != Nanos::ZERO {
            out.insert("request".into(), json!({"cost_usd": fees.usd_string()}));
        }
        let provider = Nanos(billed.cost.0 - billed.fee.0);
        out.insert("provider_usd".into(), Value::String(provider.usd_string()));
        out.insert("fee_usd".into(), Value::String(billed.fee.usd_string()));
        Value::Object(out)
    }

    /// The attempts as the request log stores them; they read back
    /// ([`tollgate_ledger::expand_attempts`]) as [`Self::to_json`] shows them.
    pub fn stored(&self) -> tollgate_ledger::JsonText {
        let attempts: Vec<StoredAttempt<'_>> = self
            .0
            .iter()
            .map(|attempt| {
                let usage = attempt.metered.usage;
                StoredAttempt {
                    provider: &attempt.route.provider.id,
                    model: &attempt.route.upstream_model,
                    adapter: &attempt.route.provider.adapter,
                    outcome: &attempt.outcome,
                    status: attempt.status,
                    latency_ms: attempt.latency.as_millis() as u64,
                    input_tokens: usage.map(|u| u.input),
                    output_tokens: usage.map(|u| u.output),
                    cache_read_tokens: usage.and_then(|u| u.cache_read),
                    cache_write_tokens: usage.and_then(|u| u.cache_write),
                    reasoning_tokens: usage.and_then(|u| u.reasoning),
                    cost: attempt.metered.cost,
                }
            })
            .collect();
        StoredAttempt::compact(&attempts)
    }

    pub fn to_json(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|attempt| {
                    json!({
                        "provider": attempt.route.provider.id,
                        "model": attempt.route.upstream_model,
                        "adapter": attempt.route.provider.adapter,
                        "outcome": attempt.outcome,
                        "status": attempt.status,
                        "latency_ms": attempt.latency.as_millis() as u64,
                        "input_tokens": attempt.metered.usage.map(|u| u.input),
                        "output_tokens": attempt.metered.usage.map(|u| u.output),
                        "cache_read_tokens": attempt.metered.usage.and_then(|u| u.cache_read),
                        "cache_write_tokens": attempt.metered.usage.and_then(|u| u.cache_write),
                        "reasoning_tokens": attempt.metered.usage.and_then(|u| u.reasoning),
                        "cost_usd": attempt.metered.cost.usd_string(),
                    })
                })
                .collect(),
        )
    }
}

/// Everything the gateway reports about how an answer was produced, typed:
/// the facts an answer's `provider`, `usage` and `service` show, for callers
/// inside the gateway (skills, actors, the ingress dialects) to read without
/// parsing the answer.
#[derive(Clone, Debug)]
pub struct Service {
    /// The candidate that answered (the last one tried, when none did).
    pub route: Arc<ModelRoute>,
    pub request_id: String,
    /// What was billed, over all attempts: the counts shown and the exact cost.
    pub billed: Metered,
    pub trail: Trail,
    pub snapshot_id: Option<i64>,
}

impl Service {
    /// Everything billed, the plan's fee included: the cost shown.
    pub fn cost(&self) -> Nanos {
        self.billed.cost
    }

    /// The provider that answered.
    pub fn provider(&self) -> &str {
        &self.route.provider.id
    }

    /// The model id the caller asked for (`<provider>/<model>`).
    pub fn model(&self) -> &str {
        &self.route.id
    }

    /// Sets `model` (the id the caller asked for, not the upstream's name,
    /// which is `service.upstream_model`), `usage` (keeping the upstream's own
    /// fields), `provider` and `service`. `usage.cost` is added by [`render`],
    /// which writes it as an exact decimal, and so is `service.route`, from
    /// the decision's text (see [`Service::take_block`] for an answer that is
    /// reshaped rather than rendered).
    pub fn annotate(&self, object: &mut Map<String, Value>) {
        object.insert("model".into(), Value::String(self.route.id.clone()));
        let usage = object.entry("usage").or_insert(Value::Null);
        if !usage.is_object() || self.trail.0.len() > 1 {
            // Several attempts: report the billed total, not the last upstream's own count.
            *usage = Value::Object(Map::new());
        }
        // The counts shown are the counts billed; other detail the upstream
        // reported (cached tokens, reasoning) stays.
        if let (Value::Object(shown), Some(billed)) = (usage, self.billed.usage) {
            shown.insert("prompt_tokens".into(), Value::from(billed.input));
            shown.insert("completion_tokens".into(), Value::from(billed.output));
            shown.insert("total_tokens".into(), Value::from(billed.input + billed.output));
            // The kinds billed at prices of their own, in OpenAI's detail
            // fields (`cache_write_tokens` is the gateway's own).
            let details = [
                ("prompt_tokens_details", "cached_tokens", billed.cache_read),
                ("prompt_tokens_details", "cache_write_tokens", billed.cache_write),
                ("completion_tokens_details", "reasoning_tokens", billed.reasoning),
            ];
            for (group, field, count) in details {
                let Some(count) = count else { continue };
                let group = shown.entry(group).or_insert_with(|| Value::Object(Map::new()));
                if !group.is_object() {
                    *group = Value::Object(Map::new());
                }
                group[field] = Value::from(count);
            }
        }
        object.insert("provider".into(), Value::String(self.route.provider.id.clone()));
        object.insert("service".into(), self.block());
    }

    /// An annotated object's `service` block taken out, with its `route`:
    /// for an answer rebuilt in another dialect rather than rendered.
    pub fn take_block(&self, object: &mut Map<String, Value>) -> Option<Value> {
        let mut service = object.remove("service")?;
        if let (Some(block), Some(decision)) = (service.as_object_mut(), self.trail.decision()) {
            block.entry("route").or_insert_with(|| decision.to_json());
        }
        Some(service)
    }

    /// The routing decision's text, which [`render`] writes as `service.route`.
    pub fn route_json(&self) -> Option<&RawValue> {
        self.trail.decision().map(Decision::json)
    }

    /// A native answer (or its closing stream event): `provider` and
    /// `service` only. The upstream's `usage` stays as it sent it, in its own
    /// dialect; [`render`] adds `usage.cost`. What was billed over several
    /// attempts is in `service.cost_breakdown`.
    pub fn annotate_native(&self, object: &mut Map<String, Value>) {
        object.insert("provider".into(), Value::String(self.route.provider.id.clone()));
        object.insert("service".into(), self.to_json());
    }

    /// The `service` block: request id, the model that answered, the exact
    /// cost and its breakdown, the attempts.
    pub fn to_json(&self) -> Value {
        let mut service = self.block();
        if let Some(decision) = self.trail.decision() {
            service["route"] = decision.to_json();
        }
        service
    }

    /// The `service` block but for `route`.
    fn block(&self) -> Value {
        json!({
            "request_id": self.request_id,
            "provider": self.route.provider.id,
            "model": self.route.id,
            "upstream_model": self.route.upstream_model,
            "cost_usd": self.billed.cost.usd_string(),
            "pricing_snapshot_id": self.snapshot_id,
            "cost_breakdown": self.trail.breakdown(self.billed),
            "attempts": self.trail.to_json(),
        })
    }
}

#[derive(Serialize)]
struct Rendered<'a> {
    #[serde(flatten)]
    fields: &'a Map<String, Value>,
    usage: RenderedUsage<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<RenderedService<'a>>,
}

/// `service` with its `route` written from the decision's text, which the
/// request log keeps too: one serialization of the decision per request.
#[derive(Serialize)]
struct RenderedService<'a> {
    #[serde(flatten)]
    fields: &'a Map<String, Value>,
    route: &'a RawValue,
}

#[derive(Serialize)]
struct RenderedUsage<'a> {
    #[serde(flatten)]
    fields: &'a Map<String, Value>,
    cost: &'a RawValue,
}

/// Serialises an annotated object with `usage.cost` written as the exact decimal
/// amount (e.g. `0.000009`), not as a float's shortest form (`9e-6`), and
/// `route` (the decision's text, [`Service::route_json`]) as `service.route`
/// unless the block has one.
pub fn render(mut object: Map<String, Value>, cost: Nanos, route: Option<&RawValue>) -> Vec<u8> {
    let mut usage = match object.remove("usage") {
        Some(Value::Object(usage)) => usage,
        _ => Map::new(),
    };
    // The host alone states the cost; an adapter's or upstream's figure goes.
    usage.remove("cost");
    let decimal = cost.usd_decimal();
    let cost = RawValue::from_string(decimal).expect("a decimal amount is a JSON number");
    let service = match (route, object.get("service")) {
        (Some(_), Some(Value::Object(block))) if !block.contains_key("route") => match object.remove("service") {
            Some(Value::Object(block)) => Some(block),
            _ => None,
        },
        _ => None,
    };
    // Room for a typical answer up front: growing from serde_json's 128
    // bytes took several reallocations per answer.
    let mut rendered = Vec::with_capacity(RENDER_CAPACITY);
    serde_json::to_writer(
        &mut rendered,
        &Rendered {
            fields: &object,
            usage: RenderedUsage {
                fields: &usage,
                cost: &cost,
            },
            service: service
                .as_ref()
                .zip(route)
                .map(|(fields, route)| RenderedService { fields, route }),
        },
    )
    .expect("JSON values always serialise");
    rendered
}

const RENDER_CAPACITY: usize = 2048;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use tollgate_routing::catalog::Catalog;

    #[test]
    fn the_stored_attempts_read_back_as_the_answer_shows_them() {
        let catalog = Catalog::build(&BTreeMap::new(), &|_| None).unwrap();
        let route = |id: &str| catalog.resolve(id).unwrap().clone();
        let mut trail = Trail::default();
        trail.push(Attempt {
            route: route("openai/gpt-4o-mini"),
            outcome: "upstream_error".into(),
            status: Some(503),
            latency: Duration::from_millis(12),
            metered: Metered::NOTHING,
        });
        trail.push(Attempt {
            route: route("anthropic/claude-sonnet-4-6"),
            outcome: "success".into(),
            status: Some(200),
            latency: Duration::from_millis(80),
            metered: Metered {
                usage: Some(Usage {
                    input: 10,
                    output: 20,
                    cache_read: Some(4),
                    cache_write: None,
                    reasoning: Some(1),
                }),
                cost: Nanos(12_345),
                fee: Nanos::ZERO,
            },
        });
        let stored = trail.stored();
        let stored = stored.as_str();
        assert_eq!(tollgate_ledger::expand_attempts(stored), trail.to_json(), "{stored}");
        assert_eq!(Trail::default().stored().as_str(), "[]");
    }

    #[test]
    fn the_route_is_rendered_into_the_service_block_once() {
        let route = RawValue::from_string(r#"{"strategy":"sort:price"}"#.into()).unwrap();
        let object = |service: Value| {
            let mut object = Map::new();
            object.insert("id".into(), json!("a"));
            object.insert("service".into(), service);
            object
        };
        let rendered = render(object(json!({"request_id": "r"})), Nanos(9_000), Some(&route));
        let read: Value = serde_json::from_slice(&rendered).unwrap();
        assert_eq!(
            read["service"],
            json!({"request_id": "r", "route": {"strategy": "sort:price"}})
        );
        let text = String::from_utf8(rendered).unwrap();
        assert!(text.contains(r#""usage":{"cost":0.000009}"#), "{text}");
        // A block that has its route already (a native answer's) keeps it.
        let kept = object(json!({"route": {"strategy": "first listed"}}));
        let rendered = String::from_utf8(render(kept, Nanos(0), Some(&route))).unwrap();
        assert_eq!(rendered.matches("\"route\"").count(), 1, "{rendered}");
        assert!(rendered.contains("first listed"), "{rendered}");
    }
}
