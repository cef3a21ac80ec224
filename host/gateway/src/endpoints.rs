//! The HTTP side of the operations besides chat (`operations`): one route
//! per OpenAI endpoint. JSON bodies are bounded by `server.max_body_bytes`
//! like chat; uploads (`multipart/form-data`) by `server.max_upload_bytes`,
//! read here with that limit. A JSON answer is rendered like a chat
//! completion; a media answer (speech audio, a text transcript) goes out as
//! the provider sent it, its provenance in `x-tollgate-*` headers.

use std::sync::Arc;

use axum::Router;
use axum::body::{Bytes, to_bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRef, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::DataPlane;
use super::chat::{body_error, refused_as};
use super::http::whole_response;
use super::operations::{OperationCall, form, kind};
use super::pipeline::{Answer, CallSite, Media, Operation as PipelineOperation, StreamFailure};
use tollgate_identity::auth::{AuthState, Caller};
use tollgate_plugin_host::Operation;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<DataPlane>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    macro_rules! json {
        ($operation:expr) => {
            post(
                |State(data): State<Arc<DataPlane>>,
                 request_id: RequestId,
                 caller: Caller,
                 body: Result<Bytes, BytesRejection>| async move {
                    json_operation(data, request_id, caller, body, $operation).await
                },
            )
        };
    }
    macro_rules! upload {
        ($operation:expr) => {
            post(
                |State(data): State<Arc<DataPlane>>, request_id: RequestId, caller: Caller, request: Request| async move {
                    upload_operation(data, request_id, caller, request, $operation).await
                },
            )
        };
    }
    Router::new()
        .route("/v1/embeddings", json!(Operation::Embeddings))
        .route("/v1/moderations", json!(Operation::Moderation))
        .route("/v1/images/generations", json!(Operation::ImageGeneration))
        .route("/v1/audio/speech", json!(Operation::Speech))
        .route("/v1/rerank", json!(Operation::Rerank))
        .route("/v1/images/edits", upload!(Operation::ImageEdit))
        .route("/v1/audio/transcriptions", upload!(Operation::Transcription))
        .route("/v1/audio/translations", upload!(Operation::Translation))
}

async fn json_operation(
    data: Arc<DataPlane>,
    request_id: RequestId,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
    operation: Operation,
) -> Response {
    let site = CallSite::top(&request_id, StreamFailure::Status);
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let error = refused_as(
                &data,
                &site,
                &caller,
                kind(operation),
                None,
                body_error(&data, &rejection),
            )
            .await;
            return error.with_request_id(&request_id.0).into_response();
        }
    };
    answer(&data, OperationCall::json(operation, body), &caller, site, &request_id).await
}

async fn upload_operation(
    data: Arc<DataPlane>,
    request_id: RequestId,
    caller: Caller,
    request: Request,
    operation: Operation,
) -> Response {
    let site = CallSite::top(&request_id, StreamFailure::Status);
    let limit = data.limits.max_upload_bytes;
    let (parts, body) = request.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let declared_too_large = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|length| length > limit);
    let read = match declared_too_large {
        true => Err(ApiError::body_too_large(limit)),
        false => to_bytes(body, limit).await.map_err(|e| {
            match std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>()) {
                true => ApiError::body_too_large(limit),
                false => ApiError::invalid_request(format!("Could not read the request body: {e}")),
            }
        }),
    };
    let form = match read {
        Ok(body) => form::parse(content_type.as_deref(), body).await,
        Err(error) => Err(error),
    };
    match form {
        Ok(parts) => answer(&data, OperationCall::form(operation, parts), &caller, site, &request_id).await,
        Err(error) => {
            let error = refused_as(&data, &site, &caller, kind(operation), None, error).await;
            error.with_request_id(&request_id.0).into_response()
        }
    }
}

async fn answer(
    data: &Arc<DataPlane>,
    call: OperationCall,
    caller: &Caller,
    site: CallSite<'_>,
    request_id: &RequestId,
) -> Response {
    match data.run(PipelineOperation::Model(call), caller, site).await {
        Ok(Answer::Whole(completion)) => whole_response(completion, request_id),
        Ok(Answer::Media(media)) => media_response(media, request_id),
        Ok(Answer::Stream(_)) => unreachable!("operations besides chat answer whole"),
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}

/// A media answer as the provider sent it; the provider, the model asked
/// for and the exact cost in headers.
fn media_response(media: Media, request_id: &RequestId) -> Response {
    let Media {
        content_type,
        body,
        service,
    } = media;
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set("content-type", &content_type);
    set("x-request-id", &request_id.0);
    set("x-tollgate-provider", &service.route.provider.id);
    set("x-tollgate-model", &service.route.id);
    set("x-tollgate-cost-usd", &service.cost().usd_string());
    response
}
