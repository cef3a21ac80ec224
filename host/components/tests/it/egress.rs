//! The egress policy against the built-in `http-fetch`, with grants that name
//! internal origins outright (as an install approved before the operator
//! took them off the allowlist would): no packet reaches a loopback listener
//! by any spelling or by a name that resolves to it, and a refused address
//! reads like a closed port.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_components::{CallError, ComponentHost, ComponentLimits, Grants, Origin, ToolServer};

use crate::{host, invocation};

/// Listeners on `127.0.0.1:port` and `[::1]:port` that count the connections
/// they accept and answer each with a tiny HTTP response.
struct Counting {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl Counting {
    async fn start() -> Counting {
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
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\ninternal")
                            .await;
                    });
                }
            });
        }
        Counting { port, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// The URLs that all lead to this listener.
    fn spellings(&self) -> Vec<String> {
        let port = self.port;
        vec![
            format!("http://127.0.0.1:{port}/"),
            format!("http://[::1]:{port}/"),
            format!("http://localhost:{port}/"),
            format!("http://localhost.:{port}/"),
            format!("http://2130706433:{port}/"),
            format!("http://0x7f.1:{port}/"),
            format!("http://[::ffff:127.0.0.1]:{port}/"),
        ]
    }
}

async fn http_fetch(host: &ComponentHost) -> Arc<ToolServer> {
    let bytes = tollgate_plugin_host::builtin_tool_servers()
        .iter()
        .find(|builtin| builtin.name == "http-fetch")
        .expect("http-fetch is built in")
        .bytes;
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.load_tool_server("http-fetch", bytes))
        .await
        .unwrap()
        .unwrap()
}

/// Grants that approve the origin of every URL in `urls`.
fn approving(urls: &[String]) -> Arc<Grants> {
    let mut origins: Vec<Origin> = urls.iter().map(|url| Origin::parse(url).unwrap()).collect();
    origins.dedup();
    Arc::new(Grants {
        origins,
        credentials: BTreeMap::new(),
        config: BTreeMap::new(),
    })
}

async fn fetch(server: &Arc<ToolServer>, grants: &Arc<Grants>, url: &str) -> Result<String, String> {
    match server
        .call(
            invocation("http-fetch"),
            grants.clone(),
            None,
            "fetch",
            json!({"url": url}).to_string(),
        )
        .await
    {
        Ok(parts) => Ok(format!("{parts:?}")),
        Err(CallError::Tool(error)) => Err(error.message),
        Err(other) => panic!("{url}: expected an answer or a tool error, got {other:?}"),
    }
}

fn limits(allow_internal_origins: Vec<String>) -> ComponentLimits {
    ComponentLimits {
        http_timeout_ms: 2_000,
        allow_internal_origins,
        ..ComponentLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_addresses_get_no_packet_by_any_spelling_unless_the_operator_allows_them() {
    let listener = Counting::start().await;
    let mut urls = listener.spellings();
    urls.extend([
        "http://10.0.0.1/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[fd00:ec2::254]/".to_string(),
        "http://[::ffff:169.254.169.254]/".to_string(),
        "http://100.64.0.1/".to_string(),
    ]);
    let grants = approving(&urls);

    let (refusing, _cache) = host(limits(Vec::new()));
    let server = http_fetch(&refusing).await;
    for url in &urls {
        let started = Instant::now();
        let message = fetch(&server, &grants, url).await.expect_err(url);
        let origin = Origin::parse(url).unwrap();
        assert_eq!(
            message,
            format!(
                "GET {url}: no answer from {origin}: it could not be reached, or it is not one components may call"
            )
        );
        // Refused before connecting: nothing waited on an unroutable address.
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{url} took {:?}",
            started.elapsed()
        );
    }
    assert_eq!(listener.accepted(), 0, "a connection reached the loopback listener");

    // A closed port the operator allowed reads exactly like a refused address.
    let closed = {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        socket.local_addr().unwrap().port()
    };
    let closed_url = format!("http://127.0.0.1:{closed}/");
    let (allowing_closed, _cache) = host(limits(vec![format!("http://127.0.0.1:{closed}")]));
    let server = http_fetch(&allowing_closed).await;
    let message = fetch(&server, &approving(std::slice::from_ref(&closed_url)), &closed_url)
        .await
        .unwrap_err();
    assert_eq!(
        message,
        format!(
            "GET {closed_url}: no answer from http://127.0.0.1:{closed}: it could not be reached, or it is not one components may call"
        )
    );

    // The operator's allowlist opens exactly its origins, and the listener answers.
    let port = listener.port;
    let allowed = vec![
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
        format!("http://localhost:{port}"),
    ];
    let (allowing, _cache) = host(limits(allowed.clone()));
    let server = http_fetch(&allowing).await;
    let mut reached = 0;
    for url in &listener.spellings() {
        let answer = fetch(&server, &grants, url).await;
        // `2130706433` is `127.0.0.1` once parsed; `localhost.` and the mapped
        // form are other origins, still refused.
        if allowed.contains(&Origin::parse(url).unwrap().to_string()) {
            assert!(answer.expect(url).contains("internal"), "{url}");
            reached += 1;
        } else {
            assert!(answer.is_err(), "{url}");
        }
    }
    assert_eq!(reached, 5);
    assert_eq!(listener.accepted(), reached);
}
