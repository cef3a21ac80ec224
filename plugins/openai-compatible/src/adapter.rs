//! The OpenAI-compatible adapter itself, free of exports.
//!
//! This file only refers to `tollgate_plugin_sdk`, never to `crate::`, so a
//! wrapping adapter can compile it into its own component with
//! `#[path = ".../plugins/openai-compatible/src/adapter.rs"] mod ...;` (see
//! `tests/plugins/misbehaving`). Linking this crate as an rlib into another
//! component does not work: its `export_adapter!` symbols would clash with the
//! wrapper's.

use tollgate_plugin_sdk::json::{RawObject, is_empty_array};
use tollgate_plugin_sdk::stream::{ChunkMeta, EventData, event_data};
use tollgate_plugin_sdk::{
    Adapter, AdapterError, AuthSlot, CallContext, Event, OutboundRequest, ResponseHead, Usage, openai,
};

/// Adapter state for one exchange with an OpenAI-compatible upstream.
pub struct OpenAiCompatible {
    ctx: CallContext,
    body: Vec<u8>,
    usage: Option<Usage>,
    meta: ChunkMeta,
    /// The last usage-only chunk (`choices: []` plus `usage`), held back so
    /// [`finish`](Adapter::finish) can return it as the final chunk.
    usage_chunk: Option<Vec<u8>>,
    done: bool,
}

impl OpenAiCompatible {
    /// The call context this exchange was created with.
    pub fn context(&self) -> &CallContext {
        &self.ctx
    }

    /// Whether the upstream sent the `[DONE]` sentinel.
    pub fn saw_done(&self) -> bool {
        self.done
    }

    /// `base_url` without trailing slashes, plus `/chat/completions`.
    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.ctx.base_url.trim_end_matches('/'))
    }

    /// Translate one stream event; `Ok(None)` when nothing is to be emitted.
    fn on_event(&mut self, event: &Event) -> Result<Option<Vec<u8>>, AdapterError> {
        let text = match event_data(&event.data)? {
            EventData::Empty => return Ok(None),
            EventData::Done => {
                self.done = true;
                return Ok(None);
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
        let usage = chunk.get_non_null("usage").and_then(openai::usage_from_raw);
        let usage_only = usage.is_some() && chunk.get("choices").is_some_and(is_empty_array);
        if usage.is_some() {
            self.usage = usage;
        }
        chunk.remove("provider");
        let out = chunk.to_vec();
        if usage_only {
            self.usage_chunk = Some(out);
            return Ok(None);
        }
        Ok(Some(out))
    }
}

impl Adapter for OpenAiCompatible {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        OpenAiCompatible {
            ctx,
            body: openai_body,
            usage: None,
            meta: ChunkMeta::default(),
            usage_chunk: None,
            done: false,
        }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        let stream = self.ctx.stream;
        let mut object = RawObject::parse_slice(&self.body)
            .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
        openai::prepare_object(
            &mut object,
            &self.ctx.upstream_model,
            stream,
            self.ctx.max_output_tokens,
        )?;
        if let Some(partial) = &self.ctx.continuation {
            openai::append_continuation(&mut object, partial)?;
        }
        let body = object.to_vec();
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        Ok(OutboundRequest {
            method: "POST".to_owned(),
            url: self.url(),
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), accept.to_owned()),
            ],
            body,
            auth: AuthSlot::Bearer,
        })
    }

    fn response(&mut self, _head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let mut completion =
            RawObject::parse_slice(&body).map_err(|_| AdapterError::internal("upstream returned invalid JSON"))?;
        if !completion.contains_key("choices")
            && let Some(error) = openai::stream_error(&completion)
        {
            // A 2xx answer that is really an error.
            return Err(error);
        }
        if let Some(usage) = completion.get_non_null("usage").and_then(openai::usage_from_raw) {
            self.usage = Some(usage);
        }
        if !completion.remove("provider") {
            return Ok(body);
        }
        Ok(completion.to_vec())
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        let mut out = Vec::with_capacity(events.len());
        for event in &events {
            if let Some(chunk) = self.on_event(event)? {
                out.push(chunk);
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
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

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        openai::classify_error(&head, &body)
    }
}
