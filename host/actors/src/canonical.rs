//! RFC 8785 (JCS) canonical bytes and the actor id derived from them.
//!
//! JSON numbers are IEEE doubles in JCS, so an integer beyond ±(2^53−1)
//! would canonicalize to a different number than it was written as; such
//! values (and anything that is not plain JSON) are refused rather than
//! silently given an id that does not describe them.

use std::fmt;

use serde::Serialize;
use serde_json::Value;
use sha1::{Digest, Sha1};

/// Largest integer a JSON number carries exactly (2^53 − 1).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    #[error("the number at {path} is outside ±(2^53−1) and cannot be canonicalized exactly")]
    UnsafeInteger { path: String },
    #[error("the value cannot be canonicalized: {0}")]
    Serialize(String),
}

/// A content id: 40 lowercase hex digits of SHA-1.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ActorId(String);

impl ActorId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ActorId {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        if text.len() == 40 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            Ok(Self(text))
        } else {
            Err(format!("'{text}' is not an actor id (40 lowercase hex digits)"))
        }
    }
}

impl std::str::FromStr for ActorId {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Self::try_from(text.to_string())
    }
}

impl From<ActorId> for String {
    fn from(id: ActorId) -> String {
        id.0
    }
}

/// The RFC 8785 canonical bytes of `value`.
pub fn canonical_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, CanonicalError> {
    let value = serde_json::to_value(value).map_err(|e| CanonicalError::Serialize(e.to_string()))?;
    check_numbers(&value, &mut String::from("$"))?;
    serde_jcs::to_vec(&value).map_err(|e| CanonicalError::Serialize(e.to_string()))
}

/// SHA-1 over `canonical`, as an id.
pub fn id_of_canonical(canonical: &[u8]) -> ActorId {
    ActorId(hex::encode(Sha1::digest(canonical)))
}

/// The id of `value`: SHA-1 of its canonical bytes.
pub fn actor_id<T: Serialize>(value: &T) -> Result<ActorId, CanonicalError> {
    Ok(id_of_canonical(&canonical_bytes(value)?))
}

fn check_numbers(value: &Value, path: &mut String) -> Result<(), CanonicalError> {
    match value {
        Value::Number(number) => {
            let unsafe_integer = number.as_u64().is_some_and(|n| n > MAX_SAFE_INTEGER)
                || number.as_i64().is_some_and(|n| n.unsigned_abs() > MAX_SAFE_INTEGER);
            if unsafe_integer {
                return Err(CanonicalError::UnsafeInteger { path: path.clone() });
            }
            Ok(())
        }
        Value::Array(items) => items.iter().enumerate().try_for_each(|(index, item)| {
            let len = path.len();
            path.push_str(&format!("[{index}]"));
            let checked = check_numbers(item, path);
            path.truncate(len);
            checked
        }),
        Value::Object(fields) => fields.iter().try_for_each(|(key, item)| {
            let len = path.len();
            path.push('.');
            path.push_str(key);
            let checked = check_numbers(item, path);
            path.truncate(len);
            checked
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_change_the_id() {
        let a = json!({"b": 1, "a": [1, 2, {"y": true, "x": null}]});
        let b: Value = serde_json::from_str(r#"{"a":[1,2,{"x":null,"y":true}],"b":1}"#).unwrap();
        assert_eq!(actor_id(&a).unwrap(), actor_id(&b).unwrap());
        assert_eq!(
            canonical_bytes(&a).unwrap(),
            br#"{"a":[1,2,{"x":null,"y":true}],"b":1}"#
        );
    }

    #[test]
    fn the_id_is_sha1_of_the_canonical_bytes() {
        // printf '{"a":1}' | sha1sum
        assert_eq!(
            actor_id(&json!({"a": 1})).unwrap().as_str(),
            "9f89c740ceb46d7418c924a78ac57941d5e96520"
        );
    }

    #[test]
    fn integers_beyond_2_pow_53_are_refused() {
        let error = canonical_bytes(&json!({"n": [1, 9007199254740993u64]})).unwrap_err();
        assert_eq!(error, CanonicalError::UnsafeInteger { path: "$.n[1]".into() });
        canonical_bytes(&json!({"n": 9007199254740991u64})).unwrap();
    }

    #[test]
    fn ids_parse_only_as_40_lowercase_hex() {
        assert!("A".repeat(40).parse::<ActorId>().is_err());
        assert!("a".repeat(39).parse::<ActorId>().is_err());
        assert!("a".repeat(40).parse::<ActorId>().is_ok());
    }
}
