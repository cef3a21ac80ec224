//! The import from LiteLLM's `model_prices_and_context_window.json`: the
//! catalog's own models get the file's prices (or keep the ones they had),
//! and every chat model the file lists for a provider Tollgate serves joins
//! the table, with its context, output limit and capabilities, so the
//! catalog can offer it without a line of its own.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::Context;
use serde_json::value::RawValue;

use super::{PriceTable, Source, TableModel, per_mtok};

/// A model of the catalog to price: its route id, provider and upstream name.
pub struct Wanted<'a> {
    pub route_id: &'a str,
    pub provider: &'a str,
    pub upstream_model: &'a str,
}

/// What an import changed, by route id.
#[derive(Debug, Default)]
pub struct ImportReport {
    pub added: Vec<(String, TableModel)>,
    pub changed: Vec<(String, TableModel, TableModel)>,
    pub unchanged: usize,
    /// In the old table, not found in the file: kept as they were.
    pub kept: Vec<String>,
    /// Neither in the file nor in the old table.
    pub missing: Vec<String>,
    /// Models the catalog does not list, taken from the file.
    pub models: Vec<String>,
    /// Chat models of a served provider left out because the file says they
    /// were retired before the import date.
    pub deprecated: usize,
}

/// LiteLLM's provider names for a catalog provider: the prefixes its keys
/// use and its `litellm_provider` values. Unlisted providers use their id.
fn source_providers(provider: &str) -> &'static [&'static str] {
    match provider {
        "bedrock" => &["bedrock_converse", "bedrock"],
        "cohere" => &["cohere_chat", "cohere"],
        "azure-openai" => &["azure"],
        "together" => &["together_ai"],
        "fireworks" => &["fireworks_ai"],
        "lambda" => &["lambda_ai"],
        "nvidia-nim" => &["nvidia_nim"],
        "cloudflare-workers-ai" => &["cloudflare"],
        "dashscope" | "dashscope-cn" => &["dashscope"],
        "moonshot" | "moonshot-cn" => &["moonshot"],
        "minimax" | "minimax-cn" => &["minimax"],
        "codestral" => &["codestral", "mistral"],
        "snowflake-cortex" => &["snowflake"],
        "friendli" => &["friendliai"],
        "featherless" => &["featherless_ai"],
        "gmi-cloud" => &["gmi"],
        "wandb-inference" => &["wandb"],
        "meta-llama-api" => &["meta_llama"],
        "vercel-ai-gateway" => &["vercel_ai_gateway"],
        _ => &[],
    }
}

fn names_of(provider: &str) -> Vec<&str> {
    match source_providers(provider) {
        [] => vec![provider],
        names => names.to_vec(),
    }
}

/// LiteLLM writes these providers' regional, data-zone and commitment
/// prices as `<provider>/<region>/<model>`: such a key names a price plan,
/// not a model a request can name.
const FLAT_NAMES: [&str; 3] = ["azure", "bedrock", "bedrock_converse"];

/// A LiteLLM entry's fields, numbers kept as written.
type Entry = HashMap<String, Box<RawValue>>;

fn text(entry: &Entry, field: &str) -> Option<String> {
    entry
        .get(field)
        .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

fn flag(entry: &Entry, field: &str) -> bool {
    entry
        .get(field)
        .and_then(|v| serde_json::from_str::<bool>(v.get()).ok())
        .unwrap_or(false)
}

fn count(entry: &Entry, field: &str) -> Option<u64> {
    entry.get(field).and_then(|v| v.get().parse::<u64>().ok())
}

/// Whether a request to `/v1/chat/completions` reaches the model: a chat
/// entry, or a Responses-API entry that also lists that endpoint. An entry
/// that lists its endpoints without that one answers elsewhere only.
fn chat_callable(entry: &Entry) -> bool {
    let endpoints = entry
        .get("supported_endpoints")
        .and_then(|v| serde_json::from_str::<Vec<String>>(v.get()).ok());
    let chat_endpoint = endpoints
        .as_ref()
        .map(|list| list.iter().any(|e| e == "/v1/chat/completions"));
    match text(entry, "mode").as_deref() {
        Some("chat") => chat_endpoint != Some(false),
        Some("responses") => chat_endpoint == Some(true),
        _ => false,
    }
}

/// The operation besides chat a LiteLLM `mode` names, for the modes whose
/// models are priced per token.
fn token_operation(entry: &Entry) -> Option<&'static str> {
    match text(entry, "mode").as_deref() {
        Some("embedding") => Some("embeddings"),
        Some("moderation") => Some("moderation"),
        _ => None,
    }
}

/// The adapter that serves OpenAI's models that answer only on its
/// Responses API (`mode: responses` without the chat endpoint).
pub const RESPONSES_ADAPTER: &str = "openai-responses";

/// Whether the entry is a Responses-API model that chat completions do not
/// reach: Tollgate serves it through [`RESPONSES_ADAPTER`], on OpenAI only.
fn responses_only(entry: &Entry) -> bool {
    text(entry, "mode").as_deref() == Some("responses") && !chat_callable(entry)
}

/// The entry as a table model, or `None` when it lacks an input or output
/// price (nothing could be billed for it).
fn read_model(key: &str, entry: &Entry) -> anyhow::Result<Option<TableModel>> {
    let per_mtok = |k: &str| {
        entry
            .get(k)
            .filter(|v| v.get() != "null")
            .map(|v| per_mtok(v.get()).with_context(|| format!("'{key}'.{k}")))
            .transpose()
    };
    let operation = token_operation(entry);
    let output = match per_mtok("output_cost_per_token")? {
        Some(output) => Some(output),
        // Embeddings and moderations write no tokens.
        None if operation.is_some() => Some("0".to_string()),
        None => None,
    };
    let (Some(input), Some(output)) = (per_mtok("input_cost_per_token")?, output) else {
        return Ok(None);
    };
    if let Some(operation) = operation {
        return Ok(Some(TableModel {
            key: key.to_string(),
            input,
            output,
            cache_read: None,
            cache_write: None,
            reasoning: None,
            context_length: count(entry, "max_input_tokens").or_else(|| count(entry, "max_tokens")),
            max_output_tokens: None,
            capabilities: Some(Vec::new()),
            adapter: None,
            operations: Some(vec![operation.to_string()]),
            images: None,
            per_mchars: None,
            per_second: None,
            per_search: None,
        }));
    }
    // In CAPABILITIES order; every chat model streams.
    let mut capabilities = vec!["streaming".to_string()];
    let schema = flag(entry, "supports_response_schema");
    for (on, name) in [
        (flag(entry, "supports_function_calling"), "tools"),
        (schema, "json_mode"),
        (schema, "structured_outputs"),
        (flag(entry, "supports_vision"), "vision"),
        (flag(entry, "supports_reasoning"), "reasoning"),
        (flag(entry, "supports_prompt_caching"), "caching"),
    ] {
        if on {
            capabilities.push(name.to_string());
        }
    }
    Ok(Some(TableModel {
        key: key.to_string(),
        input,
        output,
        cache_read: per_mtok("cache_read_input_token_cost")?,
        cache_write: per_mtok("cache_creation_input_token_cost")?,
        reasoning: per_mtok("output_cost_per_reasoning_token")?,
        context_length: count(entry, "max_input_tokens").or_else(|| count(entry, "max_tokens")),
        max_output_tokens: count(entry, "max_output_tokens"),
        capabilities: Some(capabilities),
        adapter: None,
        operations: None,
        images: None,
        per_mchars: None,
        per_second: None,
        per_search: None,
    }))
}

/// Prices `wanted` from a LiteLLM-format JSON file, on top of `current`:
/// models found in the file get its prices, the others keep theirs. Every
/// chat model the file lists for one of `providers` (the ids the catalog
/// builds) that `wanted` lacks is added, unless it is a fine-tuning template,
/// unpriced, or retired before `source.retrieved`; so is every OpenAI model
/// served only on the Responses API, with [`RESPONSES_ADAPTER`].
pub fn import_litellm(
    json: &str,
    wanted: &[Wanted<'_>],
    current: &PriceTable,
    source: Source,
    providers: &[&str],
) -> anyhow::Result<(PriceTable, ImportReport)> {
    let raw: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(json).context("the price file is not a JSON object")?;
    // Entries that are not objects (LiteLLM has none but its sample) are no models.
    let entries: BTreeMap<&str, Entry> = raw
        .iter()
        .filter_map(|(key, value)| Some((key.as_str(), serde_json::from_str::<Entry>(value.get()).ok()?)))
        .collect();
    let today = source.retrieved.clone();
    let mut table = PriceTable {
        source,
        models: BTreeMap::new(),
    };
    let mut report = ImportReport::default();
    for model in wanted {
        let found = find(&entries, model.provider, model.upstream_model)?;
        let old = current.get(model.route_id);
        match (&found, old) {
            (Some(new), Some(old)) if new.same_price(old) => report.unchanged += 1,
            (Some(new), Some(old)) => report
                .changed
                .push((model.route_id.to_string(), old.clone(), new.clone())),
            (Some(new), None) => report.added.push((model.route_id.to_string(), new.clone())),
            (None, Some(_)) => report.kept.push(model.route_id.to_string()),
            (None, None) => report.missing.push(model.route_id.to_string()),
        }
        if let Some(entry) = found.or_else(|| old.cloned()) {
            table.models.insert(model.route_id.to_string(), entry);
        }
    }

    let listed: BTreeSet<(&str, &str)> = wanted.iter().map(|m| (m.provider, m.upstream_model)).collect();
    // LiteLLM provider name → the providers it serves, with its rank among
    // each one's names. A name that is a provider's first serves only the
    // providers it is first for: `mistral` prices codestral's catalog models
    // but does not fill its endpoint with every Mistral model.
    let mut serves: HashMap<&str, Vec<(&str, usize)>> = HashMap::new();
    for &provider in providers {
        for (rank, name) in names_of(provider).into_iter().enumerate() {
            serves.entry(name).or_default().push((provider, rank));
        }
    }
    for list in serves.values_mut() {
        if list.iter().any(|&(_, rank)| rank == 0) {
            list.retain(|&(_, rank)| rank == 0);
        }
    }
    let mut added: BTreeMap<String, ((usize, bool), TableModel)> = BTreeMap::new();
    let mut unit_parts: BTreeMap<&str, Vec<units::UnitEntry>> = BTreeMap::new();
    for (&key, entry) in &entries {
        let Some(name) = text(entry, "litellm_provider") else {
            continue;
        };
        let Some(targets) = serves.get(name.as_str()) else {
            continue;
        };
        if let Some(unit) = units::unit_entry(key.strip_prefix(&format!("{name}/")).unwrap_or(key), entry)? {
            if text(entry, "deprecation_date").is_some_and(|date| date.as_str() < today.as_str()) {
                report.deprecated += 1;
                continue;
            }
            for &(provider, _) in targets {
                unit_parts.entry(provider).or_default().push(units::UnitEntry {
                    model: unit.model.clone(),
                    part: unit.part.clone(),
                });
            }
            continue;
        }
        let through_responses = responses_only(entry);
        if key.starts_with("ft:") || !(chat_callable(entry) || through_responses || token_operation(entry).is_some()) {
            continue;
        }
        let prefixed = key.strip_prefix(&format!("{name}/"));
        let model = prefixed.unwrap_or(key);
        // Size-class price templates, not models.
        if model.starts_with("together-ai-") || FLAT_NAMES.contains(&name.as_str()) && model.contains('/') {
            continue;
        }
        let Some(mut found) = read_model(key, entry)? else {
            continue;
        };
        if through_responses {
            found.adapter = Some(RESPONSES_ADAPTER.to_string());
        }
        if text(entry, "deprecation_date").is_some_and(|date| date.as_str() < today.as_str()) {
            report.deprecated += 1;
            continue;
        }
        for &(provider, rank) in targets {
            if through_responses && provider != "openai" {
                continue;
            }
            let id = format!("{provider}/{model}");
            if listed.contains(&(provider, model)) || table.models.contains_key(&id) {
                continue;
            }
            // The provider's first name, and the key that names the provider, win.
            let order = (rank, prefixed.is_none());
            if added.get(&id).is_none_or(|(best, _)| order < *best) {
                added.insert(id, (order, found.clone()));
            }
        }
    }
    for (provider, parts) in unit_parts {
        for (model, entry) in units::fold(parts, |model| model.to_string()) {
            let id = format!("{provider}/{model}");
            if listed.contains(&(provider, model.as_str())) || table.models.contains_key(&id) || added.contains_key(&id)
            {
                continue;
            }
            added.insert(id, ((usize::MAX, false), entry));
        }
    }
    for (id, (_, model)) in added {
        report.models.push(id.clone());
        table.models.insert(id, model);
    }
    Ok((table, report))
}

/// The chat entry for `model` under any of the provider's LiteLLM names.
fn find(entries: &BTreeMap<&str, Entry>, provider: &str, model: &str) -> anyhow::Result<Option<TableModel>> {
    for name in names_of(provider) {
        for key in [format!("{name}/{model}"), model.to_string()] {
            let Some(entry) = entries.get(key.as_str()) else {
                continue;
            };
            if text(entry, "litellm_provider").as_deref() != Some(name) {
                continue;
            }
            if text(entry, "mode").is_some_and(|m| m != "chat" && m != "responses") && token_operation(entry).is_none()
            {
                continue;
            }
            if let Some(found) = read_model(&key, entry)? {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
mod units;
