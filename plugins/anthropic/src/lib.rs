//! Tollgate provider adapter for the Anthropic Messages API:
//! `POST {base_url}/v1/messages` (JSON, or SSE with `stream: true`), with the
//! key in the `x-api-key` header (added by the host) and
//! `anthropic-version: 2023-06-01`.
//!
//! Every direction is translated:
//! - `request` / `messages` / `schema`: OpenAI chat-completions body → a
//!   Messages request (`system`, alternating `messages` of content blocks,
//!   `tools`, `tool_choice`, `output_config`, `max_tokens`, …);
//! - `response` / `stream`: a `message` (whole, or as SSE events) →
//!   `chat.completion` / `chat.completion.chunk`;
//! - `error`: `{"type":"error","error":{"type","message"}}` → the gateway's
//!   error classes.
//!
//! It exports `tollgate:provider/adapter@0.2.0` and takes the
//! `anthropic-messages` dialect natively (`native`): on `POST /v1/messages`
//! the caller's body goes upstream untranslated (`cache_control`, `thinking`,
//! `document` blocks kept) and the answer comes back as Anthropic sent it.
//!
//! See `docs/adapters/anthropic.md` for what is and is not translated.

mod adapter;
mod error;
mod messages;
mod native;
mod request;
mod response;
mod schema;
mod stream;

pub use adapter::Anthropic;

tollgate_plugin_sdk::export_adapter!(Anthropic);

#[cfg(test)]
mod tests;
