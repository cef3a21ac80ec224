//! The `elicitation` capability (tool WIT 0.3.0): a tool's call asks the
//! user of the MCP client it serves for input, through the call's
//! [`Elicitor`](crate::Elicitor) (the MCP endpoint, which sends
//! `elicitation/create` on the call's SSE answer and waits for the reply).
//! The host checks the question first: a message and a schema of bounded
//! size, the schema a JSON object schema, and at most [`MAX_PER_CALL`]
//! questions a call. The wait is taken out of the call's wall time (a
//! person is slow, the component is not running) and bounded by
//! `components.elicitation_timeout_ms` instead.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bindings::ElicitError;
use crate::bindings::tool_server_v3::tollgate::tool::elicitation::Host;
use crate::state::{CallState, ElicitOutcome};

/// Questions one call may ask.
pub const MAX_PER_CALL: u32 = 8;
/// Longest message, in bytes.
const MAX_MESSAGE: usize = 4 * 1024;
/// Longest requested schema, in bytes.
const MAX_SCHEMA: usize = 16 * 1024;

impl Host for CallState {
    fn elicit(&mut self, message: String, requested_schema: String) -> ElicitOutcome {
        let Some(elicitor) = self.invocation.elicit.clone() else {
            return Err(ElicitError::Unavailable(
                "this call was not made by an MCP client that can be asked: it needs a session whose client \
                 declared the elicitation capability, and a tools/call that takes an SSE answer"
                    .into(),
            ));
        };
        let schema = checked(&message, &requested_schema)?;
        if self.elicitations >= MAX_PER_CALL {
            return Err(ElicitError::Invalid(format!(
                "a call may ask at most {MAX_PER_CALL} questions"
            )));
        }
        self.elicitations += 1;
        let started = Instant::now();
        // The elicitor bounds its own wait; this bound only backs it up.
        let limit = Duration::from_millis(self.limits.elicitation_timeout_ms) + Duration::from_secs(5);
        let outcome = self.runtime.block_on(async {
            tokio::time::timeout(limit, elicitor.elicit(message, schema))
                .await
                .unwrap_or(Err(ElicitError::TimedOut))
        });
        self.exclude_wait(started.elapsed());
        outcome
    }
}

/// The schema, parsed, when the question may be sent.
fn checked(message: &str, requested_schema: &str) -> Result<Value, ElicitError> {
    if message.len() > MAX_MESSAGE {
        return Err(ElicitError::Invalid(format!(
            "the message is {} bytes; at most {MAX_MESSAGE} are allowed",
            message.len()
        )));
    }
    if requested_schema.len() > MAX_SCHEMA {
        return Err(ElicitError::Invalid(format!(
            "the requested schema is {} bytes; at most {MAX_SCHEMA} are allowed",
            requested_schema.len()
        )));
    }
    let schema: Value = serde_json::from_str(requested_schema)
        .map_err(|e| ElicitError::Invalid(format!("the requested schema is not JSON: {e}")))?;
    // MCP asks for an object of flat properties; the client renders a form.
    let is_object_schema = schema.get("type").and_then(Value::as_str) == Some("object")
        && schema.get("properties").is_some_and(Value::is_object);
    if !is_object_schema {
        return Err(ElicitError::Invalid(
            "the requested schema must be a JSON Schema object with \"type\": \"object\" and \"properties\"".into(),
        ));
    }
    Ok(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_object_schemas_are_asked() {
        let schema = r#"{"type":"object","properties":{"name":{"type":"string"}}}"#;
        assert!(checked("Your name?", schema).is_ok());
        for bad in ["[]", "not json", r#"{"type":"string"}"#, r#"{"type":"object"}"#] {
            assert!(matches!(checked("?", bad), Err(ElicitError::Invalid(_))), "{bad}");
        }
        let long = "x".repeat(MAX_MESSAGE + 1);
        assert!(matches!(checked(&long, schema), Err(ElicitError::Invalid(_))));
    }
}
