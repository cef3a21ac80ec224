//! `GET /v1/models`: the whole catalog with snapshot prices, availability
//! (credentials and circuit breakers), provider details, and query filters.

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

#[tokio::test]
async fn lists_every_catalog_model_with_catalog_prices_and_provider_details() {
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

    let mut providers = BTreeSet::new();
    for (_, entry) in builtin_entries().unwrap() {
        providers.insert(entry.id.clone());
        for model in &entry.models {
            let id = format!("{}/{}", entry.id, model.id);
            let listed = by_id.get(&id).unwrap_or_else(|| panic!("{id} not listed"));
            let price = |text: &str| PicoPerToken::from_usd_per_mtok(text).unwrap().usd_per_mtok();
            // The sourced price table first, else the catalog entry's own price.
            let table = PriceTable::builtin().get(&id);
            let expected = match table {
                Some(entry) => Some((&entry.input, &entry.output, "price_table")),
                None => model
                    .input_price_per_mtok
                    .as_ref()
                    .zip(model.output_price_per_mtok.as_ref())
                    .map(|(input, output)| (input, output, "catalog")),
            };
            match expected {
                Some((input, output, source)) => {
                    assert_eq!(listed["pricing"]["input_per_mtok"], price(input), "{id}");
                    assert_eq!(listed["pricing"]["output_per_mtok"], price(output), "{id}");
                    assert_eq!(listed["pricing"]["source"], source, "{id}");
                }
                None => {
                    // Unpriced: no price is shown and, with the wallet on, it cannot be served.
                    assert_eq!(listed["pricing"], Value::Null, "{id}");
                    assert_eq!(listed["service"]["available"], false, "{id}");
                }
            }
            assert_eq!(listed["context_length"], json!(model.context_length), "{id}");
            assert_eq!(listed["owned_by"], entry.id);
            assert_eq!(listed["service"]["provider_name"], entry.name);
            assert_eq!(listed["service"]["capabilities"], json!(entry.capabilities));
        }
    }
    assert!(providers.len() >= 130);
    // Configured (bring-your-own) providers are listed too, with no flags.
    assert_eq!(by_id["mock/small"]["service"]["capabilities"], json!([]));
    assert_eq!(by_id["mock/small"]["service"]["available"], true);
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

    let (_, vision_tools) = list(&gateway, "?capability=vision,tools&provider=openai,mock,groq").await;
    assert!(ids(&vision_tools).contains("openai/gpt-4o"));
    assert!(
        ids(&vision_tools).iter().all(|id| id.starts_with("openai/")),
        "{vision_tools}"
    );

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

/// A model with no price cannot be billed: with the wallet ledger on it is
/// listed as unavailable and refused before anything is reserved or sent; a
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
    assert_eq!(gateway.wallet()["pending_usd"], "0.000000000");

    let (status, _, body) = gateway
        .chat(json!({"model": "mystery/priced", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 200, "{body}");
}
