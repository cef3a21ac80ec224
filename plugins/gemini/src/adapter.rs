//! The `Adapter` implementation: wires the translation modules to the WIT
//! exchange and keeps the per-exchange state (usage, stream position).

use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, Event, OutboundRequest, ResponseHead, Usage};

use crate::stream::StreamState;
use crate::{error, request, response};

/// The header the host puts the API key in (Google AI Studio keys).
pub const API_KEY_HEADER: &str = "x-goog-api-key";

/// One exchange with the Gemini API.
pub struct Gemini {
    ctx: CallContext,
    body: Vec<u8>,
    /// Usage of a non-streamed answer.
    usage: Option<Usage>,
    stream: StreamState,
}

impl Adapter for Gemini {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        let stream = StreamState::new(&ctx);
        Gemini {
            ctx,
            body: openai_body,
            usage: None,
            stream,
        }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        let prepared = request::prepare(&self.ctx, &self.body)?;
        Ok(OutboundRequest {
            method: "POST".to_owned(),
            url: prepared.url,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: prepared.body,
            auth: AuthSlot::Header(API_KEY_HEADER.to_owned()),
        })
    }

    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let translated = response::completion(&self.ctx, &head, &body)?;
        self.usage = translated.usage;
        Ok(translated.body)
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        let mut out = Vec::with_capacity(events.len() + 1);
        for event in &events {
            self.stream.on_event(event, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.stream.finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.usage.or(self.stream.usage())
    }

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        error::classify(head.status, &head.headers, &body)
    }
}
