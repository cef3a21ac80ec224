//! The hostile tool server (`tests/plugins/hostile-tool`): every misbehaviour
//! fails only its own call, with a message naming the limit, and the next
//! call answers. Outbound HTTP reaches only approved origins, never follows a
//! redirect, and puts a credential only on the credential's own origins.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_components::{
    CallError, ComponentHost, ComponentLimits, Credential, Grants, Origin, Placement, ToolServer,
};
use tollgate_core::secret::Secret;

use crate::{host, invocation, servers, text};

const KEY: &str = "sk-hostile-test-key-0123456789";

async fn load(host: &ComponentHost) -> Arc<ToolServer> {
    let bytes = std::fs::read(tollgate_plugin_host::HOSTILE_TOOL_TEST_COMPONENT).unwrap();
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.load_tool_server("hostile", &bytes))
        .await
        .unwrap()
        .unwrap()
}

fn limits() -> ComponentLimits {
    allowing(&[])
}

/// The test limits, with `servers` (on loopback) allowed by the operator.
fn allowing(servers: &[&servers::Server]) -> ComponentLimits {
    ComponentLimits {
        memory_mib: 16,
        cpu_ms: 200,
        wall_ms: 2_000,
        max_output_bytes: 1 << 20,
        http_timeout_ms: 1_000,
        http_max_body_bytes: 1 << 20,
        allow_internal_origins: servers.iter().map(|s| s.url("")).collect(),
        ..ComponentLimits::default()
    }
}

async fn call(
    server: &Arc<ToolServer>,
    grants: &Arc<Grants>,
    tool: &str,
    arguments: serde_json::Value,
) -> Result<String, CallError> {
    server
        .call(invocation("hostile"), grants.clone(), None, tool, arguments.to_string())
        .await
        .map(|parts| text(Ok(parts)))
}

fn fault(result: Result<String, CallError>) -> String {
    match result {
        Err(CallError::Fault(fault)) => {
            assert_eq!(&*fault.component, "hostile");
            fault.reason
        }
        other => panic!("expected the sandbox to stop the call, got {other:?}"),
    }
}

fn tool_error(result: Result<String, CallError>) -> String {
    match result {
        Err(CallError::Tool(error)) => error.message,
        other => panic!("expected a tool error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_a_memory_bomb_a_huge_answer_and_a_panic_fail_only_their_own_call() {
    let (host, _cache) = host(limits());
    let server = load(&host).await;
    let grants = Arc::new(Grants::default());
    assert_eq!(server.tools().len(), 6);

    let started = Instant::now();
    let reason = fault(call(&server, &grants, "loop", json!({})).await);
    assert!(reason.contains("compute limit (200 ms"), "{reason}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "stopped on compute, not wall time"
    );
    assert_eq!(call(&server, &grants, "ok", json!({})).await.unwrap(), "fine");

    let reason = fault(call(&server, &grants, "bomb", json!({})).await);
    assert!(reason.contains("memory limit (16 MiB)"), "{reason}");
    assert_eq!(call(&server, &grants, "ok", json!({})).await.unwrap(), "fine");

    let reason = fault(call(&server, &grants, "huge", json!({})).await);
    assert!(reason.contains("more than the 1048576-byte limit"), "{reason}");
    assert_eq!(call(&server, &grants, "ok", json!({})).await.unwrap(), "fine");

    let reason = fault(call(&server, &grants, "panic", json!({})).await);
    assert!(reason.contains("trapped"), "{reason}");
    assert_eq!(call(&server, &grants, "ok", json!({})).await.unwrap(), "fine");
}

/// Approved: `allowed`. The credential `key` goes only to `allowed`, as `x-api-key`.
fn grants_for(allowed: &servers::Server, also: &[&servers::Server]) -> Arc<Grants> {
    let origin = Origin::parse(&allowed.url("/")).unwrap();
    let mut origins = vec![origin.clone()];
    origins.extend(also.iter().map(|s| Origin::parse(&s.url("/")).unwrap()));
    let mut credentials = BTreeMap::new();
    credentials.insert(
        "key".to_string(),
        Credential {
            value: Secret::new(KEY),
            placement: Placement::Header("x-api-key".into()),
            origins: vec![origin],
        },
    );
    Arc::new(Grants {
        origins,
        credentials,
        config: BTreeMap::new(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_http_reaches_only_approved_origins_and_keys_stay_on_theirs() {
    let allowed = servers::start().await;
    let other = servers::start().await;
    let (host, _cache) = host(allowing(&[&allowed, &other]));
    let server = load(&host).await;
    let grants = grants_for(&allowed, &[]);

    // Approved origin, with the credential: the host puts it on.
    let answer = call(
        &server,
        &grants,
        "fetch",
        json!({"url": allowed.url("/hi"), "credential": "key"}),
    )
    .await;
    assert_eq!(answer.unwrap(), "200 hello");
    let seen = allowed.seen.requests();
    assert_eq!(seen.last().unwrap().1["x-api-key"], KEY);

    // Another origin: refused before anything is sent.
    let message = tool_error(call(&server, &grants, "fetch", json!({"url": other.url("/steal")})).await);
    assert!(message.contains("is not approved for install 'hostile'"), "{message}");
    assert!(other.seen.requests().is_empty());

    // A redirect to the other origin comes back as it is; nothing follows it.
    let redirect = allowed.url(&format!("/redirect?to={}", other.url("/steal")));
    let answer = call(&server, &grants, "fetch", json!({"url": redirect, "credential": "key"})).await;
    assert_eq!(answer.unwrap(), "302 moved");
    assert!(other.seen.requests().is_empty(), "the redirect was not followed");

    // An unknown credential, and a credential for an approved origin it is not granted for.
    let message = tool_error(
        call(
            &server,
            &grants,
            "fetch",
            json!({"url": allowed.url("/"), "credential": "other"}),
        )
        .await,
    );
    assert!(message.contains("no credential 'other'"), "{message}");
    let both = grants_for(&allowed, &[&other]);
    let message = tool_error(
        call(
            &server,
            &both,
            "fetch",
            json!({"url": other.url("/steal"), "credential": "key"}),
        )
        .await,
    );
    assert!(message.contains("may be sent only to"), "{message}");
    assert!(
        other.seen.requests().is_empty(),
        "the key never reached the other origin"
    );
    assert!(!message.contains(KEY));

    // Non-http schemes and user info are refused outright.
    let message = tool_error(call(&server, &grants, "fetch", json!({"url": "file:///etc/passwd"})).await);
    assert!(message.contains("not an http(s) URL"), "{message}");

    assert_eq!(call(&server, &grants, "ok", json!({})).await.unwrap(), "fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_large_answers_are_cut_off_by_the_host() {
    let upstream = servers::start().await;
    let (host, _cache) = host(allowing(&[&upstream]));
    let server = load(&host).await;
    let grants = grants_for(&upstream, &[]);

    let started = Instant::now();
    let message = tool_error(call(&server, &grants, "fetch", json!({"url": upstream.url("/slow")})).await);
    assert!(message.contains("timed out"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "bounded by the HTTP timeout"
    );

    let message = tool_error(call(&server, &grants, "fetch", json!({"url": upstream.url("/big")})).await);
    assert!(message.contains("larger than 1048576 bytes"), "{message}");

    assert_eq!(call(&server, &grants, "ok", json!({})).await.unwrap(), "fine");
}
