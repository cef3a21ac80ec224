//! Per-key and per-role tool policy on the MCP endpoint, against two real
//! gateways: B serves the conformance fixture, which A adds as the remote
//! `remote` beside its own component installs (`fx`, `calc`) and the
//! tool-caller skill. A key limited to one remote tool lists only that tool
//! and no prompt or resource, cannot call the others by guessing their
//! names (the refusal reads the same for a name that exists and one that
//! does not), cannot reach another install through `/v1/mcp/{install}` or a
//! batch, cannot call past its list through a skill, and cannot mint a key
//! or set a role's list to get out. A role's list narrows its members'
//! keys at once, and a key's own list narrows it further.

use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::components::{install, publish_tool_caller};
use crate::control_plane::helpers::{EXTRA, method, signup};
use crate::mcp_catalog::{publish_fixture, rpc_as};

fn names(answer: &Value, list: &str) -> Vec<String> {
    let items = answer["result"][list].as_array();
    let items = items.unwrap_or_else(|| panic!("no {list}: {answer}"));
    items
        .iter()
        .map(|item| item["name"].as_str().unwrap().to_string())
        .collect()
}

async fn tools(gateway: &Gateway, key: &str, path: &str) -> Vec<String> {
    names(&rpc_as(gateway, key, path, "tools/list", json!({})).await, "tools")
}

async fn call(gateway: &Gateway, key: &str, path: &str, name: &str, arguments: Value) -> Value {
    let params = json!({"name": name, "arguments": arguments});
    rpc_as(gateway, key, path, "tools/call", params).await
}

/// A POST of `body` on `path` with `key`: its status and JSON body.
async fn post(gateway: &Gateway, key: &str, path: &str, body: Value) -> (u16, Value) {
    let response = gateway
        .http
        .post(format!("{}{path}", gateway.url))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn key_with(gateway: &Gateway, key: &str, params: Value) -> String {
    let created = method(gateway, Some(key), "keys.create", params).await.unwrap();
    created["api_key"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_key_sees_and_calls_only_what_its_lists_allow() {
    let mock = start_mock(Default::default()).await;
    let remote = Gateway::start(&standard_config(mock, "")).await;
    publish_fixture(&remote).await;
    let extra = format!("{EXTRA}[components]\nallow_internal_origins = [\"{}\"]\n", remote.url);
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let owner = gateway.api_key.clone();
    publish_fixture(&gateway).await;
    publish_tool_caller(&gateway, "tests").await;
    install(&gateway, json!({"package": "tests/caller"})).await;
    let bearer = format!("Bearer {}", remote.api_key);
    method(
        &gateway,
        Some(&owner),
        "mcp_servers.create",
        json!({"name": "remote", "url": format!("{}/v1/mcp/fx", remote.url),
               "auth": {"header": "authorization", "value": bearer}}),
    )
    .await
    .unwrap();
    let everything = tools(&gateway, &owner, "/v1/mcp").await;
    for name in [
        "remote__test_simple_text",
        "remote__test_image_content",
        "fx__test_simple_text",
        "calc__evaluate",
    ] {
        assert!(everything.contains(&name.to_string()), "{name}: {everything:?}");
    }

    // A key limited to one remote tool lists that tool alone, and no
    // prompt, resource or template of any install.
    let one = key_with(
        &gateway,
        &owner,
        json!({"name": "one", "tools": ["remote__test_simple_text"]}),
    )
    .await;
    assert_eq!(tools(&gateway, &one, "/v1/mcp").await, ["remote__test_simple_text"]);
    assert_eq!(tools(&gateway, &one, "/v1/mcp/remote").await, ["test_simple_text"]);
    for (method, list) in [
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ] {
        let answer = rpc_as(&gateway, &one, "/v1/mcp", method, json!({})).await;
        assert_eq!(answer["result"][list], json!([]), "{method}: {answer}");
    }
    let allowed = call(&gateway, &one, "/v1/mcp", "remote__test_simple_text", json!({})).await;
    assert_eq!(allowed["result"]["isError"], false, "{allowed}");

    // Guessed names are refused, and the refusal of a tool that exists
    // reads exactly as that of one that does not.
    let refusal = |answer: &Value, name: &str| {
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        answer["error"]["message"].as_str().unwrap().replace(name, "<name>")
    };
    let missing = call(&gateway, &one, "/v1/mcp", "ghost__nothing", json!({})).await;
    let expected = refusal(&missing, "ghost__nothing");
    for name in [
        "remote__test_image_content",
        "fx__test_simple_text",
        "calc__evaluate",
        "caller__run",
    ] {
        let refused = call(&gateway, &one, "/v1/mcp", name, json!({"expression": "1+1"})).await;
        assert_eq!(refusal(&refused, name), expected, "{name}");
    }
    let refused = call(&gateway, &one, "/v1/mcp/remote", "test_image_content", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let prompt = json!({"name": "remote__test_simple_prompt"});
    let refused = rpc_as(&gateway, &one, "/v1/mcp", "prompts/get", prompt).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let read = json!({"uri": "test://static-text"});
    let refused = rpc_as(&gateway, &one, "/v1/mcp", "resources/read", read).await;
    assert_eq!(refused["error"]["code"], -32002, "{refused}");

    // Another install's endpoint answers as one that does not exist.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let (status, absent) = post(&gateway, &one, "/v1/mcp/nowhere", list.clone()).await;
    assert_eq!(status, 404, "{absent}");
    for install in ["fx", "calc", "caller"] {
        let (status, body) = post(&gateway, &one, &format!("/v1/mcp/{install}"), list.clone()).await;
        assert_eq!(status, 404, "{install}: {body}");
        assert_eq!(
            body.to_string().replace(install, "nowhere"),
            absent.to_string(),
            "{install}"
        );
    }
    // A batch is held to the list message by message.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "calc__evaluate", "arguments": {"expression": "1+1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "remote__test_simple_text", "arguments": {}}},
    ]);
    let (status, answers) = post(&gateway, &one, "/v1/mcp", batch).await;
    assert_eq!(status, 200, "{answers}");
    assert_eq!(answers[0]["error"]["code"], -32602, "{answers}");
    assert_eq!(answers[1]["result"]["isError"], false, "{answers}");

    // A skill the key may call cannot call past the key's list for it.
    let skill = key_with(
        &gateway,
        &owner,
        json!({"name": "skill", "tools": ["caller__run", "fx"]}),
    )
    .await;
    let listed = tools(&gateway, &skill, "/v1/mcp").await;
    assert!(listed.contains(&"caller__run".to_string()) && !listed.contains(&"calc__evaluate".to_string()));
    let through = json!({"tool": "calc__evaluate", "arguments": {"expression": "6*7"}});
    let refused = call(&gateway, &skill, "/v1/mcp", "caller__run", through.clone()).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(refused.to_string().contains("tool policy"), "{refused}");
    let inside = json!({"tool": "fx__test_simple_text", "arguments": {}});
    let passed = call(&gateway, &skill, "/v1/mcp", "caller__run", inside).await;
    assert_eq!(passed["result"]["isError"], false, "{passed}");
    let answered = call(&gateway, &owner, "/v1/mcp", "caller__run", through).await;
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    // Nor can a key run over HTTP a skill its list leaves out: it is not
    // there, as an install that does not exist.
    for (key, install, expected) in [(&one, "caller", 404), (&one, "ghost", 404), (&skill, "caller", 200)] {
        let input = json!({"input": {"tool": "fx__test_simple_text", "arguments": {}}});
        let (status, body) = post(&gateway, key, &format!("/v1/skills/{install}"), input).await;
        assert_eq!(status, expected, "{install}: {body}");
        if status == 404 {
            assert_eq!(
                body["error"]["message"],
                format!("no install named '{install}' in this workspace")
            );
        }
    }

    // The limited key cannot mint its way out, nor lift a role's list.
    let wider = method(&gateway, Some(&one), "keys.create", json!({"name": "out"})).await;
    assert!(format!("{wider:?}").contains("PERMISSION_DENIED"), "{wider:?}");
    let other = json!({"name": "out", "tools": ["calc"]});
    let wider = method(&gateway, Some(&one), "keys.create", other).await;
    assert!(format!("{wider:?}").contains("PERMISSION_DENIED"), "{wider:?}");
    let within = key_with(&gateway, &one, json!({"tools": ["remote__test_simple_text"]})).await;
    assert_eq!(tools(&gateway, &within, "/v1/mcp").await, ["remote__test_simple_text"]);
    let lift = json!({"role": "developer", "tools": null});
    let lifted = method(&gateway, Some(&one), "workspaces.tool-policy.set", lift).await;
    assert!(format!("{lifted:?}").contains("PERMISSION_DENIED"), "{lifted:?}");
    let bad = method(&gateway, Some(&owner), "keys.create", json!({"tools": ["Calc tools"]})).await;
    assert!(format!("{bad:?}").contains("INVALID_PARAMS"), "{bad:?}");
    let keys = method(&gateway, Some(&owner), "keys.list", json!({})).await.unwrap();
    let shown = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|key| key["name"] == "one")
        .unwrap();
    assert_eq!(shown["tools"], json!(["remote__test_simple_text"]), "{keys}");

    // A role's list: a developer's key sees only `calc` once it is set,
    // a key of theirs with its own list only what both allow, and all
    // again once it is removed.
    let dev = signup(&gateway, "dev@example.com").await;
    let add = json!({"email": "dev@example.com", "role": "developer"});
    method(&gateway, Some(&owner), "members.add", add).await.unwrap();
    let here = json!({"workspace_id": gateway.workspace_id, "name": "dev"});
    let developer = key_with(&gateway, &dev.key, here).await;
    assert!(tools(&gateway, &developer, "/v1/mcp").await.len() > 2);
    let set = json!({"role": "developer", "tools": ["calc", "fx__test_simple_text"]});
    let policies = method(&gateway, Some(&owner), "workspaces.tool-policy.set", set)
        .await
        .unwrap();
    assert_eq!(
        policies["roles"]["developer"],
        json!(["calc", "fx__test_simple_text"]),
        "{policies}"
    );
    let listed = tools(&gateway, &developer, "/v1/mcp").await;
    assert_eq!(listed, ["calc__evaluate", "fx__test_simple_text"], "{listed:?}");
    let narrower = json!({"workspace_id": gateway.workspace_id, "tools": ["calc", "remote"]});
    let narrow = key_with(&gateway, &dev.key, narrower).await;
    assert_eq!(tools(&gateway, &narrow, "/v1/mcp").await, ["calc__evaluate"]);
    let refused = call(&gateway, &developer, "/v1/mcp", "remote__test_simple_text", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let owners = json!({"role": "owner", "tools": ["calc"]});
    let refused = method(&gateway, Some(&owner), "workspaces.tool-policy.set", owners).await;
    assert!(format!("{refused:?}").contains("INVALID_PARAMS"), "{refused:?}");
    assert_eq!(
        tools(&gateway, &owner, "/v1/mcp").await,
        everything,
        "the owner is not limited"
    );
    let clear = json!({"role": "developer", "tools": null});
    let policies = method(&gateway, Some(&owner), "workspaces.tool-policy.set", clear)
        .await
        .unwrap();
    assert_eq!(policies["roles"], json!({}), "{policies}");
    assert_eq!(tools(&gateway, &developer, "/v1/mcp").await, everything);
}

/// A key's own list after it is made (`keys.set-tools`): narrowed, replaced,
/// removed, each seen by the key's next request; changed only by those who
/// may revoke the key, and never widened by a key held to a list itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_own_list_is_replaced_and_removed_after_it_is_made() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, EXTRA)).await;
    let owner = gateway.api_key.clone();
    publish_fixture(&gateway).await;
    let everything = tools(&gateway, &owner, "/v1/mcp").await;
    let made = method(&gateway, Some(&owner), "keys.create", json!({"name": "bot"}))
        .await
        .unwrap();
    let (key_id, bot) = (made["key_id"].clone(), made["api_key"].as_str().unwrap().to_string());
    assert_eq!(tools(&gateway, &bot, "/v1/mcp").await, everything);

    // Narrowed: the list is stored normalized and binds the next request.
    let set = json!({"key_id": key_id, "tools": ["calc__evaluate", "calc__evaluate"]});
    let changed = method(&gateway, Some(&owner), "keys.set-tools", set).await.unwrap();
    assert_eq!(changed, json!({"key_id": key_id, "tools": ["calc__evaluate"]}));
    assert_eq!(tools(&gateway, &bot, "/v1/mcp").await, ["calc__evaluate"]);
    let refused = call(&gateway, &bot, "/v1/mcp", "fx__test_simple_text", json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let keys = method(&gateway, Some(&owner), "keys.list", json!({})).await.unwrap();
    let shown = keys["keys"].as_array().unwrap().iter().find(|k| k["key_id"] == key_id);
    assert_eq!(shown.unwrap()["tools"], json!(["calc__evaluate"]), "{keys}");

    // The limited key sets only lists within its own, and never none.
    for wider in [json!(null), json!(["calc"]), json!(["fx__test_simple_text"])] {
        let lift = json!({"key_id": key_id, "tools": wider});
        let lifted = method(&gateway, Some(&bot), "keys.set-tools", lift).await;
        assert!(format!("{lifted:?}").contains("PERMISSION_DENIED"), "{lifted:?}");
    }
    let same = json!({"key_id": key_id, "tools": ["calc__evaluate"]});
    method(&gateway, Some(&bot), "keys.set-tools", same).await.unwrap();

    // A developer may not change an owner's key; bad lists, unknown and
    // revoked keys are refused.
    let dev = signup(&gateway, "dev@example.com").await;
    let add = json!({"email": "dev@example.com", "role": "developer"});
    method(&gateway, Some(&owner), "members.add", add).await.unwrap();
    let theirs = json!({"workspace_id": gateway.workspace_id, "key_id": key_id, "tools": null});
    let refused = method(&gateway, Some(&dev.key), "keys.set-tools", theirs).await;
    assert!(format!("{refused:?}").contains("PERMISSION_DENIED"), "{refused:?}");
    let bad = json!({"key_id": key_id, "tools": ["Calc tools"]});
    let bad = method(&gateway, Some(&owner), "keys.set-tools", bad).await;
    assert!(format!("{bad:?}").contains("INVALID_PARAMS"), "{bad:?}");
    let ghost = json!({"key_id": "key_ghost", "tools": null});
    let ghost = method(&gateway, Some(&owner), "keys.set-tools", ghost).await;
    assert!(format!("{ghost:?}").contains("NOT_FOUND"), "{ghost:?}");

    // Removed: the key reaches everything installed again.
    let clear = json!({"key_id": key_id, "tools": null});
    let cleared = method(&gateway, Some(&owner), "keys.set-tools", clear).await.unwrap();
    assert_eq!(cleared["tools"], Value::Null);
    assert_eq!(tools(&gateway, &bot, "/v1/mcp").await, everything);
    method(&gateway, Some(&owner), "keys.revoke", json!({"key_id": key_id}))
        .await
        .unwrap();
    let revoked = json!({"key_id": key_id, "tools": ["calc"]});
    let revoked = method(&gateway, Some(&owner), "keys.set-tools", revoked).await;
    assert!(format!("{revoked:?}").contains("NOT_FOUND"), "{revoked:?}");
}
