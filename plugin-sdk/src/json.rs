//! [`RawObject`]: a JSON object whose member values are kept as unparsed JSON text.
//!
//! Translating a streamed chunk usually means looking at or changing a handful
//! of top-level keys and passing everything else through. Parsing the whole
//! chunk into a `serde_json::Value` tree and serializing it again costs an
//! allocation per node; a `RawObject` only validates the input, borrows the
//! member values as [`RawValue`]s and writes them back verbatim, preserving key
//! order and number formatting.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON object with raw (unparsed) member values, borrowing from its input.
#[derive(Debug, Clone, Default)]
pub struct RawObject<'a> {
    entries: Vec<(Cow<'a, str>, Cow<'a, RawValue>)>,
}

impl<'a> RawObject<'a> {
    /// An empty object.
    pub fn new() -> Self {
        RawObject::default()
    }

    /// Parse `text`, which must be exactly one JSON object (surrounding
    /// whitespace allowed). Member values are validated but not parsed.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Like [`parse`](Self::parse), from UTF-8 bytes.
    pub fn parse_slice(bytes: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The raw value of the first member named `key`.
    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_ref())
    }

    /// Like [`get`](Self::get), but `null` counts as absent.
    pub fn get_non_null(&self, key: &str) -> Option<&RawValue> {
        self.get(key).filter(|v| v.get() != "null")
    }

    /// Whether a member named `key` exists.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Remove every member named `key`; returns whether one existed.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| k != key);
        self.entries.len() != before
    }

    /// Set `key` to the raw JSON `value`, replacing the first member of that
    /// name in place (and dropping duplicates) or appending it.
    pub fn insert_raw(&mut self, key: &str, value: Cow<'a, RawValue>) {
        match self.entries.iter().position(|(k, _)| k == key) {
            Some(i) => {
                self.entries[i].1 = value;
                let mut seen = 0usize;
                self.entries.retain(|(k, _)| {
                    if k == key {
                        seen += 1;
                        seen == 1
                    } else {
                        true
                    }
                });
            }
            None => self.entries.push((Cow::Owned(key.to_owned()), value)),
        }
    }

    /// Set `key` to `value` serialized as JSON (see [`insert_raw`](Self::insert_raw)).
    pub fn insert<T: serde::Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), serde_json::Error> {
        let raw = serde_json::value::to_raw_value(value)?;
        self.insert_raw(key, Cow::Owned(raw));
        Ok(())
    }

    /// Parse the value of `key` into `T`; `None` when the key is absent.
    pub fn parse_value<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<Result<T, serde_json::Error>> {
        self.get(key).map(|raw| serde_json::from_str(raw.get()))
    }

    /// Iterate members in input order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.entries.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no members.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Detach from the input by copying borrowed keys and values.
    pub fn into_owned(self) -> RawObject<'static> {
        RawObject {
            entries: self
                .entries
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
                .collect(),
        }
    }

    /// Serialize back to compact JSON text.
    pub fn to_vec(&self) -> Vec<u8> {
        let capacity = 2 + self
            .entries
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum::<usize>();
        let mut out = Vec::with_capacity(capacity);
        out.push(b'{');
        for (i, (key, value)) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_json_string(&mut out, key);
            out.push(b':');
            out.extend_from_slice(value.get().as_bytes());
        }
        out.push(b'}');
        out
    }
}

/// Append `s` as a JSON string literal.
pub fn write_json_string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec cannot fail, and a &str always serializes.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Whether a raw value is an empty JSON array (`[]`, whitespace allowed).
pub fn is_empty_array(value: &RawValue) -> bool {
    value
        .get()
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|inner| inner.trim().is_empty())
}

/// Whether a raw value is a JSON object.
pub fn is_object(value: &RawValue) -> bool {
    value.get().starts_with('{')
}

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;

        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = RawObject<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Key(key)) = map.next_key()? {
                    let value: &'de RawValue = map.next_value()?;
                    entries.push((key, Cow::Borrowed(value)));
                }
                Ok(RawObject { entries })
            }
        }

        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// A map key, borrowed from the input unless it contains escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }

        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_preserving_order_and_numbers() {
        let text = r#" {"b": 1.50, "a" : [1, {"x":null}], "c":"\u00e9\n"} "#;
        let obj = RawObject::parse(text).unwrap();
        assert_eq!(obj.len(), 3);
        assert_eq!(
            String::from_utf8(obj.to_vec()).unwrap(),
            r#"{"b":1.50,"a":[1, {"x":null}],"c":"\u00e9\n"}"#
        );
    }

    #[test]
    fn escaped_keys_are_unescaped_and_reescaped() {
        let obj = RawObject::parse(r#"{"a\"b":1,"\u0041":2}"#).unwrap();
        assert!(obj.get("a\"b").is_some());
        assert_eq!(obj.get("A").unwrap().get(), "2");
        let back: serde_json::Value = serde_json::from_slice(&obj.to_vec()).unwrap();
        assert_eq!(back, serde_json::json!({"a\"b": 1, "A": 2}));
    }

    #[test]
    fn rejects_non_objects_and_trailing_garbage() {
        assert!(RawObject::parse("[1,2]").is_err());
        assert!(RawObject::parse("\"x\"").is_err());
        assert!(RawObject::parse("{} x").is_err());
        assert!(RawObject::parse("{\"a\":}").is_err());
        assert!(RawObject::parse_slice(b"{\"a\":\"\xff\"}").is_err());
    }

    #[test]
    fn insert_remove_get() {
        let mut obj = RawObject::parse(r#"{"model":"x","k":null,"model":"y"}"#).unwrap();
        obj.insert("model", "gpt").unwrap();
        obj.insert("stream", &true).unwrap();
        assert!(obj.get_non_null("k").is_none());
        assert!(obj.get("k").is_some());
        assert!(obj.remove("k"));
        assert!(!obj.remove("k"));
        assert_eq!(obj.to_vec(), br#"{"model":"gpt","stream":true}"#);
    }

    #[test]
    fn empty_array_detection() {
        let obj = RawObject::parse(r#"{"a":[],"b":[ ],"c":[1],"d":{}}"#).unwrap();
        assert!(is_empty_array(obj.get("a").unwrap()));
        assert!(is_empty_array(obj.get("b").unwrap()));
        assert!(!is_empty_array(obj.get("c").unwrap()));
        assert!(!is_empty_array(obj.get("d").unwrap()));
        assert!(is_object(obj.get("d").unwrap()));
    }
}
