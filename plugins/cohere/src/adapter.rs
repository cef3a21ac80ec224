//! The Cohere v2 Chat API as a [`Protocol`]: the request's headers and auth
//! slot, and which module translates each direction. [`Exchange`] keeps the
//! state.

use tollgate_plugin_sdk::openai::operations::OperationShape;
use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Exchange, Measured, Operation, OperationAnswer, OperationBody,
    OutboundRequest, Protocol, ResponseHead, Translated,
};

use crate::stream::StreamState;
use crate::{error, operations, request, response};

/// One exchange with the Cohere API.
pub type Cohere = Exchange<Chat>;

/// Cohere's v2 Chat API.
pub struct Chat;

impl Protocol for Chat {
    type Shape = ();
    type Stream = StreamState;

    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, ()), AdapterError> {
        let body = request::prepare(ctx, openai_body)?;
        let accept = if ctx.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let request = OutboundRequest {
            method: "POST".to_owned(),
            url: request::url(&ctx.base_url),
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), accept.to_owned()),
            ],
            body,
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
        head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<(OperationAnswer, Measured), AdapterError> {
        let _ = head;
        operations::response(operation, shape, body)
    }
}
