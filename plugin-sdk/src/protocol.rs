//! [`Protocol`] and [`Exchange`]: an [`Adapter`] written as what is specific
//! to one wire protocol, with the per-exchange bookkeeping done once here.
//!
//! Every native adapter keeps the same state between calls: the context and
//! the caller's body, what the request's translation decided that the
//! answer's translation needs (a forced JSON tool, whitespace cut from a
//! prefill: the [`Shape`](Protocol::Shape)), the usage of a whole answer, and
//! a per-protocol state machine for a streamed one, created on the first
//! event. [`Exchange<P>`] is that state; `P` only states how to translate.

use std::marker::PhantomData;

use crate::{Adapter, AdapterError, CallContext, Event, OutboundRequest, ResponseHead, Usage, openai};
#[cfg(feature = "operations")]
use crate::{Measured, Operation, OperationAnswer, OperationBody};

/// A whole answer translated to an OpenAI `chat.completion`, and the usage it
/// reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    /// The serialized `chat.completion` object.
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

/// One provider's wire protocol, as an [`Exchange`] uses it.
///
/// The methods are plain functions of their inputs (no `self`): the state of
/// an exchange lives in [`Exchange`], and what a request's translation must
/// hand to the answer's travels as [`Shape`](Protocol::Shape).
pub trait Protocol: 'static {
    /// What the answer's translation needs to know about the request. The
    /// default value is used when the host translates an answer without a
    /// prior [`request`](Protocol::request) (unit tests do); `()` when the
    /// answer needs nothing.
    type Shape: Default;

    /// The state machine that translates one streamed answer.
    type Stream: StreamTranslator;

    /// The upstream request for the caller's chat-completions body, and the
    /// request's [`Shape`](Protocol::Shape). The host adds the credential per
    /// [`OutboundRequest::auth`].
    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, Self::Shape), AdapterError>;

    /// A whole 2xx answer, translated to a `chat.completion`.
    fn response(
        ctx: &CallContext,
        shape: &Self::Shape,
        head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<Translated, AdapterError>;

    /// A fresh stream translator, created when the first stream event (or the
    /// end of the stream) arrives.
    fn stream(ctx: &CallContext, shape: &Self::Shape) -> Self::Stream;

    /// Classify a non-2xx answer. Defaults to [`openai::classify_error`].
    fn classify_error(head: ResponseHead, body: Vec<u8>) -> AdapterError {
        openai::classify_error(&head, &body)
    }

    /// The operations besides chat the protocol serves (feature
    /// `operations`); none by default.
    #[cfg(feature = "operations")]
    fn operations() -> Vec<Operation> {
        Vec::new()
    }

    /// The upstream request for one of [`operations`](Protocol::operations),
    /// and what its answer's translation needs.
    #[cfg(feature = "operations")]
    fn operation_request(
        ctx: &CallContext,
        operation: Operation,
        body: &OperationBody,
    ) -> Result<(OutboundRequest, openai::operations::OperationShape), AdapterError> {
        let _ = (ctx, body);
        Err(AdapterError::invalid_request(format!(
            "this adapter does not serve the {operation:?} operation"
        )))
    }

    /// A whole 2xx answer of an operation, and what it consumed.
    #[cfg(feature = "operations")]
    fn operation_response(
        operation: Operation,
        shape: &openai::operations::OperationShape,
        head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<(OperationAnswer, Measured), AdapterError> {
        let _ = (shape, head, body);
        Err(AdapterError::internal(format!(
            "this adapter does not serve the {operation:?} operation"
        )))
    }
}

/// Translates one streamed answer, event by event.
pub trait StreamTranslator {
    /// Translate one event, appending the `chat.completion.chunk`s it yields
    /// (zero or more) to `out`.
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError>;

    /// The upstream stream ended: the chunks still held back, or an error if
    /// the stream was cut short. See [`Adapter::finish`].
    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError>;

    /// The usage the stream reported so far.
    fn usage(&self) -> Option<Usage>;
}

/// The [`Adapter`] for protocol `P`: name it in the adapter crate and export
/// it as usual.
///
/// ```ignore
/// pub type MyAdapter = tollgate_plugin_sdk::Exchange<MyProtocol>;
/// tollgate_plugin_sdk::export_adapter!(MyAdapter);
/// ```
///
/// `request` stores the [`Shape`](Protocol::Shape); `response` keeps the
/// answer's usage; `on_events` and `finish` go through one
/// [`Protocol::Stream`], created on first use; `usage` is the whole answer's
/// usage, else the stream's.
pub struct Exchange<P: Protocol> {
    ctx: CallContext,
    body: Vec<u8>,
    shape: P::Shape,
    /// Usage of a whole (non-streamed) answer.
    usage: Option<Usage>,
    stream: Option<P::Stream>,
    /// Operation mode: the operation, the caller's request, what the answer
    /// needs of it, and what the answer consumed.
    #[cfg(feature = "operations")]
    operation: Option<OperationState>,
    protocol: PhantomData<P>,
}

#[cfg(feature = "operations")]
struct OperationState {
    operation: Operation,
    body: OperationBody,
    shape: openai::operations::OperationShape,
    measured: Option<Measured>,
}

impl<P: Protocol> Exchange<P> {
    /// The call context this exchange was created with.
    pub fn context(&self) -> &CallContext {
        &self.ctx
    }

    /// The stream translator, once a stream event (or its end) has arrived.
    pub fn stream(&self) -> Option<&P::Stream> {
        self.stream.as_ref()
    }

    fn stream_mut(&mut self) -> &mut P::Stream {
        let (ctx, shape) = (&self.ctx, &self.shape);
        self.stream.get_or_insert_with(|| P::stream(ctx, shape))
    }
}

impl<P: Protocol> Adapter for Exchange<P> {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        Exchange {
            ctx,
            body: openai_body,
            shape: P::Shape::default(),
            usage: None,
            stream: None,
            #[cfg(feature = "operations")]
            operation: None,
            protocol: PhantomData,
        }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        #[cfg(feature = "operations")]
        if let Some(state) = &mut self.operation {
            let (request, shape) = P::operation_request(&self.ctx, state.operation, &state.body)?;
            state.shape = shape;
            return Ok(request);
        }
        let (request, shape) = P::request(&self.ctx, &self.body)?;
        self.shape = shape;
        Ok(request)
    }

    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let translated = P::response(&self.ctx, &self.shape, head, body)?;
        self.usage = translated.usage;
        Ok(translated.body)
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        let stream = self.stream_mut();
        let mut out = Vec::with_capacity(events.len() + 1);
        for event in &events {
            stream.on_event(event, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.stream_mut().finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
            .or_else(|| self.stream.as_ref().and_then(StreamTranslator::usage))
    }

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        P::classify_error(head, body)
    }

    #[cfg(feature = "operations")]
    fn operations() -> Vec<Operation> {
        P::operations()
    }

    #[cfg(feature = "operations")]
    fn new_operation(ctx: CallContext, operation: Operation, body: OperationBody) -> Result<Self, AdapterError> {
        if !P::operations().contains(&operation) {
            return Err(AdapterError::invalid_request(format!(
                "this adapter does not serve the {operation:?} operation"
            )));
        }
        let mut exchange = Self::new(ctx, Vec::new());
        exchange.operation = Some(OperationState {
            operation,
            body,
            shape: Default::default(),
            measured: None,
        });
        Ok(exchange)
    }

    #[cfg(feature = "operations")]
    fn operation_response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<OperationAnswer, AdapterError> {
        let Some(state) = &mut self.operation else {
            return Err(AdapterError::internal("this exchange is not in operation mode"));
        };
        let (answer, measured) = P::operation_response(state.operation, &state.shape, head, body)?;
        state.measured = Some(measured);
        Ok(answer)
    }

    #[cfg(feature = "operations")]
    fn measured(&self) -> Option<Measured> {
        self.operation.as_ref().and_then(|state| state.measured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuthSlot, ErrorClass};

    /// Echoes what it was given, so the tests can see what the exchange
    /// passed along.
    struct Echo;

    #[derive(Default, Debug, Clone, PartialEq)]
    struct EchoShape(String);

    struct EchoStream {
        shape: EchoShape,
        events: u64,
    }

    impl Protocol for Echo {
        type Shape = EchoShape;
        type Stream = EchoStream;

        fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, EchoShape), AdapterError> {
            let shape = EchoShape(String::from_utf8(openai_body.to_vec()).unwrap());
            let request = OutboundRequest {
                method: "POST".into(),
                url: ctx.base_url.clone(),
                headers: Vec::new(),
                body: openai_body.to_vec(),
                auth: AuthSlot::Bearer,
            };
            Ok((request, shape))
        }

        fn response(
            _ctx: &CallContext,
            shape: &EchoShape,
            _head: ResponseHead,
            body: Vec<u8>,
        ) -> Result<Translated, AdapterError> {
            let usage = Usage {
                input: body.len() as u64,
                output: shape.0.len() as u64,
                cache_read: None,
                cache_write: None,
                reasoning: None,
            };
            Ok(Translated {
                body: shape.0.clone().into_bytes(),
                usage: Some(usage),
            })
        }

        fn stream(_ctx: &CallContext, shape: &EchoShape) -> EchoStream {
            EchoStream {
                shape: shape.clone(),
                events: 0,
            }
        }
    }

    impl StreamTranslator for EchoStream {
        fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
            if event.data == b"bad" {
                return Err(AdapterError::internal("bad event"));
            }
            self.events += 1;
            out.push(format!("{}:{}", self.shape.0, String::from_utf8_lossy(&event.data)).into_bytes());
            Ok(())
        }

        fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
            Ok(vec![format!("end after {}", self.events).into_bytes()])
        }

        fn usage(&self) -> Option<Usage> {
            (self.events > 0).then_some(Usage {
                input: 0,
                output: self.events,
                cache_read: None,
                cache_write: None,
                reasoning: None,
            })
        }
    }

    fn exchange() -> Exchange<Echo> {
        let ctx = CallContext {
            request_id: "r".into(),
            upstream_model: "m".into(),
            base_url: "http://up".into(),
            stream: false,
            attempt: 0,
            max_output_tokens: None,
            continuation: None,
        };
        Exchange::new(ctx, b"body".to_vec())
    }

    fn event(data: &str) -> Event {
        Event {
            name: None,
            data: data.as_bytes().to_vec(),
        }
    }

    fn head(status: u16) -> ResponseHead {
        ResponseHead {
            status,
            headers: Vec::new(),
        }
    }

    #[test]
    fn the_request_shape_reaches_the_answer() {
        let mut exchange = exchange();
        assert_eq!(exchange.usage(), None);
        let request = exchange.request().unwrap();
        assert_eq!(
            (request.url.as_str(), request.body.as_slice()),
            ("http://up", &b"body"[..])
        );
        assert_eq!(exchange.response(head(200), b"12345".to_vec()).unwrap(), b"body");
        let usage = exchange.usage().unwrap();
        assert_eq!((usage.input, usage.output), (5, 4));
    }

    #[test]
    fn the_stream_starts_on_first_use_with_the_shape() {
        let mut exchange = exchange();
        exchange.request().unwrap();
        assert!(exchange.stream().is_none());
        let chunks = exchange.on_events(vec![event("a"), event("b")]).unwrap();
        assert_eq!(chunks, vec![b"body:a".to_vec(), b"body:b".to_vec()]);
        assert_eq!(exchange.on_events(vec![event("c")]).unwrap(), vec![b"body:c".to_vec()]);
        assert_eq!(exchange.usage().unwrap().output, 3);
        assert_eq!(exchange.finish().unwrap(), vec![b"end after 3".to_vec()]);
        assert!(exchange.on_events(vec![event("bad")]).is_err());
    }

    #[test]
    fn without_a_request_the_default_shape_is_used() {
        let mut exchange = exchange();
        assert_eq!(exchange.finish().unwrap(), vec![b"end after 0".to_vec()]);
        assert_eq!(exchange.usage(), None);
        assert_eq!(exchange.on_events(vec![event("x")]).unwrap(), vec![b":x".to_vec()]);
    }

    #[test]
    fn errors_are_classified_as_openai_ones_by_default() {
        let error = exchange().classify_error(head(429), br#"{"error":{"message":"slow"}}"#.to_vec());
        assert_eq!(error.class, ErrorClass::RateLimited(None));
        assert_eq!(error.message, "slow");
    }
}
