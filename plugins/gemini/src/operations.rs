//! Gemini's embeddings and image generation as the gateway's operations:
//! - embeddings: `input` (a string or strings) → `POST
//!   {model}:batchEmbedContents`, one request per text, `dimensions` as
//!   `outputDimensionality`; the `embeddings[].values` back as OpenAI's list
//!   (base64 when asked). Gemini reports no token count for embeddings: the
//!   gateway bills its documented estimate.
//! - images: an Imagen model (`imagen-…`) → `POST {model}:predict` with
//!   `sampleCount`; a Gemini image model → `generateContent` with
//!   `responseModalities: ["IMAGE"]` (one image). The images come back as
//!   `b64_json`, and their count is what is billed.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::operations::{self, OperationShape};
use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Measured, Operation, OperationAnswer, OperationBody, OutboundRequest,
};

use crate::adapter::API_KEY_HEADER;

pub const SERVED: [Operation; 2] = [Operation::Embeddings, Operation::ImageGeneration];

/// The most texts one `batchEmbedContents` call takes.
const MAX_TEXTS: usize = 100;

pub fn request(
    ctx: &CallContext,
    operation: Operation,
    body: &OperationBody,
) -> Result<(OutboundRequest, OperationShape), AdapterError> {
    let request = operations::json_request(body, "Gemini")?;
    let model = crate::request::model_path(ctx)?;
    let (action, body) = match operation {
        Operation::Embeddings => ("batchEmbedContents", embed_body(&model, &request)?),
        Operation::ImageGeneration => image_body(&model, &request)?,
        other => {
            return Err(AdapterError::invalid_request(format!(
                "Gemini does not serve {other:?}"
            )));
        }
    };
    let (base, query) = ctx.base_url.split_once('?').unwrap_or((&ctx.base_url, ""));
    let mut url = format!("{}/{model}:{action}", base.trim_end_matches('/'));
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    let request_out = OutboundRequest {
        method: "POST".into(),
        url,
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::to_vec(&body).map_err(|e| AdapterError::internal(e.to_string()))?,
        auth: AuthSlot::Header(API_KEY_HEADER.to_owned()),
    };
    let shape = OperationShape {
        base64: request.get("encoding_format").and_then(Value::as_str) == Some("base64"),
        ..OperationShape::default()
    };
    Ok((request_out, shape))
}

fn embed_body(model: &str, request: &Map<String, Value>) -> Result<Value, AdapterError> {
    let texts = operations::input_texts(request, "Gemini", MAX_TEXTS)?;
    let dimensions = request.get("dimensions").and_then(Value::as_u64);
    let requests: Vec<Value> = texts
        .iter()
        .map(|text| {
            let mut one = json!({"model": model, "content": {"parts": [{"text": text}]}});
            if let Some(dimensions) = dimensions {
                one["outputDimensionality"] = Value::from(dimensions);
            }
            one
        })
        .collect();
    Ok(json!({"requests": requests}))
}

fn image_body(model: &str, request: &Map<String, Value>) -> Result<(&'static str, Value), AdapterError> {
    let prompt = request
        .get("prompt")
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::invalid_request("'prompt' must be a string"))?;
    let n = request.get("n").and_then(Value::as_u64).unwrap_or(1);
    if model.starts_with("models/imagen") {
        let mut parameters = json!({"sampleCount": n});
        if let Some(ratio) = request.get("size").and_then(Value::as_str).and_then(aspect_ratio) {
            parameters["aspectRatio"] = Value::from(ratio);
        }
        return Ok((
            "predict",
            json!({"instances": [{"prompt": prompt}], "parameters": parameters}),
        ));
    }
    if n != 1 {
        return Err(AdapterError::invalid_request(
            "Gemini's image models make one image per request ('n': 1)",
        ));
    }
    Ok((
        "generateContent",
        json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}],
               "generationConfig": {"responseModalities": ["IMAGE"]}}),
    ))
}

/// OpenAI's `WxH` as one of Imagen's aspect ratios.
fn aspect_ratio(size: &str) -> Option<&'static str> {
    let (w, h) = size.split_once('x')?;
    let (w, h) = (w.parse::<f64>().ok()?, h.parse::<f64>().ok()?);
    let ratio = w / h;
    [
        ("1:1", 1.0),
        ("4:3", 4.0 / 3.0),
        ("3:4", 0.75),
        ("16:9", 16.0 / 9.0),
        ("9:16", 9.0 / 16.0),
    ]
    .into_iter()
    .min_by(|a, b| (a.1 - ratio).abs().total_cmp(&(b.1 - ratio).abs()))
    .map(|(name, _)| name)
}

pub fn response(
    operation: Operation,
    shape: &OperationShape,
    body: Vec<u8>,
) -> Result<(OperationAnswer, Measured), AdapterError> {
    let answer: Value =
        serde_json::from_slice(&body).map_err(|_| AdapterError::internal("Gemini returned invalid JSON"))?;
    let mut measured = operations::nothing_measured();
    let out = match operation {
        Operation::Embeddings => {
            let embeddings = answer["embeddings"]
                .as_array()
                .ok_or_else(|| AdapterError::internal("Gemini's answer has no embeddings"))?;
            let vectors: Vec<Vec<f32>> = embeddings.iter().map(|e| operations::floats(&e["values"])).collect();
            operations::embedding_list(&vectors, shape.base64, None)
        }
        Operation::ImageGeneration => {
            let images: Vec<&str> = match answer.get("predictions") {
                Some(predictions) => predictions
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["bytesBase64Encoded"].as_str())
                    .collect(),
                None => answer["candidates"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|c| c["content"]["parts"].as_array().into_iter().flatten())
                    .filter_map(|part| part["inlineData"]["data"].as_str())
                    .collect(),
            };
            measured.images = Some(u32::try_from(images.len()).unwrap_or(u32::MAX));
            let data: Vec<Value> = images.iter().map(|b64| json!({"b64_json": b64})).collect();
            json!({"created": 0, "data": data})
        }
        other => return Err(AdapterError::internal(format!("Gemini does not serve {other:?}"))),
    };
    Ok((operations::json_answer(&out)?, measured))
}
