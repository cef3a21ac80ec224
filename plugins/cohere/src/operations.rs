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

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::operations::{self, OperationShape};
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
    let request = operations::json_request(body, "Cohere")?;
    let base64 = request.get("encoding_format").and_then(Value::as_str) == Some("base64");
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
        base64,
        ..OperationShape::default()
    };
    Ok((request, shape))
}

fn embed_body(ctx: &CallContext, request: &Map<String, Value>) -> Result<Value, AdapterError> {
    let texts = operations::input_texts(request, "Cohere", MAX_TEXTS)?;
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
    let mut measured = operations::nothing_measured();
    let body = match operation {
        Operation::Embeddings => {
            let vectors = answer["embeddings"]["float"]
                .as_array()
                .ok_or_else(|| AdapterError::internal("Cohere's answer has no embeddings.float"))?;
            let vectors: Vec<Vec<f32>> = vectors.iter().map(operations::floats).collect();
            let tokens = billed("input_tokens");
            measured.input_tokens = tokens;
            operations::embedding_list(&vectors, shape.base64, tokens)
        }
        Operation::Rerank => {
            measured.searches = Some(billed("search_units").map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX)));
            answer
        }
        other => return Err(AdapterError::internal(format!("Cohere does not serve {other:?}"))),
    };
    Ok((operations::json_answer(&body)?, measured))
}
