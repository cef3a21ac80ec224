//! `GET /v1/models` and `GET /v1/models/{id}`: the catalog with availability and
//! exact prices. The catalog is fixed for the life of the process, so the listing
//! is rendered once.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::catalog::{Catalog, ModelRoute};
use crate::error::ApiError;
use crate::server::{Caller, Gateway, RequestId};

pub struct ModelListing {
    all: Bytes,
}

impl ModelListing {
    pub fn render(catalog: &Catalog) -> Self {
        let data: Vec<Value> = catalog.routes().map(|route| entry(route)).collect();
        let all = serde_json::to_vec(&json!({ "object": "list", "data": data })).unwrap_or_default();
        Self { all: Bytes::from(all) }
    }
}

fn entry(route: &ModelRoute) -> Value {
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
        "service": { "available": route.provider.is_available() },
    })
}

pub async fn list_models(State(gateway): State<Arc<Gateway>>, _caller: Caller) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        gateway.routes().models.all.clone(),
    )
        .into_response()
}

pub async fn get_model(
    State(gateway): State<Arc<Gateway>>,
    request_id: RequestId,
    _caller: Caller,
    Path(id): Path<String>,
) -> Response {
    match gateway.routes().catalog.resolve(&id) {
        Some(route) => axum::Json(entry(route)).into_response(),
        None => ApiError::model_not_found(&id)
            .with_request_id(&request_id.0)
            .into_response(),
    }
}
