//! JSON Schema (as OpenAI callers write it for tool `parameters` and
//! `json_schema` response formats) → Gemini's `Schema`, an OpenAPI 3.0 subset.
//!
//! Gemini parses the schema as protobuf JSON and answers 400 "Unknown name …:
//! Cannot find field" for any other keyword, so the output keeps only the
//! fields in [`KEPT`] and rewrites what has a Gemini equivalent:
//! - `$ref` (to `#/$defs/…` or `#/definitions/…`) is inlined, `allOf` merged;
//! - `oneOf` becomes `anyOf`; a `null` branch or `"type": [T, "null"]` becomes
//!   `nullable: true`;
//! - `const` becomes a one-value `enum`; enums that are not all strings are
//!   dropped (Gemini enums are strings);
//! - `format` survives only where Gemini supports it (`date-time`/`enum`
//!   strings, `float`/`double` numbers, `int32`/`int64` integers);
//! - `required` names without a property and empty `properties` are dropped.
//!
//! Dropped outright: `additionalProperties`, `$schema`, `$id`, `$defs`,
//! `definitions`, `strict`, `examples`, `exclusiveMinimum`/`Maximum`,
//! `uniqueItems`, `patternProperties`, `not`, `if`/`then`/`else` and the rest.

use serde_json::{Map, Value};

/// Keywords copied unchanged (after their sub-schemas are converted).
const KEPT: [&str; 13] = [
    "title",
    "description",
    "nullable",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "default",
    "propertyOrdering",
];

/// Recursive `$ref`s are cut at this depth (Gemini has no references).
const MAX_DEPTH: usize = 24;

/// Convert `schema` to Gemini's subset.
pub fn to_gemini(schema: &Value) -> Value {
    Value::Object(Converter { root: schema }.convert(schema, 0))
}

struct Converter<'a> {
    root: &'a Value,
}

impl Converter<'_> {
    fn convert(&self, schema: &Value, depth: usize) -> Map<String, Value> {
        let mut out = Map::new();
        let Some(s) = schema.as_object() else {
            return out;
        };
        if depth > MAX_DEPTH {
            out.insert("type".into(), Value::from("object"));
            return out;
        }
        // A reference or `allOf` contributes its converted fields first; the
        // node's own keywords (description, …) override them.
        if let Some(target) = s.get("$ref").and_then(Value::as_str).and_then(|r| self.resolve(r)) {
            merge(&mut out, self.convert(target, depth + 1));
        }
        for branch in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            merge(&mut out, self.convert(branch, depth + 1));
        }
        for key in KEPT {
            if let Some(value) = s.get(key) {
                out.insert(key.into(), value.clone());
            }
        }
        self.types(s, &mut out);
        self.enums(s, &mut out);
        if let Some(props) = s.get("properties").and_then(Value::as_object).filter(|p| !p.is_empty()) {
            let converted: Map<String, Value> = props
                .iter()
                .map(|(name, prop)| (name.clone(), Value::Object(self.convert(prop, depth + 1))))
                .collect();
            merge(
                &mut out,
                Map::from_iter([("properties".to_owned(), Value::Object(converted))]),
            );
        }
        if let Some(required) = s.get("required").filter(|r| r.is_array()) {
            merge(&mut out, Map::from_iter([("required".to_owned(), required.clone())]));
        }
        prune_required(&mut out);
        let items = match s.get("items") {
            Some(Value::Array(tuple)) => tuple.first(),
            Some(items) => Some(items),
            None => s.get("prefixItems").and_then(Value::as_array).and_then(|p| p.first()),
        };
        if let Some(items) = items {
            out.insert("items".into(), Value::Object(self.convert(items, depth + 1)));
        }
        self.any_of(s, &mut out, depth);
        self.format(s, &mut out);
        for bound in ["minimum", "maximum"] {
            if let Some(value) = s.get(bound).filter(|v| v.is_number()) {
                out.insert(bound.into(), value.clone());
            }
        }
        out
    }

    /// `type`: a string, or a list whose `"null"` becomes `nullable`.
    fn types(&self, s: &Map<String, Value>, out: &mut Map<String, Value>) {
        match s.get("type") {
            Some(Value::String(t)) => {
                out.insert("type".into(), Value::from(t.as_str()));
            }
            Some(Value::Array(list)) => {
                let mut types: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
                if types.contains(&"null") {
                    out.insert("nullable".into(), Value::Bool(true));
                    types.retain(|t| *t != "null");
                }
                match types.as_slice() {
                    [] => {}
                    [one] => {
                        out.insert("type".into(), Value::from(*one));
                    }
                    many => {
                        let branches = many.iter().map(|t| serde_json::json!({ "type": t })).collect();
                        out.insert("anyOf".into(), Value::Array(branches));
                    }
                }
            }
            _ => {}
        }
    }

    /// `enum` / `const`, string values only.
    fn enums(&self, s: &Map<String, Value>, out: &mut Map<String, Value>) {
        let values: Vec<Value> = match (s.get("enum"), s.get("const")) {
            (Some(Value::Array(values)), _) => values.clone(),
            (_, Some(value)) => vec![value.clone()],
            _ => return,
        };
        if values.iter().any(Value::is_null) {
            out.insert("nullable".into(), Value::Bool(true));
        }
        let strings: Vec<Value> = values.into_iter().filter(|v| !v.is_null()).collect();
        if !strings.is_empty() && strings.iter().all(Value::is_string) {
            out.insert("enum".into(), Value::Array(strings));
            out.entry("type").or_insert_with(|| Value::from("string"));
        }
    }

    /// `anyOf` / `oneOf`: null branches become `nullable`; a single remaining
    /// branch is merged into the node.
    fn any_of(&self, s: &Map<String, Value>, out: &mut Map<String, Value>, depth: usize) {
        let Some(branches) = s.get("anyOf").or_else(|| s.get("oneOf")).and_then(Value::as_array) else {
            return;
        };
        let mut kept = Vec::with_capacity(branches.len());
        for branch in branches {
            if branch.get("type").and_then(Value::as_str) == Some("null") {
                out.insert("nullable".into(), Value::Bool(true));
            } else {
                kept.push(self.convert(branch, depth + 1));
            }
        }
        match kept.len() {
            0 => {}
            1 => {
                let only = kept.pop().unwrap_or_default();
                // The node's own description/title win over the branch's.
                for (key, value) in only {
                    out.entry(key).or_insert(value);
                }
            }
            _ => {
                out.insert(
                    "anyOf".into(),
                    Value::Array(kept.into_iter().map(Value::Object).collect()),
                );
            }
        }
    }

    fn format(&self, s: &Map<String, Value>, out: &mut Map<String, Value>) {
        let Some(format) = s.get("format").and_then(Value::as_str) else {
            return;
        };
        let supported = match out
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("string") => matches!(format, "date-time" | "enum"),
            Some("number") => matches!(format, "float" | "double"),
            Some("integer") => matches!(format, "int32" | "int64"),
            _ => false,
        };
        if supported {
            out.insert("format".into(), Value::from(format));
        }
    }

    fn resolve(&self, reference: &str) -> Option<&Value> {
        self.root.pointer(reference.strip_prefix('#')?)
    }
}

/// Merge `from` into `into`: properties are united, `required` lists
/// concatenated, other keys overwritten.
fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        let existing = into.get_mut(&key);
        match (key.as_str(), existing, value) {
            ("properties", Some(Value::Object(existing)), Value::Object(more)) => existing.extend(more),
            ("required", Some(Value::Array(existing)), Value::Array(more)) => existing.extend(more),
            (_, Some(existing), value) => *existing = value,
            (_, None, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// Keep each `required` name once, and only if it names a property (Gemini
/// rejects the others).
fn prune_required(out: &mut Map<String, Value>) {
    let Some(Value::Array(required)) = out.remove("required") else {
        return;
    };
    let known = out.get("properties").and_then(Value::as_object);
    let mut kept: Vec<Value> = Vec::with_capacity(required.len());
    for name in required {
        let ok = name.as_str().is_some_and(|n| known.is_some_and(|p| p.contains_key(n)));
        if ok && !kept.contains(&name) {
            kept.push(name);
        }
    }
    if !kept.is_empty() {
        out.insert("required".into(), Value::Array(kept));
    }
}
