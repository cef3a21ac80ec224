//! `ChatEnvelope::parse` on any request body: it never panics, a rejection is a
//! 400, and what it accepts agrees with a full JSON parse of the same body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tollgate_gateway::fuzzing::{ChatEnvelope, MAX_CANDIDATES};

fuzz_target!(|body: &[u8]| {
    let envelope = match ChatEnvelope::parse(body) {
        Ok(envelope) => envelope,
        Err(error) => {
            assert_eq!(error.status, 400, "{}", error.message);
            assert!(!error.message.is_empty());
            return;
        }
    };
    assert!(!envelope.model.is_empty());
    assert!(envelope.messages >= 1);
    assert!(envelope.fallbacks.len() < MAX_CANDIDATES);
    assert!(envelope.fallbacks.iter().all(|m| !m.is_empty()));
    assert_ne!(envelope.max_output_tokens, Some(0));
    // The borrowed parse skips fields it does not read; a full parse can still
    // refuse what it skipped (a number beyond f64, nesting past 128), so compare
    // only when both read the body.
    let Ok(full) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    assert_eq!(full["model"].as_str(), Some(&*envelope.model));
    let messages = full["messages"].as_array().expect("accepted messages are an array");
    assert_eq!(messages.len(), envelope.messages);
    for message in messages {
        let role = message.as_object().and_then(|m| m.get("role")).and_then(Value::as_str);
        assert!(
            role.is_some_and(|r| !r.is_empty()),
            "accepted a message without a role: {message}"
        );
    }
    assert_eq!(
        full.get("stream").and_then(Value::as_bool).unwrap_or(false),
        envelope.stream
    );
    assert_eq!(
        full.get("continuation").and_then(Value::as_bool).unwrap_or(true),
        envelope.continuation
    );
    let limit = full
        .get("max_completion_tokens")
        .filter(|v| !v.is_null())
        .or_else(|| full.get("max_tokens").filter(|v| !v.is_null()))
        .and_then(Value::as_u64);
    assert_eq!(limit, envelope.max_output_tokens);
    let listed = full
        .get("models")
        .filter(|v| !v.is_null())
        .or_else(|| full.get("fallbacks").filter(|v| !v.is_null()));
    let listed: Vec<&str> = listed
        .and_then(Value::as_array)
        .map(|names| names.iter().map(|n| n.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(listed, envelope.fallbacks);
});
