//! Bedrock's InvokeModel (`POST /model/{id}/invoke`, SigV4) for the
//! gateway's embeddings and images, in each model family's own body:
//! - embeddings: Titan (`amazon.titan-embed-*`, one text per call:
//!   `inputText`, `dimensions`; `inputTextTokenCount` is the usage) and Cohere
//!   on Bedrock (`cohere.embed-*`: `texts`, `input_type`);
//! - images: Titan and Nova Canvas (`taskType: TEXT_IMAGE`, `numberOfImages`,
//!   `width`/`height` from `size`, `quality`) and Stability (`prompt`, one
//!   image per call); the answer's `images` come back as `b64_json`.

use serde_json::{Map, Value, json};
use tollgate_plugin_sdk::openai::operations::{self, OperationShape};
use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Measured, Operation, OperationAnswer, OperationBody, OutboundRequest,
};

pub const SERVED: [Operation; 2] = [Operation::Embeddings, Operation::ImageGeneration];

/// The most texts one Cohere-on-Bedrock embed call takes.
const MAX_COHERE_TEXTS: usize = 96;

pub fn request(
    ctx: &CallContext,
    operation: Operation,
    body: &OperationBody,
) -> Result<(OutboundRequest, OperationShape), AdapterError> {
    let request = operations::json_request(body, "Bedrock")?;
    let model = ctx.upstream_model.as_str();
    let body = match operation {
        Operation::Embeddings if model.starts_with("cohere.") => {
            let texts = operations::input_texts(&request, "Cohere on Bedrock", MAX_COHERE_TEXTS)?;
            json!({"texts": texts, "input_type": "search_document"})
        }
        Operation::Embeddings => {
            let texts = operations::input_texts(&request, "Titan", 1)?;
            let mut body = json!({"inputText": texts[0]});
            if let Some(dimensions) = request.get("dimensions").and_then(Value::as_u64) {
                body["dimensions"] = Value::from(dimensions);
            }
            body
        }
        Operation::ImageGeneration => image_body(model, &request)?,
        other => {
            return Err(AdapterError::invalid_request(format!(
                "Bedrock does not serve {other:?}"
            )));
        }
    };
    let url = format!(
        "{}/model/{}/invoke",
        ctx.base_url.trim_end_matches('/'),
        crate::request::encode_segment(model)
    );
    let outbound = OutboundRequest {
        method: "POST".into(),
        url,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("accept".into(), "application/json".into()),
        ],
        body: serde_json::to_vec(&body).map_err(|e| AdapterError::internal(e.to_string()))?,
        auth: AuthSlot::AwsSigv4(crate::adapter::SIGNING_SERVICE.to_owned()),
    };
    let shape = OperationShape {
        base64: request.get("encoding_format").and_then(Value::as_str) == Some("base64"),
        ..OperationShape::default()
    };
    Ok((outbound, shape))
}

fn image_body(model: &str, request: &Map<String, Value>) -> Result<Value, AdapterError> {
    let prompt = request
        .get("prompt")
        .and_then(Value::as_str)
        .ok_or_else(|| AdapterError::invalid_request("'prompt' must be a string"))?;
    let n = request.get("n").and_then(Value::as_u64).unwrap_or(1);
    if model.starts_with("stability.") {
        if n != 1 {
            return Err(AdapterError::invalid_request(
                "Stability models on Bedrock make one image per request ('n': 1)",
            ));
        }
        return Ok(json!({"prompt": prompt}));
    }
    let mut config = json!({"numberOfImages": n});
    if let Some((w, h)) = request
        .get("size")
        .and_then(Value::as_str)
        .and_then(|s| s.split_once('x'))
    {
        let (w, h) = (
            w.parse::<u32>()
                .map_err(|_| AdapterError::invalid_request("'size' must be WxH"))?,
            h.parse::<u32>()
                .map_err(|_| AdapterError::invalid_request("'size' must be WxH"))?,
        );
        config["width"] = Value::from(w);
        config["height"] = Value::from(h);
    }
    if let Some(quality) = request.get("quality").and_then(Value::as_str) {
        config["quality"] = Value::from(if quality == "hd" || quality == "high" {
            "premium"
        } else {
            "standard"
        });
    }
    Ok(json!({"taskType": "TEXT_IMAGE", "textToImageParams": {"text": prompt}, "imageGenerationConfig": config}))
}

pub fn response(
    operation: Operation,
    shape: &OperationShape,
    body: Vec<u8>,
) -> Result<(OperationAnswer, Measured), AdapterError> {
    let answer: Value =
        serde_json::from_slice(&body).map_err(|_| AdapterError::internal("Bedrock returned invalid JSON"))?;
    let mut measured = operations::nothing_measured();
    let out = match operation {
        Operation::Embeddings => {
            let vectors: Vec<Vec<f32>> = match (answer.get("embedding"), answer.get("embeddings")) {
                (Some(one), _) => vec![operations::floats(one)],
                (None, Some(Value::Array(many))) => many.iter().map(operations::floats).collect(),
                (None, Some(Value::Object(by_type))) => by_type
                    .get("float")
                    .and_then(Value::as_array)
                    .map(|many| many.iter().map(operations::floats).collect())
                    .unwrap_or_default(),
                _ => return Err(AdapterError::internal("Bedrock's answer has no embedding")),
            };
            measured.input_tokens = answer["inputTextTokenCount"].as_u64();
            operations::embedding_list(&vectors, shape.base64, measured.input_tokens)
        }
        Operation::ImageGeneration => {
            let images: Vec<&str> = answer["images"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            measured.images = Some(u32::try_from(images.len()).unwrap_or(u32::MAX));
            let data: Vec<Value> = images.iter().map(|b64| json!({"b64_json": b64})).collect();
            json!({"created": 0, "data": data})
        }
        other => return Err(AdapterError::internal(format!("Bedrock does not serve {other:?}"))),
    };
    Ok((operations::json_answer(&out)?, measured))
}
