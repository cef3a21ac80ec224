//! YAML text → a tree of nodes that each know their line and column.
//!
//! serde-saphyr does the YAML (1.2 core schema, anchors, aliases, merge keys,
//! duplicate-key and alias-bomb limits); this module only keeps the position
//! of every node so that later checks can point at the offending one. The
//! tree is what the author meant after aliases are expanded, so two spellings
//! of the same document give the same tree (positions aside).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_saphyr::Spanned;

use super::error::{CompileError, CompileErrors, Location};

/// One YAML node and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub loc: Location,
    pub value: NodeValue,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NodeValue {
    Null,
    Bool(bool),
    /// Kept wide so that values beyond JSON's exact range can be refused
    /// with a position instead of being rounded.
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Key {
    pub name: String,
    pub loc: Location,
}

/// Largest integer a JSON number carries exactly (2^53 − 1).
const MAX_SAFE_INTEGER: i128 = (1 << 53) - 1;

impl Node {
    pub fn kind(&self) -> &'static str {
        match self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) => "an integer",
            NodeValue::Float(_) => "a number",
            NodeValue::Str(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Str(text) => Some(text),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Key, Node)]> {
        match &self.value {
            NodeValue::Map(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn error(&self, message: impl Into<String>) -> CompileError {
        CompileError::at(self.loc, message)
    }

    /// The node as plain JSON. Integers beyond ±(2^53−1) and non-finite
    /// numbers are errors: JSON cannot carry them exactly, so they would get
    /// an id that does not describe them.
    pub fn to_json(&self, errors: &mut Vec<CompileError>) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(n) if n.abs() > MAX_SAFE_INTEGER => {
                errors.push(self.error(format!(
                    "the integer {n} is outside ±(2^53−1), which JSON cannot carry exactly"
                )));
                Value::Null
            }
            NodeValue::Int(n) => Value::from(*n as i64),
            // A float this large is an integer written too long for i128, or
            // an exponent: either way not one JSON can carry exactly.
            NodeValue::Float(f) if f.fract() == 0.0 && f.abs() > MAX_SAFE_INTEGER as f64 => {
                errors.push(self.error(format!(
                    "the number {f} is outside ±(2^53−1), which JSON cannot carry exactly"
                )));
                Value::Null
            }
            NodeValue::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(number) => Value::Number(number),
                None => {
                    errors.push(self.error("a number must be finite"));
                    Value::Null
                }
            },
            NodeValue::Str(text) => Value::String(text.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(|item| item.to_json(errors)).collect()),
            NodeValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| (key.name.clone(), value.to_json(errors)))
                    .collect(),
            ),
        }
    }
}

/// Parses one YAML document into a node tree.
pub(crate) fn parse_yaml(source: &str) -> Result<Node, CompileErrors> {
    let mut options = serde_saphyr::Options::default();
    // `no`, `off`, `y` stay strings (YAML 1.2), so a name is never a boolean.
    options.strict_booleans = true;
    options.reject_unsupported_tags = true;
    options.with_snippet = false;
    let raw: Spanned<Raw> = serde_saphyr::from_str_with_options(source, options).map_err(|error| {
        let loc = error
            .location()
            .map(|l| Location::from_u64(l.line(), l.column()))
            .unwrap_or(Location::new(1, 1));
        CompileErrors::one(CompileError::at(loc, yaml_message(&error)))
    })?;
    let mut errors = Vec::new();
    let node = into_node(raw, &mut errors);
    CompileErrors::check(errors)?;
    Ok(node)
}

/// serde-saphyr's message without its own position suffix (the error
/// carries the position separately).
fn yaml_message(error: &serde_saphyr::Error) -> String {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or("").trim();
    let trimmed = match first.rfind(" at line ") {
        Some(at) => &first[..at],
        None => first,
    };
    let trimmed = trimmed.trim_end_matches(", set DuplicateKeyPolicy in Options if acceptable");
    format!("invalid YAML: {trimmed}")
}

fn location_of<T>(spanned: &Spanned<T>) -> Location {
    Location::from_u64(spanned.referenced.line(), spanned.referenced.column())
}

fn into_node(raw: Spanned<Raw>, errors: &mut Vec<CompileError>) -> Node {
    let loc = location_of(&raw);
    let value = match raw.value {
        Raw::Null => NodeValue::Null,
        Raw::Bool(b) => NodeValue::Bool(b),
        Raw::Int(n) => NodeValue::Int(n),
        Raw::Float(f) => NodeValue::Float(f),
        Raw::Str(text) => NodeValue::Str(text),
        Raw::Seq(items) => NodeValue::Seq(items.into_iter().map(|item| into_node(item, errors)).collect()),
        Raw::Map(entries) => NodeValue::Map(
            entries
                .into_iter()
                .filter_map(|(key, value)| {
                    let key_loc = location_of(&key);
                    let name = match key.value {
                        Raw::Str(name) => name,
                        _ => {
                            errors.push(CompileError::at(key_loc, "a mapping key must be a string (quote it)"));
                            return None;
                        }
                    };
                    Some((Key { name, loc: key_loc }, into_node(value, errors)))
                })
                .collect(),
        ),
    };
    Node { loc, value }
}

/// What serde-saphyr hands over, each child with its span.
enum Raw {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Raw>>),
    Map(Vec<(Spanned<Raw>, Spanned<Raw>)>),
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Raw, D::Error> {
        Raw::deserialize(deserializer)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Raw, E> {
        Ok(Raw::Int(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Raw, E> {
        Ok(Raw::Int(n.into()))
    }
    fn visit_i128<E>(self, n: i128) -> Result<Raw, E> {
        Ok(Raw::Int(n))
    }
    fn visit_u128<E: de::Error>(self, n: u128) -> Result<Raw, E> {
        Ok(Raw::Int(i128::try_from(n).unwrap_or(i128::MAX)))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Raw, E> {
        Ok(Raw::Float(f))
    }
    fn visit_str<E>(self, text: &str) -> Result<Raw, E> {
        Ok(Raw::Str(text.to_string()))
    }
    fn visit_string<E>(self, text: String) -> Result<Raw, E> {
        Ok(Raw::Str(text))
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Raw, E> {
        Err(E::custom("binary values are not supported"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Raw::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_know_their_positions() {
        let node = parse_yaml("a: 1\nb:\n  - x\n  - {c: true}\n").unwrap();
        let entries = node.as_map().unwrap();
        assert_eq!(entries[0].0.loc, Location::new(1, 1));
        assert_eq!(entries[0].1.loc, Location::new(1, 4));
        let NodeValue::Seq(items) = &entries[1].1.value else {
            panic!()
        };
        assert_eq!(items[1].loc.line, 4);
        let inner = items[1].as_map().unwrap();
        assert_eq!(inner[0].1.value, NodeValue::Bool(true));
    }

    #[test]
    fn aliases_and_merge_keys_expand() {
        let node = parse_yaml("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\nsame: *b\n").unwrap();
        let mut errors = Vec::new();
        let json = node.to_json(&mut errors);
        assert_eq!(json["other"], serde_json::json!({"x": 1, "y": 2}));
        assert_eq!(json["same"], serde_json::json!({"x": 1}));
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let node = parse_yaml("a: no\nb: true\n").unwrap();
        let mut errors = Vec::new();
        assert_eq!(node.to_json(&mut errors), serde_json::json!({"a": "no", "b": true}));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let error = parse_yaml("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        let first = &error.errors()[0];
        assert!(first.line >= 2, "{first}");
        assert!(first.message.starts_with("invalid YAML"), "{first}");
    }

    #[test]
    fn big_integers_are_refused() {
        let node = parse_yaml("a: 9007199254740993\nb: 9007199254740991\n").unwrap();
        let mut errors = Vec::new();
        node.to_json(&mut errors);
        assert_eq!(errors.len(), 1);
        assert_eq!((errors[0].line, errors[0].column), (1, 4));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let error = parse_yaml("a: 1\na: 2\n").unwrap_err();
        assert_eq!(error.errors()[0].line, 2, "{error}");
    }
}
