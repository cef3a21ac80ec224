//! The egress policy through the real binary and the built-in
//! `tollgate/http-fetch`: an install cannot approve an internal origin unless
//! the operator lists it in `[components] allow_internal_origins`, and an
//! install approved while it was listed can no longer reach it once the
//! operator takes it off. A loopback listener counts the connections that
//! reach it: none do.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::control_plane::helpers::method;

/// Accepts on `127.0.0.1:port` and `[::1]:port`, counts each connection and
/// answers it with `internal page`.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let v4 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = v4.local_addr().unwrap().port();
    let v6 = tokio::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], port)))
        .await
        .unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    for listener in [v4, v6] {
        let accepted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buffer = [0u8; 4096];
                    let _ = stream.read(&mut buffer).await;
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\nconnection: close\r\n\r\ninternal page")
                        .await;
                });
            }
        });
    }
    (port, accepted)
}

/// Calls `web__fetch` on `url`: the text, and whether it is a tool error.
async fn fetch(gateway: &Gateway, url: &str) -> (String, bool) {
    let answer: Value = gateway
        .post("/v1/mcp")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "web__fetch", "arguments": {"url": url}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let result = &answer["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    (text.to_string(), result["isError"] == true)
}

/// Rewrites the gateway's `allow_internal_origins` line.
fn set_allowlist(gateway: &Gateway, origins: &[String]) {
    let config = std::fs::read_to_string(&gateway.config_path).unwrap();
    let line = config
        .lines()
        .find(|line| line.starts_with("allow_internal_origins"))
        .unwrap()
        .to_string();
    let replaced = config.replace(&line, &format!("allow_internal_origins = {}", json!(origins)));
    std::fs::write(&gateway.config_path, replaced).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_fetch_reaches_no_internal_address_unless_the_operator_allows_it_and_sends_no_packet() {
    let (port, accepted) = counting_listener().await;
    let mock = start_mock(Default::default()).await;
    let loopback = [
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
        format!("http://localhost:{port}"),
    ];
    let unroutable = ["http://10.0.0.1".to_string(), "http://169.254.169.254".to_string()];
    let every: Vec<String> = loopback.iter().chain(&unroutable).cloned().collect();

    // Not allowed: no install may approve them, whatever the spelling.
    let mut gateway = Gateway::start(&standard_config(mock, "[components]\nallow_internal_origins = []\n")).await;
    let spellings = [
        format!("http://2130706433:{port}"),
        format!("http://0x7f.1:{port}"),
        format!("http://[::ffff:127.0.0.1]:{port}"),
        format!("http://localhost.:{port}"),
        "http://[fd00:ec2::254]".to_string(),
    ];
    for origin in every.iter().chain(&spellings) {
        let refused = method(
            &gateway,
            Some(&gateway.api_key),
            "installs.create",
            json!({"package": "tollgate/http-fetch", "name": "web", "origins": [origin]}),
        )
        .await
        .unwrap_err();
        assert_eq!(refused.0, "INVALID_PARAMS", "{origin}");
        assert!(refused.1.contains("allow_internal_origins"), "{origin}: {}", refused.1);
    }

    // Allowed by the operator: the install approves them and reaches the listener.
    gateway.kill();
    set_allowlist(&gateway, &every);
    let gateway = gateway.restart().await;
    method(
        &gateway,
        Some(&gateway.api_key),
        "installs.create",
        json!({"package": "tollgate/http-fetch", "name": "web", "origins": every}),
    )
    .await
    .unwrap();
    for origin in &loopback {
        let (text, failed) = fetch(&gateway, &format!("{origin}/page")).await;
        assert!(!failed && text == "internal page", "{origin}: {text}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), loopback.len());

    // Taken off the allowlist: the same install, its origins still approved,
    // reaches none of them, and no packet is sent.
    let mut gateway = gateway;
    gateway.kill();
    set_allowlist(&gateway, &[]);
    let gateway = gateway.restart().await;
    for origin in &every {
        let started = Instant::now();
        let url = format!("{origin}/page");
        let (text, failed) = fetch(&gateway, &url).await;
        assert!(failed, "{origin}: {text}");
        assert_eq!(
            text,
            format!(
                "GET {url}: no answer from {origin}: it could not be reached, or it is not one components may call"
            )
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{origin} waited on a connection"
        );
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        loopback.len(),
        "a refused address got a connection"
    );
}
