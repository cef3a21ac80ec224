//! Write Tollgate provider adapters.
//!
//! An adapter translates between the OpenAI chat-completions shape and one
//! provider's wire protocol (WIT world `tollgate:provider/provider-adapter@0.1.0`).
//! The host calls it through the [`Adapter`] trait; [`export_adapter!`] turns
//! an implementation into the component's exports.
//!
//! # A protocol, not an exchange
//!
//! Most adapters implement [`Protocol`] and let [`Exchange`] be the
//! [`Adapter`]. A protocol states only what is specific to it: how to build
//! the upstream request (and what the answer's translation must know about
//! it, its [`Shape`](Protocol::Shape)), how to translate a whole answer, which
//! [`StreamTranslator`] turns stream events into chunks, and how to classify
//! errors. The exchange keeps the context and body, stores the shape, keeps
//! the usage, creates the stream translator on the first event and loops
//! events through it.
//!
//! ```ignore
//! use tollgate_plugin_sdk::stream::ChunkWriter;
//! use tollgate_plugin_sdk::{AdapterError, CallContext, Event, Exchange, OutboundRequest,
//!     Protocol, ResponseHead, StreamTranslator, Translated, Usage};
//!
//! pub struct MyProtocol;
//!
//! impl Protocol for MyProtocol {
//!     type Shape = ();            // or what `response` and the stream need from the request
//!     type Stream = MyStream;
//!     fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, ()), AdapterError> { /* ... */ }
//!     fn response(ctx: &CallContext, shape: &(), head: ResponseHead, body: Vec<u8>) -> Result<Translated, AdapterError> { /* ... */ }
//!     fn stream(ctx: &CallContext, shape: &()) -> MyStream { MyStream { chunks: ChunkWriter::new(ctx), usage: None } }
//!     // `classify_error` defaults to `openai::classify_error`.
//! }
//!
//! pub struct MyStream { chunks: ChunkWriter, usage: Option<Usage> }
//!
//! impl StreamTranslator for MyStream {
//!     fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> { /* ... */ }
//!     fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> { /* ... */ }
//!     fn usage(&self) -> Option<Usage> { self.usage }
//! }
//!
//! pub type MyAdapter = Exchange<MyProtocol>;
//! tollgate_plugin_sdk::export_adapter!(MyAdapter);
//! ```
//!
//! An adapter whose state does not fit that split implements [`Adapter`]
//! itself (the `tollgate plugin new` template does, as the shortest start):
//!
//! ```ignore
//! use tollgate_plugin_sdk::{Adapter, AdapterError, CallContext, Event, OutboundRequest,
//!     ResponseHead, Usage};
//!
//! pub struct MyAdapter { /* per-exchange state */ }
//!
//! impl Adapter for MyAdapter {
//!     fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self { /* ... */ }
//!     fn request(&mut self) -> Result<OutboundRequest, AdapterError> { /* ... */ }
//!     fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> { /* ... */ }
//!     fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> { /* ... */ }
//!     fn usage(&self) -> Option<Usage> { /* ... */ }
//! }
//!
//! tollgate_plugin_sdk::export_adapter!(MyAdapter);
//! ```
//!
//! The adapter crate needs `crate-type = ["cdylib"]` and is built for
//! `wasm32-wasip2`; it does not depend on `wit-bindgen` itself.
//!
//! Helpers, all pure Rust (usable and testable natively):
//! - [`json::RawObject`]: a JSON object whose values stay unparsed, for cheap
//!   "edit a few top-level keys and pass the rest through" work.
//! - [`openai`]: request preparation, usage extraction, error classification and
//!   OpenAI-shaped error bodies; and [`openai::Compatible`], the whole
//!   protocol of an OpenAI-compatible upstream, for adapters that wrap it.
//! - [`stream`]: recognising empty / `[DONE]` / JSON stream event payloads;
//!   [`stream::ChunkWriter`], which writes a translated stream's chunks (id,
//!   model, `created`, the role on the first chunk, tool-call indexes).
//! - `golden` (feature `golden`): the golden-file test runner adapters share.
//! - [`time`]: RFC 3339 and HTTP `date` timestamps → Unix seconds (adapters
//!   have no clock).

use std::cell::RefCell;

#[cfg(feature = "golden")]
pub mod golden;
pub mod json;
pub mod openai;
mod protocol;
pub mod stream;
pub mod time;

pub use protocol::{Exchange, Protocol, StreamTranslator, Translated};

/// Raw bindings generated from `wit/provider/0.1.0`. Adapters normally use the
/// re-exports at the crate root instead.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/provider/0.1.0",
        world: "provider-adapter",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::exports::tollgate::provider::adapter::CallContext;
pub use bindings::tollgate::provider::types::{
    AdapterError, AuthSlot, ErrorClass, Event, Headers, OutboundRequest, ResponseHead, Usage,
};

/// Re-exported so adapters can use the same `serde_json` as the helpers.
pub use serde_json;

/// One upstream exchange, implemented by a provider adapter.
///
/// The host creates a fresh value per upstream attempt (see
/// [`CallContext::attempt`]), so it may keep state such as the stream position
/// or the usage seen so far. Methods are called in this order:
/// [`new`](Adapter::new), [`request`](Adapter::request), then either
/// [`response`](Adapter::response) (non-streamed 2xx),
/// [`on_events`](Adapter::on_events)… + [`finish`](Adapter::finish) (streamed 2xx),
/// or [`classify_error`](Adapter::classify_error) (non-2xx).
/// [`usage`](Adapter::usage) may be called at any point after that.
pub trait Adapter: 'static {
    /// `openai_body` is the caller's chat-completions request, unchanged.
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self
    where
        Self: Sized;

    /// The request to send upstream. The host adds the credential per
    /// [`OutboundRequest::auth`].
    fn request(&mut self) -> Result<OutboundRequest, AdapterError>;

    /// A whole (non-streamed) 2xx response, translated to an OpenAI
    /// `chat.completion` object.
    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError>;

    /// A batch of stream events (already framed by the host), translated to zero
    /// or more serialized OpenAI `chat.completion.chunk` objects.
    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError>;

    /// The upstream stream ended; return any chunks still held back. The host
    /// adds usage, cost and service metadata to the last one returned.
    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        Ok(Vec::new())
    }

    /// Token usage seen so far, if the upstream reported any.
    fn usage(&self) -> Option<Usage>;

    /// Classify a non-2xx upstream response. Defaults to
    /// [`openai::classify_error`], which understands OpenAI-shaped error bodies.
    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        openai::classify_error(&head, &body)
    }
}

impl AdapterError {
    /// An error of `class` with `message`, capped at
    /// [`openai::MAX_ERROR_MESSAGE`] bytes.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        AdapterError {
            class,
            message: openai::cap_message(message.into()),
        }
    }

    /// The caller's request cannot be translated (`invalid-request`).
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::InvalidRequest, message)
    }

    /// The adapter could not do its job: bad upstream answer or a bug (`internal`).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Internal, message)
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorClass::InvalidRequest => f.write_str("invalid-request"),
            ErrorClass::Auth => f.write_str("auth"),
            ErrorClass::RateLimited(None) => f.write_str("rate-limited"),
            ErrorClass::RateLimited(Some(s)) => write!(f, "rate-limited(retry after {s}s)"),
            ErrorClass::Overloaded => f.write_str("overloaded"),
            ErrorClass::ContextLength => f.write_str("context-length"),
            ErrorClass::Upstream(status) => write!(f, "upstream({status})"),
            ErrorClass::Internal => f.write_str("internal"),
        }
    }
}

/// Adapts an [`Adapter`] (`&mut self` methods) to the wit-bindgen resource
/// trait (`&self` methods). Used by [`export_adapter!`]; not meant to be named
/// by adapters.
#[doc(hidden)]
pub struct AdapterExchange<A: Adapter> {
    inner: RefCell<A>,
}

impl<A: Adapter> bindings::exports::tollgate::provider::adapter::GuestExchange for AdapterExchange<A> {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        AdapterExchange {
            inner: RefCell::new(A::new(ctx, openai_body)),
        }
    }

    fn request(&self) -> Result<OutboundRequest, AdapterError> {
        self.inner.borrow_mut().request()
    }

    fn response(&self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        self.inner.borrow_mut().response(head, body)
    }

    fn on_events(&self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.inner.borrow_mut().on_events(events)
    }

    fn finish(&self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.inner.borrow_mut().finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.inner.borrow().usage()
    }

    fn classify_error(&self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        self.inner.borrow_mut().classify_error(head, body)
    }
}

/// Export an [`Adapter`] implementation as this component's
/// `tollgate:provider/adapter` interface.
///
/// Call it exactly once, in the adapter's `cdylib` crate:
/// `tollgate_plugin_sdk::export_adapter!(MyAdapter);`.
///
/// The exports are plain `#[export_name]` symbols, emitted only when compiling
/// for a wasm target, so native unit tests of an adapter crate still link.
/// Two calls in one component clash at link time ("symbol multiply
/// defined"), so an adapter that wraps another cannot link that adapter's
/// crate as a library if that crate calls this macro.
#[macro_export]
macro_rules! export_adapter {
    ($adapter:ty) => {
        const _: () = {
            #[allow(dead_code)]
            struct __TollgateAdapterComponent;

            impl $crate::bindings::exports::tollgate::provider::adapter::Guest for __TollgateAdapterComponent {
                type Exchange = $crate::AdapterExchange<$adapter>;
            }

            // Only components get the exports: native builds (unit tests) of a
            // cdylib cannot link symbol names like `tollgate:provider/...`.
            #[cfg(target_family = "wasm")]
    $crate::bindings::export!(__TollgateAdapterComponent with_types_in $crate::bindings);
        };
    };
}
