//! The Messages API as a [`Protocol`]: the request's headers and auth slot,
//! and which module translates each direction. [`Exchange`] keeps the state.

use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Exchange, OutboundRequest, Protocol, ResponseHead, Translated,
};

use crate::request::{self, Prepared, Shape};
use crate::stream::StreamState;
use crate::{error, response};

/// The header the host puts the API key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// The Messages API version this adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// One exchange with the Messages API.
pub type Anthropic = Exchange<Messages>;

/// Anthropic's Messages API.
pub struct Messages;

impl Protocol for Messages {
    type Shape = Shape;
    type Stream = StreamState;

    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, Shape), AdapterError> {
        let Prepared { url, body, shape } = request::prepare(ctx, openai_body)?;
        let request = OutboundRequest {
            method: "POST".to_owned(),
            url,
            headers: vec![
                ("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ],
            body,
            auth: AuthSlot::Header(API_KEY_HEADER.to_owned()),
        };
        Ok((request, shape))
    }

    fn response(
        ctx: &CallContext,
        shape: &Shape,
        head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<Translated, AdapterError> {
        response::completion(ctx, shape, &head, &body)
    }

    fn stream(ctx: &CallContext, shape: &Shape) -> StreamState {
        StreamState::new(ctx, shape)
    }

    fn classify_error(head: ResponseHead, body: Vec<u8>) -> AdapterError {
        error::classify(head.status, &head.headers, &body)
    }
}
