//! OpenAI `json_schema` → the schema Anthropic's structured outputs accept
//! (`output_config.format.schema`), as the official SDK's `transform_schema`
//! prepares it:
//! - every object schema gets `additionalProperties: false` (required);
//! - `oneOf` becomes `anyOf`;
//! - constraints structured outputs do not support (numeric bounds, string
//!   lengths, `pattern`, item counts above 1, …) move into the `description`
//!   as `{key: value, …}`, so the model may still follow them.

use serde_json::{Map, Value};

/// Keywords passed through as they are (with their sub-schemas translated).
const KEPT: [&str; 13] = [
    "type",
    "description",
    "title",
    "enum",
    "const",
    "properties",
    "required",
    "items",
    "anyOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
];

/// String formats structured outputs support.
const FORMATS: [&str; 11] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
    "uri-reference",
];

/// The strict form of `schema`.
pub fn strict(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    let mut moved: Vec<String> = Vec::new();
    for (key, value) in map {
        match key.as_str() {
            "properties" | "$defs" | "definitions" => {
                let translated = value
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), strict(v))).collect::<Map<_, _>>());
                out.insert(key.clone(), translated.map_or_else(|| value.clone(), Value::Object));
            }
            "items" => {
                out.insert(key.clone(), strict(value));
            }
            "anyOf" | "oneOf" | "allOf" => {
                let variants = value.as_array().map(|v| v.iter().map(strict).collect::<Vec<_>>());
                let key = if key == "allOf" { "allOf" } else { "anyOf" };
                out.insert(key.into(), variants.map_or_else(|| value.clone(), Value::Array));
            }
            "additionalProperties" => {}
            "format" if value.as_str().is_some_and(|f| FORMATS.contains(&f)) => {
                out.insert(key.clone(), value.clone());
            }
            "minItems" if matches!(value.as_u64(), Some(0 | 1)) => {
                out.insert(key.clone(), value.clone());
            }
            _ if KEPT.contains(&key.as_str()) => {
                out.insert(key.clone(), value.clone());
            }
            _ => moved.push(format!("{key}: {value}")),
        }
    }
    if is_object(map) {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if !moved.is_empty() {
        let note = format!("{{{}}}", moved.join(", "));
        let description = match out.get("description").and_then(Value::as_str) {
            Some(text) => format!("{text}\n\n{note}"),
            None => note,
        };
        out.insert("description".into(), Value::String(description));
    }
    Value::Object(out)
}

fn is_object(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::strict;

    #[test]
    fn objects_are_closed_and_constraints_move_to_descriptions() {
        let schema = json!({
            "type": "object",
            "properties": {
                "age": {"type": "integer", "minimum": 0, "description": "Years"},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1},
                "pet": {"oneOf": [{"type": "object", "properties": {"n": {"type": "string"}}}, {"type": "null"}]},
                "when": {"type": "string", "format": "date"}
            },
            "required": ["age"],
            "additionalProperties": true
        });
        assert_eq!(
            strict(&schema),
            json!({
                "type": "object",
                "properties": {
                    "age": {"type": "integer", "description": "Years\n\n{minimum: 0}"},
                    "tags": {"type": "array", "items": {"type": "string", "description": "{maxLength: 5}"}, "minItems": 1},
                    "pet": {"anyOf": [
                        {"type": "object", "properties": {"n": {"type": "string"}}, "additionalProperties": false},
                        {"type": "null"}
                    ]},
                    "when": {"type": "string", "format": "date"}
                },
                "required": ["age"],
                "additionalProperties": false
            })
        );
    }
}
