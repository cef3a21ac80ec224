//! Client-side limits over real sockets: headers that never finish, a body
//! that trickles, idle keep-alive connections, overload, connection caps, and
//! readiness during a graceful shutdown. Timeouts are configured short so the
//! tests stay fast; the bounds checked leave room for a loaded machine.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common;
use common::{Gateway, assert_error_shape, standard_config, start_mock};

/// Reads until the gateway closes the connection (or resets it), or `until`.
/// Returns what was read, and whether it was closed by then.
async fn read_until_closed(stream: &mut TcpStream, until: tokio::time::Instant) -> (Vec<u8>, bool) {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(until, stream.read(&mut buf)).await {
            Err(_) => return (received, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (received, true),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// Splits a raw HTTP/1.1 response into its status, head and JSON body.
fn parse_response(raw: &[u8]) -> (u16, String, Value) {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {text:?}"));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {body:?}"));
    (status, head.to_ascii_lowercase(), body)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::test]
async fn slowloris_connections_are_closed_at_the_header_timeout_while_others_are_served() {
    let header_timeout = Duration::from_millis(1_000);
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(
        mock,
        &format!("[server]\nheader_read_timeout_ms = {}\n", header_timeout.as_millis()),
    ))
    .await;

    let mut held = Vec::new();
    for _ in 0..500 {
        let mut stream = TcpStream::connect(gateway.address()).await.unwrap();
        let opened = tokio::time::Instant::now();
        stream
            .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        held.push((stream, opened));
    }

    let sent = Instant::now();
    gateway.assert_still_serving().await;
    let latency = sent.elapsed();
    println!("a chat request made while 500 connections held unfinished headers took {latency:?}");

    let closes = held.into_iter().map(|(mut stream, opened)| async move {
        let (answer, closed) = read_until_closed(&mut stream, opened + header_timeout + Duration::from_secs(2)).await;
        (answer, closed, opened.elapsed())
    });
    let closes = futures_util::future::join_all(closes).await;
    let slowest = closes.iter().map(|(_, _, after)| *after).max().unwrap();
    println!("all 500 were closed, the last {slowest:?} after it opened (header timeout {header_timeout:?})");
    for (answer, closed, after) in &closes {
        assert!(closed, "a connection was still open {after:?} after it opened");
        assert!(
            *after >= header_timeout - Duration::from_millis(50),
            "closed before the header timeout, after {after:?}"
        );
        let (status, head, body) = parse_response(answer);
        assert_eq!(status, 408, "{head}");
        assert!(head.contains("connection: close"), "{head}");
        assert_eq!(assert_error_shape(&body)["code"], "request_timeout");
    }
    gateway.assert_still_serving().await;
}

/// Sends a chat request head announcing a 100-byte body, then one body byte
/// every `every`, and returns the gateway's answer and when it came, counted
/// from the first body byte.
async fn trickle_body(gateway: &Gateway, every: Duration) -> (u16, String, Value, Duration) {
    let mut stream = TcpStream::connect(gateway.address()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        gateway.api_key
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            if writer.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let mut answered_after = None;
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(until, reader.read(&mut buf)).await {
            Err(_) => panic!("no answer within 10 s; got {:?}", String::from_utf8_lossy(&answer)),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answered_after.get_or_insert(started.elapsed());
                answer.extend_from_slice(&buf[..n]);
            }
        }
    }
    trickle.abort();
    let (status, head, body) = parse_response(&answer);
    (status, head, body, answered_after.unwrap())
}

#[tokio::test]
async fn a_trickled_body_gets_408_at_the_idle_timeout_and_a_slow_one_at_the_overall_cap() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(
        mock,
        "[server]\nbody_idle_timeout_ms = 500\nbody_timeout_ms = 2000\n",
    ))
    .await;

    let (status, head, body, after) = trickle_body(&gateway, Duration::from_secs(1)).await;
    println!("a body at 1 byte/s was answered after {after:?} (idle timeout 500 ms)");
    assert_eq!(status, 408, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "request_timeout");
    assert!(head.contains("connection: close"), "{head}");
    assert!(
        after >= Duration::from_millis(450) && after < Duration::from_millis(1_500),
        "cut off at the idle timeout, not after {after:?}"
    );

    let (status, _, body, after) = trickle_body(&gateway, Duration::from_millis(200)).await;
    println!("a body at 5 bytes/s was answered after {after:?} (overall cap 2000 ms)");
    assert_eq!(status, 408, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("2000 ms"), "{body}");
    assert!(
        after >= Duration::from_millis(1_900) && after < Duration::from_millis(3_000),
        "cut off at the overall cap, not after {after:?}"
    );
    gateway.assert_still_serving().await;
}

/// Sends `GET /healthz` on `stream` and reads the whole answer.
async fn get_health(stream: &mut TcpStream) {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"\r\n\r\nok") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed before answering: {:?}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_configured_time() {
    let keep_alive = Duration::from_millis(1_000);
    let mock = start_mock(Default::default()).await;
    // A header timeout far longer, to tell the two apart.
    let gateway = Gateway::start(&standard_config(
        mock,
        "[server]\nkeep_alive_timeout_ms = 1000\nheader_read_timeout_ms = 8000\n",
    ))
    .await;
    let mut stream = TcpStream::connect(gateway.address()).await.unwrap();
    get_health(&mut stream).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    get_health(&mut stream).await;
    let idle_from = tokio::time::Instant::now();
    let (rest, closed) = read_until_closed(&mut stream, idle_from + keep_alive + Duration::from_secs(2)).await;
    let after = idle_from.elapsed();
    println!("the idle connection was closed {after:?} after its last answer (keep-alive timeout {keep_alive:?})");
    assert!(closed, "still open {after:?} after the last answer");
    assert!(rest.is_empty(), "nothing is sent to an idle connection: {rest:?}");
    assert!(
        after >= keep_alive - Duration::from_millis(50),
        "closed after {after:?}, before the keep-alive timeout"
    );
}

#[tokio::test]
async fn past_max_in_flight_requests_get_503_at_once_and_admitted_ones_keep_their_latency() {
    let upstream_latency_ms = 400;
    let mock = start_mock(tollgate_mock_upstream::MockOptions {
        latency_ms: upstream_latency_ms,
        ..Default::default()
    })
    .await;
    let gateway = Gateway::start(&standard_config(
        mock,
        "[server]\nmax_in_flight = 4\nshed_retry_after_secs = 2\n",
    ))
    .await;
    let chat = json!({"model": "mock/small", "messages": [{"role": "user", "content": "busy?"}]});

    // The upstream's own latency, asked directly.
    let mut direct = Vec::new();
    for _ in 0..3 {
        let sent = Instant::now();
        let response = gateway
            .http
            .post(format!("http://{mock}/v1/chat/completions"))
            .json(&json!({"model": "small", "messages": [{"role": "user", "content": "busy?"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        direct.push(sent.elapsed());
    }
    let upstream = *direct.iter().max().unwrap();

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let run_until = Instant::now() + Duration::from_secs(4);
    let clients = (0..16).map(|_| {
        let client = client.clone();
        let url = format!("{}/v1/chat/completions", gateway.url);
        let key = gateway.api_key.clone();
        let chat = chat.clone();
        async move {
            let (mut admitted, mut shed) = (Vec::new(), Vec::new());
            while Instant::now() < run_until {
                let sent = Instant::now();
                let response = client.post(&url).bearer_auth(&key).json(&chat).send().await.unwrap();
                let status = response.status().as_u16();
                let retry_after = response.headers().get("retry-after").cloned();
                let body: Value = response.json().await.unwrap();
                let took = sent.elapsed();
                match status {
                    200 => admitted.push(took),
                    503 => {
                        assert_eq!(assert_error_shape(&body)["code"], "gateway_overloaded");
                        assert_eq!(retry_after.unwrap(), "2");
                        shed.push(took);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    other => panic!("unexpected {other}: {body}"),
                }
            }
            (admitted, shed)
        }
    });
    let results = futures_util::future::join_all(clients).await;
    let mut admitted: Vec<Duration> = results.iter().flat_map(|(a, _)| a.clone()).collect();
    let mut shed: Vec<Duration> = results.iter().flat_map(|(_, s)| s.clone()).collect();
    admitted.sort();
    shed.sort();
    assert!(admitted.len() >= 10, "too few admitted to judge: {}", admitted.len());
    assert!(!shed.is_empty(), "16 clients against max_in_flight = 4 must be shed");
    let p99 = percentile(&admitted, 0.99);
    let shed_max = *shed.last().unwrap();
    println!(
        "overload: upstream {upstream:?}; {} admitted, p50 {:?} p99 {p99:?}; {} shed, p50 {:?} max {shed_max:?}",
        admitted.len(),
        percentile(&admitted, 0.5),
        shed.len(),
        percentile(&shed, 0.5),
    );
    assert!(
        p99 <= upstream * 2,
        "admitted p99 {p99:?} is over twice the upstream's {upstream:?}"
    );
    // Shed at once, never queued behind an admitted request (which would
    // take at least the upstream's latency); the margin below that is for a
    // loaded test machine.
    assert!(
        shed_max < upstream,
        "a shed request waited {shed_max:?}, as long as the upstream ({upstream:?})"
    );
    gateway.assert_still_serving().await;
}

/// Opens connections (each asking `/healthz`) until one is refused; checks
/// the refusal and that a place frees up when the others close.
async fn refused_past_the_cap(server_config: &str, code: &str, cap: usize) {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, &format!("[server]\n{server_config}\n"))).await;
    // The harness's client may hold a connection from its start-up probes,
    // so the refusal can come before the cap's worth of these.
    let mut held = Vec::new();
    let mut refused = None;
    for _ in 0..cap + 2 {
        let mut stream = TcpStream::connect(gateway.address()).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 2048];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        let answer = String::from_utf8_lossy(&buf[..n]).to_string();
        if answer.starts_with("HTTP/1.1 503") {
            refused = Some((stream, buf[..n].to_vec()));
            break;
        }
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        held.push(stream);
    }
    let (mut stream, mut answer) = refused.expect("a connection past the cap is refused");
    assert!(held.len() <= cap, "{} connections were let in", held.len());
    let (rest, closed) = read_until_closed(&mut stream, tokio::time::Instant::now() + Duration::from_secs(3)).await;
    assert!(closed, "a refused connection is closed");
    answer.extend(rest);
    let (_, head, body) = parse_response(&answer);
    assert!(head.contains("retry-after: 1"), "{head}");
    assert_eq!(assert_error_shape(&body)["code"], code);

    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut again = TcpStream::connect(gateway.address()).await.unwrap();
    get_health(&mut again).await;
}

#[tokio::test]
async fn connections_past_the_per_address_cap_get_503_and_are_closed() {
    refused_past_the_cap("max_connections_per_ip = 3", "max_connections_per_ip", 3).await;
}

#[tokio::test]
async fn connections_past_the_total_cap_get_503_and_are_closed() {
    refused_past_the_cap("max_connections = 3\nmax_connections_per_ip = 0", "max_connections", 3).await;
}

#[tokio::test]
async fn readyz_turns_503_at_sigterm_while_a_running_stream_finishes() {
    let mock = start_mock(Default::default()).await;
    let mut gateway = Gateway::start(&standard_config(mock, "")).await;
    let ready = gateway
        .http
        .get(format!("{}/readyz", gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.json::<Value>().await.unwrap()["status"], "ready");

    let mut stream = gateway
        .post("/v1/chat/completions")
        .json(&json!({
            "model": "mock/small",
            "stream": true,
            "messages": [{"role": "user", "content": "take your time"}],
            "mock": {"words": 12, "chunk_delay_ms": 150},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut streamed = String::from_utf8(stream.chunk().await.unwrap().unwrap().to_vec()).unwrap();

    // A connection opened before the shutdown whose request comes after it.
    let mut early = TcpStream::connect(gateway.address()).await.unwrap();
    // Each probe on a new connection, as a load balancer's would be.
    let probe = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let readyz = format!("{}/readyz", gateway.url);
    let signalled = Instant::now();
    gateway.signal_term();
    let (not_ready_after, body) = loop {
        let response = probe.get(&readyz).send().await.unwrap();
        if response.status() == 503 {
            break (signalled.elapsed(), response.json::<Value>().await.unwrap());
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(2),
            "/readyz still 200 after SIGTERM"
        );
    };
    println!("/readyz answered 503 {not_ready_after:?} after SIGTERM");
    assert!(not_ready_after <= Duration::from_millis(100), "{not_ready_after:?}");
    assert_eq!(assert_error_shape(&body)["code"], "not_ready");

    let alive = probe.get(format!("{}/healthz", gateway.url)).send().await.unwrap();
    assert_eq!(alive.status(), 200, "liveness holds during the drain");
    let refused = probe
        .post(format!("{}/v1/chat/completions", gateway.url))
        .bearer_auth(&gateway.api_key)
        .json(&json!({"model": "mock/small", "messages": [{"role": "user", "content": "late"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(assert_error_shape(&refused)["code"], "shutting_down");

    // It is answered, not closed unanswered as hyper's graceful shutdown
    // would close a connection that had sent nothing yet.
    let late = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
        gateway.api_key
    );
    early.write_all(late.as_bytes()).await.unwrap();
    let (answer, closed) = read_until_closed(&mut early, tokio::time::Instant::now() + Duration::from_secs(5)).await;
    assert!(closed, "the early connection closes after its answer");
    let (status, head, body) = parse_response(&answer);
    assert_eq!(status, 503, "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert_eq!(assert_error_shape(&body)["code"], "shutting_down");

    while let Some(chunk) = stream.chunk().await.unwrap() {
        streamed.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let finished = signalled.elapsed();
    assert!(
        streamed.trim_end().ends_with("data: [DONE]"),
        "the stream finishes: {streamed}"
    );
    let exit = gateway.wait_exit(Duration::from_secs(10)).await;
    println!(
        "the stream finished {finished:?} after SIGTERM; the process exited {:?} after SIGTERM",
        signalled.elapsed()
    );
    assert!(exit.success(), "graceful shutdown exits 0, got {exit}");
}
