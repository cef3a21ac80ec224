//! The component host against real components: the built-in calculator and
//! summarize skill, and the hostile test tool server (a loop, a memory bomb,
//! a huge answer, a panic, fetches off its origins and through a redirect),
//! each contained to its own call while the next call works; and the egress
//! policy, which keeps every component off internal addresses; and a tool
//! server on tool WIT 0.2.0 beside them.

mod egress;
mod guardrails;
mod hostile;
mod servers;
mod skills;
mod tool_v2;
mod tool_v4;

use std::sync::Arc;

use tollgate_components::{CallError, ComponentHost, ComponentLimits, Content, Grants, Invocation};
use tollgate_plugin_host::{PluginEngine, PluginLimits};

/// A host with `limits`, compiling into a fresh cache directory (kept alive
/// by the returned guard).
pub fn host(limits: ComponentLimits) -> (ComponentHost, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let engine = PluginEngine::new(&PluginLimits::default()).unwrap();
    (ComponentHost::new(&engine, cache.path(), limits).unwrap(), cache)
}

pub fn invocation(install: &str) -> Invocation {
    Invocation {
        request_id: "req_test".into(),
        workspace: "ws_test".into(),
        install: install.into(),
        depth: 0,
        logs: None,
        progress: None,
        elicit: None,
    }
}

pub fn grants() -> Arc<Grants> {
    Arc::new(Grants::default())
}

/// The text of a one-part answer.
pub fn text(answer: Result<Vec<Content>, CallError>) -> String {
    match answer {
        Ok(parts) => match parts.as_slice() {
            [Content::Text(text)] => text.clone(),
            other => panic!("expected one text part, got {other:?}"),
        },
        Err(error) => panic!("expected an answer, got {error}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calculator_evaluates_exactly_and_reports_bad_input_as_a_tool_error() {
    let (host, _cache) = host(ComponentLimits::default());
    let bytes = tollgate_plugin_host::builtin_tool_servers()
        .iter()
        .find(|builtin| builtin.name == "calculator")
        .expect("the calculator is built in")
        .bytes;
    let server = {
        let host = host.clone();
        tokio::task::spawn_blocking(move || host.load_tool_server("calculator", bytes))
            .await
            .unwrap()
            .unwrap()
    };
    let evaluate = server.tool("evaluate").expect("the calculator lists evaluate");
    assert_eq!(evaluate.input_schema["required"][0], "expression");
    assert_eq!(evaluate.annotations.read_only, Some(true));

    let answer = server
        .call(
            invocation("calculator"),
            grants(),
            None,
            "evaluate",
            r#"{"expression":"2*(3+4)"}"#.into(),
        )
        .await;
    assert_eq!(text(answer), "14");
    let answer = server
        .call(
            invocation("calculator"),
            grants(),
            None,
            "evaluate",
            r#"{"expression":"0.1+0.2"}"#.into(),
        )
        .await;
    assert_eq!(text(answer), "0.3");

    match server
        .call(
            invocation("calculator"),
            grants(),
            None,
            "evaluate",
            r#"{"expression":"1/0"}"#.into(),
        )
        .await
    {
        Err(CallError::Tool(error)) => assert!(error.message.contains("division by zero"), "{}", error.message),
        other => panic!("expected a tool error, got {other:?}"),
    }
    match server
        .call(
            invocation("calculator"),
            grants(),
            None,
            "evaluate",
            r#"{"expr":"1"}"#.into(),
        )
        .await
    {
        Err(CallError::Tool(error)) => assert!(error.message.contains("invalid arguments"), "{}", error.message),
        other => panic!("expected a tool error, got {other:?}"),
    }
    match server
        .call(invocation("calculator"), grants(), None, "nope", "{}".into())
        .await
    {
        Err(CallError::Tool(error)) => assert!(error.message.contains("unknown tool"), "{}", error.message),
        other => panic!("expected a tool error, got {other:?}"),
    }
}
