//! `GET /v1/models` and `GET /v1/models/{id}`: the catalog with exact prices and
//! live availability (a provider needs its key and any `{ENV}` placeholder of
//! its URL, and is unavailable while its circuit breaker is open).
//!
//! The list shows priced models only; `GET /v1/models/{id}` answers for any.
//! It takes filters, each repeatable or a comma list:
//! `provider=<id>` (any of), `capability=<flag>` (all of) and
//! `available=true|false`. Unknown parameters or values answer 400, so a typo
//! never silently widens the list.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{DataPlane, Routes};
use tollgate_core::money::Kind;
use tollgate_identity::auth::Caller;
use tollgate_routing::catalog::{CAPABILITIES, ModelRoute, PriceSource};
use tollgate_routing::groups::GroupConfig;
use tollgate_routing::health::Health;
use tollgate_routing::traffic::Traffic;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// Why `route` cannot serve requests now, if it cannot. `billing`: the wallet
/// ledger is on, so an unpriced model is unavailable.
/// Every reason that applies is given, so fixing one does not reveal another.
fn unavailable_reason(route: &ModelRoute, data: &DataPlane) -> Option<String> {
    let (health, billing) = (&data.health, data.ledger.is_some());
    let provider = &route.provider;
    let reasons: Vec<String> = provider
        .unavailable_reason()
        .into_iter()
        .chain(billing.then(|| route.unpriced_reason()).flatten())
        .chain(unserved_operations(route, data))
        .collect();
    (!reasons.is_empty())
        .then(|| reasons.join("; "))
        .or_else(|| {
            health
                .is_open(&route.id)
                .then(|| "held back: circuit breaker open after repeated upstream failures, or the upstream asked to wait (Retry-After)".to_string())
        })
}

/// Why the model's operations besides chat cannot be served: its adapter
/// does not serve them (an adapter before WIT 0.3.0 serves chat only).
fn unserved_operations(route: &ModelRoute, data: &DataPlane) -> Option<String> {
    let adapter = data.adapters.get(&route.provider.adapter)?;
    let unserved: Vec<&str> = route
        .operations
        .iter()
        .map(String::as_str)
        .filter(|op| *op != "chat")
        .filter(|op| {
            !adapter
                .operations()
                .iter()
                .any(|served| crate::operations::name(*served) == *op)
        })
        .collect();
    (!unserved.is_empty()).then(|| {
        format!(
            "its adapter '{}' does not serve {} yet",
            route.provider.adapter,
            unserved.join(", ")
        )
    })
}

fn entry(route: &ModelRoute, data: &DataPlane, snapshot_id: i64) -> Value {
    let (health, traffic) = (&data.health, &data.traffic);
    let provider = &route.provider;
    let reason = unavailable_reason(route, data);
    let mut service = json!({
        "available": reason.is_none(),
        "provider": provider.id,
        "provider_name": provider.name,
        "capabilities": route.capabilities,
        "operations": route.operations,
        "pricing_snapshot": snapshot_id,
        "health": live_health(route, health, traffic),
        "pricing_source": pricing_source(&route.price_source),
    });
    if let Some(reason) = reason {
        service["unavailable_reason"] = Value::String(reason);
    }
    json!({
        "id": route.id,
        "object": "model",
        "created": 0,
        "owned_by": provider.id,
        "name": format!("{}: {}", provider.name, route.upstream_model),
        "context_length": route.context_length,
        "max_output_tokens": route.max_output_tokens,
        "pricing": route.priced.then(|| pricing(route)),
        "service": service,
    })
}

/// What this gateway has measured of the model in real traffic since it
/// started: the breaker, recent success rate, medians of the last requests'
/// time to the answer's head, time to first token (streams) and output
/// tokens per second. Figures are `null` until traffic measured them.
fn live_health(route: &ModelRoute, health: &Health, traffic: &Traffic) -> Value {
    let measured = traffic.snapshot(&route.id).unwrap_or_default();
    let round = |value: Option<f64>| value.map(|v| (v * 10.0).round() / 10.0);
    json!({
        "breaker": health.state(&route.id),
        "requests": measured.requests,
        "success_rate": measured.success_rate.map(|rate| (rate * 1000.0).round() / 1000.0),
        "p50_latency_ms": round(measured.p50_latency_ms),
        "p50_ttft_ms": round(measured.p50_ttft_ms),
        "p50_tokens_per_second": round(measured.p50_tokens_per_second),
        "in_flight": measured.in_flight,
    })
}

/// A model's prices: OpenRouter's per-token fields (`prompt`, `completion`,
/// `input_cache_read`, `input_cache_write`, `internal_reasoning`, `request`),
/// the same per million tokens, and where they came from.
fn pricing(route: &ModelRoute) -> Value {
    let price = &route.price;
    let mut pricing = json!({
        "prompt": price.input.usd_per_token(),
        "completion": price.output.usd_per_token(),
        "input_cache_read": price.of(Kind::CacheRead).usd_per_token(),
        "input_cache_write": price.of(Kind::CacheWrite).usd_per_token(),
        "internal_reasoning": price.of(Kind::Reasoning).usd_per_token(),
        "request": price.per_request.usd_string(),
        "input_per_mtok": price.input.usd_per_mtok(),
        "output_per_mtok": price.output.usd_per_mtok(),
        "cache_read_per_mtok": price.of(Kind::CacheRead).usd_per_mtok(),
        "cache_write_per_mtok": price.of(Kind::CacheWrite).usd_per_mtok(),
        "reasoning_per_mtok": price.of(Kind::Reasoning).usd_per_mtok(),
        "currency": "USD",
        "source": route.price_source.name(),
    });
    if let PriceSource::Table { key, .. } = &route.price_source {
        pricing["source_key"] = Value::String(key.clone());
    }
    // The operations' own units, where the model is priced in them.
    let units = &route.units;
    if !units.images.is_empty() {
        let images: serde_json::Map<String, Value> = units
            .images
            .iter()
            .map(|p| (p.key(), Value::String(p.price.usd_string())))
            .collect();
        pricing["image"] = Value::Object(images);
    }
    if let Some(per_character) = units.per_character {
        pricing["speech_per_mchars"] = Value::String(per_character.usd_per_mtok());
    }
    if let Some(per_second) = units.per_audio_second {
        pricing["audio_per_second"] = Value::String(per_second.usd_string());
    }
    if let Some(per_search) = units.per_search {
        pricing["search"] = Value::String(per_search.usd_string());
    }
    pricing
}

/// Where the price came from: the table's source with its release, date and
/// key for the model, or `config` / `catalog`.
fn pricing_source(source: &PriceSource) -> Value {
    match source {
        PriceSource::Table { key, source } => json!({
            "name": source.name,
            "release": source.release,
            "retrieved": source.retrieved,
            "key": key,
        }),
        PriceSource::None => Value::Null,
        other => json!({ "name": other.name() }),
    }
}

/// The list's filters; an empty set means "no filter".
#[derive(Default)]
struct Filter {
    providers: BTreeSet<String>,
    capabilities: BTreeSet<String>,
    available: Option<bool>,
}

impl Filter {
    fn parse(pairs: Vec<(String, String)>, known_providers: &BTreeSet<&str>) -> Result<Self, ApiError> {
        let mut filter = Filter::default();
        for (key, value) in pairs {
            let values = value.split(',').map(str::trim);
            match key.as_str() {
                "provider" => {
                    for id in values {
                        if !known_providers.contains(id) {
                            return Err(
                                ApiError::invalid_request(format!("provider '{id}' is not in the catalog"))
                                    .with_param("provider"),
                            );
                        }
                        filter.providers.insert(id.to_string());
                    }
                }
                "capability" => {
                    for flag in values {
                        if !CAPABILITIES.contains(&flag) {
                            return Err(ApiError::invalid_request(format!(
                                "capability '{flag}' is unknown (known: {})",
                                CAPABILITIES.join(", ")
                            ))
                            .with_param("capability"));
                        }
                        filter.capabilities.insert(flag.to_string());
                    }
                }
                "available" => {
                    let flag = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        other => {
                            return Err(ApiError::invalid_request(format!(
                                "available must be true or false, not '{other}'"
                            ))
                            .with_param("available"));
                        }
                    };
                    if filter.available.is_some_and(|f| f != flag) {
                        return Err(
                            ApiError::invalid_request("available is given twice with different values")
                                .with_param("available"),
                        );
                    }
                    filter.available = Some(flag);
                }
                other => {
                    return Err(ApiError::invalid_request(format!(
                        "unknown query parameter '{other}' (supported: provider, capability, available)"
                    )));
                }
            }
        }
        Ok(filter)
    }

    fn admits(&self, route: &ModelRoute, data: &DataPlane) -> bool {
        let provider = &route.provider;
        (self.providers.is_empty() || self.providers.contains(&provider.id))
            && self.capabilities.iter().all(|flag| route.has_capability(flag))
            && self
                .available
                .is_none_or(|want| want == unavailable_reason(route, data).is_none())
    }
}

pub async fn list_models(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    _caller: Caller,
    uri: Uri,
) -> Response {
    let routes = data.routes();
    let known: BTreeSet<&str> = routes.catalog.routes().map(|r| r.provider.id.as_str()).collect();
    let filter = Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map_err(|e| ApiError::invalid_request(format!("malformed query string: {e}")))
        .and_then(|Query(pairs)| Filter::parse(pairs, &known));
    let filter = match filter {
        Ok(filter) => filter,
        Err(error) => return error.with_request_id(&request_id.0).into_response(),
    };
    // A model without a price anywhere is left out whether or not the wallet
    // is on: the list promises a price for every model it shows. It still
    // answers by id (with the reason), and serves once the operator prices it.
    let mut listed: Vec<Value> = routes
        .catalog
        .routes()
        .filter(|route| route.priced)
        .filter(|route| filter.admits(route, &data))
        .map(|route| model_entry(route, &routes, &data))
        .collect();
    // Groups with ids of their own come after the catalog's models.
    for (id, group) in &data.groups.groups {
        if routes.catalog.resolve(id).is_some() {
            continue;
        }
        // A group is the gateway's model, not a provider's: a provider filter leaves it out.
        let deployments = deployments(group, &routes);
        let admitted = filter.providers.is_empty() && deployments.iter().any(|route| filter.admits(route, &data));
        if admitted && let Some(entry) = group_entry(id, group, &routes, &data) {
            listed.push(entry);
        }
    }
    axum::Json(json!({ "object": "list", "data": listed })).into_response()
}

/// A catalog model's entry; an equivalents group named after it adds `service.group`.
fn model_entry(route: &ModelRoute, routes: &Routes, data: &DataPlane) -> Value {
    let mut listed = entry(route, data, routes.snapshot_id);
    if let Some(group) = data.groups.groups.get(&route.id) {
        listed["service"]["group"] = group_json(group, routes, data);
    }
    listed
}

fn deployments(group: &GroupConfig, routes: &Routes) -> Vec<Arc<ModelRoute>> {
    group
        .deployments
        .iter()
        .filter_map(|d| routes.catalog.resolve(&d.model).cloned())
        .collect()
}

/// A model group as a model: what a request naming it may cost at most (its
/// dearest deployment's prices, which the wallet holds for), the limits every
/// deployment honours, and each deployment, each also listed as itself.
fn group_entry(id: &str, group: &GroupConfig, routes: &Routes, data: &DataPlane) -> Option<Value> {
    let members = deployments(group, routes);
    let dearest = members
        .iter()
        .filter(|route| route.priced)
        .max_by_key(|route| route.price.input.0.saturating_add(route.price.output.0))?;
    let available = members.iter().any(|route| unavailable_reason(route, data).is_none());
    let capabilities: Vec<&String> = dearest
        .capabilities
        .iter()
        .filter(|flag| members.iter().all(|route| route.has_capability(flag)))
        .collect();
    let mut service = json!({
        "available": available,
        "provider": "tollgate",
        "capabilities": capabilities,
        "pricing_snapshot": routes.snapshot_id,
        "pricing_source": pricing_source(&dearest.price_source),
        "group": group_json(group, routes, data),
    });
    if !available {
        service["unavailable_reason"] = Value::String("no deployment of the group is available".into());
    }
    Some(json!({
        "id": id,
        "object": "model",
        "created": 0,
        "owned_by": "tollgate",
        "name": format!("Group: {id}"),
        "context_length": members.iter().filter_map(|r| r.context_length).min(),
        "max_output_tokens": members.iter().filter_map(|r| r.max_output_tokens).min(),
        "pricing": pricing(dearest),
        "service": service,
    }))
}

/// `service.group`: the strategy, affinity and each deployment with its
/// weight and whether it can serve now.
fn group_json(group: &GroupConfig, routes: &Routes, data: &DataPlane) -> Value {
    let deployments: Vec<Value> = group
        .deployments
        .iter()
        .map(|d| {
            let available = routes
                .catalog
                .resolve(&d.model)
                .is_some_and(|route| unavailable_reason(route, data).is_none());
            json!({"model": d.model, "weight": d.weight, "rpm": d.rpm, "tpm": d.tpm, "available": available})
        })
        .collect();
    json!({"strategy": group.strategy.name(), "affinity": group.affinity, "deployments": deployments})
}

pub async fn get_model(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    _caller: Caller,
    Path(id): Path<String>,
) -> Response {
    let routes = data.routes();
    let found = match routes.catalog.resolve(&id) {
        Some(route) => Some(model_entry(route, &routes, &data)),
        None => (data.groups.groups.get(&id)).and_then(|group| group_entry(&id, group, &routes, &data)),
    };
    match found {
        Some(listed) => axum::Json(listed).into_response(),
        None => ApiError::model_not_found(&id)
            .with_request_id(&request_id.0)
            .into_response(),
    }
}
