//! A tool server on tool WIT 0.3.0 (the MCP conformance fixture,
//! `tests/plugins/mcp-tool`; 0.2.0's interfaces plus elicitation) beside a
//! 0.1.0 one: told apart on load, its prompts and resources listed once,
//! progress reports sent only to a call that has a sink and only while they
//! increase, questions asked only through a call's elicitor and waited for
//! outside its wall time, and its answers checked against the same output
//! cap as a tool call's.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tollgate_components::{
    CallError, ComponentHost, ComponentLimits, Content, ElicitAction, ElicitOutcome, Elicited, Elicitor, Progress,
    Reference, ResourceBody, ToolServer,
};

use crate::{grants, host, invocation};

async fn load(host: &ComponentHost) -> Arc<ToolServer> {
    let bytes = std::fs::read(tollgate_plugin_host::MCP_TOOL_TEST_COMPONENT).unwrap();
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.load_tool_server("fixture", &bytes))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_0_server_lists_its_catalog_reports_progress_and_answers_rich_content() {
    let (host, _cache) = host(ComponentLimits::default());
    let server = load(&host).await;
    assert_eq!(server.wit_version(), "0.3.0");
    let catalog = server.catalog();
    assert_eq!(catalog.prompts.len(), 4);
    assert_eq!(catalog.resources.len(), 3);
    assert_eq!(catalog.templates[0].uri_template, "test://template/{id}/data");

    // Progress goes to the call's sink, in order.
    let (sink, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let mut with_sink = invocation("fixture");
    with_sink.progress = Some(sink);
    let answer = server
        .call(with_sink, grants(), None, "test_tool_with_progress", "{}".into())
        .await
        .unwrap();
    assert!(matches!(answer.as_slice(), [Content::Text(_)]));
    let received: Vec<Progress> = std::iter::from_fn(|| reports.try_recv().ok()).collect();
    let values: Vec<f64> = received.iter().map(|report| report.progress).collect();
    assert_eq!(values, [0.0, 50.0, 100.0]);
    assert_eq!(received[1].total, Some(100.0));
    assert_eq!(received[1].message.as_deref(), Some("50 of 100"));

    let mixed = server
        .call(
            invocation("fixture"),
            grants(),
            None,
            "test_multiple_content_types",
            "{}".into(),
        )
        .await
        .unwrap();
    match mixed.as_slice() {
        [Content::Text(_), Content::Image(image), Content::Resource(resource)] => {
            assert_eq!(image.mime_type, "image/png");
            assert!(image.data.starts_with(b"\x89PNG"));
            assert_eq!(resource.uri, "test://mixed-content-resource");
        }
        other => panic!("unexpected content {other:?}"),
    }

    let arguments = vec![
        ("arg1".to_string(), "a".to_string()),
        ("arg2".to_string(), "b".to_string()),
    ];
    let prompt = server
        .get_prompt(invocation("fixture"), grants(), "test_prompt_with_arguments", arguments)
        .await
        .unwrap();
    assert_eq!(
        prompt.messages[0].content,
        Content::Text("Prompt with arguments: arg1='a', arg2='b'".into())
    );
    let read = server
        .read_resource(invocation("fixture"), grants(), "test://template/7/data")
        .await
        .unwrap();
    assert!(matches!(&read[0].body, ResourceBody::Text(text) if text.contains("\"id\":\"7\"")));
    let unknown = server
        .read_resource(invocation("fixture"), grants(), "test://nowhere")
        .await;
    assert!(matches!(unknown, Err(CallError::Tool(_))));
    let values = server
        .complete(
            invocation("fixture"),
            grants(),
            Reference::Prompt("test_prompt_with_arguments".into()),
            "arg1",
            "pa",
        )
        .await
        .unwrap();
    assert_eq!(values, ["paris", "park", "party"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rich_answers_count_against_the_output_cap_as_base64() {
    // The mixed answer weighs 28 + 101 + 72 bytes (the PNG as base64 and
    // its media type, the resource's URI, media type and text).
    let limits = ComponentLimits {
        max_output_bytes: 150,
        ..ComponentLimits::default()
    };
    let (host, _cache) = host(limits);
    let server = load(&host).await;
    let refused = server
        .call(
            invocation("fixture"),
            grants(),
            None,
            "test_multiple_content_types",
            "{}".into(),
        )
        .await;
    match refused {
        Err(CallError::Fault(fault)) => assert!(
            fault.reason.contains("201 bytes, more than the 150-byte limit"),
            "{}",
            fault.reason
        ),
        other => panic!("expected the cap, got {other:?}"),
    }
    // A smaller answer still fits, in the same server.
    let small = server
        .call(invocation("fixture"), grants(), None, "test_simple_text", "{}".into())
        .await;
    assert!(small.is_ok());
}

/// Answers every question after `delay`, with `answer`, and keeps what it was asked.
#[derive(Debug)]
struct Patient {
    delay: std::time::Duration,
    asked: std::sync::Mutex<Vec<(String, serde_json::Value)>>,
}

impl Elicitor for Patient {
    fn elicit(&self, message: String, schema: serde_json::Value) -> BoxFuture<'static, ElicitOutcome> {
        self.asked.lock().unwrap().push((message, schema));
        let delay = self.delay;
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok(Elicited {
                action: ElicitAction::Accept,
                content: Some(r#"{"username":"ada","email":"a@example.com"}"#.into()),
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_go_to_the_calls_elicitor_and_the_wait_is_not_wall_time() {
    // A wall time shorter than the user's answer takes: the wait is not counted.
    let limits = ComponentLimits {
        cpu_ms: 500,
        wall_ms: 500,
        ..ComponentLimits::default()
    };
    let (host, _cache) = host(limits);
    let server = load(&host).await;
    let patient = Arc::new(Patient {
        delay: std::time::Duration::from_millis(900),
        asked: Default::default(),
    });
    let mut asking = invocation("fixture");
    asking.elicit = Some(patient.clone());
    let arguments = r#"{"message":"Who are you?"}"#;
    let answer = server
        .call(asking, grants(), None, "test_elicitation", arguments.into())
        .await
        .unwrap();
    let [Content::Text(text)] = answer.as_slice() else {
        panic!("{answer:?}")
    };
    assert!(text.starts_with("User response: action=accept"), "{text}");
    assert!(text.contains("a@example.com"), "{text}");
    let asked = patient.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, "Who are you?");
    assert_eq!(asked[0].1["required"], serde_json::json!(["username", "email"]));

    // Without an elicitor no one is asked, and the tool is told why.
    let failed = server
        .call(
            invocation("fixture"),
            grants(),
            None,
            "test_elicitation",
            arguments.into(),
        )
        .await;
    match failed {
        Err(CallError::Tool(error)) => assert!(error.message.contains("elicitation capability"), "{}", error.message),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_2_0_server_still_loads_and_runs_beside_0_3_0() {
    let (host, _cache) = host(ComponentLimits::default());
    let bytes = std::fs::read(tollgate_plugin_host::MCP_TOOL_V2_TEST_COMPONENT).unwrap();
    let loading = host.clone();
    let server = tokio::task::spawn_blocking(move || loading.load_tool_server("dot", &bytes))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(server.wit_version(), "0.2.0");
    assert_eq!(server.catalog().prompts[0].name, "describe");
    assert_eq!(server.catalog().resources[0].uri, "dot://png");
    let (sink, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let mut with_sink = invocation("dot");
    with_sink.progress = Some(sink);
    let answer = server
        .call(with_sink, grants(), None, "dot", "{}".into())
        .await
        .unwrap();
    assert!(matches!(answer.as_slice(), [Content::Image(image)] if image.mime_type == "image/png"));
    assert_eq!(reports.try_recv().unwrap().progress, 1.0);
    let prompt = server
        .get_prompt(invocation("dot"), grants(), "describe", Vec::new())
        .await
        .unwrap();
    assert_eq!(prompt.messages.len(), 1);
}
