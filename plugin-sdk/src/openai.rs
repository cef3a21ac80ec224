//! Helpers for OpenAI chat-completions payloads: preparing a request for an
//! upstream, reading a request's parameters and messages for a native
//! protocol, writing a whole answer, reading and writing `usage`, classifying
//! and building errors; and [`Compatible`], the whole protocol of an
//! OpenAI-compatible upstream.
//!
//! Each concern is a module of its own (`request`, `params`, `content`,
//! `completion`, `usage`, `errors`), and everything is re-exported here, so
//! an adapter names `openai::…` whichever part it uses.

mod compatible;
mod completion;
mod content;
mod errors;
#[cfg(feature = "operations")]
pub mod operations;
mod params;
mod request;
mod usage;

pub use compatible::{Compatible, CompatibleStream};
pub use completion::{Answer, arguments_text, completion, completion_id, tool_call};
pub use content::{
    FunctionCall, base64_data_url, function_call, image_url, role, texts, tool_call_id, tool_result_id,
    unsupported_part, unsupported_role,
};
pub use errors::{
    ErrorDetail, MAX_ERROR_MESSAGE, cap_message, classify_detail, classify_error, classify_status, error_body,
    error_body_for, error_type, header, retry_after, stream_error,
};
pub use params::{
    ReasoningEffort, ResponseFormat, ToolChoice, max_tokens, messages, mock_directives, number, number_as_sent,
    reasoning_effort, request_object, require_one_choice, response_format, stop_sequences, tool_choice,
};
pub use request::{FunctionTool, GATEWAY_FIELDS, append_continuation, function_tools, prepare_object, prepare_request};
pub use usage::{usage_from_raw, usage_from_value, usage_json, usage_with_cache_apart};
