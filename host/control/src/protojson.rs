//! Field names of the A2A core methods' params. A2A's JSON-RPC binding
//! carries the proto messages in the proto3 JSON mapping, whose parsers must
//! accept both a field's JSON name (`historyLength`) and its proto name
//! (`history_length`); clients do send either (the official TCK sends the
//! proto names). The handlers read JSON names only, so params are rewritten
//! to JSON names once, here, before any handler sees them.

use serde_json::{Map, Value};

use super::error::RpcError;

/// Fields whose value is a `google.protobuf.Struct`/`Value` (free-form user
/// JSON, e.g. a control-plane op's `{"op", "params"}` in a data part): their
/// keys are data, not proto field names, and are left as sent.
const FREE_FORM: &[&str] = &["data", "metadata"];

/// Rewrites every proto field name (`snake_case`) in `params` to its JSON name
/// (`lowerCamelCase`), except inside free-form fields. A field given under
/// both names is invalid params, as proto3 JSON parsers reject it too.
pub fn json_names(params: Value) -> Result<Value, RpcError> {
    match params {
        Value::Object(object) => {
            let mut renamed = Map::with_capacity(object.len());
            for (key, value) in object {
                let name = json_name(&key);
                let value = if FREE_FORM.contains(&name.as_str()) {
                    value
                } else {
                    json_names(value)?
                };
                if renamed.contains_key(&name) {
                    return Err(RpcError::invalid_params(format!(
                        "field '{name}' is given twice (as '{name}' and as its proto name)"
                    )));
                }
                renamed.insert(name, value);
            }
            Ok(Value::Object(renamed))
        }
        Value::Array(items) => items
            .into_iter()
            .map(json_names)
            .collect::<Result<_, _>>()
            .map(Value::Array),
        other => Ok(other),
    }
}

/// `history_length` → `historyLength`, as protoc derives `json_name`; a name
/// without underscores (already a JSON name) is unchanged.
fn json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper_next = false;
    for c in name.chars() {
        if c == '_' {
            upper_next = true;
        } else if upper_next {
            out.extend(c.to_uppercase());
            upper_next = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Numbers that are whole (`144618.0`) become integers, recursively. A
/// message's data part travels as a protobuf `Struct`, which has only
/// doubles, so clients that build it that way (the official SDKs do) send
/// every integer as a float; typed params (sizes, limits) need them back.
/// Doubles hold integers exactly only up to 2^53, the bound used here.
pub fn integral_numbers(value: Value) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match value {
        Value::Number(number) if !number.is_i64() && !number.is_u64() => match number.as_f64() {
            Some(float) if float.fract() == 0.0 && float.abs() <= EXACT => Value::from(float as i64),
            _ => Value::Number(number),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral_numbers).collect()),
        Value::Object(object) => Value::Object(object.into_iter().map(|(k, v)| (k, integral_numbers(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{integral_numbers, json_names};

    #[test]
    fn proto_names_become_json_names_except_in_free_form_fields() {
        let params = json!({
            "history_length": 1,
            "message": {
                "message_id": "m1", "taskId": "t1",
                "parts": [{"media_type": "application/json", "data": {"op": "x", "params": {"workspace_id": "ws"}}}],
                "metadata": {"some_key": 1},
            },
            "configuration": {"return_immediately": true},
        });
        assert_eq!(
            json_names(params).unwrap(),
            json!({
                "historyLength": 1,
                "message": {
                    "messageId": "m1", "taskId": "t1",
                    "parts": [{"mediaType": "application/json", "data": {"op": "x", "params": {"workspace_id": "ws"}}}],
                    "metadata": {"some_key": 1},
                },
                "configuration": {"returnImmediately": true},
            })
        );
    }

    #[test]
    fn whole_doubles_become_integers_and_the_rest_stay() {
        let value =
            integral_numbers(json!({"size": 144618.0, "nested": [2.0, 2.5, -3.0], "big": 1e300, "text": "1.0"}));
        assert_eq!(
            value,
            json!({"size": 144618, "nested": [2, 2.5, -3], "big": 1e300, "text": "1.0"})
        );
        assert!(value["size"].is_u64());
    }

    #[test]
    fn a_field_under_both_names_is_invalid_params() {
        let error = json_names(json!({"historyLength": 1, "history_length": 2})).unwrap_err();
        assert_eq!(error.code, -32602);
    }
}
