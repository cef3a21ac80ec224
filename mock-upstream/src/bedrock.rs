//! Amazon Bedrock's Converse API:
//! `POST /model/{modelId}/converse` (one JSON answer) and
//! `POST /model/{modelId}/converse-stream` (AWS event-stream frames,
//! `application/vnd.amazon.eventstream`).
//!
//! The request is validated as Bedrock does for the fields it requires
//! (`validate`), restated in OpenAI terms and answered by [`neutral::decide`]
//! (`restate`), so the reply text, tool call, token counts and model-name
//! faults equal the OpenAI route's. The answer is rendered as Converse JSON or
//! ConverseStream events (`render`, `frames`); errors use Bedrock's shape:
//! `{"message": …}` with the type in `x-amzn-ErrorType` (`errors`), and a
//! `throttlingException` frame mid-stream for `ratelimit-<n>`.
//!
//! With `--api-key`, requests need a SigV4 `authorization` header
//! (`AWS4-HMAC-SHA256 Credential=<access key id>/…`) whose access key id is
//! the part of the key before its first `:` (the key is Tollgate's
//! `ACCESS_KEY_ID:SECRET[:TOKEN]` credential string). The signature itself is
//! not verified. A body may carry the mock's `mock` directives object.

mod errors;
mod frames;
mod render;
mod restate;
mod validate;

use axum::Router;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::stream;
use serde_json::Value;

use crate::Shared;
use crate::faults::StreamFault;
use crate::neutral;
use crate::sse::abort_after_flush;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/model/{model}/converse", post(converse))
        .route("/model/{model}/converse-stream", post(converse_stream))
        .route("/model/{model}/invoke", post(invoke))
}

/// `POST /model/{modelId}/converse`.
async fn converse(State(app): State<Shared>, Path(model): Path<String>, request: Request) -> Response {
    answer(app, model, request, false).await
}

/// `POST /model/{modelId}/converse-stream`.
async fn converse_stream(State(app): State<Shared>, Path(model): Path<String>, request: Request) -> Response {
    answer(app, model, request, true).await
}

async fn answer(app: Shared, model: String, request: Request, streaming: bool) -> Response {
    let (parts, body) = request.into_parts();
    let request_id = errors::request_id(app.next_id());
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return errors::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "ValidationException",
            "Request body too large",
            &request_id,
        );
    };
    app.count_chat_request();
    let authorized = sigv4_key_matches(&app, &parts.headers);
    app.recorder.record(parts, body.clone());
    sleep(app.latency()).await;
    if let Err(rejection) = authorized {
        return rejection.into_response(&request_id);
    }
    let converse: Value = match serde_json::from_slice(&body) {
        Ok(value @ Value::Object(_)) => value,
        _ => {
            return errors::error(
                StatusCode::BAD_REQUEST,
                "SerializationException",
                "Start of structure or map found where not expected.",
                &request_id,
            );
        }
    };
    if let Err(message) = validate::converse(&converse) {
        return errors::validation(&message, &request_id);
    }
    let decision = match neutral::decide(&restate::to_openai(&model, &converse)) {
        Ok(decision) => decision,
        Err(invalid) => return errors::validation(&invalid.message, &request_id),
    };
    let faults = &decision.faults;
    sleep(faults.latency).await;
    if let Some(status) = faults.status {
        return errors::fault(
            status,
            decision.error_code.as_deref(),
            decision.retry_after.as_deref(),
            &request_id,
        );
    }
    let answer = render::Rendered::new(&decision, app.next_id(), faults.latency.as_millis() as u64);
    if !streaming {
        if faults.stream.cuts_whole_answer() {
            return aborted_json();
        }
        return answer.converse_response(&request_id);
    }
    let events = answer.stream_events();
    let stopping = events
        .iter()
        .position(|(event, _)| *event == "messageStop")
        .unwrap_or(events.len());
    let mut frames: Vec<Bytes> = events
        .iter()
        .map(|(event, payload)| frames::event_frame(event, payload))
        .collect();
    let abort = match faults.stream {
        StreamFault::None => false,
        StreamFault::CutAfter(n) => {
            frames.truncate(n);
            true
        }
        StreamFault::ErrorAfter(n) => {
            frames.truncate(n);
            frames.push(frames::exception_frame(
                "throttlingException",
                "Too many tokens, please wait before trying again.",
            ));
            false
        }
        StreamFault::EndAfter(n) => {
            // Whole frames only, and never `messageStop` or what follows it.
            frames.truncate(n.min(stopping));
            false
        }
    };
    frames::respond(frames, faults.chunk_delay, abort, &request_id)
}

/// Why a request's credentials were refused.
enum Rejection {
    Missing,
    Unrecognized,
}

impl Rejection {
    fn into_response(self, request_id: &str) -> Response {
        match self {
            Rejection::Missing => errors::error(
                StatusCode::FORBIDDEN,
                "MissingAuthenticationTokenException",
                "Missing Authentication Token",
                request_id,
            ),
            Rejection::Unrecognized => errors::error(
                StatusCode::FORBIDDEN,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
                request_id,
            ),
        }
    }
}

/// `POST /model/{model}/invoke`: Titan and Cohere embeddings (the same
/// vectors as the OpenAI route for the same text), Titan/Nova and Stability
/// images (1×1 PNGs). Model-name faults answer as Bedrock errors.
async fn invoke(State(app): State<Shared>, Path(model): Path<String>, request: Request) -> Response {
    use base64::Engine;
    use serde_json::json;
    let (parts, body) = request.into_parts();
    let request_id = errors::request_id(app.next_id());
    let Ok(body) = to_bytes(body, crate::openai::MAX_BODY).await else {
        return errors::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "ValidationException",
            "Request body too large",
            &request_id,
        );
    };
    app.count_chat_request();
    let authorized = sigv4_key_matches(&app, &parts.headers);
    app.recorder.record(parts, body.clone());
    sleep(app.latency()).await;
    if let Err(rejection) = authorized {
        return rejection.into_response(&request_id);
    }
    if let Some(status) = crate::faults::Faults::resolve(&Default::default(), &model).status {
        return errors::error(status, "ThrottlingException", "mock: scripted failure", &request_id);
    }
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return errors::error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "Malformed input request",
            &request_id,
        );
    };
    let vector =
        |text: &str| crate::openai::operations::vector(text, request["dimensions"].as_u64().unwrap_or(8) as usize);
    let image = || base64::engine::general_purpose::STANDARD.encode(crate::openai::operations::PNG);
    let answer = if let Some(text) = request["inputText"].as_str() {
        json!({"embedding": vector(text), "inputTextTokenCount": crate::text::word_count(text).max(1)})
    } else if let Some(texts) = request["texts"].as_array() {
        let vectors: Vec<Vec<f32>> = texts.iter().map(|t| vector(t.as_str().unwrap_or_default())).collect();
        json!({"id": request_id, "embeddings": vectors, "response_type": "embeddings_floats"})
    } else if request["taskType"] == "TEXT_IMAGE" {
        let n = request["imageGenerationConfig"]["numberOfImages"]
            .as_u64()
            .unwrap_or(1)
            .clamp(1, 5) as usize;
        json!({"images": vec![image(); n]})
    } else if request["prompt"].is_string() {
        json!({"images": [image()], "finish_reasons": [null]})
    } else {
        return errors::error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "mock: unknown invoke body",
            &request_id,
        );
    };
    axum::Json(answer).into_response()
}

/// The SigV4 check described in the module docs.
fn sigv4_key_matches(app: &Shared, headers: &HeaderMap) -> Result<(), Rejection> {
    let Some(expected) = &app.expected_auth else {
        return Ok(());
    };
    let key = expected.strip_prefix(b"Bearer ").unwrap_or(expected);
    let key_id = key.split(|b| *b == b':').next().unwrap_or(key);
    let Some(authorization) = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes()) else {
        return Err(Rejection::Missing);
    };
    let Some(rest) = authorization.strip_prefix(b"AWS4-HMAC-SHA256 ") else {
        return Err(Rejection::Unrecognized);
    };
    let presented = rest
        .split(|b| *b == b',')
        .filter_map(|field| field.trim_ascii().strip_prefix(b"Credential="))
        .next()
        .and_then(|credential| credential.split(|b| *b == b'/').next());
    if presented == Some(key_id) {
        Ok(())
    } else {
        Err(Rejection::Unrecognized)
    }
}

/// Head sent, body aborted: the non-streaming form of a cut.
fn aborted_json() -> Response {
    let cut = stream::once(async { Err::<Bytes, _>(abort_after_flush().await) });
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(cut)).into_response()
}

async fn sleep(delay: std::time::Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}
