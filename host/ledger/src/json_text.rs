//! JSON a request-log row carries as text (its attempts, its routing
//! decision). It is journaled as JSON, not as a string holding JSON: a
//! string would be escaped on every settlement, on the request's path, and
//! unescaped again by the writer. The database column stays text.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

#[derive(Debug, Clone)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// `value` as JSON text; `None` when it cannot be written as JSON.
    pub fn of(value: &impl Serialize) -> Option<Self> {
        serde_json::value::to_raw_value(value).ok().map(Self)
    }

    /// `[]`.
    pub fn empty_array() -> Self {
        Self(RawValue::from_string("[]".into()).expect("[] is JSON"))
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    /// Reads the JSON itself, or a string holding it: records journaled
    /// before this form, still waiting for the writer after an upgrade.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        if !raw.get().starts_with('"') {
            return Ok(Self(raw));
        }
        let text: String = serde_json::from_str(raw.get()).map_err(D::Error::custom)?;
        RawValue::from_string(text).map(Self).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Row {
        attempts: JsonText,
        detail: Option<JsonText>,
    }

    #[test]
    fn journals_json_as_json_and_reads_the_older_string_form() {
        let row = Row {
            attempts: JsonText::of(&serde_json::json!([["p", "m", 200]])).unwrap(),
            detail: JsonText::of(&serde_json::json!({"route": {"reason": "a \"quoted\" why"}})),
        };
        let journaled = serde_json::to_string(&row).unwrap();
        assert_eq!(
            journaled,
            r#"{"attempts":[["p","m",200]],"detail":{"route":{"reason":"a \"quoted\" why"}}}"#
        );
        let back: Row = serde_json::from_str(&journaled).unwrap();
        assert_eq!(back.attempts.as_str(), r#"[["p","m",200]]"#);
        let older: Row = serde_json::from_str(r#"{"attempts":"[[\"p\"]]","detail":"{\"route\":{}}"}"#).unwrap();
        assert_eq!(older.attempts.as_str(), r#"[["p"]]"#);
        assert_eq!(older.detail.unwrap().as_str(), r#"{"route":{}}"#);
        let none: Row = serde_json::from_str(r#"{"attempts":[],"detail":null}"#).unwrap();
        assert!(none.detail.is_none());
        assert_eq!(JsonText::empty_array().as_str(), "[]");
    }
}
