//! The Responses API as a [`Protocol`]: the request's URL, headers and auth
//! slot, and which module translates each direction. [`Exchange`] keeps the
//! state.

use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Exchange, OutboundRequest, Protocol, ResponseHead, Translated,
};

use crate::stream::StreamState;
use crate::{request, response};

/// One exchange with the Responses API.
pub type OpenAiResponses = Exchange<Responses>;

/// OpenAI's `POST /responses`.
pub struct Responses;

impl Protocol for Responses {
    type Shape = ();
    type Stream = StreamState;

    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, ()), AdapterError> {
        let accept = if ctx.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let request = OutboundRequest {
            method: "POST".to_owned(),
            url: format!("{}/responses", ctx.base_url.trim_end_matches('/')),
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), accept.to_owned()),
            ],
            body: request::body(ctx, openai_body)?,
            auth: AuthSlot::Bearer,
        };
        Ok((request, ()))
    }

    fn response(ctx: &CallContext, _shape: &(), head: ResponseHead, body: Vec<u8>) -> Result<Translated, AdapterError> {
        response::completion(ctx, &head, &body)
    }

    fn stream(ctx: &CallContext, _shape: &()) -> StreamState {
        StreamState::new(ctx)
    }
}
