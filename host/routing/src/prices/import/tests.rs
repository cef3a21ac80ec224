//! The import against small LiteLLM-format fixtures: what it adds, what it
//! leaves out and why, and that its numbers stay exact.

use tollgate_core::money::PicoPerToken;

use super::*;

fn source(retrieved: &str) -> Source {
    Source {
        retrieved: retrieved.into(),
        ..Source::default()
    }
}

#[test]
fn imports_by_provider_name_and_reports_changes() {
    let json = r#"{
        "gpt-4o-mini": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1.5e-07,
                        "output_cost_per_token": 6e-07, "cache_read_input_token_cost": 7.5e-08,
                        "cache_creation_input_token_cost": null},
        "together_ai/meta-llama/x": {"litellm_provider": "together_ai", "input_cost_per_token": 8.8e-07, "output_cost_per_token": 8.8e-07},
        "text-embedding-3-small": {"litellm_provider": "openai", "mode": "embedding", "input_cost_per_token": 2e-08, "output_cost_per_token": 0}
    }"#;
    let wanted = [
        Wanted {
            route_id: "openai/gpt-4o-mini",
            provider: "openai",
            upstream_model: "gpt-4o-mini",
        },
        Wanted {
            route_id: "together/meta-llama/x",
            provider: "together",
            upstream_model: "meta-llama/x",
        },
        Wanted {
            route_id: "openai/text-embedding-3-small",
            provider: "openai",
            upstream_model: "text-embedding-3-small",
        },
        Wanted {
            route_id: "openai/old",
            provider: "openai",
            upstream_model: "old",
        },
    ];
    let mut current = PriceTable::default();
    let old = TableModel {
        key: "gpt-4o-mini".into(),
        input: "0.2".into(),
        output: "0.6".into(),
        cache_read: None,
        cache_write: None,
        reasoning: None,
        context_length: None,
        max_output_tokens: None,
        capabilities: None,
        adapter: None,
        operations: None,
        images: None,
        per_mchars: None,
        per_second: None,
        per_search: None,
    };
    current.models.insert("openai/gpt-4o-mini".into(), old.clone());
    current.models.insert("openai/old".into(), old);
    let (table, report) = import_litellm(json, &wanted, &current, Source::default(), &[]).unwrap();
    assert_eq!(report.changed.len(), 1);
    assert_eq!(report.changed[0].2.cache_read.as_deref(), Some("0.075"));
    assert_eq!(report.added[0].0, "together/meta-llama/x");
    assert_eq!(report.kept, ["openai/old"]);
    // An embedding model is priced per input token and serves embeddings.
    assert_eq!(report.added[1].0, "openai/text-embedding-3-small");
    let embedding = &report.added[1].1;
    assert_eq!((embedding.input.as_str(), embedding.output.as_str()), ("0.02", "0"));
    assert_eq!(embedding.operations.as_deref(), Some(&["embeddings".to_string()][..]));
    assert!(report.missing.is_empty());
    assert_eq!(table.models.len(), 4);
    let reparsed = PriceTable::parse(&table.to_toml()).unwrap();
    assert_eq!(reparsed, table);
    let price = reparsed.get("openai/gpt-4o-mini").unwrap().price().unwrap();
    assert_eq!(price.cache_read, Some(PicoPerToken(75_000)));
}

/// A file with one entry of each kind the import must add or leave out.
const FIXTURE: &str = r#"{
    "sample_spec": {"litellm_provider": "one of https://docs.litellm.ai/docs/providers", "mode": "chat",
                    "input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
    "gemini/gemini-9-pro": {"litellm_provider": "gemini", "mode": "chat",
        "input_cost_per_token": 1.25e-06, "output_cost_per_token": 0.00001,
        "cache_read_input_token_cost": 3.125e-7, "output_cost_per_reasoning_token": 0.0000123456789012,
        "max_input_tokens": 1048576, "max_output_tokens": 65535, "max_tokens": 8192,
        "supports_function_calling": true, "supports_vision": true, "supports_response_schema": true,
        "supports_reasoning": true, "supports_prompt_caching": true, "supports_audio_input": true},
    "gemini-9-pro": {"litellm_provider": "gemini", "mode": "chat",
        "input_cost_per_token": 9e-06, "output_cost_per_token": 9e-06},
    "plain-chat": {"litellm_provider": "openai", "mode": "chat", "max_tokens": 4096,
        "input_cost_per_token": 1e-07, "output_cost_per_token": 2e-07, "supports_vision": false},
    "gpt-9-pro": {"litellm_provider": "openai", "mode": "responses", "supported_endpoints": ["/v1/responses"],
        "input_cost_per_token": 1e-05, "output_cost_per_token": 1e-05},
    "gpt-9": {"litellm_provider": "openai", "mode": "responses",
        "supported_endpoints": ["/v1/chat/completions", "/v1/responses"],
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "computer-use": {"litellm_provider": "openai", "mode": "chat", "supported_endpoints": ["/v1/responses"],
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "text-embedding-9": {"litellm_provider": "openai", "mode": "embedding",
        "input_cost_per_token": 2e-08, "output_cost_per_token": 0},
    "dall-e-9": {"litellm_provider": "openai", "mode": "image_generation", "input_cost_per_token": 1e-06,
        "output_cost_per_token": 1e-06},
    "gpt-3-retired": {"litellm_provider": "openai", "mode": "chat", "deprecation_date": "2026-10-23",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "gpt-3-retiring": {"litellm_provider": "openai", "mode": "chat", "deprecation_date": "2027-01-14",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "ft:gpt-9": {"litellm_provider": "openai", "mode": "chat",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "free-lunch": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1e-06},
    "vertex_ai/gemini-9-pro": {"litellm_provider": "vertex_ai-language-models", "mode": "chat",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "nowhere/model": {"litellm_provider": "nowhere", "mode": "chat",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "azure/eu/gpt-9": {"litellm_provider": "azure", "mode": "chat",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "azure/gpt-9": {"litellm_provider": "azure", "mode": "chat",
        "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "azure/gpt-9-pro": {"litellm_provider": "azure", "mode": "responses", "supported_endpoints": ["/v1/responses"],
        "input_cost_per_token": 1e-05, "output_cost_per_token": 1e-05},
    "together-ai-4.1b-8b": {"litellm_provider": "together_ai", "mode": "chat",
        "input_cost_per_token": 2e-07, "output_cost_per_token": 2e-07},
    "mistral/mistral-9": {"litellm_provider": "mistral", "mode": "chat",
        "input_cost_per_token": 2e-07, "output_cost_per_token": 2e-07},
    "dashscope/qwen-9": {"litellm_provider": "dashscope", "mode": "chat",
        "input_cost_per_token": 2e-07, "output_cost_per_token": 2e-07},
    "gpt-4o": {"litellm_provider": "openai", "mode": "chat",
        "input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05, "supports_function_calling": true}
}"#;

#[test]
fn adds_every_chat_model_of_a_served_provider_and_nothing_else() {
    let providers = [
        "openai",
        "gemini",
        "azure-openai",
        "together",
        "mistral",
        "codestral",
        "dashscope",
        "dashscope-cn",
    ];
    let wanted = [Wanted {
        route_id: "openai/gpt-4o",
        provider: "openai",
        upstream_model: "gpt-4o",
    }];
    let (table, report) = import_litellm(
        FIXTURE,
        &wanted,
        &PriceTable::default(),
        source("2026-11-27"),
        &providers,
    )
    .unwrap();
    let ids: Vec<&str> = table.models.keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        [
            "azure-openai/gpt-9",
            "dashscope-cn/qwen-9",
            "dashscope/qwen-9",
            "gemini/gemini-9-pro",
            "mistral/mistral-9",
            "openai/gpt-3-retiring",
            "openai/gpt-4o",
            "openai/gpt-9",
            "openai/gpt-9-pro",
            "openai/plain-chat",
            "openai/text-embedding-9",
        ],
        "image, responses-only beyond OpenAI, retired, fine-tune, half-priced, \
         unknown-provider, regional and template entries are left out; mistral does not fill codestral"
    );
    assert_eq!(report.deprecated, 1);
    assert_eq!(report.models.len(), 10, "the catalog's own gpt-4o is priced, not added");
    let embedding = table.get("openai/text-embedding-9").unwrap();
    assert_eq!(embedding.operations.as_deref(), Some(&["embeddings".to_string()][..]));
    assert_eq!(
        embedding.capabilities.as_deref(),
        Some(&[][..]),
        "an embedding model does not stream"
    );
    // OpenAI's Responses-only model is served through its own adapter; the
    // one that also answers chat completions is not.
    assert_eq!(
        table.get("openai/gpt-9-pro").unwrap().adapter.as_deref(),
        Some("openai-responses")
    );
    assert_eq!(table.get("openai/gpt-9").unwrap().adapter, None);
    assert_eq!(report.added.len(), 1);

    // The provider-prefixed key wins over the bare one, and its facts come along.
    let gemini = table.get("gemini/gemini-9-pro").unwrap();
    assert_eq!(gemini.key, "gemini/gemini-9-pro");
    assert_eq!(gemini.input, "1.25");
    assert_eq!(gemini.output, "10");
    assert_eq!(gemini.cache_read.as_deref(), Some("0.3125"));
    // Exact: 0.0000123456789012 USD/token is 12.3456789012 USD/Mtok, not a float's neighbour.
    assert_eq!(gemini.reasoning.as_deref(), Some("12.345679"));
    assert_eq!(
        gemini.context_length,
        Some(1048576),
        "max_input_tokens before max_tokens"
    );
    assert_eq!(gemini.max_output_tokens, Some(65535));
    assert_eq!(
        gemini.capabilities.as_deref().unwrap(),
        [
            "streaming",
            "tools",
            "json_mode",
            "structured_outputs",
            "vision",
            "reasoning",
            "caching"
        ]
    );
    let plain = table.get("openai/plain-chat").unwrap();
    assert_eq!(plain.context_length, Some(4096), "max_tokens when no max_input_tokens");
    assert_eq!(plain.max_output_tokens, None);
    assert_eq!(plain.capabilities.as_deref().unwrap(), ["streaming"]);
    assert_eq!(
        table.get("openai/gpt-4o").unwrap().capabilities.as_deref().unwrap(),
        ["streaming", "tools"]
    );

    // What the import writes, the table reads back the same.
    assert_eq!(PriceTable::parse(&table.to_toml()).unwrap(), table);
    // Re-importing over its own output changes no price.
    let (again, report) = import_litellm(FIXTURE, &wanted, &table, source("2026-11-27"), &providers).unwrap();
    assert_eq!(again, table);
    assert!(report.changed.is_empty());
}

#[test]
fn retirement_is_judged_on_the_import_date() {
    let before = import_litellm(FIXTURE, &[], &PriceTable::default(), source("2026-10-22"), &["openai"]).unwrap();
    assert!(before.0.get("openai/gpt-3-retired").is_some());
    let on_the_day = import_litellm(FIXTURE, &[], &PriceTable::default(), source("2026-10-23"), &["openai"]).unwrap();
    assert!(
        on_the_day.0.get("openai/gpt-3-retired").is_some(),
        "retired after its date, not on it"
    );
    let after = import_litellm(FIXTURE, &[], &PriceTable::default(), source("2027-01-15"), &["openai"]).unwrap();
    assert!(after.0.get("openai/gpt-3-retired").is_none() && after.0.get("openai/gpt-3-retiring").is_none());
    assert_eq!(after.1.deprecated, 2);
}
