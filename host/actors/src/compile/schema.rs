//! JSON Schemas inside an actor (`inputs`, `outputs`, an `llm` step's
//! `schema`): meta-validated where they are written, and read statically
//! to know the type of a step's output and what a sub-actor requires.

use serde_json::Value;

use super::error::CompileError;
use super::yaml::{Node, NodeValue};

/// `node` as a JSON Schema, with an error at the offending node when it is
/// not a valid one.
pub(crate) fn read(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<Value> {
    if node.as_map().is_none() {
        errors.push(node.error(format!("{what} must be a JSON Schema (a mapping), not {}", node.kind())));
        return None;
    }
    let before = errors.len();
    let value = node.to_json(errors);
    if errors.len() > before {
        return None;
    }
    if let Err(error) = jsonschema::meta::validate(&value) {
        let at = node_at(node, error.instance_path().as_str());
        errors.push(at.error(format!("{what} is not a valid JSON Schema: {error}")));
        return None;
    }
    if let Err(error) = jsonschema::validator_for(&value) {
        errors.push(node.error(format!("{what} is not a usable JSON Schema: {error}")));
        return None;
    }
    Some(value)
}

/// The node a JSON Pointer names, or the deepest one it reaches.
fn node_at<'a>(node: &'a Node, pointer: &str) -> &'a Node {
    let mut current = node;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = match &current.value {
            NodeValue::Map(entries) => entries.iter().find(|(k, _)| k.name == token).map(|(_, v)| v),
            NodeValue::Seq(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match next {
            Some(next) => current = next,
            None => break,
        }
    }
    current
}

/// A static type: a JSON Schema, or nothing known.
pub(crate) type Ty = Option<Value>;

/// The JSON types a schema allows, when it says (`type`, or `const`/`enum`
/// of one kind); `None` when anything may be there.
pub(crate) fn types(schema: &Value) -> Option<Vec<String>> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(vec![t.clone()]),
        Some(Value::Array(ts)) => Some(ts.iter().filter_map(|t| t.as_str().map(String::from)).collect()),
        _ => schema.get("const").map(|value| vec![json_type(value).to_string()]),
    }
}

pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a value of type `actual` may be what `expected` asks for.
pub(crate) fn compatible(actual: &Value, expected: &Value) -> bool {
    let (Some(actual), Some(expected)) = (types(actual), types(expected)) else {
        return true;
    };
    actual
        .iter()
        .any(|a| expected.iter().any(|e| a == e || (a == "integer" && e == "number")))
}

/// "a string", "an array", "a string or null".
pub(crate) fn describe(schema: &Value) -> String {
    match types(schema) {
        Some(types) if !types.is_empty() => types
            .iter()
            .map(|t| match t.as_str() {
                "array" | "object" | "integer" => format!("an {t}"),
                "null" => "null".to_string(),
                _ => format!("a {t}"),
            })
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any value".to_string(),
    }
}

pub(crate) fn allows(schema: &Value, kind: &str) -> bool {
    types(schema).is_none_or(|types| types.iter().any(|t| t == kind))
}

/// The type of `.attribute` on a value of type `ty`, or why there is none.
pub(crate) fn attribute(ty: &Value, name: &str) -> Result<Ty, String> {
    if !allows(ty, "object") {
        return Err(format!("is {}, which has no attribute '{name}'", describe(ty)));
    }
    if let Some(property) = ty.get("properties").and_then(|p| p.get(name)) {
        return Ok(Some(property.clone()));
    }
    match ty.get("additionalProperties") {
        Some(Value::Bool(false)) if ty.get("properties").is_some() => {
            let known: Vec<&String> = ty["properties"]
                .as_object()
                .map(|p| p.keys().collect())
                .unwrap_or_default();
            Err(format!(
                "has no property '{name}' (its schema allows only: {})",
                known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            ))
        }
        Some(extra @ Value::Object(_)) => Ok(Some(extra.clone())),
        _ => Ok(None),
    }
}

/// The type of the items of a list of type `ty`.
pub(crate) fn items(ty: &Value) -> Ty {
    ty.get("items").filter(|items| items.is_object()).cloned()
}
