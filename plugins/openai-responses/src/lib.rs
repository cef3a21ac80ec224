//! Tollgate provider adapter for OpenAI's Responses API:
//! `POST {base_url}/responses`, bearer auth, SSE streaming with named
//! `response.*` events.
//!
//! Some OpenAI models answer only there (the `-pro` models, the `-codex`
//! models): the catalog names this adapter for them, and callers keep
//! speaking chat completions. Every direction is translated:
//! - `request`: a chat-completions body → a Responses body (`input` items,
//!   `instructions`-free system and developer messages, flat function tools,
//!   `text.format`, `reasoning.effort`, `max_output_tokens`, `store: false`);
//! - `response` / `stream`: a `response` object (whole, or as its events) →
//!   `chat.completion` / `chat.completion.chunk`;
//! - errors are OpenAI's `{"error": …}`, classified as for chat completions.
//!
//! See `docs/adapters/openai-responses.md` for what is and is not translated.

mod adapter;
mod request;
mod response;
mod stream;

pub use adapter::OpenAiResponses;

tollgate_plugin_sdk::export_adapter!(OpenAiResponses);

#[cfg(test)]
mod tests;
