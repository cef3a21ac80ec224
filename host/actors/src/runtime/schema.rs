//! Checking values against an actor's JSON Schemas (its input, output and
//! structured model answers), with compiled validators cached by schema.

use std::sync::Arc;

use serde_json::Value;

/// Compiled schemas by their JSON text: an actor's schemas are checked on
/// every run, and compiling one costs far more than checking with it.
static VALIDATORS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, Arc<jsonschema::Validator>>>,
> = std::sync::LazyLock::new(Default::default);
/// Bound on the cache; past it, it starts over.
const MAX_CACHED_VALIDATORS: usize = 1024;

fn validator(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    let key = schema.to_string();
    if let Some(found) = VALIDATORS.lock().expect("validator cache lock").get(&key) {
        return Ok(found.clone());
    }
    let compiled = Arc::new(jsonschema::validator_for(schema).map_err(|e| format!("the schema is invalid: {e}"))?);
    let mut cache = VALIDATORS.lock().expect("validator cache lock");
    if cache.len() >= MAX_CACHED_VALIDATORS {
        cache.clear();
    }
    cache.insert(key, compiled.clone());
    Ok(compiled)
}

/// Problems of `instance` against `schema`, joined; Ok when it matches.
pub(crate) fn check_schema(schema: &Value, instance: &Value) -> Result<(), String> {
    let validator = validator(schema)?;
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .take(5)
        .map(|error| {
            let at = error.instance_path().to_string();
            if at.is_empty() {
                error.to_string()
            } else {
                format!("{error} at {at}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
