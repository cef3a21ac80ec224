//! Prompt-template packages as MCP prompts, against the real binary: a
//! published template installed without any component is listed with the
//! `input.<name>`s it reads as arguments (required unless its manifest says
//! `optional`, described where it says so), renders with them, and refuses
//! a missing required one (-32602); a hostile template stops at the actors'
//! template limits within bounded time while the gateway keeps serving;
//! another workspace sees none of it.

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{Gateway, admin, standard_config, start_mock};
use crate::components::{install, publish};
use crate::control_plane::helpers::method;
use crate::mcp_catalog::{assert_needs, rpc_as};

const GREETING: &str = "Write a {{ input.tone }} note about {{ input.topic }}.\
{% if input.words is defined %} At most {{ input.words }} words.{% endif %}";
/// Ten billion iterations: only fuel stops it.
const SPIN: &str = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";
/// Formats a lazily repeated list of 100 GB at once, before fuel is charged
/// for it: the render child's memory cap stops it.
const HOG: &str = "{{ '' ~ (['A' * 1000000] * 100000) }}";

fn template_manifest(name: &str, description: &str, text: &str, arguments: Value) -> Value {
    json!({
        "schema_version": 1, "kind": "prompt-template", "name": format!("tpl/{name}"), "version": "1.0.0",
        "description": description, "license": "Apache-2.0",
        "content": {"digest": tollgate_registry::Digest::of(text.as_bytes()).to_string(), "size": text.len(), "media_type": "text/plain"},
        "metadata": {"arguments": arguments},
    })
}

async fn publish_template(gateway: &Gateway, name: &str, description: &str, text: &str, arguments: Value) {
    let manifest = template_manifest(name, description, text, arguments);
    publish(gateway, manifest, text.as_bytes()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_template_installs_are_mcp_prompts_rendered_within_the_template_limits() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let key = gateway.api_key.clone();
    let rpc = |path: &'static str, method: &'static str, params: Value| rpc_as(&gateway, &key, path, method, params);
    method(&gateway, Some(&key), "namespaces.create", json!({"name": "tpl"}))
        .await
        .unwrap();
    // Describing an argument the template never reads is refused.
    let stray = template_manifest("stray", "", GREETING, json!({"length": {"optional": true}}));
    let encoded = base64::engine::general_purpose::STANDARD.encode(GREETING);
    let refused = method(
        &gateway,
        Some(&key),
        "packages.publish",
        json!({"manifest": stray, "content_base64": encoded}),
    )
    .await;
    assert!(format!("{refused:?}").contains("input.length"), "{refused:?}");
    let described = json!({"tone": {"description": "How it sounds"}, "words": {"optional": true}});
    publish_template(
        &gateway,
        "greeting",
        "A short note in a given tone",
        GREETING,
        described,
    )
    .await;
    publish_template(&gateway, "spin", "", SPIN, json!({})).await;
    publish_template(&gateway, "hog", "Asks for 100 GB", HOG, json!({})).await;

    // Before any install: nothing to serve, no prompts capability.
    let initialize =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let bare = rpc("/v1/mcp", "initialize", initialize.clone()).await;
    assert!(bare["result"]["capabilities"].get("prompts").is_none(), "{bare}");

    // A template installs without a component; settings would go unread.
    let refused = method(
        &gateway,
        Some(&key),
        "installs.create",
        json!({"package": "tpl/greeting", "name": "greet", "config": {"a": "b"}}),
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");
    let installed = install(&gateway, json!({"package": "tpl/greeting", "name": "greet"})).await;
    assert!(installed.to_string().contains("prompt-template"), "{installed}");
    install(&gateway, json!({"package": "tpl/spin", "name": "spin"})).await;
    install(&gateway, json!({"package": "tpl/hog", "name": "hog"})).await;

    let all = rpc("/v1/mcp", "initialize", initialize.clone()).await;
    assert_eq!(
        all["result"]["capabilities"]["prompts"],
        json!({"listChanged": false}),
        "{all}"
    );
    let one = rpc("/v1/mcp/greet", "initialize", initialize).await;
    assert!(one["result"]["capabilities"].get("prompts").is_some(), "{one}");

    // Listed with their arguments: namespaced on /v1/mcp, plain on the install's endpoint.
    let listed = rpc("/v1/mcp", "prompts/list", json!({})).await;
    let prompts = listed["result"]["prompts"].as_array().unwrap();
    let greet = prompts
        .iter()
        .find(|p| p["name"] == "greet__greet")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(greet["description"], "A short note in a given tone");
    assert_eq!(
        greet["arguments"],
        json!([
            {"name": "tone", "required": true, "description": "How it sounds"},
            {"name": "topic", "required": true},
            {"name": "words", "required": false},
        ])
    );
    let spin = prompts
        .iter()
        .find(|p| p["name"] == "spin__spin")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(spin["description"], "Prompt template tpl/spin@1.0.0");
    assert_eq!(spin["arguments"], json!([]));
    let plain = rpc("/v1/mcp/greet", "prompts/list", json!({})).await;
    assert_eq!(plain["result"]["prompts"].as_array().unwrap().len(), 1, "{plain}");
    assert_eq!(plain["result"]["prompts"][0]["name"], "greet", "{plain}");
    // A template offers no tools.
    let tools = rpc("/v1/mcp/greet", "tools/list", json!({})).await;
    assert_eq!(tools["result"]["tools"], json!([]), "{tools}");

    // Rendered with its arguments, on both endpoints.
    let arguments = json!({"tone": "cheerful", "topic": "tolls"});
    let render = || {
        rpc(
            "/v1/mcp",
            "prompts/get",
            json!({"name": "greet__greet", "arguments": arguments}),
        )
    };
    let got = render().await;
    assert_eq!(
        got["result"],
        json!({
            "description": "A short note in a given tone",
            "messages": [{"role": "user", "content": {"type": "text", "text": "Write a cheerful note about tolls."}}]
        }),
        "{got}"
    );
    let plain = rpc(
        "/v1/mcp/greet",
        "prompts/get",
        json!({"name": "greet", "arguments": {"tone": "dry", "topic": "gates", "words": "50"}}),
    )
    .await;
    assert_eq!(
        plain["result"]["messages"][0]["content"]["text"], "Write a dry note about gates. At most 50 words.",
        "{plain}"
    );

    // A missing argument is invalid params, naming it.
    let missing = rpc(
        "/v1/mcp",
        "prompts/get",
        json!({"name": "greet__greet", "arguments": {"tone": "dry"}}),
    )
    .await;
    assert_needs(&missing, "topic");

    // Completion has nothing to suggest for free text, but knows the arguments.
    let complete = rpc(
        "/v1/mcp",
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "greet__greet"}, "argument": {"name": "tone", "value": "ch"}}),
    )
    .await;
    assert_eq!(complete["result"]["completion"]["values"], json!([]), "{complete}");
    let unknown = rpc(
        "/v1/mcp",
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "greet__greet"}, "argument": {"name": "nope", "value": ""}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    // Hostile templates stop at the actors' limits (fuel; the render
    // child's memory cap), as errors, in bounded time; the next request is served.
    for (name, limit) in [("spin__spin", "fuel"), ("hog__hog", "memory")] {
        let started = Instant::now();
        let failed = rpc("/v1/mcp", "prompts/get", json!({"name": name})).await;
        let elapsed = started.elapsed();
        assert_eq!(failed["error"]["code"], -32603, "{name}: {failed}");
        let message = failed["error"]["message"].as_str().unwrap();
        eprintln!("{name}: {elapsed:?}: {message}");
        assert!(
            message.contains("limit") && message.contains(limit),
            "{name}: {message}"
        );
        assert!(elapsed < Duration::from_secs(20), "{name} took {elapsed:?}");
        let next = render().await;
        assert_eq!(
            next["result"]["messages"][0]["content"]["text"], "Write a cheerful note about tolls.",
            "after {name}: {next}"
        );
    }

    // Another workspace sees none of them.
    let stranger = admin(
        &gateway.config_path,
        &["create-account", "--name", "stranger", "--credit-usd", "5", "--json"],
    );
    let stranger: Value = serde_json::from_str(&stranger).unwrap();
    let stranger = stranger["api_key"].as_str().unwrap();
    let theirs = rpc_as(&gateway, stranger, "/v1/mcp", "prompts/list", json!({})).await;
    assert_eq!(theirs["result"]["prompts"], json!([]), "{theirs}");
    let theirs = rpc_as(
        &gateway,
        stranger,
        "/v1/mcp",
        "prompts/get",
        json!({"name": "greet__greet", "arguments": arguments}),
    )
    .await;
    assert_eq!(theirs["error"]["code"], -32602, "{theirs}");
    let response = gateway
        .http
        .post(format!("{}/v1/mcp/greet", gateway.url))
        .bearer_auth(stranger)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}
