//! Builds a deterministic JSON instance of a JSON schema, for tool-call
//! arguments and `json_schema` response formats. It covers what model
//! providers accept in practice, not the whole JSON Schema spec.

use serde_json::{Map, Value};

/// Guards against self-referencing `$ref` cycles.
const MAX_DEPTH: usize = 32;

pub fn instance(schema: &Value) -> Value {
    Generator { root: schema }.value(schema, 0)
}

struct Generator<'a> {
    /// Target of `#/...` references.
    root: &'a Value,
}

impl Generator<'_> {
    fn value(&self, schema: &Value, depth: usize) -> Value {
        if depth > MAX_DEPTH {
            return Value::Null;
        }
        // `true` or a non-object schema accepts anything.
        let Some(s) = schema.as_object() else {
            return Value::from("mock");
        };
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        if let Some(first) = s.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
            return first.clone();
        }
        if let Some(first) = s.get("examples").and_then(Value::as_array).and_then(|e| e.first()) {
            return first.clone();
        }
        if let Some(target) = s.get("$ref").and_then(Value::as_str).and_then(|r| self.resolve(r)) {
            return self.value(target, depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branch) = branches(s, key).find(|b| !is_null_schema(b)) {
                return self.value(branch, depth + 1);
            }
        }
        if s.contains_key("allOf") {
            let mut merged = Map::new();
            for branch in branches(s, "allOf") {
                if let Value::Object(part) = self.value(branch, depth + 1) {
                    merged.extend(part);
                }
            }
            return Value::Object(merged);
        }
        match type_name(s) {
            "object" => self.object(s, depth),
            "array" => self.array(s, depth),
            "integer" => Value::from(bounded(s, 1.0) as i64),
            "number" => Value::from(bounded(s, 1.0)),
            "boolean" => Value::Bool(true),
            "null" => Value::Null,
            _ => Value::from(sample_string(s)),
        }
    }

    fn object(&self, s: &Map<String, Value>, depth: usize) -> Value {
        let mut out = Map::new();
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                out.insert(name.clone(), self.value(prop, depth + 1));
            }
        }
        // Required names without a property schema still need a value.
        for name in s.get("required").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = name.as_str() {
                out.entry(name).or_insert_with(|| Value::from("mock"));
            }
        }
        Value::Object(out)
    }

    fn array(&self, s: &Map<String, Value>, depth: usize) -> Value {
        if let Some(prefix) = s.get("prefixItems").and_then(Value::as_array) {
            return prefix.iter().map(|p| self.value(p, depth + 1)).collect();
        }
        let item = s.get("items").map_or(Value::from("mock"), |i| self.value(i, depth + 1));
        // `minItems` items (at most 16); strings are numbered so they differ.
        let count = s.get("minItems").and_then(Value::as_u64).unwrap_or(1).clamp(1, 16) as usize;
        (0..count)
            .map(|index| match &item {
                Value::String(text) if index > 0 => Value::from(format!("{text} {}", index + 1)),
                other => other.clone(),
            })
            .collect()
    }

    fn resolve(&self, reference: &str) -> Option<&Value> {
        self.root.pointer(reference.strip_prefix('#')?)
    }
}

fn branches<'a>(s: &'a Map<String, Value>, key: &str) -> impl Iterator<Item = &'a Value> {
    s.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// The declared type (first non-null of a type list), else inferred.
fn type_name(s: &Map<String, Value>) -> &str {
    match s.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") || s.contains_key("prefixItems") => "array",
        _ => "string",
    }
}

/// `preferred`, moved inside `minimum`/`maximum` when they exclude it.
fn bounded(s: &Map<String, Value>, preferred: f64) -> f64 {
    let min = s.get("minimum").and_then(Value::as_f64);
    let max = s.get("maximum").and_then(Value::as_f64);
    match (min, max) {
        (Some(min), _) if preferred < min => min,
        (_, Some(max)) if preferred > max => max,
        _ => preferred,
    }
}

fn sample_string(s: &Map<String, Value>) -> &'static str {
    match s.get("format").and_then(Value::as_str) {
        Some("date-time") => "2024-01-01T00:00:00Z",
        Some("date") => "2024-01-01",
        Some("time") => "00:00:00",
        Some("email") => "mock@example.com",
        Some("uri" | "url") => "https://example.com/mock",
        Some("uuid") => "00000000-0000-0000-0000-000000000000",
        _ => "mock",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_and_objects() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 3},
                "ratio": {"type": ["number", "null"]},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "kind": {"const": "fixed"},
                "nested": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
            "required": ["city", "extra"],
        });
        assert_eq!(
            instance(&schema),
            json!({
                "city": "mock", "unit": "celsius", "days": 3, "ratio": 1.0, "ok": true,
                "tags": ["mock"], "kind": "fixed", "nested": {"n": 1}, "extra": "mock",
            })
        );
    }

    #[test]
    fn refs_unions_and_cycles() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "type": "object",
            "properties": {
                "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                "both": {"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "boolean"}}}]},
                "list": {"$ref": "#/$defs/node"},
            },
        });
        let out = instance(&schema);
        assert_eq!(out["maybe"], json!(1));
        assert_eq!(out["both"], json!({"a": "mock", "b": true}));
        assert!(out["list"]["next"]["next"].is_object());
    }
}
