//! Write Tollgate components: provider adapters, tool servers and skills.
//!
//! Each kind is a cargo feature, because a component may carry the bindings
//! of exactly one WIT world: `provider` (on by default) for adapters, `tool`
//! for tool servers ([`tool`], world `tollgate:tool/tool-server@0.1.0`, or
//! 0.2.0 with `tool-v2`: richer content, progress, prompts and resources;
//! 0.3.0 with `tool-v3`: elicitation; 0.4.0 with `tool-v4`: model calls) and
//! `skill` for skills ([`skill`], world `tollgate:skill/skill@0.1.0`). A tool
//! server or skill crate depends on this one with
//! `default-features = false, features = ["tool"]` (or `["skill"]`, or
//! `["guardrail"]` for a guardrail: [`guardrail`], world
//! `tollgate:guardrail/guardrail@0.1.0`).
//!
//! # Provider adapters
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
//! # Native dialects (WIT 0.2.0, feature `native`)
//!
//! With the `native` feature the component exports
//! `tollgate:provider/adapter@0.2.0` instead of 0.1.0. Its exchange may also
//! be opened natively, with the caller's body in the provider's own dialect
//! (e.g. `anthropic-messages` on `POST /v1/messages`): the adapter lists the
//! dialects in [`Adapter::native_dialects`] and implements
//! [`Adapter::new_native`], [`Adapter::native_events`] and
//! [`Adapter::native_finish`]; `response` then returns the provider's answer
//! in the dialect. Without the feature those methods are never called and
//! the component is a 0.1.0 one, which the host keeps loading.
//!
//! # Operations besides chat (WIT 0.3.0, feature `operations`)
//!
//! With the `operations` feature the component exports
//! `tollgate:provider/adapter@0.3.0`: 0.2.0 plus the model operations
//! besides chat (embeddings, images, audio, moderation, rerank). The adapter
//! lists them in [`Adapter::operations`], and implements
//! [`Adapter::new_operation`], [`Adapter::operation_response`] and
//! [`Adapter::measured`]; `request` and `classify_error` serve every mode.
//! [`openai::Compatible`] serves them all for an OpenAI-compatible upstream
//! ([`openai::operations`]).
//!
//! The adapter crate needs `crate-type = ["cdylib"]` and is built for
//! `wasm32-wasip2`; it does not depend on `wit-bindgen` itself.
//!
//! Helpers, all pure Rust (usable and testable natively):
//! - [`json::RawObject`]: a JSON object whose values stay unparsed, for cheap
//!   "edit a few top-level keys and pass the rest through" work.
//! - [`openai`]: request preparation, usage extraction, error classification and
//!   OpenAI-shaped error bodies; for native protocols, reading a request's
//!   parameters and messages and writing a whole answer
//!   ([`openai::completion`]); and [`openai::Compatible`], the whole
//!   protocol of an OpenAI-compatible upstream, for adapters that wrap it.
//! - [`stream`]: recognising empty / `[DONE]` / JSON stream event payloads;
//!   [`stream::ChunkWriter`], which writes a translated stream's chunks (id,
//!   model, `created`, the role on the first chunk, tool-call indexes).
//! - `golden` (feature `golden`): the golden-file test runner adapters share.
//! - [`time`]: RFC 3339 and HTTP `date` timestamps → Unix seconds (adapters
//!   have no clock).

#[cfg(feature = "provider")]
mod adapter;
#[cfg(feature = "golden")]
pub mod golden;
#[cfg(feature = "guardrail")]
pub mod guardrail;
pub mod json;
#[cfg(feature = "provider")]
pub mod openai;
#[cfg(feature = "provider")]
mod protocol;
#[cfg(feature = "skill")]
pub mod skill;
#[cfg(feature = "provider")]
pub mod stream;
pub mod time;
#[cfg(feature = "tool")]
pub mod tool;

#[cfg(feature = "provider")]
pub use adapter::{Adapter, AdapterExchange};
#[cfg(feature = "provider")]
pub use protocol::{Exchange, Protocol, StreamTranslator, Translated};

/// Raw bindings generated from `wit/provider/0.1.0`, or from
/// `wit/provider/0.2.0` with the `native` feature. Adapters normally use the
/// re-exports at the crate root instead.
#[cfg(all(feature = "provider", not(feature = "native")))]
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

/// Raw bindings generated from `wit/provider/0.2.0` (feature `native`).
#[cfg(all(feature = "native", not(feature = "operations")))]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/provider/0.2.0",
        world: "provider-adapter",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

/// Raw bindings generated from `wit/provider/0.3.0` (feature `operations`).
#[cfg(feature = "operations")]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/provider/0.3.0",
        world: "provider-adapter",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "tollgate_plugin_sdk::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

#[cfg(feature = "provider")]
pub use bindings::exports::tollgate::provider::adapter::CallContext;
#[cfg(feature = "operations")]
pub use bindings::tollgate::provider::operations::{FormPart, Measured, Operation, OperationAnswer, OperationBody};
#[cfg(feature = "provider")]
pub use bindings::tollgate::provider::types::{
    AdapterError, AuthSlot, ErrorClass, Event, Headers, OutboundRequest, ResponseHead, Usage,
};

/// Re-exported so components can use the same `serde_json` as the helpers.
pub use serde_json;
