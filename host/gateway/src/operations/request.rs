//! What the gateway reads of an operation's request, JSON or form: the
//! candidates (`model`, then `models`/`fallbacks`), the routing preferences,
//! and what the request asks for in its operation's units, which the wallet
//! holds for: images (`n` of a `quality` and `size`), characters of speech,
//! seconds of audio (from the upload), searches. Everything else reaches the
//! adapter as sent.

use serde_json::Value;

use super::super::billing::UnitDemand;
use super::super::envelope::MAX_CANDIDATES;
use super::name;
use tollgate_plugin_host::{FormPart, Operation, OperationBody};
use tollgate_web::error::ApiError;

/// Most images one request may ask for (OpenAI's own limit).
const MAX_IMAGES: u64 = 10;
/// Documents per search, as Cohere bills a rerank.
const DOCUMENTS_PER_SEARCH: u64 = 100;
/// The slowest audio the worst case assumes when the upload does not say its
/// length (a WAV does): 6 kbit/s, below any speech codec's usual rate, so
/// the hold covers any file of that size.
const WORST_AUDIO_BYTES_PER_SECOND: u64 = 750;

/// The request, as far as the gateway reads it.
pub struct Request {
    pub model: String,
    pub fallbacks: Vec<String>,
    /// The `provider` preferences object, as written.
    pub provider: Option<Box<serde_json::value::RawValue>>,
    /// The bytes the worst case counts as input tokens.
    pub input_bytes: usize,
    pub units: UnitDemand,
    /// The length of the uploaded audio, when its header says it (WAV):
    /// what is billed if the provider reports none.
    pub audio_ms: Option<u64>,
}

impl Request {
    pub fn read(operation: Operation, body: &OperationBody) -> Result<Self, ApiError> {
        match body {
            OperationBody::Json(json) => Self::json(operation, json),
            OperationBody::Form(parts) => Self::form(operation, parts),
        }
    }

    fn json(operation: Operation, json: &[u8]) -> Result<Self, ApiError> {
        if json.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::invalid_request("The request body must be a JSON object."));
        }
        let body: serde_json::Map<String, Value> = serde_json::from_slice(json).map_err(|e| {
            ApiError::invalid_request(format!(
                "The request body is not valid JSON for {}: {e}",
                name(operation)
            ))
        })?;
        let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_string);
        let required = |key: &'static str| match body.get(key) {
            None | Some(Value::Null) => Err(ApiError::invalid_request(format!("'{key}' is required.")).with_param(key)),
            Some(value) => Ok(value),
        };
        let mut units = UnitDemand::default();
        match operation {
            Operation::Embeddings | Operation::Moderation => {
                required("input")?;
            }
            Operation::ImageGeneration => {
                required("prompt")?;
                units.counts.images = image_count(body.get("n"))?;
                units.quality = text("quality");
                units.size = text("size");
            }
            Operation::Speech => {
                let input = required("input")?
                    .as_str()
                    .ok_or_else(|| ApiError::invalid_request("'input' must be a string.").with_param("input"))?;
                units.counts.characters = input.chars().count() as u64;
            }
            Operation::Rerank => {
                required("query")?;
                let documents = required("documents")?.as_array().ok_or_else(|| {
                    ApiError::invalid_request("'documents' must be an array.").with_param("documents")
                })?;
                units.counts.searches = (documents.len() as u64).div_ceil(DOCUMENTS_PER_SEARCH).max(1);
            }
            Operation::ImageEdit | Operation::Transcription | Operation::Translation => {
                return Err(ApiError::invalid_request(format!(
                    "{} takes a multipart/form-data upload, not JSON.",
                    name(operation)
                )));
            }
        }
        let fallbacks = match (body.get("models"), body.get("fallbacks")) {
            (Some(_), Some(_)) => {
                return Err(
                    ApiError::invalid_request("Send either 'models' or 'fallbacks', not both.").with_param("models"),
                );
            }
            (Some(list), None) | (None, Some(list)) => strings(list)?,
            (None, None) => Vec::new(),
        };
        let provider = body
            .get("provider")
            .map(|p| serde_json::value::to_raw_value(p).expect("a JSON value serializes"));
        Self::candidates(text("model"), fallbacks, provider, json.len(), units, None)
    }

    fn form(operation: Operation, parts: &[FormPart]) -> Result<Self, ApiError> {
        let field = |key: &str| {
            parts
                .iter()
                .find(|p| p.name == key && p.filename.is_none())
                .map(|p| String::from_utf8_lossy(&p.data).into_owned())
        };
        let mut units = UnitDemand::default();
        let mut audio_ms = None;
        let files: Vec<&FormPart> = parts.iter().filter(|p| p.filename.is_some()).collect();
        match operation {
            Operation::ImageEdit => {
                if !files.iter().any(|p| p.name == "image" || p.name == "image[]") {
                    return Err(ApiError::invalid_request("'image' is required.").with_param("image"));
                }
                if field("prompt").is_none() {
                    return Err(ApiError::invalid_request("'prompt' is required.").with_param("prompt"));
                }
                let n = field("n").map(|n| Value::String(n));
                units.counts.images = image_count(n.as_ref())?;
                units.quality = field("quality");
                units.size = field("size");
            }
            Operation::Transcription | Operation::Translation => {
                let file = files
                    .iter()
                    .find(|p| p.name == "file")
                    .ok_or_else(|| ApiError::invalid_request("'file' is required.").with_param("file"))?;
                audio_ms = wav_duration_ms(&file.data);
                units.counts.audio_ms =
                    audio_ms.unwrap_or_else(|| (file.data.len() as u64 * 1000).div_ceil(WORST_AUDIO_BYTES_PER_SECOND));
            }
            _ => {
                return Err(ApiError::invalid_request(format!(
                    "{} takes a JSON body, not a form.",
                    name(operation)
                )));
            }
        }
        // A form lists fallbacks as repeated `models` fields (or one
        // comma-separated field).
        let fallbacks: Vec<String> = parts
            .iter()
            .filter(|p| (p.name == "models" || p.name == "models[]") && p.filename.is_none())
            .flat_map(|p| {
                String::from_utf8_lossy(&p.data)
                    .split(',')
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty())
                    .collect::<Vec<_>>()
            })
            .collect();
        let bytes = parts
            .iter()
            .filter(|p| p.filename.is_none())
            .map(|p| p.data.len() + p.name.len())
            .sum();
        Self::candidates(field("model"), fallbacks, None, bytes, units, audio_ms)
    }

    fn candidates(
        model: Option<String>,
        fallbacks: Vec<String>,
        provider: Option<Box<serde_json::value::RawValue>>,
        input_bytes: usize,
        units: UnitDemand,
        audio_ms: Option<u64>,
    ) -> Result<Self, ApiError> {
        let model = model
            .filter(|m| !m.is_empty())
            .ok_or_else(|| ApiError::invalid_request("'model' is required.").with_param("model"))?;
        if fallbacks.len() + 1 > MAX_CANDIDATES {
            let message = format!("At most {} fallback models may follow 'model'.", MAX_CANDIDATES - 1);
            return Err(ApiError::invalid_request(message).with_param("models"));
        }
        Ok(Request {
            model,
            fallbacks,
            provider,
            input_bytes,
            units,
            audio_ms,
        })
    }
}

fn strings(list: &Value) -> Result<Vec<String>, ApiError> {
    let invalid = || ApiError::invalid_request("'models' must be an array of model ids.").with_param("models");
    list.as_array()
        .ok_or_else(invalid)?
        .iter()
        .map(|m| m.as_str().map(str::to_string).ok_or_else(invalid))
        .collect()
}

/// `n`: 1 by default, at most [`MAX_IMAGES`].
fn image_count(n: Option<&Value>) -> Result<u64, ApiError> {
    let invalid =
        || ApiError::invalid_request(format!("'n' must be a whole number from 1 to {MAX_IMAGES}.")).with_param("n");
    let n = match n {
        None | Some(Value::Null) => 1,
        Some(Value::Number(n)) => n.as_u64().ok_or_else(invalid)?,
        Some(Value::String(n)) => n.trim().parse().map_err(|_| invalid())?,
        Some(_) => return Err(invalid()),
    };
    if !(1..=MAX_IMAGES).contains(&n) {
        return Err(invalid());
    }
    Ok(n)
}

/// The length of a RIFF/WAVE file from its `fmt ` byte rate and `data` size,
/// rounded up to the millisecond; `None` for anything else.
pub fn wav_duration_ms(bytes: &[u8]) -> Option<u64> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return None;
    }
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    let mut at = 12;
    let mut byte_rate = None;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32_at(at + 4)? as usize;
        match id {
            b"fmt " => byte_rate = u32_at(at + 16).filter(|rate| *rate > 0),
            b"data" => {
                // A streamed WAV may say 0 or 0xFFFFFFFF: the bytes present.
                let size = if size == 0 || size == u32::MAX as usize {
                    bytes.len() - at - 8
                } else {
                    size
                };
                return Some((size as u64 * 1000).div_ceil(u64::from(byte_rate?)));
            }
            _ => {}
        }
        at = at.checked_add(8 + size + (size & 1))?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wav(seconds: u32, rate: u32) -> Vec<u8> {
        let data = seconds * rate * 2;
        let mut out = b"RIFF".to_vec();
        out.extend((36 + data).to_le_bytes());
        out.extend(b"WAVEfmt ");
        out.extend(16u32.to_le_bytes());
        out.extend(1u16.to_le_bytes()); // PCM
        out.extend(1u16.to_le_bytes()); // mono
        out.extend(rate.to_le_bytes());
        out.extend((rate * 2).to_le_bytes()); // byte rate
        out.extend(2u16.to_le_bytes());
        out.extend(16u16.to_le_bytes());
        out.extend(b"data");
        out.extend(data.to_le_bytes());
        out.extend(vec![0u8; data as usize]);
        out
    }

    #[test]
    fn a_wav_says_its_length_and_anything_else_is_bounded() {
        assert_eq!(wav_duration_ms(&wav(3, 16_000)), Some(3_000));
        assert_eq!(wav_duration_ms(b"ID3\x04not a wav"), None);
        let parts = vec![
            FormPart {
                name: "model".into(),
                filename: None,
                content_type: None,
                data: b"acme/whisper".to_vec(),
            },
            FormPart {
                name: "file".into(),
                filename: Some("a.mp3".into()),
                content_type: Some("audio/mpeg".into()),
                data: vec![0; 1500],
            },
        ];
        let request = Request::read(Operation::Transcription, &OperationBody::Form(parts)).unwrap();
        assert_eq!(
            request.units.counts.audio_ms, 2_000,
            "1,500 bytes at 750 bytes a second"
        );
        assert_eq!(request.audio_ms, None);
    }

    #[test]
    fn images_and_searches_are_counted_from_the_request() {
        let body = br#"{"model":"m","prompt":"a cat","n":3,"size":"1024x1024","quality":"hd"}"#;
        let request = Request::read(Operation::ImageGeneration, &OperationBody::Json(body.to_vec())).unwrap();
        assert_eq!(request.units.counts.images, 3);
        assert_eq!(request.units.size.as_deref(), Some("1024x1024"));
        let many = br#"{"model":"m","prompt":"x","n":11}"#;
        assert!(Request::read(Operation::ImageGeneration, &OperationBody::Json(many.to_vec())).is_err());
        let docs: Vec<String> = (0..150).map(|i| format!("\"d{i}\"")).collect();
        let body = format!(r#"{{"model":"m","query":"q","documents":[{}]}}"#, docs.join(","));
        let request = Request::read(Operation::Rerank, &OperationBody::Json(body.into_bytes())).unwrap();
        assert_eq!(request.units.counts.searches, 2);
        let speech = r#"{"model":"m","input":"héllo","voice":"alloy"}"#;
        let request = Request::read(Operation::Speech, &OperationBody::Json(speech.as_bytes().to_vec())).unwrap();
        assert_eq!(request.units.counts.characters, 5);
    }
}
