//! Cohere's embed and rerank APIs as the gateway's embeddings and rerank
//! operations:
//! - embeddings: an OpenAI embeddings request (`input` as a string or an
//!   array of strings, `encoding_format`, `dimensions`) → `POST /v2/embed`
//!   (`texts`, `input_type: search_document`, `embedding_types: ["float"]`,
//!   `output_dimension`), and Cohere's `embeddings.float` back to OpenAI's
//!   list, base64-encoded (little-endian f32) when the caller asked;
//!   `meta.billed_units.input_tokens` is the usage;
//! - rerank: the caller's body is Cohere's shape already (the gateway's
//!   `/v1/rerank`): `POST /v2/rerank` with the model set, the answer as it
//!   is; `meta.billed_units.search_units` is what is billed.

use base64::Engine;
use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::operations::OperationShape;
use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Measured, Operation, OperationAnswer, OperationBody, OutboundRequest,
};

/// What Cohere serves besides chat.
pub const SERVED: [Operation; 2] = [Operation::Embeddings, Operation::Rerank];

/// The most texts one embed call takes.
const MAX_TEXTS: usize = 96;

pub fn request(
    ctx: &CallContext,
    operation: Operation,
    body: &OperationBody,
) -> Result<(OutboundRequest, OperationShape), AdapterError> {
    let OperationBody::Json(json) = body else {
        return Err(AdapterError::invalid_request(
            "Cohere's embed and rerank take JSON, not a form",
        ));
    };
    let request: Map<String, Value> = serde_json::from_slice(json)
        .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
    let base = ctx.base_url.trim_end_matches('/');
    let (path, body) = match operation {
        Operation::Embeddings => ("v2/embed", embed_body(ctx, &request)?),
        Operation::Rerank => {
            let mut body = request;
            for field in tollgate_plugin_sdk::openai::GATEWAY_FIELDS {
                body.remove(field);
            }
            body.insert("model".into(), Value::String(ctx.upstream_model.clone()));
            ("v2/rerank", Value::Object(body))
        }
        other => {
            return Err(AdapterError::invalid_request(format!(
                "Cohere does not serve {other:?}"
            )));
        }
    };
    let request = OutboundRequest {
        method: "POST".into(),
        url: format!("{base}/{path}"),
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::to_vec(&body).map_err(|e| AdapterError::internal(e.to_string()))?,
        auth: AuthSlot::Bearer,
    };
    let shape = OperationShape {
        base64: serde_json::from_slice::<Value>(json).is_ok_and(|v| v["encoding_format"] == "base64"),
        ..OperationShape::default()
    };
    Ok((request, shape))
}

fn embed_body(ctx: &CallContext, request: &Map<String, Value>) -> Result<Value, AdapterError> {
    let texts: Vec<&str> = match request.get("input") {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().ok_or_else(|| {
                    AdapterError::invalid_request("Cohere embeds text: 'input' must be strings, not token ids")
                })
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(AdapterError::invalid_request(
                "'input' must be a string or an array of strings",
            ));
        }
    };
    if texts.is_empty() || texts.len() > MAX_TEXTS {
        return Err(AdapterError::invalid_request(format!(
            "Cohere embeds 1 to {MAX_TEXTS} texts per request"
        )));
    }
    let mut body = json!({
        "model": ctx.upstream_model,
        "texts": texts,
        "input_type": "search_document",
        "embedding_types": ["float"],
    });
    if let Some(dimensions) = request.get("dimensions").and_then(Value::as_u64) {
        body["output_dimension"] = Value::from(dimensions);
    }
    Ok(body)
}

pub fn response(
    operation: Operation,
    shape: &OperationShape,
    body: Vec<u8>,
) -> Result<(OperationAnswer, Measured), AdapterError> {
    let answer: Value =
        serde_json::from_slice(&body).map_err(|_| AdapterError::internal("Cohere returned invalid JSON"))?;
    let billed = |unit: &str| answer["meta"]["billed_units"][unit].as_u64();
    let mut measured = Measured {
        input_tokens: None,
        output_tokens: None,
        images: None,
        characters: None,
        audio_milliseconds: None,
        searches: None,
    };
    let body = match operation {
        Operation::Embeddings => {
            let vectors = answer["embeddings"]["float"]
                .as_array()
                .ok_or_else(|| AdapterError::internal("Cohere's answer has no embeddings.float"))?;
            let base64 = shape.base64;
            let data: Vec<Value> = vectors
                .iter()
                .enumerate()
                .map(|(index, vector)| {
                    let floats: Vec<f32> = vector
                        .as_array()
                        .map(|v| v.iter().filter_map(Value::as_f64).map(|x| x as f32).collect())
                        .unwrap_or_default();
                    let embedding = if base64 {
                        let bytes: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
                        Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
                    } else {
                        json!(floats)
                    };
                    json!({"object": "embedding", "index": index, "embedding": embedding})
                })
                .collect();
            let tokens = billed("input_tokens");
            measured.input_tokens = tokens;
            // The gateway sets `model` to the id the caller asked for.
            let mut answer = json!({"object": "list", "data": data, "model": ""});
            if let Some(tokens) = tokens {
                answer["usage"] = json!({"prompt_tokens": tokens, "total_tokens": tokens});
            }
            answer
        }
        Operation::Rerank => {
            measured.searches = Some(billed("search_units").map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX)));
            answer
        }
        other => return Err(AdapterError::internal(format!("Cohere does not serve {other:?}"))),
    };
    let answer = OperationAnswer {
        content_type: "application/json".into(),
        body: serde_json::to_vec(&body).map_err(|e| AdapterError::internal(e.to_string()))?,
    };
    Ok((answer, measured))
}
