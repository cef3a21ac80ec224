//! The protocol-neutral core the native-protocol mocks share. A native module
//! restates its request in OpenAI chat-completions terms (roles, text content,
//! `tools` with `function.name`/`parameters`, `tool_choice`, `response_format`,
//! `mock`), and [`decide`] answers exactly as the OpenAI route would: same reply
//! text, tool call, JSON output, token counts and faults. The native module then
//! renders the [`Decision`] in its own wire format.

use serde_json::Value;

use crate::directives::Directives;
use crate::faults::Faults;
pub use crate::openai::answer::{Answer, Invalid};
use crate::openai::request::ChatRequest;

/// What to answer, and how to misbehave while answering.
pub struct Decision {
    pub answer: Answer,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub faults: Faults,
    /// `retry_after` directive as header text.
    pub retry_after: Option<String>,
    /// `error_code` directive.
    pub error_code: Option<String>,
    /// `cached_tokens` and `cache_write_tokens` directives: the parts of the
    /// prompt reported as read from and written to the cache.
    pub cache_read: u64,
    pub cache_write: u64,
}

/// Decide the answer to an OpenAI-shaped restatement of a native request.
/// `model` must be set (it scripts faults such as `fail-429`).
pub fn decide(openai_request: &Value) -> Result<Decision, Invalid> {
    let bytes = serde_json::to_vec(openai_request).unwrap_or_default();
    let request: ChatRequest<'_> = serde_json::from_slice(&bytes).map_err(|e| Invalid {
        message: format!("mock: cannot read the request: {e}"),
        param: "messages",
    })?;
    let no_directives = Directives::default();
    let directives = request.mock.as_ref().unwrap_or(&no_directives);
    let faults = Faults::resolve(directives, &request.model);
    let answer = Answer::decide(&request, directives)?;
    Ok(Decision {
        prompt_tokens: request.prompt_tokens(),
        completion_tokens: answer.completion_tokens(),
        answer,
        faults,
        retry_after: directives.retry_after_header(),
        error_code: directives.error_code.clone(),
        cache_read: directives.cached_tokens.unwrap_or(0).min(request.prompt_tokens()),
        cache_write: directives.cache_write_tokens.unwrap_or(0).min(
            request
                .prompt_tokens()
                .saturating_sub(directives.cached_tokens.unwrap_or(0)),
        ),
    })
}
