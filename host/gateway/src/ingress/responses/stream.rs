//! A streamed Responses answer: the chat pipeline's chunks → the Responses
//! events (`response.created`, `response.in_progress`, `output_item.added`,
//! `content_part.added`, `output_text.delta`, `function_call_arguments.delta`,
//! their `.done` events, then `response.completed`, `response.incomplete` or
//! `response.failed`), each with a `sequence_number`. The stream's settled
//! end becomes the final response object, with the billed `usage` (and
//! `cost`), `provider` and `service`.

use axum::response::Response;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::super::{ChatEvent, Counts, first_choice, raw_with_cost, translate_stream, write_event};
use super::tools::custom_input;
use super::{Echo, message_item, response_id, status, usage};
use crate::pipeline::{ChatStream, Ending};
use tollgate_web::server::RequestId;

pub fn respond(chat: ChatStream, echo: Echo, request_id: &RequestId) -> Response {
    let id = response_id(&request_id.0);
    let mut events = Events {
        message_id: format!("msg_{}", &id[5..]),
        id,
        echo,
        model: Value::Null,
        sequence: 0,
        started: false,
        items: Vec::new(),
        finish: None,
        ended: false,
    };
    translate_stream(chat, move |event, out| events.on(event, out), request_id)
}

/// An output item being streamed, in output order.
enum Item {
    Text(String),
    Call {
        chat_index: u64,
        call_id: String,
        name: Value,
        arguments: String,
    },
}

struct Events {
    id: String,
    message_id: String,
    echo: Echo,
    model: Value,
    sequence: u64,
    started: bool,
    items: Vec<Item>,
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
            ChatEvent::End(ending) => {
                let closing = ending.chunk.clone().unwrap_or_default();
                if ending.error.is_some() {
                    self.start(&closing, out);
                    self.failed(closing, ending, out);
                } else {
                    // The closing chunk may carry the answer's last delta and its finish.
                    self.chunk(&closing, out);
                    self.complete(closing, ending, out);
                }
            }
        }
    }

    fn emit(&mut self, out: &mut Vec<u8>, kind: &str, mut event: Map<String, Value>) {
        event.insert("type".into(), Value::String(kind.to_string()));
        event.insert("sequence_number".into(), Value::from(self.sequence));
        self.sequence += 1;
        write_event(out, kind, Value::Object(event).to_string().as_bytes());
    }

    fn emit_json(&mut self, out: &mut Vec<u8>, kind: &str, event: Value) {
        let Value::Object(event) = event else {
            unreachable!("events are objects")
        };
        self.emit(out, kind, event);
    }

    /// `response.created` and `response.in_progress`, once.
    fn start(&mut self, chunk: &Map<String, Value>, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        self.model = chunk.get("model").cloned().unwrap_or(Value::Null);
        let response = self.echo.response(&self.id, &self.model, "in_progress", Vec::new());
        self.emit_json(out, "response.created", json!({"response": response}));
        let response = self.echo.response(&self.id, &self.model, "in_progress", Vec::new());
        self.emit_json(out, "response.in_progress", json!({"response": response}));
    }

    fn chunk(&mut self, chunk: &Map<String, Value>, out: &mut Vec<u8>) {
        self.start(chunk, out);
        if let Some(choice) = first_choice(chunk) {
            let delta = &choice["delta"];
            if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                self.text(text, out);
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                self.call(call, out);
            }
            if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(finish.to_string());
            }
        }
    }

    fn text(&mut self, text: &str, out: &mut Vec<u8>) {
        let output_index = self.items.len().saturating_sub(1);
        if let Some(Item::Text(all)) = self.items.last_mut() {
            all.push_str(text);
        } else {
            let output_index = self.items.len();
            self.items.push(Item::Text(text.to_string()));
            let item = json!({"type": "message", "id": self.message_id, "status": "in_progress", "role": "assistant", "content": []});
            self.emit_json(
                out,
                "response.output_item.added",
                json!({"output_index": output_index, "item": item}),
            );
            let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
            let added =
                json!({"item_id": self.message_id, "output_index": output_index, "content_index": 0, "part": part});
            self.emit_json(out, "response.content_part.added", added);
            let event = json!({"item_id": self.message_id, "output_index": output_index, "content_index": 0, "delta": text, "logprobs": []});
            return self.emit_json(out, "response.output_text.delta", event);
        }
        let event = json!({"item_id": self.message_id, "output_index": output_index, "content_index": 0, "delta": text, "logprobs": []});
        self.emit_json(out, "response.output_text.delta", event);
    }

    fn call(&mut self, call: &Value, out: &mut Vec<u8>) {
        let chat_index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let fragment = call["function"]["arguments"].as_str().unwrap_or_default();
        let known = self
            .items
            .iter()
            .position(|item| matches!(item, Item::Call { chat_index: i, .. } if *i == chat_index));
        let output_index = match known {
            Some(index) => index,
            None => {
                let call_id = call["id"].as_str().unwrap_or_default().to_string();
                let name = call["function"].get("name").cloned().unwrap_or(Value::Null);
                let item = self.echo.names.call_item(&call_id, &name, "", "in_progress");
                self.items.push(Item::Call {
                    chat_index,
                    call_id,
                    name,
                    arguments: String::new(),
                });
                let output_index = self.items.len() - 1;
                self.emit_json(
                    out,
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": item}),
                );
                output_index
            }
        };
        if fragment.is_empty() {
            return;
        }
        let Item::Call {
            call_id,
            arguments,
            name,
            ..
        } = &mut self.items[output_index]
        else {
            unreachable!("the index names a call")
        };
        arguments.push_str(fragment);
        // A custom tool's input is a string inside the JSON arguments: it is
        // sent whole when the call is done.
        if self.echo.names.is_custom(name.as_str().unwrap_or_default()) {
            return;
        }
        let event = json!({"item_id": format!("fc_{call_id}"), "output_index": output_index, "delta": fragment});
        self.emit_json(out, "response.function_call_arguments.delta", event);
    }

    /// The `.done` events of every item, and the finished items.
    fn finish_items(&mut self, out: &mut Vec<u8>) -> Vec<Value> {
        let mut done = Vec::new();
        let items = std::mem::take(&mut self.items);
        for (output_index, item) in items.iter().enumerate() {
            let finished = match item {
                Item::Text(text) => {
                    let id = self.message_id.clone();
                    let event = json!({"item_id": id, "output_index": output_index, "content_index": 0, "text": text, "logprobs": []});
                    self.emit_json(out, "response.output_text.done", event);
                    let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
                    let event = json!({"item_id": id, "output_index": output_index, "content_index": 0, "part": part});
                    self.emit_json(out, "response.content_part.done", event);
                    message_item(&id, text, "completed")
                }
                Item::Call {
                    call_id,
                    name,
                    arguments,
                    ..
                } if self.echo.names.is_custom(name.as_str().unwrap_or_default()) => {
                    let item_id = format!("ctc_{call_id}");
                    let input = custom_input(arguments);
                    let event = json!({"item_id": item_id, "output_index": output_index, "delta": input});
                    self.emit_json(out, "response.custom_tool_call_input.delta", event);
                    let event = json!({"item_id": item_id, "output_index": output_index, "input": input});
                    self.emit_json(out, "response.custom_tool_call_input.done", event);
                    self.echo.names.call_item(call_id, name, arguments, "completed")
                }
                Item::Call {
                    call_id,
                    name,
                    arguments,
                    ..
                } => {
                    let event = json!({"item_id": format!("fc_{call_id}"), "output_index": output_index, "name": name, "arguments": arguments});
                    self.emit_json(out, "response.function_call_arguments.done", event);
                    self.echo.names.call_item(call_id, name, arguments, "completed")
                }
            };
            let event = json!({"output_index": output_index, "item": finished});
            self.emit_json(out, "response.output_item.done", event);
            done.push(finished);
        }
        done
    }

    /// The settled end: the final response with billed usage and provenance.
    fn complete(&mut self, mut chunk: Map<String, Value>, ending: Ending, out: &mut Vec<u8>) {
        let cost = ending.service.cost();
        let output = self.finish_items(out);
        let status = status(self.finish.as_deref());
        let mut response = self.echo.response(&self.id, &self.model, status, output);
        response.insert("usage".into(), Value::Object(usage(&Counts::billed(&ending.service))));
        response.insert("provider".into(), Value::String(ending.service.provider().to_string()));
        let service = ending
            .service
            .take_block(&mut chunk)
            .unwrap_or_else(|| ending.service.to_json());
        response.insert("service".into(), self.echo.service(Some(service)));
        let rendered = raw_with_cost(response, cost);
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        self.emit_raw(out, kind, &rendered);
        self.ended = true;
    }

    /// The stream failed: `response.failed`, with the gateway's error and
    /// `service` (what the failed attempts cost).
    fn failed(&mut self, mut chunk: Map<String, Value>, ending: Ending, out: &mut Vec<u8>) {
        let cost = ending.service.cost();
        let output = self.finish_items(out);
        let mut response = self.echo.response(&self.id, &self.model, "failed", output);
        if let Some(error) = &ending.error {
            response.insert("error".into(), json!({"code": error.code, "message": error.message}));
        }
        response.insert("usage".into(), Value::Object(usage(&Counts::billed(&ending.service))));
        response.insert("provider".into(), Value::String(ending.service.provider().to_string()));
        let service = ending
            .service
            .take_block(&mut chunk)
            .unwrap_or_else(|| ending.service.to_json());
        response.insert("service".into(), service);
        let rendered = raw_with_cost(response, cost);
        self.emit_raw(out, "response.failed", &rendered);
        self.ended = true;
    }

    /// An event holding an already rendered response (its exact cost).
    fn emit_raw(&mut self, out: &mut Vec<u8>, kind: &str, response: &RawValue) {
        #[derive(serde::Serialize)]
        struct Event<'a> {
            #[serde(rename = "type")]
            kind: &'a str,
            sequence_number: u64,
            response: &'a RawValue,
        }
        let event = Event {
            kind,
            sequence_number: self.sequence,
            response,
        };
        self.sequence += 1;
        write_event(out, kind, &serde_json::to_vec(&event).expect("events serialise"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settled end of a stream: `cost` nano-USD for 3 + 2 tokens.
    fn ending(cost: i64, closing: Value) -> ChatEvent {
        let usage = tollgate_plugin_host::Usage {
            input: 3,
            output: 2,
            cache_read: None,
            cache_write: None,
            reasoning: None,
        };
        ChatEvent::End(Ending {
            chunk: closing.as_object().cloned(),
            service: super::super::super::tests::service(cost, Some(usage)),
            error: None,
        })
    }

    #[test]
    fn text_and_call_then_completed() {
        let echo = Echo::of(&Map::new());
        let mut events = Events {
            id: "resp_1".into(),
            message_id: "msg_1".into(),
            echo,
            model: Value::Null,
            sequence: 0,
            started: false,
            items: Vec::new(),
            finish: None,
            ended: false,
        };
        let mut out = Vec::new();
        for chunk in [
            json!({"model": "m", "choices": [{"delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"delta": {"content": "a"}}]}),
            json!({"choices": [{"delta": {"content": "b"}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "w", "arguments": "{\"x\""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}}]}),
        ] {
            events.on(ChatEvent::Chunk(chunk.as_object().unwrap().clone()), &mut out);
        }
        events.on(
            ending(5, json!({"choices": [], "service": {"cost_usd": "0.000000005"}})),
            &mut out,
        );
        let text = String::from_utf8(out).unwrap();
        let kinds: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
        assert_eq!(kinds.first(), Some(&"response.created"));
        assert_eq!(kinds.last(), Some(&"response.completed"));
        assert_eq!(kinds.iter().filter(|k| **k == "response.output_text.delta").count(), 2);
        let data = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .unwrap();
        let last: Value = serde_json::from_str(data).unwrap();
        assert_eq!(last["response"]["output"][0]["content"][0]["text"], "ab");
        assert_eq!(last["response"]["output"][1]["arguments"], "{\"x\":1}");
        assert_eq!(last["response"]["usage"]["total_tokens"], 5);
        assert_eq!(last["response"]["usage"]["cost"].as_f64(), Some(5e-9));
        assert_eq!(last["sequence_number"].as_u64(), Some(kinds.len() as u64 - 1));
    }

    /// A custom tool's input arrives inside JSON arguments: its events carry
    /// the string itself, once the call is whole.
    #[test]
    fn a_custom_tool_call_streams_its_input_whole() {
        let request = json!({"model": "m/x", "input": "go", "tools": [{"type": "custom", "name": "apply_patch"}]});
        let chat = super::super::request::to_chat_form(request.as_object().unwrap().clone()).unwrap();
        let mut echo = Echo::of(&Map::new());
        echo.names = chat.names;
        let mut events = Events {
            id: "resp_1".into(),
            message_id: "msg_1".into(),
            echo,
            model: Value::Null,
            sequence: 0,
            started: false,
            items: Vec::new(),
            finish: None,
            ended: false,
        };
        let mut out = Vec::new();
        for chunk in [
            json!({"model": "m/x", "choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "apply_patch", "arguments": "{\"input\":"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\"*** Begin Patch\"}"}}]}}]}),
        ] {
            events.on(ChatEvent::Chunk(chunk.as_object().unwrap().clone()), &mut out);
        }
        events.on(ending(0, json!({"choices": []})), &mut out);
        let text = String::from_utf8(out).unwrap();
        let kinds: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
        assert!(!kinds.contains(&"response.function_call_arguments.delta"), "{kinds:?}");
        assert!(kinds.contains(&"response.custom_tool_call_input.done"), "{kinds:?}");
        let last: Value = serde_json::from_str(
            text.lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .next_back()
                .unwrap(),
        )
        .unwrap();
        let call = &last["response"]["output"][0];
        assert_eq!(
            (call["type"].as_str(), call["input"].as_str()),
            (Some("custom_tool_call"), Some("*** Begin Patch"))
        );
    }
}
