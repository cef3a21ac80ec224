//! The `Adapter` implementation: wires the translation modules to the WIT
//! exchange and keeps the per-exchange state (usage, stream position).

use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, Event, OutboundRequest, ResponseHead, Usage};

use crate::stream::StreamState;
use crate::{error, request, response};

/// One exchange with the Cohere API.
pub struct Cohere {
    ctx: CallContext,
    body: Vec<u8>,
    /// Usage of a non-streamed answer.
    usage: Option<Usage>,
    stream: StreamState,
}

impl Adapter for Cohere {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        let stream = StreamState::new(&ctx);
        Cohere {
            ctx,
            body: openai_body,
            usage: None,
            stream,
        }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        let body = request::prepare(&self.ctx, &self.body)?;
        let accept = if self.ctx.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        Ok(OutboundRequest {
            method: "POST".to_owned(),
            url: request::url(&self.ctx.base_url),
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), accept.to_owned()),
            ],
            body,
            auth: AuthSlot::Bearer,
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
