//! OpenAI's endpoints besides chat that the mock answers: embeddings and
//! moderations, in the shapes the official SDK's types read.
//!
//! Embeddings are deterministic: each input gets a unit vector derived from
//! its text (or tokens), `dimensions` long (8 by default), so a test can
//! compare two answers. Usage counts one prompt token per word of a text
//! input and one per token of a token-array input, like the chat mock's
//! word arithmetic. Faults follow the chat mock: model names such as
//! `fail-429` and a `mock` object in the body.

use axum::body::{Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::MAX_BODY;
use super::error;
use crate::Shared;
use crate::directives::Directives;
use crate::faults::Faults;
use crate::text::word_count;

/// Most dimensions the mock writes (OpenAI's largest model has 3072).
const MAX_DIMENSIONS: usize = 3072;

#[derive(Deserialize)]
struct EmbeddingsRequest {
    model: String,
    input: Value,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<usize>,
    #[serde(default)]
    mock: Option<Directives>,
}

#[derive(Deserialize)]
struct ModerationsRequest {
    #[serde(default)]
    model: Option<String>,
    input: Value,
    #[serde(default)]
    mock: Option<Directives>,
}

/// `POST /v1/embeddings`.
pub async fn embeddings(State(app): State<Shared>, request: Request) -> Response {
    let (body, fault) = match admit::<EmbeddingsRequest>(&app, request, |r| (r.model.clone(), r.mock.as_ref())).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    if let Some(response) = fault {
        return response;
    }
    let inputs = match inputs(&body.input) {
        Some(inputs) if !inputs.is_empty() => inputs,
        _ => return invalid("'input' must be a string, an array of strings, or token arrays, and not empty"),
    };
    let dimensions = body.dimensions.unwrap_or(8);
    if dimensions == 0 || dimensions > MAX_DIMENSIONS {
        return invalid("'dimensions' must be between 1 and 3072");
    }
    let base64 = match body.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => return invalid(&format!("'encoding_format' must be float or base64, not '{other}'")),
    };
    let mut tokens = 0u64;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, input)| {
            tokens += input.tokens;
            let vector = vector(&input.seed, dimensions);
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    axum::Json(json!({
        "object": "list",
        "data": data,
        "model": body.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

/// `POST /v1/moderations`: flags an input that contains the word `flagme`.
pub async fn moderations(State(app): State<Shared>, request: Request) -> Response {
    let default_model = "omni-moderation-latest";
    let (body, fault) = match admit::<ModerationsRequest>(&app, request, |r| {
        (r.model.clone().unwrap_or_else(|| default_model.into()), r.mock.as_ref())
    })
    .await
    {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    if let Some(response) = fault {
        return response;
    }
    let texts: Vec<String> = match &body.input {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(text) => Some(text.clone()),
                other => other.get("text").and_then(Value::as_str).map(str::to_string),
            })
            .collect(),
        _ => Vec::new(),
    };
    if texts.is_empty() {
        return invalid("'input' must be a string or an array of strings");
    }
    let tokens: u64 = texts.iter().map(|t| word_count(t).max(1) as u64).sum();
    let results: Vec<Value> = texts
        .iter()
        .map(|text| {
            let flagged = text.split_whitespace().any(|w| w == "flagme");
            let score = if flagged { 0.99 } else { 0.01 };
            json!({
                "flagged": flagged,
                "categories": {"harassment": flagged, "violence": false},
                "category_scores": {"harassment": score, "violence": 0.01},
                "category_applied_input_types": {"harassment": ["text"], "violence": ["text"]},
            })
        })
        .collect();
    let id = app.next_id();
    axum::Json(json!({
        "id": format!("modr-mock-{id}"),
        "model": body.model.as_deref().unwrap_or(default_model),
        "results": results,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

/// Reads, records and checks a request: the parsed body, and the fault to
/// answer with instead when one is scripted (by body, model name or outage).
async fn admit<T: for<'de> Deserialize<'de>>(
    app: &Shared,
    request: Request,
    scripted: impl Fn(&T) -> (String, Option<&Directives>),
) -> Result<(T, Option<Response>), Response> {
    let (parts, body) = request.into_parts();
    let Ok(body): Result<Bytes, _> = to_bytes(body, MAX_BODY).await else {
        return Err(invalid("mock: request body too large or unreadable"));
    };
    let authorized = app.authorized(&parts.headers);
    app.count_chat_request();
    app.recorder.record(parts, body.clone());
    tokio::time::sleep(app.latency()).await;
    if !authorized {
        return Err(error::invalid_api_key());
    }
    let parsed: T = serde_json::from_slice(&body).map_err(|e| invalid(&format!("Invalid request: {e}")))?;
    let (model, directives) = scripted(&parsed);
    let no_directives = Directives::default();
    let directives = directives.unwrap_or(&no_directives);
    let faults = Faults::resolve(directives, &model);
    tokio::time::sleep(faults.latency).await;
    if let Some(status) = app.outage() {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        return Ok((parsed, Some(error::fault_response(status, None, None))));
    }
    if let Some(status) = faults.status {
        let retry_after = directives.retry_after_header();
        let response = error::fault_response(status, directives.error_code.as_deref(), retry_after.as_deref());
        return Ok((parsed, Some(response)));
    }
    Ok((parsed, None))
}

fn invalid(message: &str) -> Response {
    error::error_response(StatusCode::BAD_REQUEST, message, "invalid_request_error", None, None)
}

/// One input to embed: what seeds its vector, and its token count.
struct Input {
    seed: String,
    tokens: u64,
}

/// A string, an array of strings, an array of tokens, or an array of token
/// arrays.
fn inputs(input: &Value) -> Option<Vec<Input>> {
    let text = |text: &str| Input {
        seed: text.to_string(),
        tokens: word_count(text).max(1) as u64,
    };
    let token_array = |items: &[Value]| -> Option<Input> {
        let ids: Option<Vec<u64>> = items.iter().map(Value::as_u64).collect();
        let ids = ids?;
        Some(Input {
            seed: format!("{ids:?}"),
            tokens: ids.len() as u64,
        })
    };
    match input {
        Value::String(s) => Some(vec![text(s)]),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            Some(items.iter().filter_map(Value::as_str).map(text).collect())
        }
        Value::Array(items) if items.iter().all(Value::is_u64) => Some(vec![token_array(items)?]),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_array().and_then(|ids| token_array(ids)))
            .collect(),
        _ => None,
    }
}

/// A unit vector of `dimensions` derived from `seed` (FNV-1a, then a
/// linear congruential walk): the same text always embeds the same.
fn vector(seed: &str, dimensions: usize) -> Vec<f32> {
    let mut state = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let raw: Vec<f32> = (0..dimensions)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
    raw.iter().map(|x| x / norm).collect()
}
