//! OpenAI's endpoints besides chat that the mock answers (embeddings,
//! moderations, images, speech, transcriptions and translations) and
//! Cohere's rerank, in the shapes the official SDKs' types read.
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

#[derive(Deserialize)]
struct ImagesRequest {
    model: String,
    prompt: String,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    mock: Option<Directives>,
}

/// A 1×1 PNG, the image every request gets.
pub(crate) const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d,
    0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// `POST /v1/images/generations`: `n` images (1×1 PNGs), as `b64_json`
/// unless `response_format` is `url`.
pub async fn image_generations(State(app): State<Shared>, request: Request) -> Response {
    let (body, fault) = match admit::<ImagesRequest>(&app, request, |r| (r.model.clone(), r.mock.as_ref())).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    if let Some(response) = fault {
        return response;
    }
    images(body.n.unwrap_or(1), body.response_format.as_deref(), &body.prompt)
}

fn images(n: u32, response_format: Option<&str>, prompt: &str) -> Response {
    if !(1..=10).contains(&n) {
        return invalid("'n' must be between 1 and 10");
    }
    let image = match response_format {
        Some("url") => json!({"url": "https://images.example/mock.png", "revised_prompt": prompt}),
        _ => json!({"b64_json": base64::engine::general_purpose::STANDARD.encode(PNG), "revised_prompt": prompt}),
    };
    axum::Json(json!({"created": 1_700_000_000, "data": vec![image; n as usize]})).into_response()
}

#[derive(Deserialize)]
struct SpeechRequest {
    model: String,
    input: String,
    voice: String,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    mock: Option<Directives>,
}

/// `POST /v1/audio/speech`: "audio" bytes whose length follows the input
/// (an ID3 header, then the input repeated), in the asked format's type.
pub async fn speech(State(app): State<Shared>, request: Request) -> Response {
    let (body, fault) = match admit::<SpeechRequest>(&app, request, |r| (r.model.clone(), r.mock.as_ref())).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    if let Some(response) = fault {
        return response;
    }
    if body.voice.is_empty() || body.input.is_empty() {
        return invalid("'input' and 'voice' are required");
    }
    let content_type = match body.response_format.as_deref().unwrap_or("mp3") {
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "opus" => "audio/opus",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        "pcm" => "audio/pcm",
        other => return invalid(&format!("unknown response_format '{other}'")),
    };
    let mut audio = b"ID3\x04\x00mock-audio:".to_vec();
    for _ in 0..4 {
        audio.extend_from_slice(body.input.as_bytes());
    }
    ([(axum::http::header::CONTENT_TYPE, content_type)], audio).into_response()
}

/// `POST /v1/audio/transcriptions` and `/v1/audio/translations`: the
/// transcript is the upload's name and length; usage is its duration in
/// seconds, from a WAV header (else one second).
pub async fn transcriptions(State(app): State<Shared>, request: Request) -> Response {
    let form = match read_form(&app, request).await {
        Ok(form) => form,
        Err(response) => return response,
    };
    let model = form.field("model").unwrap_or_default();
    let directives = Directives::default();
    if let Some(response) = scripted_fault(&app, &directives, &model).await {
        return response;
    }
    let Some(file) = form.files.iter().find(|(name, _, _)| name == "file") else {
        return invalid("'file' is required");
    };
    let seconds = wav_seconds(&file.2).unwrap_or(1.0);
    let text = format!("mock transcript of {} ({} bytes)", file.1, file.2.len());
    match form.field("response_format").as_deref() {
        Some("text") => ([(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response(),
        Some("verbose_json") => axum::Json(
            json!({"task": "transcribe", "language": "english", "duration": seconds, "text": text, "segments": []}),
        )
        .into_response(),
        _ => axum::Json(json!({"text": text, "usage": {"type": "duration", "seconds": seconds}})).into_response(),
    }
}

/// `POST /v1/images/edits`: as generations, from a form with an image.
pub async fn image_edits(State(app): State<Shared>, request: Request) -> Response {
    let form = match read_form(&app, request).await {
        Ok(form) => form,
        Err(response) => return response,
    };
    let model = form.field("model").unwrap_or_default();
    if let Some(response) = scripted_fault(&app, &Directives::default(), &model).await {
        return response;
    }
    if !form
        .files
        .iter()
        .any(|(name, _, _)| name == "image" || name == "image[]")
    {
        return invalid("'image' is required");
    }
    let n = form.field("n").and_then(|n| n.parse().ok()).unwrap_or(1);
    images(
        n,
        form.field("response_format").as_deref(),
        &form.field("prompt").unwrap_or_default(),
    )
}

#[derive(Deserialize)]
struct RerankRequest {
    model: String,
    query: String,
    documents: Vec<Value>,
    #[serde(default)]
    top_n: Option<usize>,
    #[serde(default)]
    mock: Option<Directives>,
}

/// `POST /v1/rerank` (Cohere's shape): documents sharing more words with
/// the query rank higher; one search unit per 100 documents.
pub async fn rerank(State(app): State<Shared>, request: Request) -> Response {
    let (body, fault) = match admit::<RerankRequest>(&app, request, |r| (r.model.clone(), r.mock.as_ref())).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    if let Some(response) = fault {
        return response;
    }
    let words: Vec<&str> = body.query.split_whitespace().collect();
    let mut scored: Vec<(usize, f64)> = body
        .documents
        .iter()
        .enumerate()
        .map(|(index, doc)| {
            let text = doc
                .as_str()
                .or_else(|| doc.get("text").and_then(Value::as_str))
                .unwrap_or_default();
            let shared = text.split_whitespace().filter(|w| words.contains(w)).count();
            (index, shared as f64 / (words.len().max(1) as f64))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(body.top_n.unwrap_or(scored.len()));
    let results: Vec<Value> = scored
        .iter()
        .map(|(index, score)| json!({"index": index, "relevance_score": score}))
        .collect();
    let units = body.documents.len().div_ceil(100).max(1);
    let id = app.next_id();
    axum::Json(json!({
        "id": format!("rerank-mock-{id}"),
        "results": results,
        "meta": {"billed_units": {"search_units": units}},
    }))
    .into_response()
}

/// A multipart form's text fields and files (name, filename, bytes).
struct Form {
    fields: Vec<(String, String)>,
    files: Vec<(String, String, Bytes)>,
}

impl Form {
    fn field(&self, name: &str) -> Option<String> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }
}

async fn read_form(app: &Shared, request: Request) -> Result<Form, Response> {
    let (parts, body) = request.into_parts();
    let Ok(body): Result<Bytes, _> = to_bytes(body, MAX_BODY * 2).await else {
        return Err(invalid("mock: request body too large or unreadable"));
    };
    let authorized = app.authorized(&parts.headers);
    let boundary = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| multer::parse_boundary(ct).ok());
    app.count_chat_request();
    app.recorder.record(parts, body.clone());
    tokio::time::sleep(app.latency()).await;
    if !authorized {
        return Err(error::invalid_api_key());
    }
    let Some(boundary) = boundary else {
        return Err(invalid("expected multipart/form-data"));
    };
    let stream = futures_util::stream::once(async move { Ok::<Bytes, std::convert::Infallible>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut form = Form {
        fields: Vec::new(),
        files: Vec::new(),
    };
    loop {
        match multipart.next_field().await {
            Ok(Some(field)) => {
                let name = field.name().unwrap_or_default().to_string();
                let filename = field.file_name().map(str::to_string);
                let data = match field.bytes().await {
                    Ok(data) => data,
                    Err(e) => return Err(invalid(&format!("malformed form: {e}"))),
                };
                match filename {
                    Some(filename) => form.files.push((name, filename, data)),
                    None => form.fields.push((name, String::from_utf8_lossy(&data).into_owned())),
                }
            }
            Ok(None) => return Ok(form),
            Err(e) => return Err(invalid(&format!("malformed form: {e}"))),
        }
    }
}

/// The fault a request scripts by model name (or an outage), if any.
async fn scripted_fault(app: &Shared, directives: &Directives, model: &str) -> Option<Response> {
    let faults = Faults::resolve(directives, model);
    tokio::time::sleep(faults.latency).await;
    if let Some(status) = app.outage() {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        return Some(error::fault_response(status, None, None));
    }
    faults.status.map(|status| {
        let retry_after = directives.retry_after_header();
        error::fault_response(status, directives.error_code.as_deref(), retry_after.as_deref())
    })
}

/// A PCM WAV's length in seconds, from its `fmt ` byte rate and `data` size.
fn wav_seconds(bytes: &[u8]) -> Option<f64> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return None;
    }
    let u32_at = |at: usize| Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let (mut at, mut rate) = (12, None);
    while at + 8 <= bytes.len() {
        let size = u32_at(at + 4)? as usize;
        match &bytes[at..at + 4] {
            b"fmt " => rate = u32_at(at + 16),
            b"data" => return Some(size as f64 / f64::from(rate.filter(|r| *r > 0)?)),
            _ => {}
        }
        at += 8 + size + (size & 1);
    }
    None
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
    let fault = scripted_fault(app, directives.unwrap_or(&no_directives), &model).await;
    Ok((parsed, fault))
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

/// A unit vector of `dimensions` for `seed`: the sum of one pseudo-random
/// vector per word (lower-cased letters and digits; FNV-1a, then a linear
/// congruential walk), normalised. The same text always embeds the same, and
/// texts sharing most of their words embed close together, so a semantic
/// cache can be tested against it.
pub(crate) fn vector(seed: &str, dimensions: usize) -> Vec<f32> {
    let words: Vec<String> = seed
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut sum = vec![0.0f32; dimensions];
    let parts: Vec<&str> = match words.is_empty() {
        true => vec![seed],
        false => words.iter().map(String::as_str).collect(),
    };
    for part in parts {
        for (total, x) in sum.iter_mut().zip(word_vector(part, dimensions)) {
            *total += x;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::EPSILON);
    sum.iter().map(|x| x / norm).collect()
}

fn word_vector(word: &str, dimensions: usize) -> Vec<f32> {
    let mut state = word.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (0..dimensions)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[derive(Deserialize)]
struct CohereEmbedRequest {
    model: String,
    texts: Vec<String>,
    #[serde(default)]
    output_dimension: Option<usize>,
}

/// Cohere's `POST /v2/embed`: the same vectors as the OpenAI route for the
/// same texts, under `embeddings.float`, with `meta.billed_units`.
pub async fn cohere_embed(State(app): State<Shared>, request: Request) -> Response {
    let (body, fault) = match admit::<CohereEmbedRequest>(&app, request, |r| (r.model.clone(), None)).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    if let Some(response) = fault {
        return response;
    }
    let dimensions = body.output_dimension.unwrap_or(8).clamp(1, MAX_DIMENSIONS);
    let vectors: Vec<Vec<f32>> = body.texts.iter().map(|t| vector(t, dimensions)).collect();
    let tokens: u64 = body.texts.iter().map(|t| word_count(t).max(1) as u64).sum();
    let id = app.next_id();
    axum::Json(json!({
        "id": format!("embed-mock-{id}"),
        "embeddings": {"float": vectors},
        "texts": body.texts,
        "meta": {"billed_units": {"input_tokens": tokens}},
    }))
    .into_response()
}
