//! Tollgate provider adapter for the Google Gemini API (Google AI Studio):
//! `POST {base_url}/models/{model}:generateContent` and
//! `POST {base_url}/models/{model}:streamGenerateContent?alt=sse`, with the key
//! in the `x-goog-api-key` header (added by the host).
//!
//! Gemini has its own wire format, so every direction is translated:
//! - `request` / `messages` / `schema`: OpenAI chat-completions body → Gemini
//!   `GenerateContentRequest` (`contents`, `systemInstruction`, `tools`,
//!   `toolConfig`, `generationConfig`);
//! - `response` / `stream`: `GenerateContentResponse` (whole, or one per SSE
//!   event) → `chat.completion` / `chat.completion.chunk`;
//! - `error`: Google's `{"error":{"code","message","status","details"}}` →
//!   the gateway's error classes.
//!
//! See `docs/adapters/gemini.md` for what is and is not translated.

mod adapter;
mod error;
mod messages;
mod operations;
mod request;
mod response;
mod schema;
mod stream;

pub use adapter::Gemini;

tollgate_plugin_sdk::export_adapter!(Gemini);

#[cfg(test)]
mod tests;
