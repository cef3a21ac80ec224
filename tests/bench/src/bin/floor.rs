//! `bench-floor`: the least a gateway in this stack can do, as a yardstick for
//! `tollgate-bench --floor`. It relays each request to the upstream unchanged
//! through the same parts the gateway is built on (axum and hyper serving, a
//! pooled reqwest client, TCP_NODELAY both ways, the multi-threaded tokio
//! runtime) and does nothing else: no auth, no adapter, no wallet, no log.
//! Its added latency is what one more loopback hop costs on the machine, which
//! no gateway can go below.
//!
//!   bench-floor --listen 127.0.0.1:9100 --upstream http://127.0.0.1:9000
#![forbid(unsafe_code)]

use std::process::ExitCode;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use axum::serve::ListenerExt;
use clap::Parser;

#[derive(Parser)]
#[command(about = "A bare HTTP relay: the floor a gateway's added latency is measured against")]
struct Args {
    /// Address to listen on.
    #[arg(long)]
    listen: String,
    /// Origin every request is relayed to, e.g. http://127.0.0.1:9000.
    #[arg(long)]
    upstream: String,
}

#[derive(Clone)]
struct Upstream {
    client: reqwest::Client,
    origin: String,
}

/// Relays method, path, query, `content-type`, `authorization` and body; a
/// whole answer is read before it is sent on (as the gateway does), an event
/// stream is relayed chunk by chunk.
async fn relay(
    State(upstream): State<Upstream>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = upstream
        .client
        .request(method, format!("{}{path}", upstream.origin))
        .body(body);
    for name in [header::CONTENT_TYPE, header::AUTHORIZATION] {
        if let Some(value) = headers.get(&name) {
            request = request.header(name, value);
        }
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return answer(StatusCode::BAD_GATEWAY, None, Body::from(error.to_string())),
    };
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let streamed = content_type
        .as_ref()
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let body = match streamed {
        true => Body::from_stream(response.bytes_stream()),
        false => match response.bytes().await {
            Ok(bytes) => Body::from(bytes),
            Err(error) => return answer(StatusCode::BAD_GATEWAY, None, Body::from(error.to_string())),
        },
    };
    answer(status, content_type, body)
}

fn answer(status: StatusCode, content_type: Option<HeaderValue>, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    if let Some(value) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let serve = async {
        let client = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1024)
            .build()?;
        let app = axum::Router::new().fallback(relay).with_state(Upstream {
            client,
            origin: args.upstream.trim_end_matches('/').to_owned(),
        });
        let listener = tokio::net::TcpListener::bind(&args.listen).await?.tap_io(|tcp| {
            // A relay that waits for Nagle's algorithm would measure the wait.
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app).await?;
        anyhow::Ok(())
    };
    match serve.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench-floor: {error:#}");
            ExitCode::FAILURE
        }
    }
}
