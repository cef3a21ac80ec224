//! Tollgate provider adapter for Azure OpenAI deployments:
//! `POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version=…`
//! with the key in the `api-key` header.
//!
//! Azure speaks the OpenAI protocol, so this wraps the OpenAI-compatible
//! adapter, compiled in from its source file (a component cannot link another
//! component crate; see `plugins/openai-compatible/src/lib.rs`). Only the URL,
//! the auth slot, the body's `model` (Azure takes the deployment from the URL),
//! Azure's prompt-filter stream chunks and content-filter errors differ.

#[allow(dead_code)]
#[path = "../../openai-compatible/src/adapter.rs"]
mod openai_compatible;

mod adapter;

pub use adapter::{AzureOpenAi, DEFAULT_API_VERSION};

tollgate_plugin_sdk::export_adapter!(AzureOpenAi);

#[cfg(test)]
mod tests;
