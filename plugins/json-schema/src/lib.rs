//! Built-in guardrail `json-schema`: when a request asks for structured output
//! (`response_format: {type: "json_schema", json_schema: {schema}}`, or the
//! Responses API's `text.format`), checks each whole answer against that
//! schema and, when it is not JSON or breaks the schema, asks the model once
//! more (`retry`) with the reason, so a client gets JSON it can parse.
//! Streams are allowed through: a window is not a whole answer.
//!
//! Validation is the `jsonschema` crate's (drafts 4 to 2020-12, no remote
//! `$ref`s). It seeds its hash maps, as `std`'s `HashMap` does, from WASI's
//! `wasi:random` interfaces, so it runs only where the host links those for
//! guardrails; where it does not, every check traps.
//!
//! No settings.

use serde_json::Value;
use tollgate_plugin_sdk::guardrail::log::{self, Level};
use tollgate_plugin_sdk::guardrail::{CallContext, Description, Guardrail, ResponseVerdict, Subject};

pub struct JsonSchema;

/// The longest reason handed back, in characters: an error may quote a large
/// part of the answer.
const MAX_REASON_CHARS: usize = 400;

/// The schema a request asks answers to follow, if any.
fn requested_schema(request: &Value) -> Option<&Value> {
    let chat = &request["response_format"];
    if chat["type"] == "json_schema" {
        return chat["json_schema"].get("schema");
    }
    let responses = &request["text"]["format"];
    if responses["type"] == "json_schema" {
        return responses.get("schema");
    }
    None
}

/// What to do with whole answers to `request`.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Allow,
    Retry(String),
    /// The request's own schema does not compile: nothing to hold answers to.
    BadSchema(String),
}

fn check(request: &Value, texts: &[String]) -> Outcome {
    let Some(schema) = requested_schema(request) else {
        return Outcome::Allow;
    };
    let validator = match jsonschema::validator_for(schema) {
        Ok(validator) => validator,
        Err(error) => return Outcome::BadSchema(error.to_string()),
    };
    for (choice, text) in texts.iter().enumerate() {
        // An empty text is a choice that called tools or refused instead.
        if text.trim().is_empty() {
            continue;
        }
        let which = match texts.len() {
            1 => String::new(),
            _ => format!(" (choice {})", choice + 1),
        };
        let answer: Value = match serde_json::from_str(text) {
            Ok(answer) => answer,
            Err(error) => return Outcome::Retry(shorten(format!("the answer is not valid JSON{which}: {error}"))),
        };
        if let Err(error) = validator.validate(&answer) {
            let path = error.instance_path().to_string();
            let at = match path.is_empty() {
                true => String::new(),
                false => format!(" at {path}"),
            };
            return Outcome::Retry(shorten(format!(
                "the answer does not match the requested schema{which}: {error}{at}"
            )));
        }
    }
    Outcome::Allow
}

fn shorten(reason: String) -> String {
    match reason.char_indices().nth(MAX_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &reason[..cut]),
        None => reason,
    }
}

impl Guardrail for JsonSchema {
    fn describe() -> Description {
        Description::new(
            "json-schema",
            "Checks answers against the JSON schema the request asked for (response_format json_schema) \
             and has the model try again when an answer is not JSON or breaks the schema.",
        )
        .responses()
    }

    fn check_response(
        _ctx: CallContext,
        _subject: Subject,
        request: &str,
        _memo: Option<String>,
        texts: Vec<String>,
        done: bool,
    ) -> ResponseVerdict {
        let Ok(request) = serde_json::from_str::<Value>(request) else {
            return ResponseVerdict::Allow;
        };
        // A stream's windows are parts of answers, and the host cannot retry
        // a stream anyway.
        if !done || request["stream"] == true {
            return ResponseVerdict::Allow;
        }
        match check(&request, &texts) {
            Outcome::Allow => ResponseVerdict::Allow,
            Outcome::Retry(reason) => ResponseVerdict::Retry(reason),
            Outcome::BadSchema(error) => {
                log::log(
                    Level::Warn,
                    &format!("json-schema: the requested schema does not compile: {error}"),
                );
                ResponseVerdict::Allow
            }
        }
    }
}

tollgate_plugin_sdk::export_guardrail!(JsonSchema);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn chat_request(schema: Value) -> Value {
        json!({
            "model": "openai/gpt-4o-mini",
            "messages": [{"role": "user", "content": "Who?"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "person", "strict": true, "schema": schema}},
        })
    }

    fn person() -> Value {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
            "required": ["name", "age"],
            "additionalProperties": false,
        })
    }

    fn answers(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn matching_answers_pass() {
        let request = chat_request(person());
        assert_eq!(
            check(&request, &answers(&[r#"{"name": "Ada", "age": 36}"#])),
            Outcome::Allow
        );
        assert_eq!(check(&request, &answers(&[""])), Outcome::Allow);
    }

    #[test]
    fn a_missing_property_is_named() {
        let outcome = check(&chat_request(person()), &answers(&[r#"{"name": "Ada"}"#]));
        assert_eq!(
            outcome,
            Outcome::Retry("the answer does not match the requested schema: \"age\" is a required property".into())
        );
    }

    #[test]
    fn a_wrong_type_says_where() {
        let texts = answers(&[r#"{"name": "Ada", "age": 36}"#, r#"{"name": "Bob", "age": "old"}"#]);
        assert_eq!(
            check(&chat_request(person()), &texts),
            Outcome::Retry(
                "the answer does not match the requested schema (choice 2): \"old\" is not of type \"integer\" at /age"
                    .into()
            )
        );
    }

    #[test]
    fn not_json_is_a_retry() {
        let Outcome::Retry(reason) = check(&chat_request(person()), &answers(&["```json\n{}\n```"])) else {
            panic!()
        };
        assert!(
            reason.starts_with("the answer is not valid JSON: expected value at line 1"),
            "{reason}"
        );
    }

    #[test]
    fn the_responses_api_shape_too() {
        let request =
            json!({"input": "Who?", "text": {"format": {"type": "json_schema", "name": "p", "schema": person()}}});
        assert!(matches!(check(&request, &answers(&["{}"])), Outcome::Retry(_)));
    }

    #[test]
    fn no_schema_no_check() {
        for request in [
            json!({"messages": []}),
            json!({"response_format": {"type": "json_object"}}),
            json!({"response_format": {"type": "text"}}),
        ] {
            assert_eq!(check(&request, &answers(&["not json"])), Outcome::Allow);
        }
    }

    #[test]
    fn a_broken_schema_is_reported_not_retried() {
        let outcome = check(&chat_request(json!({"type": 12})), &answers(&["{}"]));
        assert!(matches!(outcome, Outcome::BadSchema(_)), "{outcome:?}");
    }

    #[test]
    fn long_reasons_are_cut() {
        let reason = shorten("x".repeat(1000));
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS + 1);
    }
}
