//! Helpers for OpenAI chat-completions payloads: preparing a request for an
//! upstream, reading `usage`, classifying and building errors; and
//! [`Compatible`], the whole protocol of an OpenAI-compatible upstream.
//!
//! Each concern is a module of its own (`request`, `usage`, `errors`), and
//! everything is re-exported here, so an adapter names `openai::…` whichever
//! part it uses.

mod compatible;
mod errors;
mod request;
mod usage;

pub use compatible::{Compatible, CompatibleStream};
pub use errors::{
    ErrorDetail, MAX_ERROR_MESSAGE, cap_message, classify_detail, classify_error, classify_status, error_body,
    error_body_for, error_type, header, retry_after, stream_error,
};
pub use request::{FunctionTool, GATEWAY_FIELDS, append_continuation, function_tools, prepare_object, prepare_request};
pub use usage::{usage_from_raw, usage_from_value, usage_json};
