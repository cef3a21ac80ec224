//! Tollgate provider adapter for Azure OpenAI deployments:
//! `POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version=…`
//! with the key in the `api-key` header.
//!
//! Azure speaks the OpenAI protocol, so this wraps the SDK's
//! `openai::Compatible` protocol (the one `plugins/openai-compatible`
//! exports). Only the URL, the auth slot, the body's `model` (Azure takes the
//! deployment from the URL), Azure's prompt-filter stream chunks and
//! content-filter errors differ. It exports WIT 0.3.0: embeddings, images,
//! speech, transcriptions and moderations go to the deployment's own
//! endpoint the same way.

mod adapter;

pub use adapter::{Azure, AzureOpenAi, DEFAULT_API_VERSION};

tollgate_plugin_sdk::export_adapter!(AzureOpenAi);

#[cfg(test)]
mod tests;
