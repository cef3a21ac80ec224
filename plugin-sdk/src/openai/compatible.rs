//! [`Compatible`]: the [`Protocol`] of an upstream that already speaks OpenAI
//! chat completions. The request passes through with the upstream model
//! pinned, the gateway's fields removed and streamed usage asked for; the
//! answer passes through with its usage recorded and a provider-specific
//! top-level `provider` key removed.
//!
//! It is the whole of `plugins/openai-compatible` and the base that adapters
//! for OpenAI-like APIs with quirks (`plugins/azure-openai`) wrap: call its
//! functions from your own [`Protocol`] and change what differs.

use crate::json::{RawObject, is_empty_array};
use crate::stream::{ChunkMeta, EventData, event_data};
use crate::{
    AdapterError, AuthSlot, CallContext, Event, Exchange, OutboundRequest, Protocol, ResponseHead, StreamTranslator,
    Translated, Usage, openai,
};

/// The OpenAI chat-completions protocol: `POST {base_url}/chat/completions`,
/// bearer auth, SSE streaming.
pub struct Compatible;

impl Compatible {
    /// `base_url` without trailing slashes, plus `/chat/completions`.
    pub fn url(ctx: &CallContext) -> String {
        format!("{}/chat/completions", ctx.base_url.trim_end_matches('/'))
    }
}

impl Protocol for Compatible {
    type Shape = ();
    type Stream = CompatibleStream;

    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, ()), AdapterError> {
        let mut object = RawObject::parse_slice(openai_body)
            .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
        openai::prepare_object(&mut object, &ctx.upstream_model, ctx.stream, ctx.max_output_tokens)?;
        if let Some(partial) = &ctx.continuation {
            openai::append_continuation(&mut object, partial)?;
        }
        let accept = if ctx.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let request = OutboundRequest {
            method: "POST".to_owned(),
            url: Self::url(ctx),
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), accept.to_owned()),
            ],
            body: object.to_vec(),
            auth: AuthSlot::Bearer,
        };
        Ok((request, ()))
    }

    fn response(
        _ctx: &CallContext,
        _shape: &(),
        _head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<Translated, AdapterError> {
        let mut completion =
            RawObject::parse_slice(&body).map_err(|_| AdapterError::internal("upstream returned invalid JSON"))?;
        if !completion.contains_key("choices")
            && let Some(error) = openai::stream_error(&completion)
        {
            // A 2xx answer that is really an error.
            return Err(error);
        }
        let usage = completion.get_non_null("usage").and_then(openai::usage_from_raw);
        if !completion.remove("provider") {
            return Ok(Translated { body, usage });
        }
        Ok(Translated {
            body: completion.to_vec(),
            usage,
        })
    }

    fn stream(_ctx: &CallContext, _shape: &()) -> CompatibleStream {
        CompatibleStream::default()
    }

    #[cfg(feature = "operations")]
    fn operations() -> Vec<crate::Operation> {
        openai::operations::ALL.to_vec()
    }

    #[cfg(feature = "operations")]
    fn operation_request(
        ctx: &CallContext,
        operation: crate::Operation,
        body: &crate::OperationBody,
    ) -> Result<(OutboundRequest, openai::operations::OperationShape), AdapterError> {
        openai::operations::request(ctx, operation, body)
    }

    #[cfg(feature = "operations")]
    fn operation_response(
        operation: crate::Operation,
        shape: &openai::operations::OperationShape,
        head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<(crate::OperationAnswer, crate::Measured), AdapterError> {
        openai::operations::response(operation, shape, &head, body)
    }
}

/// The stream of an OpenAI-compatible upstream: chunks pass through minus
/// `provider`; a usage-only chunk (`choices: []` plus `usage`) is held back to
/// be the last one, else [`finish`](StreamTranslator::finish) synthesizes a
/// final chunk from the last chunk's id, model and `created`.
///
/// The answer is finished once a choice names its `finish_reason` or the
/// `[DONE]` sentinel arrives; a stream that ends before either was cut short
/// (a proxy that closes the connection cleanly looks exactly like the end of
/// the body), and `finish` says so.
#[derive(Debug, Default)]
pub struct CompatibleStream {
    usage: Option<Usage>,
    meta: ChunkMeta,
    /// The last usage-only chunk, held back so `finish` can return it.
    usage_chunk: Option<Vec<u8>>,
    done: bool,
    finish_reason_seen: bool,
}

impl CompatibleStream {
    /// Whether the upstream sent the `[DONE]` sentinel.
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// Whether the upstream said the answer is finished: a `finish_reason`
    /// or `[DONE]`.
    pub fn finished(&self) -> bool {
        self.done || self.finish_reason_seen
    }
}

/// Whether a chunk's `choices` name a non-null `finish_reason`.
fn names_finish_reason(chunk: &RawObject<'_>) -> bool {
    #[derive(serde::Deserialize)]
    struct Choice {
        #[serde(default)]
        finish_reason: Option<serde::de::IgnoredAny>,
    }
    matches!(
        chunk.parse_value::<Vec<Choice>>("choices"),
        Some(Ok(choices)) if choices.iter().any(|c| c.finish_reason.is_some())
    )
}

impl StreamTranslator for CompatibleStream {
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        let text = match event_data(&event.data)? {
            EventData::Empty => return Ok(()),
            EventData::Done => {
                self.done = true;
                return Ok(());
            }
            EventData::Json(text) => text,
        };
        let mut chunk =
            RawObject::parse(text).map_err(|_| AdapterError::internal("upstream sent an invalid JSON stream chunk"))?;
        if let Some(error) = openai::stream_error(&chunk) {
            return Err(error);
        }
        if event.name.as_deref() == Some("error") {
            // `event: error` with the error object as the whole payload.
            let detail = openai::ErrorDetail::from_body(text.as_bytes());
            return Err(openai::classify_detail(&detail));
        }
        self.meta.remember(&chunk);
        if !self.finish_reason_seen {
            self.finish_reason_seen = names_finish_reason(&chunk);
        }
        let usage = chunk.get_non_null("usage").and_then(openai::usage_from_raw);
        let usage_only = usage.is_some() && chunk.get("choices").is_some_and(is_empty_array);
        if usage.is_some() {
            self.usage = usage;
        }
        chunk.remove("provider");
        let chunk = chunk.to_vec();
        if usage_only {
            self.usage_chunk = Some(chunk);
        } else {
            out.push(chunk);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        if !self.finished() {
            return Err(AdapterError::cut_short(
                "the stream ended before a finish_reason or [DONE]",
            ));
        }
        if let Some(chunk) = self.usage_chunk.take() {
            return Ok(vec![chunk]);
        }
        if !self.meta.seen() {
            return Ok(Vec::new());
        }
        Ok(vec![self.meta.final_chunk()])
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
    }
}

impl Exchange<Compatible> {
    /// Whether the upstream sent the `[DONE]` sentinel.
    pub fn saw_done(&self) -> bool {
        self.stream().is_some_and(CompatibleStream::saw_done)
    }
}
