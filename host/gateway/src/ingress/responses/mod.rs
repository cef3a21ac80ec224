//! `POST /v1/responses`: OpenAI's Responses API, stateless (nothing is
//! stored: `store` is always false and `previous_response_id` is refused),
//! served by any provider through the chat pipeline (docs/ingress.md).
//! `request` translates the request into a chat body, this module the whole
//! answer, `stream` the streamed one. Errors keep the OpenAI shape the chat
//! API uses.

mod request;
mod stream;
mod tools;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{Counts, first_choice, json_response, read_object, render_with_cost};
use crate::DataPlane;
use crate::chat;
use crate::pipeline::{Answer, CallSite, ChatCall, Completion, Operation, StreamFailure};
use request::to_chat_form;
use tollgate_identity::auth::Caller;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;
use tools::ToolNames;

/// Request fields a response object repeats back.
const ECHOED: [&str; 8] = [
    "instructions",
    "max_output_tokens",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "tool_choice",
    "tools",
    "text",
];

pub async fn create(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    caller: Result<Caller, ApiError>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let caller = caller?;
        let site = CallSite::top(&request_id, StreamFailure::Status);
        let request = read_object(&data, &site, &caller, body, "a Responses request").await?;
        let mut echo = Echo::of(&request);
        let model = request.get("model").and_then(Value::as_str).map(str::to_string);
        if let Some(name) = model.as_deref().filter(|m| !m.is_empty())
            && data.routes().catalog.resolve(name).is_none()
        {
            let error = ApiError::model_not_found(name);
            return Err(chat::refused(&data, &site, &caller, model.as_deref(), error).await);
        }
        let chat = match to_chat_form(request) {
            Ok(chat) => chat,
            Err(error) => {
                return Err(chat::refused(&data, &site, &caller, model.as_deref(), error).await);
            }
        };
        echo.names = chat.names;
        echo.warnings = chat.warnings;
        let bytes = Bytes::from(serde_json::to_vec(&chat.body).expect("JSON values serialise"));
        Ok(
            match data.run(Operation::Chat(ChatCall::body(bytes)), &caller, site).await? {
                Answer::Whole(completion) => json_response(StatusCode::OK, from_chat(completion, &echo), &request_id),
                Answer::Stream(chat) => stream::respond(chat, echo, &request_id),
                Answer::Media(_) => unreachable!("a chat answer is JSON or a stream"),
            },
        )
    }
    .await;
    answer.unwrap_or_else(|error: ApiError| error.with_request_id(&request_id.0).into_response())
}

/// What a response object repeats from its request, and what its
/// translation back needs from the request.
pub(super) struct Echo {
    fields: Map<String, Value>,
    pub created_at: u64,
    /// How chat tool calls map back to the request's tools.
    pub names: ToolNames,
    /// `service.warnings`: what the request asked for that was left out.
    pub warnings: Vec<String>,
}

impl Echo {
    pub(super) fn of(request: &Map<String, Value>) -> Self {
        let mut fields: Map<String, Value> = ECHOED
            .iter()
            .filter_map(|key| request.get(*key).map(|v| (key.to_string(), v.clone())))
            .collect();
        fields.entry("tools").or_insert_with(|| json!([]));
        fields.entry("tool_choice").or_insert_with(|| json!("auto"));
        fields.entry("parallel_tool_calls").or_insert(Value::Bool(true));
        fields
            .entry("text")
            .or_insert_with(|| json!({"format": {"type": "text"}}));
        let created_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Echo {
            fields,
            created_at,
            names: ToolNames::default(),
            warnings: Vec::new(),
        }
    }

    /// The answer's `service`, with the request's warnings added.
    pub(super) fn service(&self, service: Option<Value>) -> Value {
        let mut service = service.unwrap_or(Value::Null);
        if !self.warnings.is_empty()
            && let Some(object) = service.as_object_mut()
        {
            object.insert("warnings".into(), json!(self.warnings));
        }
        service
    }

    /// A `response` object with this request's fields, before `usage`.
    pub(super) fn response(&self, id: &str, model: &Value, status: &str, output: Vec<Value>) -> Map<String, Value> {
        let mut object = Map::new();
        object.insert("id".into(), Value::String(id.to_string()));
        object.insert("object".into(), json!("response"));
        object.insert("created_at".into(), Value::from(self.created_at));
        object.insert("status".into(), Value::String(status.to_string()));
        object.insert("error".into(), Value::Null);
        object.insert(
            "incomplete_details".into(),
            match status {
                "incomplete" => json!({"reason": "max_output_tokens"}),
                _ => Value::Null,
            },
        );
        object.insert("model".into(), model.clone());
        object.insert("output".into(), Value::Array(output));
        object.insert("store".into(), Value::Bool(false));
        for (key, value) in &self.fields {
            object.insert(key.clone(), value.clone());
        }
        object
    }
}

/// `resp_…` from the gateway request id, so a response id names its log row.
pub(super) fn response_id(request_id: &str) -> String {
    format!("resp_{}", request_id.strip_prefix("req_").unwrap_or(request_id))
}

/// The Responses usage object from the billed counts.
pub(super) fn usage(counts: &Counts) -> Map<String, Value> {
    let usage = json!({
        "input_tokens": counts.prompt,
        "input_tokens_details": {"cached_tokens": counts.cache_read, "cache_write_tokens": counts.cache_write},
        "output_tokens": counts.completion,
        "output_tokens_details": {"reasoning_tokens": counts.reasoning},
        "total_tokens": counts.prompt + counts.completion,
    });
    let Value::Object(usage) = usage else { unreachable!() };
    usage
}

/// The status a chat finish reason gives a response.
pub(super) fn status(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length") => "incomplete",
        _ => "completed",
    }
}

pub(super) fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    })
}

/// A chat completion → a `response` object, with `provider`, `service` and
/// `usage.cost`.
fn from_chat(completion: Completion, echo: &Echo) -> Vec<u8> {
    let cost = completion.service.cost();
    let counts = Counts::billed(&completion.service);
    let id = response_id(&completion.service.request_id);
    let mut object = completion.object;
    let choice = first_choice(&object).cloned().unwrap_or(Value::Null);
    let message = &choice["message"];
    let mut output = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        output.push(message_item(&format!("msg_{}", &id[5..]), text, "completed"));
    }
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str) {
        output.push(json!({
            "type": "message", "id": format!("msg_{}", &id[5..]), "status": "completed", "role": "assistant",
            "content": [{"type": "refusal", "refusal": refusal}],
        }));
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let call_id = call["id"].as_str().unwrap_or_default();
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        output.push(
            echo.names
                .call_item(call_id, &call["function"]["name"], arguments, "completed"),
        );
    }
    let model = object.remove("model").unwrap_or(Value::Null);
    let mut out = echo.response(&id, &model, status(choice["finish_reason"].as_str()), output);
    out.insert("usage".into(), Value::Object(usage(&counts)));
    out.insert("provider".into(), object.remove("provider").unwrap_or(Value::Null));
    out.insert(
        "service".into(),
        echo.service(completion.service.take_block(&mut object)),
    );
    render_with_cost(out, cost)
}
