//! `GET /v1/models`: the whole priced catalog (its own models and the price
//! table's) with snapshot prices and their source, availability (credentials
//! and circuit breakers), provider details, and query filters.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Gateway, standard_config, start_mock};
use serde_json::{Value, json};
use tollgate_core::money::PicoPerToken;
use tollgate_routing::catalog::builtin_entries;
use tollgate_routing::prices::PriceTable;

const FLAKY: &str = r#"
[breaker]
failure_threshold = 1
cooldown_ms = 600000
"#;

async fn setup() -> Gateway {
    let mock = start_mock(Default::default()).await;
    let extra = format!(
        r#"{FLAKY}
[providers.flaky]
base_url = "http://{mock}/v1"
api_key = "sk-flaky"
models = [{{ id = "broken", upstream = "fail-500", input_price_per_mtok = "1", output_price_per_mtok = "2" }}]
[providers.free]
base_url = "http://{mock}/v1"
models = [{{ id = "small", input_price_per_mtok = "0", output_price_per_mtok = "0", context_length = 8192 }}]
# A local server, enabled by naming it (vLLM stays off).
[providers.ollama]
"#
    );
    Gateway::start(&standard_config(mock, &extra)).await
}

async fn list(gateway: &Gateway, query: &str) -> (u16, Value) {
    let response = gateway.get(&format!("/v1/models{query}")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn ids(body: &Value) -> BTreeSet<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

/// The price a model shows: the sourced table's first, else the catalog
/// entry's own, as (input, output, source); `None` when it has none.
fn expected_price(id: &str, model: &tollgate_routing::ModelConfig) -> Option<(String, String, &'static str)> {
    match PriceTable::builtin().get(id) {
        Some(entry) => Some((entry.input.clone(), entry.output.clone(), "price_table")),
        None => model
            .input_price_per_mtok
            .clone()
            .zip(model.output_price_per_mtok.clone())
            .map(|(input, output)| (input, output, "catalog")),
    }
}

fn mtok(text: &str) -> String {
    PicoPerToken::from_usd_per_mtok(text).unwrap().usd_per_mtok()
}

#[tokio::test]
async fn lists_every_priced_catalog_and_table_model_with_its_prices_and_provider_details() {
    let gateway = setup().await;
    let (status, body) = list(&gateway, "").await;
    assert_eq!(status, 200);
    let by_id: BTreeMap<String, Value> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].as_str().unwrap().to_string(), m.clone()))
        .collect();
    let snapshots: BTreeSet<i64> = by_id
        .values()
        .map(|m| m["service"]["pricing_snapshot"].as_i64().unwrap())
        .collect();
    assert_eq!(snapshots.len(), 1, "one pricing snapshot for the whole list");
    let unpriced: Vec<&String> = by_id.keys().filter(|id| by_id[*id]["pricing"].is_null()).collect();
    assert!(unpriced.is_empty(), "listed without a price: {unpriced:?}");

    let table = PriceTable::builtin();
    let mut providers = BTreeSet::new();
    let mut hidden = 0;
    for (_, entry) in builtin_entries().unwrap() {
        providers.insert(entry.id.clone());
        for model in &entry.models {
            let id = format!("{}/{}", entry.id, model.id);
            let Some((input, output, source)) = expected_price(&id, model) else {
                // Unpriced: not listed, but it answers by id with the reason.
                assert!(!by_id.contains_key(&id), "{id} is listed without a price");
                let alone = gateway.model(&id).await;
                assert_eq!(alone["id"], id);
                assert_eq!(alone["pricing"], Value::Null, "{id}");
                assert_eq!(alone["service"]["available"], false, "{id}");
                assert_eq!(alone["service"]["pricing_source"], Value::Null, "{id}");
                hidden += 1;
                continue;
            };
            let listed = by_id.get(&id).unwrap_or_else(|| panic!("{id} not listed"));
            assert_eq!(listed["pricing"]["input_per_mtok"], mtok(&input), "{id}");
            assert_eq!(listed["pricing"]["output_per_mtok"], mtok(&output), "{id}");
            assert_eq!(listed["pricing"]["source"], source, "{id}");
            let pricing_source = &listed["service"]["pricing_source"];
            match table.get(&id) {
                Some(row) => {
                    assert_eq!(pricing_source["name"], table.source.name.as_str(), "{id}");
                    assert_eq!(pricing_source["release"], table.source.release.as_str(), "{id}");
                    assert_eq!(pricing_source["retrieved"], table.source.retrieved.as_str(), "{id}");
                    assert_eq!(pricing_source["key"], row.key.as_str(), "{id}");
                    assert_eq!(listed["pricing"]["source_key"], row.key.as_str(), "{id}");
                }
                None => assert_eq!(pricing_source, &json!({"name": "catalog"}), "{id}"),
            }
            let capabilities = table
                .get(&id)
                .and_then(|row| row.capabilities.clone())
                .unwrap_or_else(|| entry.capabilities.clone());
            assert_eq!(listed["service"]["capabilities"], json!(capabilities), "{id}");
            let context = model
                .context_length
                .or(table.get(&id).and_then(|row| row.context_length));
            assert_eq!(listed["context_length"], json!(context), "{id}");
            assert_eq!(listed["owned_by"], entry.id);
            assert_eq!(listed["service"]["provider_name"], entry.name);
        }
    }
    // The product's promise is about the catalog: the providers one can configure.
    assert!(providers.len() >= 130, "{} providers in the catalog", providers.len());
    // Besides the catalog's own lines, every model the table holds for a
    // catalog provider is listed at the table's price.
    let mut from_table = 0;
    for (id, row) in &table.models {
        let provider = id.split('/').next().unwrap();
        if !providers.contains(provider) {
            continue;
        }
        let listed = by_id
            .get(id)
            .unwrap_or_else(|| panic!("{id} from the table not listed"));
        if listed["pricing"]["source"] == "price_table" {
            assert_eq!(listed["pricing"]["input_per_mtok"], mtok(&row.input), "{id}");
            assert_eq!(listed["pricing"]["output_per_mtok"], mtok(&row.output), "{id}");
            from_table += 1;
        }
    }
    assert!(from_table >= 1000, "only {from_table} table models listed");
    println!("listed {} models, {hidden} unpriced catalog models hidden", by_id.len());

    // Configured (bring-your-own) providers are listed too, with no flags.
    assert_eq!(by_id["mock/small"]["service"]["capabilities"], json!([]));
    assert_eq!(by_id["mock/small"]["service"]["available"], true);
    assert_eq!(
        by_id["mock/small"]["service"]["pricing_source"],
        json!({"name": "config"})
    );
    let openai = &by_id["openai/gpt-4o"]["service"];
    assert_eq!(openai["available"], false);
    assert!(
        openai["unavailable_reason"]
            .as_str()
            .unwrap()
            .contains("OPENAI_API_KEY")
    );
    let cloudflare = &by_id["cloudflare-workers-ai/@cf/meta/llama-3.1-8b-instruct"]["service"];
    assert_eq!(cloudflare["available"], false);
}

/// Issue 36's acceptance line: with no provider key the list has no model
/// without a price (`without_keys_no_listed_model_lacks_a_price`); with the
/// OpenAI, Anthropic and Gemini keys set, every model of theirs the catalog or
/// the table holds is available, each at the sourced table's price.
///
/// The issue asks for 150 of them. litellm 1.109.1 yields 132 under the
/// import's rules: 119 chat models, and the 13 Responses-only OpenAI models
/// (o3-pro, gpt-5-pro, gpt-5.3-codex, …) served through the
/// `openai-responses` adapter. OpenAI retired 26 of its chat models and 11
/// Responses-only ones before the import date (gpt-3.5-turbo, gpt-4,
/// gpt-4-turbo, o1-pro, … on 2026-10-23), and those are left out. The floor
/// below is that figure, so a lost model still fails the test.
#[tokio::test]
async fn with_three_keys_their_models_are_available_at_the_tables_prices() {
    let mock = start_mock(Default::default()).await;
    let keys = [
        ("OPENAI_API_KEY", "sk-test"),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("GEMINI_API_KEY", "gm-test"),
    ];
    let gateway = Gateway::start_with_env(&standard_config(mock, ""), "100", &keys).await;
    let (status, body) = list(&gateway, "?provider=openai,anthropic,gemini&available=true").await;
    assert_eq!(status, 200);
    let data = body["data"].as_array().unwrap();
    let table = PriceTable::builtin();
    let three = ["openai", "anthropic", "gemini"];
    let mut expected: BTreeSet<String> = table
        .models
        .keys()
        .filter(|id| three.contains(&id.split('/').next().unwrap()))
        .cloned()
        .collect();
    for (_, entry) in builtin_entries().unwrap() {
        if !three.contains(&entry.id.as_str()) {
            continue;
        }
        for model in &entry.models {
            let id = format!("{}/{}", entry.id, model.id);
            if expected_price(&id, model).is_some() {
                expected.insert(id);
            }
        }
    }
    assert_eq!(ids(&body), expected, "every model of the three is listed and available");
    assert!(data.len() >= 132, "only {} models available", data.len());
    eprintln!("{} models of openai, anthropic and gemini available", data.len());
    // The operations besides chat are listed with the rest: an embedding
    // model, an image model priced per image.
    let gemini_embedding = gateway.model("gemini/gemini-embedding-001").await;
    assert_eq!(gemini_embedding["service"]["available"], true, "{gemini_embedding}");
    assert_eq!(
        gemini_embedding["service"]["operations"],
        serde_json::json!(["embeddings"])
    );
    let imagen = gateway.model("gemini/imagen-3.0-generate-001").await;
    assert_eq!(imagen["pricing"]["image"]["*"], "0.040000000", "{imagen}");
    let pro = data
        .iter()
        .find(|m| m["id"] == "openai/o3-pro")
        .expect("a Responses-only model is listed");
    assert_eq!(pro["service"]["available"], true, "{pro}");
    for model in data {
        let id = model["id"].as_str().unwrap();
        let row = table
            .get(id)
            .unwrap_or_else(|| panic!("{id} is not priced by the table"));
        assert_eq!(model["pricing"]["input_per_mtok"], mtok(&row.input), "{id}");
        assert_eq!(model["pricing"]["output_per_mtok"], mtok(&row.output), "{id}");
        let kind = |price: &Option<String>, fallback: &str| mtok(price.as_deref().unwrap_or(fallback));
        assert_eq!(
            model["pricing"]["cache_read_per_mtok"],
            kind(&row.cache_read, &row.input),
            "{id}"
        );
        assert_eq!(
            model["pricing"]["cache_write_per_mtok"],
            kind(&row.cache_write, &row.input),
            "{id}"
        );
        assert_eq!(
            model["pricing"]["reasoning_per_mtok"],
            kind(&row.reasoning, &row.output),
            "{id}"
        );
        assert_eq!(model["service"]["pricing_source"]["key"], row.key.as_str(), "{id}");
    }
    let count = |provider: &str| data.iter().filter(|m| m["owned_by"] == provider).count();
    println!(
        "available with keys: openai {}, anthropic {}, gemini {}",
        count("openai"),
        count("anthropic"),
        count("gemini")
    );
    assert!(count("openai") > 0 && count("anthropic") > 0 && count("gemini") > 0);

    // The capability filter reads each model's own flags.
    let (_, caching) = list(&gateway, "?provider=anthropic,openai,gemini&capability=caching").await;
    let caching = caching["data"].as_array().unwrap();
    assert!(!caching.is_empty());
    assert!(caching.iter().all(|m| {
        table
            .get(m["id"].as_str().unwrap())
            .and_then(|r| r.capabilities.as_ref())
            .is_some_and(|c| c.iter().any(|f| f == "caching"))
    }));
    assert!(caching.len() < data.len(), "not every model caches prompts");
}

#[tokio::test]
async fn without_keys_no_listed_model_lacks_a_price() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let (status, body) = list(&gateway, "").await;
    assert_eq!(status, 200);
    let data = body["data"].as_array().unwrap();
    let unpriced: Vec<&Value> = data
        .iter()
        .filter(|m| m["pricing"].is_null())
        .map(|m| &m["id"])
        .collect();
    assert!(unpriced.is_empty(), "{unpriced:?}");
    let providers: BTreeSet<&str> = data.iter().map(|m| m["owned_by"].as_str().unwrap()).collect();
    println!(
        "no keys: {} models listed, of {} providers",
        data.len(),
        providers.len()
    );
    assert!(data.len() > 1000);
}

#[tokio::test]
async fn filters_by_provider_capability_and_availability() {
    let gateway = setup().await;

    let (_, body) = list(&gateway, "?provider=mock").await;
    assert_eq!(
        ids(&body),
        BTreeSet::from(["mock/small".to_string(), "mock/renamed".to_string()])
    );

    let (_, comma) = list(&gateway, "?provider=mock,groq").await;
    let (_, repeated) = list(&gateway, "?provider=mock&provider=groq").await;
    assert_eq!(ids(&comma), ids(&repeated));
    assert!(ids(&comma).contains("groq/llama-3.1-8b-instant") && ids(&comma).contains("mock/small"));
    assert!(
        comma["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["owned_by"] == "mock" || m["owned_by"] == "groq")
    );

    let (_, available) = list(&gateway, "?available=true").await;
    let data = available["data"].as_array().unwrap();
    assert!(data.iter().all(|m| m["service"]["available"] == true));
    assert!(ids(&available).contains("mock/small") && ids(&available).contains("ollama/llama3.2"));
    assert!(!ids(&available).contains("openai/gpt-4o"));
    assert!(
        !ids(&available).contains("vllm/meta-llama/Llama-3.1-8B-Instruct"),
        "a local server nobody named is off"
    );

    let (_, unavailable) = list(&gateway, "?available=false").await;
    assert!(
        unavailable["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["service"]["available"] == false)
    );
    assert!(ids(&unavailable).contains("openai/gpt-4o") && !ids(&unavailable).contains("mock/small"));

    // Each model's own flags: a groq model the table says sees images is in,
    // groq's catalog models (no vision) and mock's (no flags) are out.
    let (_, vision_tools) = list(&gateway, "?capability=vision,tools&provider=openai,mock,groq").await;
    let found = ids(&vision_tools);
    assert!(found.contains("openai/gpt-4o") && found.contains("groq/qwen/qwen3.8-27b"));
    assert!(!found.contains("groq/llama-3.1-8b-instant") && !found.contains("groq/openai/gpt-oss-20b"));
    assert!(!found.iter().any(|id| id.starts_with("mock/")), "{vision_tools}");
    for model in vision_tools["data"].as_array().unwrap() {
        let flags = &model["service"]["capabilities"];
        assert!(flags.as_array().unwrap().contains(&json!("vision")), "{model}");
        assert!(flags.as_array().unwrap().contains(&json!("tools")), "{model}");
    }

    let (_, combined) = list(&gateway, "?capability=tools&available=true").await;
    assert!(ids(&combined).contains("ollama/llama3.2") && !ids(&combined).contains("mock/small"));
}

#[tokio::test]
async fn bad_filters_answer_400_in_the_documented_shape() {
    let gateway = setup().await;
    for (query, param) in [
        ("?provider=nope", json!("provider")),
        ("?provider=", json!("provider")),
        ("?available=yes", json!("available")),
        ("?available=true&available=false", json!("available")),
        ("?capability=telepathy", json!("capability")),
        ("?owner=openai", Value::Null),
    ] {
        let (status, body) = list(&gateway, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{query}");
        assert_eq!(body["error"]["code"], "invalid_request", "{query}");
        assert_eq!(body["error"]["param"], param, "{query}");
        assert!(body["service"]["request_id"].as_str().unwrap().starts_with("req_"));
    }
    // The server keeps serving.
    assert_eq!(list(&gateway, "?provider=mock").await.0, 200);
}

#[tokio::test]
async fn an_open_circuit_breaker_makes_the_provider_unavailable() {
    let gateway = setup().await;
    assert_eq!(gateway.model("flaky/broken").await["service"]["available"], true);
    let (status, _, _) = gateway
        .chat(json!({"model": "flaky/broken", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert!(status >= 500, "{status}");
    let entry = gateway.model("flaky/broken").await;
    assert_eq!(entry["service"]["available"], false);
    assert!(
        entry["service"]["unavailable_reason"]
            .as_str()
            .unwrap()
            .contains("circuit breaker")
    );
    let (_, unavailable) = list(&gateway, "?available=false&provider=flaky").await;
    assert_eq!(ids(&unavailable), BTreeSet::from(["flaky/broken".to_string()]));
}

#[tokio::test]
async fn a_zero_priced_keyless_provider_serves_and_bills_nothing() {
    // The catalog's price policy: local servers (and unpriced providers) are "0".
    let gateway = setup().await;
    let listed = gateway.model("free/small").await;
    assert_eq!(listed["service"]["available"], true);
    assert_eq!(listed["pricing"]["input_per_mtok"], "0.000000");
    let (status, _, body) = gateway
        .chat(json!({"model": "free/small", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "You said: hi");
    assert_eq!(body["usage"]["cost"], json!(0));
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
}

/// A model with no price cannot be billed: it is left out of the list, shown
/// by id as unavailable, and refused before anything is reserved or sent; a
/// configured price makes it servable.
#[tokio::test]
async fn unpriced_models_are_refused_until_priced() {
    let mock = start_mock(Default::default()).await;
    let extra = format!(
        r#"
[providers.mystery]
base_url = "http://{mock}/v1"
api_key = "sk-m"
models = [{{ id = "small" }}, {{ id = "priced", upstream = "small", input_price_per_mtok = "1", output_price_per_mtok = "1" }}]
"#
    );
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let (_, provider) = list(&gateway, "?provider=mystery").await;
    assert_eq!(
        ids(&provider),
        BTreeSet::from(["mystery/priced".to_string()]),
        "the list shows priced models only"
    );
    let listed = gateway.model("mystery/small").await;
    assert_eq!(listed["pricing"], Value::Null);
    assert_eq!(listed["service"]["available"], false);
    assert!(
        listed["service"]["unavailable_reason"]
            .as_str()
            .unwrap()
            .contains("no price: the price table has no entry for it")
    );

    let before = common::mock_chat_requests(mock).await;
    let (status, _, body) = gateway
        .chat(json!({"model": "mystery/small", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "model_unpriced");
    let (status, _, body) = gateway
        .chat(json!({"model": "mystery/priced", "models": ["mystery/small"], "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 503, "an unpriced fallback is refused too: {body}");
    assert_eq!(body["error"]["param"], "models");
    assert_eq!(common::mock_chat_requests(mock).await, before, "nothing went upstream");
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");

    let (status, _, body) = gateway
        .chat(json!({"model": "mystery/priced", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 200, "{body}");
}
