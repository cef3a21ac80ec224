//! Gemini's `batchEmbedContents` and Imagen's `predict`, as the mock answers
//! them: the same vectors as the OpenAI route for the same text, and 1×1
//! PNGs. Model-name faults (`fail-429`, …) answer as Google errors.

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::errors;
use crate::faults::Faults;
use crate::openai::operations::{PNG, vector};

pub fn answer(model: &str, action: &str, body: &Bytes) -> Response {
    if let Some(status) = Faults::resolve(&Default::default(), model).status {
        return errors::error(status, "mock: scripted failure");
    }
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return errors::invalid("Invalid JSON payload received.");
    };
    match action {
        "batchEmbedContents" => {
            let Some(requests) = request["requests"].as_array() else {
                return errors::invalid("* BatchEmbedContentsRequest.requests: must be set");
            };
            let embeddings: Vec<Value> = requests
                .iter()
                .map(|one| {
                    let text = one["content"]["parts"][0]["text"].as_str().unwrap_or_default();
                    let dimensions = one["outputDimensionality"].as_u64().unwrap_or(8).clamp(1, 3072) as usize;
                    json!({"values": vector(text, dimensions)})
                })
                .collect();
            axum::Json(json!({"embeddings": embeddings})).into_response()
        }
        _ => {
            let n = request["parameters"]["sampleCount"].as_u64().unwrap_or(1).clamp(1, 8) as usize;
            let image = base64::engine::general_purpose::STANDARD.encode(PNG);
            let predictions = vec![json!({"bytesBase64Encoded": image, "mimeType": "image/png"}); n];
            axum::Json(json!({"predictions": predictions})).into_response()
        }
    }
}
