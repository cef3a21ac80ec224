//! The Gemini API as a [`Protocol`]: the request's headers and auth slot, and
//! which module translates each direction. [`Exchange`] keeps the state.

use tollgate_plugin_sdk::openai::operations::OperationShape;
use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Exchange, Measured, Operation, OperationAnswer, OperationBody,
    OutboundRequest, Protocol, ResponseHead, Translated,
};

use crate::stream::StreamState;
use crate::{error, operations, request, response};

/// The header the host puts the API key in (Google AI Studio keys).
pub const API_KEY_HEADER: &str = "x-goog-api-key";

/// One exchange with the Gemini API.
pub type Gemini = Exchange<GenerateContent>;

/// Gemini's `generateContent` / `streamGenerateContent` API.
pub struct GenerateContent;

impl Protocol for GenerateContent {
    type Shape = ();
    type Stream = StreamState;

    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, ()), AdapterError> {
        let prepared = request::prepare(ctx, openai_body)?;
        let request = OutboundRequest {
            method: "POST".to_owned(),
            url: prepared.url,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: prepared.body,
            auth: AuthSlot::Header(API_KEY_HEADER.to_owned()),
        };
        Ok((request, ()))
    }

    fn response(ctx: &CallContext, _shape: &(), head: ResponseHead, body: Vec<u8>) -> Result<Translated, AdapterError> {
        response::completion(ctx, &head, &body)
    }

    fn stream(ctx: &CallContext, _shape: &()) -> StreamState {
        StreamState::new(ctx)
    }

    fn classify_error(head: ResponseHead, body: Vec<u8>) -> AdapterError {
        error::classify(head.status, &head.headers, &body)
    }

    fn operations() -> Vec<Operation> {
        operations::SERVED.to_vec()
    }

    fn operation_request(
        ctx: &CallContext,
        operation: Operation,
        body: &OperationBody,
    ) -> Result<(OutboundRequest, OperationShape), AdapterError> {
        operations::request(ctx, operation, body)
    }

    fn operation_response(
        operation: Operation,
        shape: &OperationShape,
        _head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<(OperationAnswer, Measured), AdapterError> {
        operations::response(operation, shape, body)
    }
}
