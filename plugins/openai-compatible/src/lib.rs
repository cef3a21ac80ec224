//! Tollgate provider adapter for OpenAI-compatible chat-completions APIs
//! (`POST {base_url}/chat/completions`, bearer auth, SSE streaming).
//!
//! Requests and responses are already in the OpenAI shape, so the adapter only
//! pins the upstream model, strips gateway-only fields, asks for streamed
//! usage, records usage and drops a provider-specific top-level `provider` key.
//!
//! [`OpenAiCompatible`] is public so other adapters can wrap it. Because this
//! crate exports a component, a wrapping *component* cannot link it as a
//! library (the export symbols would be defined twice); it compiles
//! `src/adapter.rs` into itself instead, as `tests/plugins/misbehaving` does.

mod adapter;

pub use adapter::OpenAiCompatible;

tollgate_plugin_sdk::export_adapter!(OpenAiCompatible);

#[cfg(test)]
mod tests;
