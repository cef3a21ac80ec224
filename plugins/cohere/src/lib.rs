//! Tollgate provider adapter for the Cohere v2 Chat API:
//! `POST {base_url}/v2/chat` (one JSON answer, or SSE events with
//! `"stream": true`), with the key as `Authorization: Bearer` (added by the
//! host).
//!
//! Cohere has its own wire format, so every direction is translated:
//! - `request` / `messages`: OpenAI chat-completions body → Cohere v2 chat
//!   request (`messages`, `tools`, `tool_choice`, `response_format`,
//!   `stop_sequences`, `p`, …);
//! - `response` / `stream`: the v2 chat answer (whole, or its `message-start`
//!   … `message-end` events) → `chat.completion` / `chat.completion.chunk`;
//! - `error`: Cohere's `{"message": "…"}` error bodies (and a `message-end`
//!   carrying `error`) → the gateway's error classes.
//!
//! - `operations` (WIT 0.3.0): embeddings through `POST /v2/embed` and
//!   rerank through `POST /v2/rerank`.
//!
//! See `docs/adapters/cohere.md` for what is and is not translated.

mod adapter;
mod error;
mod messages;
mod operations;
mod request;
mod response;
mod stream;

pub use adapter::Cohere;

tollgate_plugin_sdk::export_adapter!(Cohere);

#[cfg(test)]
mod tests;
