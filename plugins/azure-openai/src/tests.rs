//! Golden tests (`tests/golden/*.json`, run by the SDK's `golden` module,
//! whose docs give the format) plus a few cases easier to state in code.

use serde_json::{Value, json};
use tollgate_plugin_sdk::golden::Goldens;
use tollgate_plugin_sdk::{Adapter, CallContext, ErrorClass};

use crate::AzureOpenAi;

const SECRET_HEADERS: [&str; 3] = ["authorization", "api-key", "ocp-apim-subscription-key"];

#[test]
fn golden_files() {
    Goldens {
        dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"),
        secret_headers: &SECRET_HEADERS,
        secret_markers: &["test-key", "sk-"],
    }
    .check::<AzureOpenAi>();
}

fn adapter(base_url: &str, deployment: &str) -> AzureOpenAi {
    let ctx = CallContext {
        request_id: "r".into(),
        upstream_model: deployment.into(),
        base_url: base_url.into(),
        stream: false,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    };
    AzureOpenAi::new(ctx, br#"{"model":"azure-openai/x","messages":[]}"#.to_vec())
}

#[test]
fn api_version_comes_from_base_url_or_the_default() {
    let cases = [
        (
            "https://res.openai.azure.com",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
        ),
        (
            "https://res.openai.azure.com/openai/",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
        ),
        (
            "https://res.openai.azure.com/?api-version=2025-01-01-preview",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2025-01-01-preview",
        ),
        (
            "http://127.0.0.1:9/openai?foo=1&api-version=2024-06-01",
            "http://127.0.0.1:9/openai/deployments/gpt4o/chat/completions?foo=1&api-version=2024-06-01",
        ),
    ];
    for (base, url) in cases {
        assert_eq!(adapter(base, "gpt4o").request().unwrap().url, url, "{base}");
    }
}

#[test]
fn rejects_deployment_names_that_would_change_the_url() {
    for bad in ["", "a/b", "x?y", "dep loy", "../admin"] {
        let error = adapter("https://r.openai.azure.com", bad).request().unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidRequest, "{bad}");
    }
}

#[test]
fn continuation_becomes_a_trailing_assistant_turn() {
    let ctx = CallContext {
        request_id: "r".into(),
        upstream_model: "dep".into(),
        base_url: "https://r.openai.azure.com".into(),
        stream: true,
        attempt: 1,
        max_output_tokens: Some(64),
        continuation: Some("Hello".into()),
    };
    let body = json!({"model": "azure-openai/dep", "messages": [{"role": "user", "content": "hi"}]});
    let request = AzureOpenAi::new(ctx, body.to_string().into_bytes()).request().unwrap();
    let sent: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        sent,
        json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}],
               "max_tokens": 64, "stream": true, "stream_options": {"include_usage": true}})
    );
}

#[test]
fn operations_go_to_the_deployments_endpoint_with_the_api_key_slot() {
    use tollgate_plugin_sdk::{Adapter, AuthSlot, Operation, OperationBody};
    let ctx = tollgate_plugin_sdk::CallContext {
        request_id: "r".into(),
        upstream_model: "embed-prod".into(),
        base_url: "https://acme.openai.azure.com/openai?api-version=2024-10-21".into(),
        stream: false,
        attempt: 0,
        max_output_tokens: None,
        continuation: None,
    };
    assert!(!crate::AzureOpenAi::operations().contains(&Operation::Rerank));
    let body = OperationBody::Json(br#"{"model":"azure-openai/embed","input":"hi"}"#.to_vec());
    let mut exchange = crate::AzureOpenAi::new_operation(ctx, Operation::Embeddings, body).unwrap();
    let request = exchange.request().unwrap();
    assert_eq!(
        request.url,
        "https://acme.openai.azure.com/openai/deployments/embed-prod/embeddings?api-version=2024-10-21"
    );
    assert_eq!(request.auth, AuthSlot::Header("api-key".into()));
    let sent: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert!(sent.get("model").is_none(), "the deployment picks the model");
}
