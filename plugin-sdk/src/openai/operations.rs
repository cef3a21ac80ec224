//! The model operations besides chat (WIT 0.3.0) against an OpenAI-compatible
//! upstream: each request goes to the operation's own endpoint under the
//! base URL with the upstream model set and the gateway's fields removed, and
//! the answer comes back in OpenAI's shape with what it consumed
//! ([`Measured`]) read from it.
//!
//! What each answer reports, and so what the host can bill exactly:
//! - embeddings and moderations: `usage.prompt_tokens` (moderations are
//!   free at OpenAI; a priced moderation model is billed by its tokens);
//! - images: one image per `data` item, and `usage` tokens where the model
//!   reports them (`gpt-image-1`);
//! - speech: the characters of `input`, counted from the request;
//! - transcription and translation: `usage` (tokens, or `seconds` of a
//!   `duration` usage), else `duration` of a verbose answer;
//! - rerank: `meta.billed_units.search_units`, else one search.

use serde_json::Value;

use crate::json::RawObject;
use crate::{
    AdapterError, AuthSlot, CallContext, FormPart, Measured, Operation, OperationAnswer, OperationBody,
    OutboundRequest, ResponseHead, openai,
};

/// Every operation an OpenAI-compatible upstream may serve.
pub const ALL: [Operation; 8] = [
    Operation::Embeddings,
    Operation::ImageGeneration,
    Operation::ImageEdit,
    Operation::Speech,
    Operation::Transcription,
    Operation::Translation,
    Operation::Moderation,
    Operation::Rerank,
];

/// The endpoint path of `operation`, under the base URL.
pub fn path(operation: Operation) -> &'static str {
    match operation {
        Operation::Embeddings => "embeddings",
        Operation::ImageGeneration => "images/generations",
        Operation::ImageEdit => "images/edits",
        Operation::Speech => "audio/speech",
        Operation::Transcription => "audio/transcriptions",
        Operation::Translation => "audio/translations",
        Operation::Moderation => "moderations",
        Operation::Rerank => "rerank",
    }
}

/// What the answer's translation needs to know about the request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperationShape {
    /// Characters of a speech request's `input`.
    pub characters: Option<u64>,
    /// The caller asked for base64 embeddings (`encoding_format`), for a
    /// protocol that answers floats only and encodes them itself.
    pub base64: bool,
}

/// The upstream request for `operation`: the caller's JSON object or form,
/// with `model` set to the upstream's and the gateway's fields removed.
pub fn request(
    ctx: &CallContext,
    operation: Operation,
    body: &OperationBody,
) -> Result<(OutboundRequest, OperationShape), AdapterError> {
    let url = format!("{}/{}", ctx.base_url.trim_end_matches('/'), path(operation));
    let mut shape = OperationShape::default();
    let (content_type, body) = match body {
        OperationBody::Json(json) => {
            let mut object = RawObject::parse_slice(json)
                .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
            for field in openai::GATEWAY_FIELDS {
                object.remove(field);
            }
            object
                .insert("model", &ctx.upstream_model)
                .map_err(|e| AdapterError::internal(e.to_string()))?;
            if operation == Operation::Speech {
                let input: Option<String> = object.parse_value("input").and_then(Result::ok);
                shape.characters = input.map(|text| text.chars().count() as u64);
            }
            ("application/json".to_owned(), object.to_vec())
        }
        OperationBody::Form(parts) => {
            let boundary = format!("tollgate-{}-{}", ctx.request_id, ctx.attempt);
            let form = multipart(parts, &ctx.upstream_model, &boundary);
            (format!("multipart/form-data; boundary={boundary}"), form)
        }
    };
    let request = OutboundRequest {
        method: "POST".to_owned(),
        url,
        headers: vec![("content-type".to_owned(), content_type)],
        body,
        auth: AuthSlot::Bearer,
    };
    Ok((request, shape))
}

/// A form with `model` replaced by `upstream_model` (added if absent) and the
/// gateway's fields dropped, encoded as `multipart/form-data`.
pub fn multipart(parts: &[FormPart], upstream_model: &str, boundary: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.data.len() + 160).sum::<usize>() + 200);
    let mut model_written = false;
    for part in parts {
        if openai::GATEWAY_FIELDS.contains(&part.name.as_str()) {
            continue;
        }
        let data: &[u8] = if part.name == "model" && part.filename.is_none() {
            if model_written {
                continue;
            }
            model_written = true;
            upstream_model.as_bytes()
        } else {
            &part.data
        };
        write_part(&mut out, boundary, part, data);
    }
    if !model_written {
        let model = FormPart {
            name: "model".into(),
            filename: None,
            content_type: None,
            data: Vec::new(),
        };
        write_part(&mut out, boundary, &model, upstream_model.as_bytes());
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    out
}

fn write_part(out: &mut Vec<u8>, boundary: &str, part: &FormPart, data: &[u8]) {
    out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
    // Quotes and line breaks cannot be escaped in a disposition: dropped.
    let clean = |s: &str| s.replace(['"', '\r', '\n'], "");
    let mut disposition = format!("Content-Disposition: form-data; name=\"{}\"", clean(&part.name));
    if let Some(filename) = &part.filename {
        disposition.push_str(&format!("; filename=\"{}\"", clean(filename)));
    }
    out.extend_from_slice(disposition.as_bytes());
    out.extend_from_slice(b"\r\n");
    if let Some(content_type) = &part.content_type {
        out.extend_from_slice(format!("Content-Type: {}\r\n", clean(content_type)).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A whole 2xx answer of `operation`: passed through (a JSON answer minus a
/// provider-specific top-level `provider` key), with what it consumed.
pub fn response(
    operation: Operation,
    shape: &OperationShape,
    head: &ResponseHead,
    body: Vec<u8>,
) -> Result<(OperationAnswer, Measured), AdapterError> {
    let content_type = openai::header(&head.headers, "content-type")
        .unwrap_or("application/json")
        .to_owned();
    let mut measured = Measured {
        characters: shape.characters,
        ..nothing_measured()
    };
    let is_json = content_type.starts_with("application/json");
    if operation == Operation::Speech || !is_json {
        // Audio, or a transcript asked for as text, SRT or VTT.
        return Ok((OperationAnswer { content_type, body }, measured));
    }
    let answer: Value =
        serde_json::from_slice(&body).map_err(|_| AdapterError::internal("upstream returned invalid JSON"))?;
    let Value::Object(mut answer) = answer else {
        return Err(AdapterError::internal("upstream answer is not a JSON object"));
    };
    if answer.contains_key("error") && !answer.contains_key("data") && !answer.contains_key("results") {
        let raw =
            RawObject::parse_slice(&body).map_err(|_| AdapterError::internal("upstream returned invalid JSON"))?;
        if let Some(error) = openai::stream_error(&raw) {
            return Err(error);
        }
    }
    let usage = answer.get("usage");
    let tokens = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
    match operation {
        Operation::Embeddings | Operation::Moderation => {
            measured.input_tokens = tokens("prompt_tokens").or_else(|| tokens("input_tokens"));
        }
        Operation::ImageGeneration | Operation::ImageEdit => {
            let made = answer.get("data").and_then(Value::as_array).map_or(0, Vec::len);
            measured.images = Some(u32::try_from(made).unwrap_or(u32::MAX));
            measured.input_tokens = tokens("input_tokens");
            measured.output_tokens = tokens("output_tokens");
        }
        Operation::Transcription | Operation::Translation => {
            let seconds = tokens("seconds")
                .map(|s| s as f64)
                .or_else(|| usage.and_then(|u| u.get("seconds")).and_then(Value::as_f64))
                .or_else(|| answer.get("duration").and_then(Value::as_f64));
            measured.audio_milliseconds = seconds.map(|s| (s * 1000.0).ceil() as u64);
            measured.input_tokens = tokens("input_tokens");
            measured.output_tokens = tokens("output_tokens");
        }
        Operation::Rerank => {
            let units = answer
                .get("meta")
                .and_then(|m| m.get("billed_units"))
                .and_then(|b| b.get("search_units"))
                .and_then(Value::as_u64)
                .unwrap_or(1);
            measured.searches = Some(u32::try_from(units).unwrap_or(u32::MAX));
        }
        Operation::Speech => unreachable!("speech answers are audio, handled above"),
    }
    let body = if answer.remove("provider").is_some() {
        serde_json::to_vec(&answer).map_err(|e| AdapterError::internal(e.to_string()))?
    } else {
        body
    };
    Ok((OperationAnswer { content_type, body }, measured))
}

/// A JSON operation's body as an object, for a protocol that takes no
/// forms (`provider` names it in the refusal).
pub fn json_request(body: &OperationBody, provider: &str) -> Result<serde_json::Map<String, Value>, AdapterError> {
    let OperationBody::Json(json) = body else {
        return Err(AdapterError::invalid_request(format!(
            "{provider} takes this operation as JSON, not a form"
        )));
    };
    serde_json::from_slice(json)
        .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))
}

/// Nothing measured yet: every count unset.
pub fn nothing_measured() -> Measured {
    Measured {
        input_tokens: None,
        output_tokens: None,
        images: None,
        characters: None,
        audio_milliseconds: None,
        searches: None,
    }
}

/// A JSON object as an operation's answer.
pub fn json_answer(answer: &Value) -> Result<OperationAnswer, AdapterError> {
    Ok(OperationAnswer {
        content_type: "application/json".to_owned(),
        body: serde_json::to_vec(answer).map_err(|e| AdapterError::internal(e.to_string()))?,
    })
}

/// An embeddings request's `input` as texts, for a protocol that embeds
/// text only: `provider` names it in the error for token ids; between 1 and
/// `max` texts.
pub fn input_texts<'a>(
    request: &'a serde_json::Map<String, Value>,
    provider: &str,
    max: usize,
) -> Result<Vec<&'a str>, AdapterError> {
    let texts: Vec<&str> = match request.get("input") {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().ok_or_else(|| {
                    AdapterError::invalid_request(format!(
                        "{provider} embeds text: 'input' must be strings, not token ids"
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(AdapterError::invalid_request(
                "'input' must be a string or an array of strings",
            ));
        }
    };
    if texts.is_empty() || texts.len() > max {
        return Err(AdapterError::invalid_request(format!(
            "{provider} embeds 1 to {max} texts per request"
        )));
    }
    Ok(texts)
}

/// Vectors as OpenAI's embeddings list (`object: list`, `data[]` with
/// `index` and `embedding`), each as floats or, when `base64`, as the
/// little-endian f32 bytes in standard base64, which the SDKs decode.
pub fn embedding_list(vectors: &[Vec<f32>], base64: bool, usage_tokens: Option<u64>) -> Value {
    use base64::Engine;
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(index, floats)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                serde_json::json!(floats)
            };
            serde_json::json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    // The gateway sets `model` to the id the caller asked for.
    let mut list = serde_json::json!({"object": "list", "data": data, "model": ""});
    if let Some(tokens) = usage_tokens {
        list["usage"] = serde_json::json!({"prompt_tokens": tokens, "total_tokens": tokens});
    }
    list
}

/// A JSON array of numbers as f32s (anything else is skipped).
pub fn floats(value: &Value) -> Vec<f32> {
    value
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_f64).map(|x| x as f32).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> CallContext {
        CallContext {
            request_id: "req_1".into(),
            upstream_model: "text-embedding-3-small".into(),
            base_url: "https://api.example.com/v1/".into(),
            stream: false,
            attempt: 0,
            max_output_tokens: None,
            continuation: None,
        }
    }

    fn head(content_type: &str) -> ResponseHead {
        ResponseHead {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
        }
    }

    #[test]
    fn a_json_request_gets_the_upstream_model_and_loses_the_gateways_fields() {
        let body = OperationBody::Json(
            br#"{"model":"openai/x","input":["a","b"],"models":["y"],"encoding_format":"base64"}"#.to_vec(),
        );
        let (request, _) = request(&ctx(), Operation::Embeddings, &body).unwrap();
        assert_eq!(request.url, "https://api.example.com/v1/embeddings");
        let sent: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(sent["model"], "text-embedding-3-small");
        assert_eq!(sent["encoding_format"], "base64");
        assert!(sent.get("models").is_none());
    }

    #[test]
    fn a_form_is_rebuilt_with_the_upstream_model() {
        let parts = vec![
            FormPart {
                name: "model".into(),
                filename: None,
                content_type: None,
                data: b"openai/whisper-1".to_vec(),
            },
            FormPart {
                name: "file".into(),
                filename: Some("a\"b.wav".into()),
                content_type: Some("audio/wav".into()),
                data: b"RIFF....".to_vec(),
            },
        ];
        let form = String::from_utf8(multipart(&parts, "whisper-1", "XX")).unwrap();
        assert!(form.contains("name=\"model\"\r\n\r\nwhisper-1\r\n"), "{form}");
        assert!(
            form.contains("filename=\"ab.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF....\r\n"),
            "{form}"
        );
        assert!(form.ends_with("--XX--\r\n"));
    }

    #[test]
    fn embeddings_encode_as_floats_or_base64() {
        let list = embedding_list(&[vec![1.0, 0.0]], true, Some(2));
        assert_eq!(list["data"][0]["embedding"], "AACAPwAAAAA=");
        assert_eq!(list["usage"]["prompt_tokens"], 2);
        let list = embedding_list(&[vec![1.0, 0.5]], false, None);
        assert_eq!(list["data"][0]["embedding"], serde_json::json!([1.0, 0.5]));
        let request: serde_json::Map<String, Value> = serde_json::from_str(r#"{"input":[1,2]}"#).unwrap();
        assert!(input_texts(&request, "Acme", 4).is_err());
    }

    #[test]
    fn answers_report_what_they_consumed() {
        let shape = OperationShape::default();
        let (_, measured) = response(
            Operation::Embeddings,
            &shape,
            &head("application/json"),
            br#"{"object":"list","data":[],"usage":{"prompt_tokens":7,"total_tokens":7}}"#.to_vec(),
        )
        .unwrap();
        assert_eq!(measured.input_tokens, Some(7));
        let (_, measured) = response(
            Operation::ImageGeneration,
            &shape,
            &head("application/json"),
            br#"{"created":1,"data":[{"b64_json":"x"},{"b64_json":"y"}]}"#.to_vec(),
        )
        .unwrap();
        assert_eq!(measured.images, Some(2));
        let (_, measured) = response(
            Operation::Transcription,
            &shape,
            &head("application/json"),
            br#"{"text":"hi","usage":{"type":"duration","seconds":3}}"#.to_vec(),
        )
        .unwrap();
        assert_eq!(measured.audio_milliseconds, Some(3000));
        let speech = OperationShape {
            characters: Some(11),
            ..OperationShape::default()
        };
        let (answer, measured) = response(Operation::Speech, &speech, &head("audio/mpeg"), b"ID3...".to_vec()).unwrap();
        assert_eq!(
            (answer.content_type.as_str(), measured.characters),
            ("audio/mpeg", Some(11))
        );
    }
}
