//! A guardrail's stores made ahead of need: a used guardrail keeps one
//! ready, and a check that takes it is bound to its own caller (its
//! capabilities, a whole compute budget), as a fresh store would be.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tollgate_components::{
    Capabilities, Check, ComponentLimits, GuardRoute, Guardrail, ModelAccess, ModelError, RequestVerdict, Subject, Text,
};

use crate::{grants, host, invocation};

/// Answers every model call, so a judge that asks one is allowed to.
struct AnyModel;

impl ModelAccess for AnyModel {
    fn chat(&self, _request: String) -> BoxFuture<'static, Result<String, ModelError>> {
        Box::pin(async { Ok(r#"{"choices":[]}"#.to_string()) })
    }
}

fn check(capabilities: Capabilities) -> Check {
    Check {
        invocation: invocation("hostile"),
        grants: grants(),
        capabilities,
        subject: Subject {
            route: GuardRoute::Chat,
            target: "mock/small".into(),
        },
        request: Arc::from("{}"),
    }
}

fn said(text: &str) -> Vec<Text> {
    vec![Text {
        role: "user".into(),
        content: text.into(),
    }]
}

/// Waits for the warmer to make the guardrail's next store.
async fn ready(guardrail: &Guardrail) {
    let started = Instant::now();
    while guardrail.ready_stores() == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "no store was made ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_store_is_bound_to_the_check_that_takes_it() {
    let limits = ComponentLimits {
        cpu_ms: 200,
        ..ComponentLimits::default()
    };
    let (host, _cache) = host(limits);
    let guardrail = {
        let host = host.clone();
        let bytes = std::fs::read(tollgate_plugin_host::HOSTILE_GUARDRAIL_TEST_COMPONENT).unwrap();
        tokio::task::spawn_blocking(move || host.load_guardrail("hostile", &bytes))
            .await
            .unwrap()
            .unwrap()
    };
    assert_eq!(guardrail.ready_stores(), 0, "nothing is made before the first check");
    let allowed = guardrail
        .check_request(check(Capabilities::default()), said("hello"))
        .await;
    assert!(matches!(allowed, Ok(RequestVerdict::Allow)), "{allowed:?}");

    // Made for no one, the store takes its caller's capabilities.
    ready(&guardrail).await;
    let refused = guardrail
        .check_request(check(Capabilities::default()), said("judge"))
        .await;
    assert!(
        matches!(&refused, Ok(RequestVerdict::Deny(why)) if why == "judge: capability_not_granted"),
        "{refused:?}"
    );
    ready(&guardrail).await;
    let models = Capabilities {
        models: Some(Arc::new(AnyModel)),
        tools: None,
    };
    let judged = guardrail.check_request(check(models), said("judge")).await;
    assert!(
        matches!(&judged, Ok(RequestVerdict::Deny(why)) if why == "judge: ok"),
        "{judged:?}"
    );

    // A store that waited still gets only its call's compute budget.
    ready(&guardrail).await;
    let stopped = guardrail
        .check_request(check(Capabilities::default()), said("loop"))
        .await;
    let fault = stopped.expect_err("a loop is stopped");
    assert!(fault.reason.contains("compute limit"), "{fault}");
    ready(&guardrail).await;
    let allowed = guardrail
        .check_request(check(Capabilities::default()), said("hello"))
        .await;
    assert!(matches!(allowed, Ok(RequestVerdict::Allow)), "{allowed:?}");
}
