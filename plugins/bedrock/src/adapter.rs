//! Bedrock's Converse API as a [`Protocol`]: the request's headers and SigV4
//! auth slot, and which module translates each direction. [`Exchange`] keeps
//! the state.

use tollgate_plugin_sdk::openai::operations::OperationShape;
use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, Exchange, Measured, Operation, OperationAnswer, OperationBody,
    OutboundRequest, Protocol, ResponseHead, Translated,
};

use crate::request::{self, Prepared, Shape};
use crate::response;
use crate::stream::StreamState;
use crate::{error, operations};

/// The SigV4 signing name of Bedrock Runtime (`bedrock`, not the endpoint
/// prefix `bedrock-runtime`).
pub const SIGNING_SERVICE: &str = "bedrock";

/// One exchange with Bedrock's Converse API.
pub type Bedrock = Exchange<Converse>;

/// Bedrock's Converse / ConverseStream API.
pub struct Converse;

impl Protocol for Converse {
    type Shape = Shape;
    type Stream = StreamState;

    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, Shape), AdapterError> {
        let Prepared {
            url,
            body,
            response_tool,
            prefill_whitespace,
        } = request::prepare(ctx, openai_body)?;
        let request = OutboundRequest {
            method: "POST".to_owned(),
            url,
            // The host signs these headers along with the body; it adds
            // `x-amz-date` and `authorization` (and a session token) itself.
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body,
            auth: AuthSlot::AwsSigv4(SIGNING_SERVICE.to_owned()),
        };
        Ok((
            request,
            Shape {
                response_tool,
                prefill_whitespace,
            },
        ))
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
        error::classify_http(&head, &body)
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
