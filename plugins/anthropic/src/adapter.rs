//! The `Adapter` implementation: wires the translation modules to the WIT
//! exchange and keeps the per-exchange state (usage, stream position).

use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, Event, OutboundRequest, ResponseHead, Usage};

use crate::request::{self, Prepared};
use crate::stream::StreamState;
use crate::{error, response};

/// The header the host puts the API key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// The Messages API version this adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// One exchange with the Messages API.
pub struct Anthropic {
    ctx: CallContext,
    body: Vec<u8>,
    /// What the answer translation needs to know about the request, set by
    /// [`Adapter::request`].
    shape: request::Shape,
    /// Usage of a non-streamed answer.
    usage: Option<Usage>,
    stream: Option<StreamState>,
}

impl Adapter for Anthropic {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        Anthropic {
            ctx,
            body: openai_body,
            shape: request::Shape::default(),
            usage: None,
            stream: None,
        }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        let Prepared { url, body, shape } = request::prepare(&self.ctx, &self.body)?;
        self.shape = shape;
        Ok(OutboundRequest {
            method: "POST".to_owned(),
            url,
            headers: vec![
                ("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body,
            auth: AuthSlot::Header(API_KEY_HEADER.to_owned()),
        })
    }

    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let translated = response::completion(&self.ctx, &self.shape, &head, &body)?;
        self.usage = translated.usage;
        Ok(translated.body)
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        let stream = self
            .stream
            .get_or_insert_with(|| StreamState::new(&self.ctx, &self.shape));
        let mut out = Vec::with_capacity(events.len() + 1);
        for event in &events {
            stream.on_event(event, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.stream
            .get_or_insert_with(|| StreamState::new(&self.ctx, &self.shape))
            .finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.usage.or(self.stream.as_ref().and_then(StreamState::usage))
    }

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        error::classify(head.status, &head.headers, &body)
    }
}
