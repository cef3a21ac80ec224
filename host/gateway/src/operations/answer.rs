//! An operation's answer: what it consumed (as the adapter measured it,
//! else as the request asked for), and the answer for the caller with its
//! provenance: a JSON answer gets `model`, `usage` (the counts billed, in
//! the endpoint's own shape; `usage.cost` is written exactly when rendered),
//! `provider` and `service`; a media answer (speech audio, a plain-text
//! transcript) goes out as it came, its provenance in headers.

use axum::body::Bytes;
use serde_json::{Map, Value};

use super::super::pipeline::{self, Completion, Media};
use super::super::provenance::Service;
use super::request::Request;
use tollgate_core::units::UnitCounts;
use tollgate_plugin_host::{Measured, Operation, OperationAnswer, Usage};
use tollgate_routing::catalog::ModelRoute;
use tollgate_web::error::ApiError;

pub enum Answer {
    Json(Map<String, Value>),
    Media { content_type: String, body: Bytes },
}

/// What an answer consumed: its tokens (when the upstream reported any),
/// its units, and whether every count is the upstream's or exact (else the
/// gateway billed what the request asked for, or the audio's bound).
pub struct Consumed {
    pub tokens: Option<Usage>,
    pub units: UnitCounts,
    pub reported: bool,
}

impl Answer {
    pub fn read(answer: OperationAnswer, route: &ModelRoute) -> Result<Self, ApiError> {
        let media = answer
            .content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if media != "application/json" {
            return Ok(Answer::Media {
                content_type: answer.content_type,
                body: Bytes::from(answer.body),
            });
        }
        serde_json::from_slice::<Map<String, Value>>(&answer.body)
            .map(Answer::Json)
            .map_err(|e| {
                ApiError::adapter_refused(&route.provider.adapter, format!("output is not a JSON object: {e}"))
            })
    }

    /// The answer for the caller.
    pub fn finish(self, operation: Operation, service: Service, consumed: &Consumed) -> pipeline::Answer {
        match self {
            Answer::Json(mut object) => {
                annotate(operation, &service, consumed, &mut object);
                pipeline::Answer::Whole(Completion {
                    object,
                    service,
                    native: false,
                })
            }
            Answer::Media { content_type, body } => pipeline::Answer::Media(Media {
                content_type,
                body,
                service,
            }),
        }
    }
}

impl Consumed {
    pub fn of(operation: Operation, measured: Option<&Measured>, request: &Request) -> Self {
        let asked = request.units.counts;
        let tokens = measured.and_then(|m| {
            Some(Usage {
                input: m.input_tokens?,
                output: m.output_tokens.unwrap_or(0),
                cache_read: None,
                cache_write: None,
                reasoning: None,
            })
        });
        let mut reported = true;
        let mut units = UnitCounts::default();
        match operation {
            Operation::ImageGeneration | Operation::ImageEdit => {
                // No more than were held for: a provider that makes extra
                // images is not billed past the request.
                units.images = match measured.and_then(|m| m.images) {
                    Some(made) => u64::from(made).min(asked.images),
                    None => {
                        reported = false;
                        asked.images
                    }
                };
            }
            // The characters sent are counted exactly by the gateway.
            Operation::Speech => {
                units.characters = measured
                    .and_then(|m| m.characters)
                    .unwrap_or(asked.characters)
                    .min(asked.characters)
            }
            Operation::Transcription | Operation::Translation => {
                units.audio_ms = match (measured.and_then(|m| m.audio_milliseconds), request.audio_ms) {
                    (Some(ms), _) => ms.min(asked.audio_ms),
                    (None, Some(ms)) => ms,
                    (None, None) => {
                        reported = false;
                        asked.audio_ms
                    }
                };
            }
            Operation::Rerank => {
                units.searches = measured
                    .and_then(|m| m.searches)
                    .map_or(asked.searches, |s| u64::from(s).min(asked.searches));
            }
            Operation::Embeddings | Operation::Moderation => {}
        }
        Consumed {
            tokens,
            units,
            reported,
        }
    }
}

/// `model` as asked, `usage` with the counts billed in the endpoint's shape,
/// `provider` and `service`.
fn annotate(operation: Operation, service: &Service, consumed: &Consumed, object: &mut Map<String, Value>) {
    object.insert("model".into(), Value::String(service.route.id.clone()));
    let mut usage = match object.remove("usage") {
        // Several attempts: the billed totals, not the last upstream's.
        Some(Value::Object(usage)) if service.trail.0.len() == 1 => usage,
        _ => Map::new(),
    };
    let billed = service.billed.usage;
    let (input, output) = billed.map_or((0, 0), |u| (u.input, u.output));
    match operation {
        Operation::Embeddings | Operation::Moderation => {
            usage.insert("prompt_tokens".into(), Value::from(input));
            if output > 0 {
                usage.insert("completion_tokens".into(), Value::from(output));
            }
            usage.insert("total_tokens".into(), Value::from(input + output));
        }
        Operation::ImageGeneration | Operation::ImageEdit => {
            usage.insert("input_tokens".into(), Value::from(input));
            usage.insert("output_tokens".into(), Value::from(output));
            usage.insert("total_tokens".into(), Value::from(input + output));
            usage.insert("images".into(), Value::from(consumed.units.images));
        }
        Operation::Transcription | Operation::Translation => {
            if consumed.units.audio_ms > 0 || consumed.tokens.is_none() {
                usage.insert("type".into(), Value::from("duration"));
                usage.insert("seconds".into(), Value::from(consumed.units.audio_ms as f64 / 1000.0));
            } else {
                usage.insert("type".into(), Value::from("tokens"));
                usage.insert("input_tokens".into(), Value::from(input));
                usage.insert("output_tokens".into(), Value::from(output));
                usage.insert("total_tokens".into(), Value::from(input + output));
            }
        }
        Operation::Rerank => {
            usage.insert("search_units".into(), Value::from(consumed.units.searches));
        }
        Operation::Speech => {}
    }
    object.insert("usage".into(), Value::Object(usage));
    object.insert("provider".into(), Value::String(service.route.provider.id.clone()));
    object.insert("service".into(), service.to_json());
}
