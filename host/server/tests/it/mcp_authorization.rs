//! MCP authorization for clients (docs/mcp.md, "Authorization"): the
//! protected resource metadata (RFC 9728) of `/v1/mcp`, the 401 challenge
//! that points at it on both MCP endpoints, and a Tollgate key still
//! accepted as the bearer token.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};

const ISSUER: &str = "https://idp.example.com/realms/acme";
const OTHER_ISSUER: &str = "https://login.example.org";

fn list_tools() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
}

async fn metadata(gateway: &Gateway, path: &str) -> Value {
    let response = gateway.get(path).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{path}"
    );
    response.json().await.unwrap()
}

/// The `WWW-Authenticate` of a POST to `path` with `key` (or none), which
/// must be refused with 401.
async fn challenge(gateway: &Gateway, path: &str, key: Option<&str>) -> String {
    let mut request = gateway
        .http
        .post(format!("{}{path}", gateway.url))
        .header("accept", "application/json, text/event-stream")
        .json(&list_tools());
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    response.headers()["www-authenticate"].to_str().unwrap().to_string()
}

#[tokio::test]
async fn the_metadata_names_the_oidc_issuers_and_the_public_mcp_url() {
    let mock = start_mock(Default::default()).await;
    let extra = format!(
        "[control_plane]\npublic_url = \"https://gw.example.com/\"\n\n\
         [[auth.oidc]]\nname = \"acme\"\nissuer = \"{ISSUER}\"\nclient_id = \"tollgate\"\n\n\
         [[auth.oidc]]\nname = \"other\"\nissuer = \"{OTHER_ISSUER}\"\nclient_id = \"tollgate\"\n"
    );
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;

    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/v1/mcp",
    ] {
        let document = metadata(&gateway, path).await;
        assert_eq!(
            document["resource"], "https://gw.example.com/v1/mcp",
            "{path}: {document}"
        );
        assert_eq!(
            document["authorization_servers"],
            json!([ISSUER, OTHER_ISSUER]),
            "{document}"
        );
        assert_eq!(document["bearer_methods_supported"], json!(["header"]), "{document}");
    }
    // An install's own endpoint is a resource of its own.
    let document = metadata(&gateway, "/.well-known/oauth-protected-resource/v1/mcp/github").await;
    assert_eq!(
        document["resource"], "https://gw.example.com/v1/mcp/github",
        "{document}"
    );
    assert_eq!(document["authorization_servers"], json!([ISSUER, OTHER_ISSUER]));
    let odd = gateway
        .get("/.well-known/oauth-protected-resource/v1/mcp/Not%20An%20Install")
        .send()
        .await
        .unwrap();
    assert_eq!(odd.status(), StatusCode::NOT_FOUND);

    // The challenges point at the public URL too, whatever Host was sent.
    let header = challenge(&gateway, "/v1/mcp", None).await;
    assert!(
        header.contains("resource_metadata=\"https://gw.example.com/.well-known/oauth-protected-resource/v1/mcp\""),
        "{header}"
    );
}

#[tokio::test]
async fn without_oidc_the_metadata_has_no_authorization_server_and_follows_the_host() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let document = metadata(&gateway, "/.well-known/oauth-protected-resource/v1/mcp").await;
    // No public_url: the base is the Host the client used, as the Agent Card's.
    assert_eq!(document["resource"], format!("{}/v1/mcp", gateway.url), "{document}");
    assert_eq!(document["authorization_servers"], json!([]), "{document}");
    assert_eq!(document["bearer_methods_supported"], json!(["header"]), "{document}");
}

#[tokio::test]
async fn a_401_from_either_mcp_endpoint_points_at_its_metadata_and_a_key_still_works() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let base = &gateway.url;

    // No credential: the challenge without an error, plus where to look.
    let header = challenge(&gateway, "/v1/mcp", None).await;
    assert_eq!(
        header,
        format!("Bearer realm=\"tollgate\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/v1/mcp\"")
    );
    let header = challenge(&gateway, "/v1/mcp/calc", None).await;
    assert_eq!(
        header,
        format!(
            "Bearer realm=\"tollgate\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/v1/mcp/calc\""
        )
    );
    // A refused key keeps RFC 6750's error beside it.
    let header = challenge(&gateway, "/v1/mcp/calc", Some("tg_live_not-a-real-key")).await;
    assert!(
        header.starts_with("Bearer realm=\"tollgate\", error=\"invalid_token\""),
        "{header}"
    );
    assert!(
        header.ends_with(&format!(
            "resource_metadata=\"{base}/.well-known/oauth-protected-resource/v1/mcp/calc\""
        )),
        "{header}"
    );
    // The metadata the challenge names is served.
    let url = header
        .rsplit_once("resource_metadata=\"")
        .unwrap()
        .1
        .trim_end_matches('"');
    let document: Value = gateway.http.get(url).send().await.unwrap().json().await.unwrap();
    assert_eq!(document["resource"], format!("{base}/v1/mcp/calc"));

    // DELETE of a session is refused the same way.
    let response = gateway
        .http
        .delete(format!("{base}/v1/mcp"))
        .header("mcp-session-id", "whatever")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("resource_metadata="),
        "{:?}",
        response.headers()
    );

    // A static key is served exactly as before.
    let response = gateway
        .http
        .post(format!("{base}/v1/mcp"))
        .bearer_auth(&gateway.api_key)
        .header("accept", "application/json, text/event-stream")
        .json(&list_tools())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("www-authenticate").is_none());
    let body: Value = response.json().await.unwrap();
    assert!(body["result"]["tools"].is_array(), "{body}");
}
