//! A streamed Messages answer: the chat pipeline's chunks → Anthropic's SSE
//! events (`message_start`, `content_block_start` / `_delta` / `_stop`,
//! `message_delta`, `message_stop`, `error`). The stream's settled end, with
//! the billed usage and `service`, becomes the `message_delta`, with
//! `usage.cost`, `provider` and `service` added.

use axum::response::Response;
use serde_json::{Map, Value, json};

use super::super::{ChatEvent, Counts, first_choice, raw_with_cost, translate_stream, write_event};
use super::{message_id, stop_reason, usage};
use crate::pipeline::{ChatStream, Ending};
use tollgate_web::error::{ApiError, Failure};
use tollgate_web::server::RequestId;

pub fn respond(chat: ChatStream, request_id: &RequestId) -> Response {
    let mut events = Events {
        request_id: request_id.0.to_string(),
        ..Events::default()
    };
    translate_stream(chat, move |event, out| events.on(event, out), request_id)
}

/// The block being streamed: text, or the tool call with this chat index.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Tool(u64),
}

#[derive(Default)]
struct Events {
    request_id: String,
    started: bool,
    /// The open content block and its Anthropic index.
    open: Option<(Open, usize)>,
    next_index: usize,
    finish: Option<String>,
    ended: bool,
}

impl Events {
    fn on(&mut self, event: ChatEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            ChatEvent::Chunk(chunk) => self.chunk(&chunk, out),
            ChatEvent::End(Ending {
                error: Some(error),
                service,
                ..
            }) => self.error(&error, service.to_json(), out),
            ChatEvent::End(ending) => self.close(ending, out),
        }
    }

    fn chunk(&mut self, chunk: &Map<String, Value>, out: &mut Vec<u8>) {
        if !self.started {
            self.start(chunk, out);
        }
        if let Some(choice) = first_choice(chunk) {
            let delta = &choice["delta"];
            if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                self.open_block(Open::Text, out, || json!({"type": "text", "text": ""}));
                let index = self.index();
                let event = json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}});
                write_event(out, "content_block_delta", event.to_string().as_bytes());
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let tool = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                self.open_block(Open::Tool(tool), out, || {
                    json!({"type": "tool_use", "id": call.get("id").cloned().unwrap_or(Value::Null),
                           "name": call["function"].get("name").cloned().unwrap_or(Value::Null), "input": {}})
                });
                if let Some(fragment) = call["function"]["arguments"].as_str().filter(|a| !a.is_empty()) {
                    let index = self.index();
                    let event = json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": fragment}});
                    write_event(out, "content_block_delta", event.to_string().as_bytes());
                }
            }
            if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(finish.to_string());
            }
        }
    }

    /// `message_start`. Its `input_tokens` are the provider's when the first
    /// chunk reports usage (some OpenAI-compatible servers report it on
    /// every chunk); most report it only at the end, in `message_delta`, and
    /// then it is 0 here, as Anthropic's own `output_tokens` is.
    fn start(&mut self, chunk: &Map<String, Value>, out: &mut Vec<u8>) {
        self.started = true;
        let counts = Counts::of(chunk);
        let id = message_id(chunk.get("id").and_then(Value::as_str), &self.request_id);
        let event = json!({
            "type": "message_start",
            "message": {
                "id": id, "type": "message", "role": "assistant", "content": [],
                "model": chunk.get("model").cloned().unwrap_or(Value::Null),
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": counts.uncached_prompt(), "output_tokens": 0,
                          "cache_read_input_tokens": counts.cache_read, "cache_creation_input_tokens": counts.cache_write},
                "provider": chunk.get("provider").cloned().unwrap_or(Value::Null),
            },
        });
        write_event(out, "message_start", event.to_string().as_bytes());
    }

    fn index(&self) -> usize {
        self.open.map_or(0, |(_, index)| index)
    }

    /// Opens `kind` unless it is the block already open.
    fn open_block(&mut self, kind: Open, out: &mut Vec<u8>, block: impl FnOnce() -> Value) {
        if self.open.is_some_and(|(open, _)| open == kind) {
            return;
        }
        self.close_block(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((kind, index));
        let event = json!({"type": "content_block_start", "index": index, "content_block": block()});
        write_event(out, "content_block_start", event.to_string().as_bytes());
    }

    fn close_block(&mut self, out: &mut Vec<u8>) {
        if let Some((_, index)) = self.open.take() {
            let event = json!({"type": "content_block_stop", "index": index});
            write_event(out, "content_block_stop", event.to_string().as_bytes());
        }
    }

    /// The settled end: the closing chunk's finish, the billed usage, cost
    /// and provenance.
    fn close(&mut self, ending: Ending, out: &mut Vec<u8>) {
        let mut chunk = ending.chunk.unwrap_or_default();
        // The closing chunk may carry the answer's last delta and its finish.
        self.chunk(&chunk, out);
        self.close_block(out);
        let counts = Counts::billed(&ending.service);
        let cost = ending.service.cost();
        let mut delta = Map::new();
        delta.insert("type".into(), json!("message_delta"));
        delta.insert(
            "delta".into(),
            json!({"stop_reason": stop_reason(self.finish.as_deref()), "stop_sequence": null}),
        );
        delta.insert("usage".into(), Value::Object(usage(&counts)));
        delta.insert("provider".into(), chunk.remove("provider").unwrap_or(Value::Null));
        let service = ending.service.take_block(&mut chunk);
        delta.insert("service".into(), service.unwrap_or(Value::Null));
        write_event(out, "message_delta", raw_with_cost(delta, cost).get().as_bytes());
        write_event(out, "message_stop", br#"{"type":"message_stop"}"#);
        self.ended = true;
    }

    /// The stream failed: Anthropic's `error` event, with the gateway's code
    /// and `service` (what the failed attempts cost).
    fn error(&mut self, error: &ApiError, service: Value, out: &mut Vec<u8>) {
        let kind = match (error.kind, error.failure) {
            ("rate_limit_error" | "invalid_request_error" | "timeout_error", _) => error.kind,
            (_, Failure::Overloaded) => "overloaded_error",
            _ => "api_error",
        };
        let event = json!({
            "type": "error",
            "error": {"type": kind, "message": error.message, "code": error.code},
            "service": service,
        });
        write_event(out, "error", event.to_string().as_bytes());
        self.ended = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events for `chunks` and then an end settled at 7 nano-USD for 5 + 2
    /// tokens, whose closing chunk is `closing` (failed with `error`).
    fn run_to(chunks: &[Value], closing: Value, error: Option<ApiError>) -> Vec<(String, Value)> {
        let mut events = Events::default();
        let mut out = Vec::new();
        for chunk in chunks {
            events.on(ChatEvent::Chunk(chunk.as_object().unwrap().clone()), &mut out);
        }
        let usage = tollgate_plugin_host::Usage {
            input: 5,
            output: 2,
            cache_read: None,
            cache_write: None,
            reasoning: None,
        };
        let ending = Ending {
            chunk: closing.as_object().cloned(),
            service: super::super::super::tests::service(7, Some(usage)),
            error,
        };
        events.on(ChatEvent::End(ending), &mut out);
        String::from_utf8(out)
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap().to_string();
                (
                    name,
                    serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
                )
            })
            .collect()
    }

    fn run(chunks: &[Value]) -> Vec<(String, Value)> {
        let closing = json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}, "provider": "p",
                             "service": {"request_id": "r", "cost_usd": "0.000000007"}});
        run_to(chunks, closing, None)
    }

    #[test]
    fn text_then_tool_call_then_usage() {
        let events = run(&[
            json!({"id": "chatcmpl-1", "model": "m", "provider": "p", "choices": [{"delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"delta": {"content": "Hi"}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "w", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        ]);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(events[0].1["message"]["id"], "msg_1");
        assert_eq!(events[4].1["content_block"]["name"], "w");
        assert_eq!(events[4].1["index"], 1);
        assert_eq!(events[7].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[7].1["usage"]["input_tokens"], 5);
        assert_eq!(events[7].1["usage"]["cost"].as_f64(), Some(7e-9));
    }

    #[test]
    fn message_start_reports_the_input_tokens_a_first_chunk_states() {
        let events = run(&[
            json!({"id": "c", "model": "p/m", "choices": [{"delta": {"content": "Hi"}}],
                   "usage": {"prompt_tokens": 40, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 30}}}),
        ]);
        assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 10);
        assert_eq!(events[0].1["message"]["usage"]["cache_read_input_tokens"], 30);
        assert_eq!(events[0].1["message"]["model"], "p/m");
    }

    #[test]
    fn a_failed_stream_ends_in_an_error_event() {
        let error = ApiError::upstream_rate_limited("p", "slow");
        let closing = json!({"choices": [{"delta": {}, "finish_reason": "error"}], "error": error.error_object()});
        let events = run_to(
            &[json!({"choices": [{"delta": {"content": "Hi"}}]})],
            closing,
            Some(error),
        );
        let last = events.last().unwrap();
        assert_eq!(last.0, "error");
        assert_eq!(last.1["error"]["type"], "rate_limit_error");
        assert_eq!(last.1["service"]["request_id"], "req_1");
    }

    #[test]
    fn an_overloaded_upstream_is_an_overloaded_error() {
        let error = ApiError::new(
            axum::http::StatusCode::BAD_GATEWAY,
            "upstream_error",
            "upstream_overloaded",
            "busy",
        )
        .failing(Failure::Overloaded);
        let events = run_to(&[], json!({"choices": []}), Some(error));
        assert_eq!(events.last().unwrap().1["error"]["type"], "overloaded_error");
    }

    #[test]
    fn a_closing_chunk_with_the_last_text_streams_it_before_the_delta() {
        let closing = json!({"id": "c", "choices": [{"delta": {"content": "end"}, "finish_reason": "length"}]});
        let events = run_to(&[], closing, None);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[..3],
            ["message_start", "content_block_start", "content_block_delta"]
        );
        assert_eq!(events[2].1["delta"]["text"], "end");
        assert_eq!(events[4].1["delta"]["stop_reason"], "max_tokens");
        assert_eq!(events[4].1["usage"]["output_tokens"], 2);
    }
}
