//! Small local HTTP servers for the outbound-HTTP tests: one that records what
//! reached it (path and headers), with routes that answer, redirect, sleep or
//! send a large body.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// What one server saw: (path and query, headers) per request.
#[derive(Clone, Default)]
pub struct Seen(Arc<Mutex<Vec<(String, HeaderMap)>>>);

impl Seen {
    pub fn requests(&self) -> Vec<(String, HeaderMap)> {
        self.0.lock().unwrap().clone()
    }
}

pub struct Server {
    pub address: SocketAddr,
    pub seen: Seen,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

/// Starts a server on `127.0.0.1:0`. `/redirect?to=URL` answers 302 to URL;
/// `/slow` answers after 5 s; `/big` sends 8 MiB; anything else answers `hello`.
pub async fn start() -> Server {
    let seen = Seen::default();
    let app = Router::new()
        .route("/redirect", get(redirect))
        .route("/slow", get(slow))
        .route("/big", get(big))
        .fallback(get(hello))
        .layer(axum::middleware::from_fn_with_state(seen.clone(), record))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server { address, seen }
}

async fn record(State(seen): State<Seen>, request: Request, next: axum::middleware::Next) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    seen.0.lock().unwrap().push((target, request.headers().clone()));
    next.run(request).await
}

async fn hello() -> &'static str {
    "hello"
}

async fn redirect(request: Request) -> Response {
    let to = request
        .uri()
        .query()
        .and_then(|q| q.strip_prefix("to="))
        .unwrap_or("/")
        .to_string();
    (StatusCode::FOUND, [(header::LOCATION, to)], "moved").into_response()
}

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(5)).await;
    "late"
}

async fn big() -> Vec<u8> {
    vec![b'x'; 8 << 20]
}
