//! The `mock` object a test puts in a request body to script the answer.
//! Protocol-neutral: every protocol module reads the same fields.

use serde::Deserialize;
use serde_json::Value;

/// Caps `words` so a typo cannot make the mock build a gigabyte reply.
const MAX_WORDS: usize = 100_000;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Directives {
    /// Reply text instead of the default echo.
    pub reply: Option<String>,
    /// Reply with `word1 word2 … wordN`.
    pub words: Option<usize>,
    /// Answer with this HTTP status and a protocol-shaped error.
    pub status: Option<u16>,
    /// Overrides the error code chosen for `status`.
    pub error_code: Option<String>,
    /// Seconds (number) or any header text for `retry-after`.
    pub retry_after: Option<Value>,
    /// Delay before the response head.
    pub latency_ms: Option<u64>,
    /// Delay between stream frames.
    pub chunk_delay_ms: Option<u64>,
    /// Stream: send this many frames, then drop the connection.
    pub cut_after: Option<usize>,
    /// Stream: send this many frames, then an error frame, then end.
    pub stream_error_after: Option<usize>,
    /// Stream: send this many frames, then end the body cleanly without the
    /// protocol's terminal event (no `finish_reason`, `[DONE]`,
    /// `message_stop`, `finishReason`, `messageStop` or `message-end`).
    pub eof_after: Option<usize>,
    /// Report this many prompt tokens as read from the prompt cache (at most
    /// the prompt): OpenAI's `prompt_tokens_details.cached_tokens`,
    /// Anthropic's `cache_read_input_tokens`.
    pub cached_tokens: Option<u64>,
    /// Report this many prompt tokens as written to the prompt cache
    /// (Anthropic's `cache_creation_input_tokens`; OpenAI has no such field).
    pub cache_write_tokens: Option<u64>,
    /// Reply as scripted even when `response_format` asks for JSON: a model
    /// that ignores the requested format (OpenAI-compatible protocol).
    pub unformatted: bool,
}

impl Directives {
    /// The scripted reply text, if the directives ask for one.
    pub fn reply_text(&self) -> Option<String> {
        if let Some(reply) = &self.reply {
            return Some(reply.clone());
        }
        self.words.map(|n| crate::text::numbered_words(n.min(MAX_WORDS)))
    }

    /// `retry_after` as header text.
    pub fn retry_after_header(&self) -> Option<String> {
        match self.retry_after.as_ref()? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    }
}
