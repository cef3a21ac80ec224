//! Protobuf JSON accepts each field under its proto name (`property_ordering`)
//! or its lowerCamelCase JSON name (`propertyOrdering`), and Gemini does too;
//! the google-genai SDK sends some snake_case names. The mock renames every
//! field to camelCase once, so validation and restating see one spelling.
//! Free-form values (function arguments and responses, examples, defaults,
//! JSON Schemas, labels, the mock's directives) and the property names of a
//! schema's `properties` are left as they are. One visible difference from
//! Gemini: an unknown snake_case field is reported under its camelCase name.

use serde_json::{Map, Value};

/// Fields whose value is user data, not proto fields.
const VERBATIM: &[&str] = &[
    "args",
    "response",
    "example",
    "default",
    "enum",
    "required",
    "propertyOrdering",
    "parametersJsonSchema",
    "responseJsonSchema",
    "labels",
    "mock",
];

/// `body` with camelCase field names.
pub fn camel_case(body: Map<String, Value>) -> Map<String, Value> {
    body.into_iter().map(|(key, value)| field(key, value)).collect()
}

fn field(key: String, value: Value) -> (String, Value) {
    let key = camel(&key);
    let value = match (key.as_str(), value) {
        (name, value) if VERBATIM.contains(&name) => value,
        // Property names are the caller's; their schemas are proto.
        ("properties", Value::Object(properties)) => Value::Object(
            properties
                .into_iter()
                .map(|(name, schema)| (name, renamed(schema)))
                .collect(),
        ),
        (_, value) => renamed(value),
    };
    (key, value)
}

fn renamed(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(camel_case(map)),
        Value::Array(items) => Value::Array(items.into_iter().map(renamed).collect()),
        other => other,
    }
}

/// `function_declarations` → `functionDeclarations`; camelCase stays.
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' && !out.is_empty() {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn renames_proto_fields_only() {
        let body = json!({
            "system_instruction": {"parts": [{"text": "x"}]},
            "contents": [{"role": "model", "parts": [{"function_call": {"name": "f", "args": {"snake_arg": 1}}}]}],
            "generation_config": {"response_schema": {"type": "OBJECT", "property_ordering": ["my_field"],
                "properties": {"my_field": {"type": "STRING", "max_length": 3}}}},
            "mock": {"error_code": "x"}
        });
        let Value::Object(map) = body else { unreachable!() };
        let out = Value::Object(camel_case(map));
        assert_eq!(
            out,
            json!({
                "systemInstruction": {"parts": [{"text": "x"}]},
                "contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"snake_arg": 1}}}]}],
                "generationConfig": {"responseSchema": {"type": "OBJECT", "propertyOrdering": ["my_field"],
                    "properties": {"my_field": {"type": "STRING", "maxLength": 3}}}},
                "mock": {"error_code": "x"}
            })
        );
    }
}
