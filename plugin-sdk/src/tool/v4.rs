//! What tool WIT 0.4.0 adds (feature `tool-v4`): [`models`], chat
//! completions through the gateway's metered pipeline, the interface skills
//! use (`tollgate:host/models`). The gateway bills each call to the caller of
//! the tool call (wallet, budgets), logs it inside the tool call, and allows
//! at most `components.max_model_calls` a call. The package must declare the
//! `models` capability (`"capabilities": ["models"]`), or every call is
//! refused with 403 `capability_not_granted`.
//!
//! ```ignore
//! use tollgate_plugin_sdk::tool::models;
//!
//! match models::complete("openai/gpt-4o-mini", "Name a colour.") {
//!     Ok(text) => { /* the model's answer */ }
//!     Err(error) => { /* e.g. 402 insufficient_balance: error.describe() */ }
//! }
//! ```

pub use super::bindings::tollgate::host::models::ModelError;

/// Model calls through the gateway's metered pipeline (`tollgate:host/models`).
pub mod models {
    use serde_json::{Value, json};

    use super::ModelError;

    /// A chat completion: `request` is an OpenAI chat-completions body (not
    /// streamed); the answer is the `chat.completion` object, with
    /// `usage.cost`.
    pub fn chat(request: &Value) -> Result<Value, ModelError> {
        let answer = super::super::bindings::tollgate::host::models::chat(&request.to_string())?;
        serde_json::from_str(&answer).map_err(|e| ModelError {
            status: 502,
            code: "invalid_answer".into(),
            message: format!("the gateway's answer is not JSON: {e}"),
        })
    }

    /// One user message to `model`; the answer's text.
    pub fn complete(model: &str, prompt: &str) -> Result<String, ModelError> {
        let answer = chat(&json!({
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
        }))?;
        Ok(answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }
}

impl ModelError {
    /// The failure as a sentence for a tool's caller, with its status and
    /// code (`402 insufficient_balance`, …).
    pub fn describe(&self) -> String {
        format!("a model call failed ({} {}): {}", self.status, self.code, self.message)
    }
}
