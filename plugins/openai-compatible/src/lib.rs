//! Tollgate provider adapter for OpenAI-compatible chat-completions APIs
//! (`POST {base_url}/chat/completions`, bearer auth, SSE streaming).
//!
//! Requests and responses are already in the OpenAI shape, so the adapter only
//! pins the upstream model, strips gateway-only fields, asks for streamed
//! usage, records usage and drops a provider-specific top-level `provider` key.
//! All of that is the SDK's `openai::Compatible` protocol, which adapters for
//! OpenAI-like APIs wrap; this crate only exports it. It exports WIT 0.3.0,
//! so the same protocol serves the operations besides chat (embeddings,
//! images, audio, moderations, rerank) at their OpenAI endpoints.

mod adapter;

pub use adapter::OpenAiCompatible;

tollgate_plugin_sdk::export_adapter!(OpenAiCompatible);

#[cfg(test)]
mod tests;
