//! `stop_sequences` and `max_tokens` applied to a text answer, as Cohere
//! applies them: the text ends before the first stop sequence (finish reason
//! `STOP_SEQUENCE`, the sequence itself not included), and after
//! `max_tokens` words (the mock's tokens, see `text`) it is cut with finish
//! reason `MAX_TOKENS`. Tool calls are left whole.

use serde_json::{Map, Value};

use crate::neutral::{Answer, Decision};
use crate::text::{word_chunks, word_count};

/// Cut `decision`'s text per `request`; the finish reason of the answer.
pub fn apply(decision: &mut Decision, request: &Map<String, Value>) -> &'static str {
    let Answer::Text(text) = &mut decision.answer else {
        return "TOOL_CALL";
    };
    let mut finish = "COMPLETE";
    let stop_at = request
        .get("stop_sequences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s))
        .min();
    if let Some(at) = stop_at {
        text.truncate(at);
        finish = "STOP_SEQUENCE";
    }
    if let Some(limit) = request.get("max_tokens").and_then(Value::as_u64)
        && (word_count(text) as u64) > limit
    {
        let kept: String = word_chunks(text).into_iter().take(limit as usize).collect();
        *text = kept;
        finish = "MAX_TOKENS";
    }
    decision.completion_tokens = word_count(text) as u64;
    finish
}
