//! The OpenAI-compatible data plane: `/v1/chat/completions` and `/v1/models`.

mod attempts;
mod billing;
mod chat;
pub(crate) mod chunk;
pub(crate) mod envelope;
pub(crate) mod framing;
mod models;
mod provenance;
pub mod sigv4;
mod stream;
pub mod upstream;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use tollgate_routing::catalog::Catalog;

/// The routing table requests read: the catalog and the pricing snapshot its
/// prices were frozen as. Replaced whole on reload; a request keeps the table it
/// started with.
pub struct Routes {
    pub catalog: Catalog,
    pub snapshot_id: i64,
}

use crate::server::Gateway;

pub fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/models", get(models::list_models))
        .route("/v1/models/{*id}", get(models::get_model))
}
