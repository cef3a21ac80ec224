//! Serializes an [`Answer`] as a `chat.completion` object or as the SSE
//! frames of a `chat.completion.chunk` stream. Borrowing structs rather than
//! `json!` trees keeps the benchmark baseline cheap.

use axum::body::Bytes;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::answer::Answer;
use crate::sse::data_frame;
use crate::text::{fragments, word_chunks};

/// Tool-call arguments are streamed in about this many fragments.
const ARGUMENT_FRAGMENTS: usize = 3;

#[derive(Clone, Copy, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Clone, Copy, Serialize)]
pub struct PromptDetails {
    pub cached_tokens: u64,
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: None,
        }
    }

    /// With `cached` of the prompt tokens read from the cache (the `cached_tokens` directive).
    pub fn cached(mut self, cached: Option<u64>) -> Self {
        self.prompt_tokens_details = cached.map(|n| PromptDetails {
            cached_tokens: n.min(self.prompt_tokens),
        });
        self
    }
}

/// Fields common to a completion and each of its chunks.
pub struct Meta<'a> {
    pub id: String,
    pub call_id: String,
    pub created: u64,
    pub model: &'a str,
}

#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [Choice<'a>; 1],
    usage: Usage,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    message: Message<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCall<'a>; 1]>,
    refusal: Option<()>,
}

#[derive(Serialize)]
struct ToolCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionCall<'a>,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [ChunkChoice<'a>],
    /// Absent unless usage was requested; then `null` on every chunk but the
    /// last, as OpenAI does.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<Usage>>,
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Default, Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCall<'a>; 1]>,
}

impl Meta<'_> {
    pub fn completion(&self, answer: &Answer, usage: Usage) -> Response {
        let (content, tool_calls, finish_reason) = match answer {
            Answer::Text(text) => (Some(text.as_str()), None, "stop"),
            Answer::ToolCall { name, arguments } => {
                (None, Some([self.tool_call_head(name, arguments, None)]), "tool_calls")
            }
        };
        let completion = Completion {
            id: &self.id,
            object: "chat.completion",
            created: self.created,
            model: self.model,
            choices: [Choice {
                index: 0,
                message: Message {
                    role: "assistant",
                    content,
                    tool_calls,
                    refusal: None,
                },
                logprobs: None,
                finish_reason,
            }],
            usage,
        };
        let body = serde_json::to_vec(&completion).unwrap_or_default();
        (
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response()
    }

    /// All data frames of the stream, without the `[DONE]` terminator (the
    /// caller decides how the stream ends).
    pub fn stream_frames(&self, answer: &Answer, usage: Usage, include_usage: bool) -> Vec<Bytes> {
        let usage_field = include_usage.then_some(None);
        let mut frames = Vec::new();
        let mut push = |delta: Delta<'_>, finish_reason| {
            let choice = [ChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason,
            }];
            frames.push(self.chunk_frame(&choice, usage_field));
        };
        let finish_reason = match answer {
            Answer::Text(text) => {
                push(
                    Delta {
                        role: Some("assistant"),
                        content: Some(Some("")),
                        ..Delta::default()
                    },
                    None,
                );
                for word in word_chunks(text) {
                    push(
                        Delta {
                            content: Some(Some(word)),
                            ..Delta::default()
                        },
                        None,
                    );
                }
                "stop"
            }
            Answer::ToolCall { name, arguments } => {
                push(
                    Delta {
                        role: Some("assistant"),
                        content: Some(None),
                        tool_calls: Some([self.tool_call_head(name, "", Some(0))]),
                    },
                    None,
                );
                for fragment in fragments(arguments, ARGUMENT_FRAGMENTS) {
                    let call = ToolCall {
                        index: Some(0),
                        id: None,
                        kind: None,
                        function: FunctionCall {
                            name: None,
                            arguments: fragment,
                        },
                    };
                    push(
                        Delta {
                            tool_calls: Some([call]),
                            ..Delta::default()
                        },
                        None,
                    );
                }
                "tool_calls"
            }
        };
        push(Delta::default(), Some(finish_reason));
        if include_usage {
            frames.push(self.chunk_frame(&[], Some(Some(usage))));
        }
        frames
    }

    fn chunk_frame(&self, choices: &[ChunkChoice<'_>], usage: Option<Option<Usage>>) -> Bytes {
        let chunk = Chunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model,
            choices,
            usage,
        };
        data_frame(&serde_json::to_vec(&chunk).unwrap_or_default())
    }

    fn tool_call_head<'s>(&'s self, name: &'s str, arguments: &'s str, index: Option<u32>) -> ToolCall<'s> {
        ToolCall {
            index,
            id: Some(&self.call_id),
            kind: Some("function"),
            function: FunctionCall {
                name: Some(name),
                arguments,
            },
        }
    }
}
