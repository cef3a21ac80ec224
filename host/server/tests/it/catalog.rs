//! The built-in provider catalog (`host/routing/catalog/*.toml`): enough providers,
//! every entry complete and well formed, ids unique across files, and the
//! whole catalog loads into routes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tollgate_core::money::PicoPerToken;
use tollgate_routing::catalog::{
    AuthStyle, CAPABILITIES, Catalog, CatalogProvider, ProviderConfig, builtin_entries, fill_placeholders,
};

/// Adapters built into the binary: one per folder under `plugins/`.
fn builtin_adapters() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins");
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase())
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Every problem with one entry, so a failure lists them all at once.
fn problems(entry: &CatalogProvider, adapters: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut bad = |what: String| out.push(what);
    let id_ok = !entry.id.is_empty()
        && entry
            .id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !id_ok {
        bad("id must be lowercase letters, digits, '-' or '_'".into());
    }
    if entry.name.trim().is_empty() {
        bad("empty name".into());
    }
    if !adapters.contains(&entry.adapter) {
        bad(format!("adapter '{}' is not built in ({adapters:?})", entry.adapter));
    }
    // Placeholders are filled from the environment at start; any value must
    // give an absolute http(s) URL.
    let (url, unresolved) = fill_placeholders(&entry.base_url, &|_| Some("placeholder".into()));
    if !unresolved.is_empty() {
        bad(format!("base_url placeholders {unresolved:?}"));
    }
    for name in entry
        .base_url
        .split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}'))
        .map(|(n, _)| n)
    {
        if !is_env_name(name) {
            bad(format!("placeholder '{{{name}}}' is not an environment variable name"));
        }
    }
    match reqwest::Url::parse(&url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some() => {}
        _ => bad(format!("base_url '{}' is not an absolute http(s) URL", entry.base_url)),
    }
    match (entry.auth, &entry.api_key_env) {
        (AuthStyle::None, _) => {}
        (_, Some(env)) if is_env_name(env) => {}
        (_, other) => bad(format!(
            "auth {:?} needs api_key_env like FOO_API_KEY, got {other:?}",
            entry.auth
        )),
    }
    if entry.auth == AuthStyle::None && !(url.starts_with("http://127.0.0.1") || url.starts_with("http://localhost")) {
        bad("auth 'none' is only for local servers".into());
    }
    let mut seen = BTreeSet::new();
    for flag in &entry.capabilities {
        if !CAPABILITIES.contains(&flag.as_str()) {
            bad(format!("unknown capability '{flag}'"));
        }
        if !seen.insert(flag) {
            bad(format!("capability '{flag}' listed twice"));
        }
    }
    if entry.models.is_empty() {
        bad("no models".into());
    }
    let mut model_ids = BTreeSet::new();
    for model in &entry.models {
        if model.id.trim().is_empty() {
            bad("a model has an empty id".into());
        }
        if !model_ids.insert(&model.id) {
            bad(format!("model '{}' listed twice", model.id));
        }
        // An unpriced model (no published per-token USD price) gives neither price.
        match (&model.input_price_per_mtok, &model.output_price_per_mtok) {
            (Some(input), Some(output)) => {
                for (what, price) in [("input", input), ("output", output)] {
                    if let Err(e) = PicoPerToken::from_usd_per_mtok(price) {
                        bad(format!("model '{}' {what} price: {e}", model.id));
                    }
                }
            }
            (None, None) => {}
            _ => bad(format!("model '{}' sets only one of its two prices", model.id)),
        }
        if model.context_length.is_none_or(|n| n == 0) {
            bad(format!("model '{}' needs a positive context_length", model.id));
        }
    }
    out
}

#[test]
fn catalog_has_at_least_130_complete_unique_providers() {
    let entries = builtin_entries().unwrap();
    assert!(entries.len() >= 130, "only {} built-in providers", entries.len());
    let adapters = builtin_adapters();
    assert!(adapters.contains("openai-compatible") && adapters.contains("azure-openai"));

    let mut first_file: BTreeMap<&str, &str> = BTreeMap::new();
    let mut failures = Vec::new();
    for (file, entry) in &entries {
        if let Some(earlier) = first_file.insert(&entry.id, file) {
            failures.push(format!("{file}: id '{}' already defined in {earlier}", entry.id));
        }
        for problem in problems(entry, &adapters) {
            failures.push(format!("{file}: provider '{}': {problem}", entry.id));
        }
    }
    assert!(failures.is_empty(), "catalog problems:\n{}", failures.join("\n"));
}

#[test]
fn the_issue_s_named_providers_are_present() {
    let ids: BTreeSet<String> = builtin_entries().unwrap().into_iter().map(|(_, e)| e.id).collect();
    for id in [
        "openai",
        "azure-openai",
        "groq",
        "together",
        "fireworks",
        "deepinfra",
        "mistral",
        "deepseek",
        "xai",
        "perplexity",
        "cerebras",
        "openrouter",
        "nebius",
        "hyperbolic",
        "sambanova",
        "novita",
        "lambda",
        "nvidia-nim",
        "github-models",
        "cloudflare-workers-ai",
        "ollama",
        "vllm",
        "lm-studio",
        "llama-cpp",
    ] {
        assert!(ids.contains(id), "provider '{id}' missing");
    }
}

#[test]
fn local_servers_are_free_keyless_and_off_until_named_in_config() {
    let local = [
        "ollama/llama3.2",
        "vllm/meta-llama/Llama-3.1-8B-Instruct",
        "lm-studio/qwen2.5-7b-instruct",
        "llama-cpp/default",
    ];
    let catalog = Catalog::build(&BTreeMap::new(), &|_| None).unwrap();
    for id in local {
        let route = catalog.resolve(id).unwrap_or_else(|| panic!("{id} missing"));
        let provider = &route.provider;
        let reason = provider.unavailable_reason().unwrap_or_default();
        assert!(
            reason.contains(&format!("add [providers.{}]", provider.id)),
            "{id}: {reason}"
        );
        assert_eq!(route.price.input.0 + route.price.output.0, 0, "{id}");
    }
    // Naming the provider, even with nothing in its section, enables it.
    let named: BTreeMap<String, ProviderConfig> = local
        .iter()
        .map(|id| (id.split('/').next().unwrap().to_string(), ProviderConfig::default()))
        .collect();
    let catalog = Catalog::build(&named, &|_| None).unwrap();
    for id in local {
        assert!(catalog.resolve(id).unwrap().provider.is_available(), "{id}");
    }
}

#[test]
fn whole_catalog_loads_and_placeholders_come_from_the_environment() {
    let catalog = Catalog::build(&BTreeMap::new(), &|_| None).unwrap();
    let providers: BTreeSet<&str> = catalog.routes().map(|r| r.provider.id.as_str()).collect();
    assert!(providers.len() >= 130);

    let cloudflare = catalog
        .resolve("cloudflare-workers-ai/@cf/meta/llama-3.1-8b-instruct")
        .unwrap();
    assert!(!cloudflare.provider.is_available());
    assert!(cloudflare.provider.has_capability("tools"));

    let env = |name: &str| match name {
        "CLOUDFLARE_API_TOKEN" => Some("token".to_string()),
        "CLOUDFLARE_ACCOUNT_ID" => Some("acc123".to_string()),
        _ => None,
    };
    let catalog = Catalog::build(&BTreeMap::new(), &env).unwrap();
    let cloudflare = catalog
        .resolve("cloudflare-workers-ai/@cf/meta/llama-3.1-8b-instruct")
        .unwrap();
    assert!(cloudflare.provider.is_available());
    assert_eq!(
        cloudflare.provider.base_url,
        "https://api.cloudflare.com/client/v4/accounts/acc123/ai/v1"
    );
}
