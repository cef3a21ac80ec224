//! `GET /v1/models` and `GET /v1/models/{id}`: the catalog with exact prices and
//! live availability (a provider needs its key, and is unavailable while its
//! circuit breaker is open).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::catalog::ModelRoute;
use crate::error::ApiError;
use crate::health::Health;
use crate::server::{Caller, Gateway, RequestId};

fn entry(route: &ModelRoute, health: &Health) -> Value {
    let available = route.provider.is_available() && !health.is_open(&route.provider.id);
    json!({
        "id": route.id,
        "object": "model",
        "created": 0,
        "owned_by": route.provider.id,
        "name": format!("{}: {}", route.provider.name, route.upstream_model),
        "context_length": route.context_length,
        "pricing": {
            "prompt": route.price.input.usd_per_token(),
            "completion": route.price.output.usd_per_token(),
            "input_per_mtok": route.price.input.usd_per_mtok(),
            "output_per_mtok": route.price.output.usd_per_mtok(),
            "currency": "USD",
        },
        "service": { "available": available },
    })
}

pub async fn list_models(State(gateway): State<Arc<Gateway>>, _caller: Caller) -> Response {
    let routes = gateway.routes();
    let data: Vec<Value> = routes
        .catalog
        .routes()
        .map(|route| entry(route, &gateway.health))
        .collect();
    axum::Json(json!({ "object": "list", "data": data })).into_response()
}

pub async fn get_model(
    State(gateway): State<Arc<Gateway>>,
    request_id: RequestId,
    _caller: Caller,
    Path(id): Path<String>,
) -> Response {
    match gateway.routes().catalog.resolve(&id) {
        Some(route) => axum::Json(entry(route, &gateway.health)).into_response(),
        None => ApiError::model_not_found(&id)
            .with_request_id(&request_id.0)
            .into_response(),
    }
}
