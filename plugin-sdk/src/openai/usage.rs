//! Reading and writing OpenAI `usage` objects. Billing reads these counts,
//! so a missing or odd count becomes 0 or `None` rather than an error: an
//! answer is never lost over its usage block.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::Usage;
use crate::json::is_object;

/// Read an OpenAI `usage` object: `prompt_tokens` → input, `completion_tokens`
/// → output, `prompt_tokens_details.cached_tokens` → cache-read,
/// `completion_tokens_details.reasoning_tokens` → reasoning. Missing counts
/// are 0 (input/output) or `None`. Returns `None` unless `usage` is an object.
pub fn usage_from_value(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |v: Option<&Value>| v.and_then(as_count);
    let detail = |outer: &str, inner: &str| count(usage.get(outer).and_then(|d| d.get(inner)));
    Some(Usage {
        input: count(usage.get("prompt_tokens")).unwrap_or(0),
        output: count(usage.get("completion_tokens")).unwrap_or(0),
        cache_read: detail("prompt_tokens_details", "cached_tokens"),
        cache_write: None,
        reasoning: detail("completion_tokens_details", "reasoning_tokens"),
    })
}

/// The OpenAI `usage` object for `usage`, with `prompt_tokens_details` /
/// `completion_tokens_details` only when cached / reasoning tokens were
/// reported.
pub fn usage_json(usage: &Usage) -> Value {
    let mut out = serde_json::json!({
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
    });
    if let Some(cached) = usage.cache_read {
        out["prompt_tokens_details"] = serde_json::json!({ "cached_tokens": cached });
    }
    if let Some(reasoning) = usage.reasoning {
        out["completion_tokens_details"] = serde_json::json!({ "reasoning_tokens": reasoning });
    }
    out
}

/// The usage of a provider that counts prompt tokens read from or written
/// to its cache apart from the other input tokens (Anthropic, and Bedrock
/// after it): all three are billed as input, so input is their sum, and the
/// cache counts are also reported on their own (as OpenAI's `cached_tokens`
/// is part of `prompt_tokens`). Missing counts are 0 or `None`.
pub fn usage_with_cache_apart(
    uncached_input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
) -> Usage {
    Usage {
        input: uncached_input.unwrap_or(0) + cache_read.unwrap_or(0) + cache_write.unwrap_or(0),
        output: output.unwrap_or(0),
        cache_read,
        cache_write,
        reasoning: None,
    }
}

/// [`usage_from_value`] on raw JSON text; `None` for `null`, non-objects or
/// invalid JSON.
pub fn usage_from_raw(usage: &RawValue) -> Option<Usage> {
    if !is_object(usage) {
        return None;
    }
    usage_from_value(&serde_json::from_str(usage.get()).ok()?)
}

fn as_count(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_mapping() {
        let u = usage_from_value(&json!({
            "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 3},
            "completion_tokens_details": {"reasoning_tokens": 2}
        }))
        .unwrap();
        assert_eq!(
            u,
            Usage {
                input: 10,
                output: 5,
                cache_read: Some(3),
                cache_write: None,
                reasoning: Some(2)
            }
        );
        let u = usage_from_value(&json!({"prompt_tokens": 7, "prompt_tokens_details": null})).unwrap();
        assert_eq!((u.input, u.output, u.cache_read, u.reasoning), (7, 0, None, None));
        assert_eq!(usage_from_value(&json!(null)), None);
        assert_eq!(usage_from_value(&json!(3)), None);
        let raw = RawValue::from_string(r#"{"prompt_tokens":1,"completion_tokens":2}"#.into()).unwrap();
        assert_eq!(usage_from_raw(&raw).unwrap().output, 2);
        assert_eq!(usage_from_raw(&RawValue::from_string("null".into()).unwrap()), None);
    }

    #[test]
    fn cache_counts_kept_apart_are_input_too() {
        let u = usage_with_cache_apart(Some(10), Some(3), Some(15), None);
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write),
            (25, 3, Some(15), None)
        );
        assert_eq!(usage_with_cache_apart(None, None, None, None).input, 0);
    }
}
