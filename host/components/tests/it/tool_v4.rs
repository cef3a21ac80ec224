//! A tool server on tool WIT 0.4.0 (`tests/plugins/sampling-tool`), which
//! imports the host's `models`: its call reaches the model access it is lent
//! and no other; a call lent none is refused as not granted; a tool that asks
//! without end reaches the access exactly `max_model_calls` times and is then
//! stopped by the sandbox, the next call working. A 0.3.0 server beside it is
//! never lent model access.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tollgate_components::{CallError, ComponentHost, ComponentLimits, ModelAccess, ModelError, ToolServer};

use crate::{grants, host, invocation, text};

/// Answers every chat with a completion saying how many came before.
#[derive(Default)]
struct Counting {
    requests: Mutex<Vec<Value>>,
}

impl ModelAccess for Counting {
    fn chat(&self, request: String) -> BoxFuture<'static, Result<String, ModelError>> {
        let mut requests = self.requests.lock().unwrap();
        requests.push(serde_json::from_str(&request).unwrap());
        let answer =
            json!({"choices": [{"message": {"role": "assistant", "content": format!("answer {}", requests.len())}}]});
        Box::pin(async move { Ok(answer.to_string()) })
    }
}

async fn load(host: &ComponentHost, path: &str) -> Arc<ToolServer> {
    let bytes = std::fs::read(path).unwrap();
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.load_tool_server("sampler", &bytes))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_4_0_tool_calls_models_only_through_the_access_it_is_lent_and_within_the_cap() {
    let limits = ComponentLimits {
        cpu_ms: 200,
        wall_ms: 5_000,
        max_model_calls: 3,
        ..ComponentLimits::default()
    };
    let (host, _cache) = host(limits);
    let server = load(&host, tollgate_plugin_host::SAMPLING_TOOL_TEST_COMPONENT).await;
    assert_eq!(server.wit_version(), "0.4.0");
    assert!(server.imports_models());

    let models = Arc::new(Counting::default());
    let ask = json!({"model": "acme/small", "prompt": "hello"}).to_string();
    let answer = server
        .call(
            invocation("sampler"),
            grants(),
            Some(models.clone()),
            "ask",
            ask.clone(),
        )
        .await;
    assert_eq!(text(answer), "answer 1");
    let sent = models.requests.lock().unwrap()[0].clone();
    assert_eq!(sent["model"], "acme/small");
    assert_eq!(sent["messages"][0]["content"], "hello");

    // Lent nothing, it gets nothing: the host refuses, and the tool says so.
    let refused = server
        .call(invocation("sampler"), grants(), None, "ask", ask.clone())
        .await;
    match refused {
        Err(CallError::Tool(error)) => assert!(
            error.message.contains("403 capability_not_granted"),
            "{}",
            error.message
        ),
        other => panic!("expected the tool's error, got {other:?}"),
    }

    // Asking without end: three reach the access, then the sandbox stops it.
    let spending = Arc::new(Counting::default());
    let spend = json!({"model": "acme/small"}).to_string();
    let stopped = server
        .call(invocation("sampler"), grants(), Some(spending.clone()), "spend", spend)
        .await;
    match stopped {
        Err(CallError::Fault(fault)) => assert!(fault.reason.contains("exceeded its"), "{}", fault.reason),
        other => panic!("expected a fault, got {other:?}"),
    }
    assert_eq!(spending.requests.lock().unwrap().len(), 3);
    // Each call has its own count: the next one is served.
    let answer = server
        .call(invocation("sampler"), grants(), Some(models.clone()), "ask", ask)
        .await;
    assert_eq!(text(answer), "answer 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_0_server_is_never_lent_model_access() {
    let (host, _cache) = host(ComponentLimits::default());
    let server = load(&host, tollgate_plugin_host::MCP_TOOL_TEST_COMPONENT).await;
    assert_eq!(server.wit_version(), "0.3.0");
    assert!(!server.imports_models());
    let models = Arc::new(Counting::default());
    let answer = server
        .call(
            invocation("sampler"),
            grants(),
            Some(models.clone()),
            "test_simple_text",
            "{}".into(),
        )
        .await;
    assert!(answer.is_ok());
    assert!(models.requests.lock().unwrap().is_empty());
}
