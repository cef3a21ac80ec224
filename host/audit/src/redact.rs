//! What may rest in a store that many people read (the A2A task store, the
//! audit log): JSON with every secret replaced by [`REDACTED`], found by the
//! field's name wherever it appears, so a field added later is covered
//! without remembering to list it.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// What is kept in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// Object keys whose values are secrets wherever they appear: a minted key
/// (`api_key`), a credential's `value` (under `credentials`), and the usual
/// names for passwords and tokens; a remote MCP server's static credential
/// (`value` under `auth`) too.
const SECRET_KEYS: &[&str] = &[
    "api_key",
    "secret",
    "client_secret",
    "password",
    "token",
    "access_token",
    "refresh_token",
    "webhook_secret",
    "bearer_token",
    "signing_key",
    "private_key",
];

/// A copy of `value` with every secret replaced by [`REDACTED`].
pub fn redacted(value: &Value) -> Value {
    let mut value = value.clone();
    redact(&mut value, false);
    value
}

fn redact(value: &mut Value, in_credentials: bool) {
    match value {
        Value::Object(object) => {
            for (key, value) in object.iter_mut() {
                let secret = SECRET_KEYS.contains(&key.as_str()) || (in_credentials && key == "value");
                match secret {
                    true if !value.is_null() => *value = Value::String(REDACTED.into()),
                    true => {}
                    false => redact(value, in_credentials || key == "credentials" || key == "auth"),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| redact(item, in_credentials)),
        // A full key is a secret wherever it appears (a hint is shortened with "…").
        Value::String(text) if text.starts_with("tg_live_") && !text.contains('…') => *text = REDACTED.into(),
        _ => {}
    }
}

/// Strings longer than this are kept as their size and digest: an actor's
/// source or a package's base64 content would otherwise make one audit row
/// megabytes. The digest still says exactly what was sent.
pub const MAX_KEPT_STRING: usize = 1024;

/// [`redacted`], with long strings replaced by `{"bytes": n, "sha256": …}`.
pub fn for_audit(value: &Value) -> Value {
    let mut value = redacted(value);
    shrink(&mut value);
    value
}

fn shrink(value: &mut Value) {
    match value {
        Value::Object(object) => object.values_mut().for_each(shrink),
        Value::Array(items) => items.iter_mut().for_each(shrink),
        Value::String(text) if text.len() > MAX_KEPT_STRING => {
            *value = serde_json::json!({
                "bytes": text.len(),
                "sha256": hex::encode(Sha256::digest(text.as_bytes())),
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_replaced_wherever_they_are() {
        let value = json!({
            "api_key": "tg_live_abcdefgh",
            "nested": [{"token": "t"}, {"hint": "tg_live_AbCd…wxyz"}, "tg_live_wholekey"],
            "credentials": [{"name": "GITHUB", "value": "ghp_x"}],
            "value": "not a credential",
            "password": null,
        });
        assert_eq!(
            redacted(&value),
            json!({
                "api_key": REDACTED,
                "nested": [{"token": REDACTED}, {"hint": "tg_live_AbCd…wxyz"}, REDACTED],
                "credentials": [{"name": "GITHUB", "value": REDACTED}],
                "value": "not a credential",
                "password": null,
            })
        );
    }

    #[test]
    fn long_strings_keep_their_size_and_digest() {
        let long = "x".repeat(MAX_KEPT_STRING + 1);
        let kept = for_audit(&json!({"source": long, "name": "short"}));
        assert_eq!(kept["name"], "short");
        assert_eq!(kept["source"]["bytes"], MAX_KEPT_STRING + 1);
        assert_eq!(kept["source"]["sha256"].as_str().unwrap().len(), 64);
    }
}
