//! The `Adapter` implementation: ties the request, response, stream and error
//! translations to one exchange's state.

use tollgate_plugin_sdk::{Adapter, AdapterError, AuthSlot, CallContext, Event, OutboundRequest, ResponseHead, Usage};

use crate::error;
use crate::request::{self, Prepared};
use crate::response::{self, Answering};
use crate::stream::StreamState;

/// The SigV4 signing name of Bedrock Runtime (`bedrock`, not the endpoint
/// prefix `bedrock-runtime`).
const SIGNING_SERVICE: &str = "bedrock";

/// One exchange with Bedrock's Converse API.
pub struct Bedrock {
    ctx: CallContext,
    body: Vec<u8>,
    response_tool: Option<String>,
    prefill_whitespace: String,
    usage: Option<Usage>,
    stream: Option<StreamState>,
}

impl Bedrock {
    fn stream_state(&mut self) -> &mut StreamState {
        let (ctx, tool, whitespace) = (&self.ctx, &self.response_tool, &self.prefill_whitespace);
        self.stream
            .get_or_insert_with(|| StreamState::new(ctx, tool.clone(), whitespace.clone()))
    }
}

impl Adapter for Bedrock {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        Bedrock {
            ctx,
            body: openai_body,
            response_tool: None,
            prefill_whitespace: String::new(),
            usage: None,
            stream: None,
        }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        let Prepared {
            url,
            body,
            response_tool,
            prefill_whitespace,
        } = request::prepare(&self.ctx, &self.body)?;
        self.response_tool = response_tool;
        self.prefill_whitespace = prefill_whitespace;
        Ok(OutboundRequest {
            method: "POST".to_owned(),
            url,
            // The host signs these headers along with the body; it adds
            // `x-amz-date` and `authorization` (and a session token) itself.
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body,
            auth: AuthSlot::AwsSigv4(SIGNING_SERVICE.to_owned()),
        })
    }

    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let answering = Answering {
            ctx: &self.ctx,
            response_tool: self.response_tool.as_deref(),
            prefill_whitespace: &self.prefill_whitespace,
        };
        let (completion, usage) = response::completion(&answering, &head, &body)?;
        self.usage = usage;
        Ok(completion)
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        let state = self.stream_state();
        let mut out = Vec::with_capacity(events.len());
        for event in &events {
            state.on_event(event, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.stream_state().finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.stream.as_ref().and_then(StreamState::usage).or(self.usage)
    }

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        error::classify_http(&head, &body)
    }
}
