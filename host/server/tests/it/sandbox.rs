//! Misbehaving adapters (trap, infinite loop, memory bomb) fail only their own
//! request with a 502 naming the adapter; the next request succeeds.

use crate::common;

use common::{Gateway, assert_error_shape, standard_config, start_mock};
use serde_json::json;

#[tokio::test]
async fn misbehaving_adapters_fail_only_their_own_request() {
    let mock = start_mock(Default::default()).await;
    // A small memory cap and a generous time limit, so the memory bomb hits the
    // cap well before the clock even on a loaded machine.
    let limits = "[plugins]\ncall_timeout_ms = 1000\nmemory_mib = 16\n";
    let gateway = Gateway::start(&standard_config(mock, limits)).await;
    let ask = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});

    for (model, reason) in [
        ("bad/trap", "trapped"),
        ("bad/loop", "time limit"),
        ("bad/oom", "memory limit"),
    ] {
        let started = std::time::Instant::now();
        let (status, _, body) = gateway.chat(ask(model)).await;
        assert_eq!(status, 502, "{model}: {body}");
        let error = assert_error_shape(&body);
        assert_eq!(error["code"], "adapter_failed", "{model}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("'misbehaving'"),
            "{model}: the message names the adapter: {message}"
        );
        assert!(message.contains(reason), "{model}: expected '{reason}' in: {message}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{model} took {:?}",
            started.elapsed()
        );

        // The same adapter serves the next request, and so does everything else.
        let (status, _, body) = gateway.chat(ask("bad/fine")).await;
        assert_eq!(status, 200, "after {model}: {body}");
        assert_eq!(body["provider"], "bad");
        gateway.assert_still_serving().await;
    }

    // A trap in the middle of a stream ends that stream with an error frame.
    let (status, frames) = gateway
        .chat_stream(
            json!({"model": "bad/trap-stream", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"));
    let last: serde_json::Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    assert_eq!(last["error"]["code"], "adapter_failed", "{last}");
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn loops_in_parallel_do_not_starve_other_requests() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[plugins]\ncall_timeout_ms = 100\n")).await;
    let mut handles = Vec::new();
    for _ in 0..8 {
        let request = gateway
            .post("/v1/chat/completions")
            .json(&json!({"model": "bad/loop", "messages": [{"role": "user", "content": "x"}]}));
        handles.push(tokio::spawn(
            async move { request.send().await.unwrap().status().as_u16() },
        ));
    }
    gateway.assert_still_serving().await;
    for handle in handles {
        assert_eq!(handle.await.unwrap(), 502);
    }
}

/// Instance memory a request wrote is reset before the next instance gets its
/// slot, also where the pages stay resident and are reset by copy
/// (`plugins.resident_kib`, on by default where the kernel supports it): an
/// adapter that reads its whole memory finds its own request's marker, and
/// never an earlier request's.
#[tokio::test]
async fn an_adapter_finds_nothing_an_earlier_request_left_in_its_memory() {
    let mock = start_mock(Default::default()).await;
    for limits in ["", "[plugins]\nresident_kib = 0\n"] {
        let gateway = Gateway::start(&standard_config(mock, limits)).await;
        let ask =
            |model: &str, content: &str| json!({"model": model, "messages": [{"role": "user", "content": content}]});
        for round in 0..3 {
            let (status, _, body) = gateway.chat(ask("bad/fine", "TENANT-SECRET-alpha-42")).await;
            assert_eq!(status, 200, "{body}");
            let (status, _, body) = gateway.chat(ask("bad/scavenge", "TENANT-SECRET-self")).await;
            assert_eq!(status, 200, "{body}");
            let found = body["choices"][0]["message"]["content"].as_str().unwrap();
            assert!(
                found.split(';').any(|t| t == "self"),
                "{limits:?} round {round}: the scan sees the request's own memory: {found:?}"
            );
            assert!(
                !found.contains("alpha"),
                "{limits:?} round {round}: an earlier request's data was left in memory: {found:?}"
            );
        }
    }
}

/// A model that names its own adapter (`adapter` on the model, as the
/// Responses-only models do) gets that adapter in the same sandbox, with its
/// provider's origin and key and nothing more: a trapping adapter named by
/// one model fails only that model's request, and the provider's other
/// models, on its own adapter, keep serving.
#[tokio::test]
async fn a_hostile_adapter_named_by_one_model_fails_only_that_models_request() {
    let mock = start_mock(Default::default()).await;
    let extra = r#"
[[providers.mock.models]]
id = "trap-by-model"
upstream = "trap"
adapter = "misbehaving"
input_price_per_mtok = "1"
output_price_per_mtok = "1"
[[providers.mock.models]]
id = "fine-by-model"
upstream = "fine"
adapter = "misbehaving"
input_price_per_mtok = "1"
output_price_per_mtok = "1"
"#;
    let gateway = Gateway::start(&standard_config(mock, extra)).await;
    let ask = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});

    let (status, _, body) = gateway.chat(ask("mock/trap-by-model")).await;
    assert_eq!(status, 502, "{body}");
    let error = assert_error_shape(&body);
    assert_eq!(error["code"], "adapter_failed");
    assert!(error["message"].as_str().unwrap().contains("'misbehaving'"), "{body}");
    gateway.assert_still_serving().await;

    // Served by the model's adapter, sent only to the provider's own origin
    // with the provider's own key.
    let (status, _, body) = gateway.chat(ask("mock/fine-by-model")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["service"]["attempts"][0]["adapter"], "misbehaving");
    let sent = common::mock_requests(mock).await;
    let last = sent.last().unwrap();
    assert_eq!(last["body"]["model"], "fine");
    assert_eq!(last["headers"]["authorization"], "Bearer sk-test-upstream");
}
