//! Tollgate provider adapter for Amazon Bedrock's Converse API:
//! `POST {base_url}/model/{modelId}/converse` (or `/converse-stream`), signed
//! by the host with AWS SigV4 (auth slot `aws-sigv4("bedrock")`).
//!
//! Converse is one message format for every Bedrock model, so the adapter
//! translates OpenAI chat completions to it and back:
//! - `request`: messages and content blocks, system prompt, tools and
//!   `tool_choice`, inference parameters, structured output through a forced
//!   tool, continuation as an assistant prefill;
//! - `response`: a Converse answer to a `chat.completion`;
//! - `stream`: ConverseStream events (already decoded from the AWS event-stream
//!   framing by the host) to `chat.completion.chunk`s;
//! - `error`: Bedrock error types (HTTP and in-stream exceptions) to classes.
//!
//! See `docs/adapters/bedrock.md` for what is and is not translated.

mod adapter;
mod converse;
mod error;
mod messages;
mod operations;
mod request;
mod response;
mod stream;
mod tools;

pub use adapter::Bedrock;

tollgate_plugin_sdk::export_adapter!(Bedrock);

#[cfg(test)]
mod tests;
