//! The Messages API as a [`Protocol`]: the request's headers and auth slot,
//! and which module translates each direction. [`Exchange`] keeps the state.
//! [`Anthropic`] is the exported adapter: that translated exchange, or a
//! native one (`crate::native`) when the host opens it in the
//! `anthropic-messages` dialect.

use tollgate_plugin_sdk::{
    Adapter, AdapterError, AuthSlot, CallContext, Event, Exchange, OutboundRequest, Protocol, ResponseHead, Translated,
    Usage,
};

use crate::native::{self, Native};
use crate::request::{self, Prepared, Shape};
use crate::stream::StreamState;
use crate::{error, response};

/// The header the host puts the API key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// The Messages API version this adapter speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// One exchange with the Messages API: translated from and to chat
/// completions, or native (the caller's Messages request passed through).
pub enum Anthropic {
    Translated(Box<Exchange<Messages>>),
    Native(Box<Native>),
}

impl Adapter for Anthropic {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        Anthropic::Translated(Box::new(Exchange::new(ctx, openai_body)))
    }

    fn native_dialects() -> Vec<String> {
        vec![native::DIALECT.to_owned()]
    }

    fn new_native(ctx: CallContext, dialect: String, body: Vec<u8>) -> Result<Self, AdapterError> {
        Native::new(ctx, &dialect, &body).map(|n| Anthropic::Native(Box::new(n)))
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        match self {
            Anthropic::Translated(exchange) => exchange.request(),
            Anthropic::Native(native) => native.request(),
        }
    }

    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        match self {
            Anthropic::Translated(exchange) => exchange.response(head, body),
            Anthropic::Native(native) => native.response(body),
        }
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        match self {
            Anthropic::Translated(exchange) => exchange.on_events(events),
            Anthropic::Native(_) => Err(AdapterError::internal(
                "a native exchange streams through native-events",
            )),
        }
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        match self {
            Anthropic::Translated(exchange) => exchange.finish(),
            Anthropic::Native(_) => Err(AdapterError::internal("a native exchange ends with native-finish")),
        }
    }

    fn native_events(&mut self, events: Vec<Event>) -> Result<Vec<Event>, AdapterError> {
        match self {
            Anthropic::Native(native) => native.events(events),
            Anthropic::Translated(_) => Err(AdapterError::internal("this exchange is not in native mode")),
        }
    }

    fn native_finish(&mut self) -> Result<Vec<Event>, AdapterError> {
        match self {
            Anthropic::Native(native) => native.finish(),
            Anthropic::Translated(_) => Err(AdapterError::internal("this exchange is not in native mode")),
        }
    }

    fn usage(&self) -> Option<Usage> {
        match self {
            Anthropic::Translated(exchange) => exchange.usage(),
            Anthropic::Native(native) => native.usage(),
        }
    }

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        error::classify(head.status, &head.headers, &body)
    }
}

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
