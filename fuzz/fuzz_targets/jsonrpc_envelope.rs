//! The JSON-RPC 2.0 envelope of `POST /a2a` (`parse_body`, then `parse_entry`
//! per entry): it never panics, a batch holds 1 to 100 entries, an accepted
//! entry has a string method, object params and a valid id, and every
//! rejection carries a JSON-RPC error code and an id that may be answered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tollgate_control::rpc::{Body, Request, parse_body, parse_entry};

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_) | Value::Null)
}

fn check_entry(entry: Value) {
    let original = entry.clone();
    match parse_entry(entry) {
        Ok(Request { id, method, params }) => {
            assert!(params.is_object(), "params {params}");
            assert_eq!(original["method"], Value::String(method));
            assert_eq!(original["jsonrpc"], "2.0");
            assert_eq!(id.as_ref(), original.get("id"), "the id changed");
            if let Some(id) = &id {
                assert!(valid_id(id));
            }
            match original.get("params") {
                None | Some(Value::Null) => assert_eq!(params, serde_json::json!({})),
                Some(given) => assert_eq!(&params, given),
            }
        }
        Err((id, error)) => {
            assert!(valid_id(&id), "answers with id {id}");
            assert!(matches!(error.code, -32600 | -32602), "code {}", error.code);
            // The answer serialises and names the entry's id when it had a usable one.
            let answer = serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() });
            assert!(serde_json::to_vec(&answer).is_ok());
            if let Some(given) = original.get("id").filter(|i| valid_id(i)) {
                assert!(id == *given || id.is_null());
            }
        }
    }
}

fuzz_target!(|body: &[u8]| {
    match parse_body(body) {
        Ok(Body::Batch(entries)) => {
            assert!((1..=100).contains(&entries.len()), "batch of {}", entries.len());
            for entry in entries {
                check_entry(entry);
            }
        }
        Ok(Body::Single(entry)) => {
            assert!(!entry.is_array());
            check_entry(entry);
        }
        Err(error) => assert!(matches!(error.code, -32700 | -32600), "code {}", error.code),
    }
});
