//! Usage events, read from the request log by each sink's dispatcher, against
//! the real binary: a sink outage loses nothing, a kill -9 loses nothing, a
//! graceful restart hands the sink over at once, events reconcile with the
//! ledger, NATS JetStream receives one event per request, and the default file
//! sink writes JSON lines.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use common::nats::Delivered;
use common::{Gateway, PgSchema, nanos, standard_config, start_mock};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// A CloudEvents HTTP sink that can be switched off (503) and on.
#[derive(Default)]
pub(crate) struct TestSink {
    pub(crate) up: AtomicBool,
    refused: AtomicUsize,
    received: Mutex<Vec<Value>>,
}

impl TestSink {
    pub(crate) async fn start(up: bool) -> (Arc<TestSink>, SocketAddr) {
        let sink = Arc::new(TestSink::default());
        sink.up.store(up, Ordering::SeqCst);
        let app = axum::Router::new()
            .route("/events", post(receive))
            .with_state(sink.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (sink, address)
    }

    fn events(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }

    /// Waits until events for all of `ids` arrived; returns them by id.
    pub(crate) async fn wait_for(&self, ids: &BTreeSet<String>, within: Duration) -> BTreeMap<String, Vec<Value>> {
        let deadline = Instant::now() + within;
        loop {
            let mut by_id: BTreeMap<String, Vec<Value>> = BTreeMap::new();
            for event in self.events() {
                by_id
                    .entry(event["id"].as_str().unwrap().to_string())
                    .or_default()
                    .push(event);
            }
            if ids.iter().all(|id| by_id.contains_key(id)) || Instant::now() > deadline {
                return by_id;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn receive(State(sink): State<Arc<TestSink>>, headers: HeaderMap, body: String) -> StatusCode {
    if !sink.up.load(Ordering::SeqCst) {
        sink.refused.fetch_add(1, Ordering::SeqCst);
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    assert_eq!(headers["content-type"], "application/cloudevents+json");
    let event: Value = serde_json::from_str(&body).unwrap();
    sink.received.lock().unwrap().push(event);
    StatusCode::ACCEPTED
}

pub(crate) fn metering_config(sinks: &str) -> String {
    format!(
        r#"
[metering]
retry_base_ms = 100
retry_max_ms = 400
lease_ms = 1000
linger_ms = 5
poll_interval_ms = 200
{sinks}
"#
    )
}

pub(crate) fn http_sink(sink: SocketAddr) -> String {
    format!("[[metering.sinks]]\nkind = \"http\"\nurl = \"http://{sink}/events\"\nmode = \"structured\"\n")
}

/// Sends `count` requests, `concurrency` at a time; returns the request ids.
pub(crate) async fn send_requests(gateway: &Gateway, count: usize, concurrency: usize) -> BTreeSet<String> {
    let requests = (0..count).map(|i| {
        gateway
            .post("/v1/chat/completions")
            .json(&json!({"model": "mock/small", "messages": [{"role": "user", "content": format!("request {i}")}]}))
            .send()
    });
    let responses: Vec<_> = futures_util::stream::iter(requests)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    responses
        .into_iter()
        .map(|response| {
            let response = response.unwrap();
            assert_eq!(response.status(), 200);
            response.headers()["x-request-id"].to_str().unwrap().to_string()
        })
        .collect()
}

fn spent(gateway: &Gateway) -> i64 {
    100_000_000_000 - nanos(gateway.wallet()["posted_usd"].as_str().unwrap())
}

fn cost_nano(event: &Value) -> i64 {
    let data = &event["data"];
    assert_eq!(
        nanos(data["cost"].as_str().unwrap()),
        data["cost_nano"].as_i64().unwrap()
    );
    data["cost_nano"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sink_outage_loses_nothing_and_events_reconcile_with_the_ledger() {
    let mock = start_mock(Default::default()).await;
    let (sink, address) = TestSink::start(false).await;
    let gateway = Gateway::start(&standard_config(mock, &metering_config(&http_sink(address)))).await;

    let ids = send_requests(&gateway, 500, 16).await;
    assert_eq!(ids.len(), 500);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(sink.events().is_empty(), "the sink was down");
    assert!(
        sink.refused.load(Ordering::SeqCst) > 0,
        "delivery was attempted during the outage"
    );

    sink.up.store(true, Ordering::SeqCst);
    let by_id = sink.wait_for(&ids, Duration::from_secs(60)).await;
    let missing: Vec<_> = ids.iter().filter(|id| !by_id.contains_key(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} events never arrived, e.g. {:?}",
        missing.len(),
        missing.first()
    );
    assert_eq!(by_id.len(), 500, "only events of this run's requests");
    for (id, copies) in &by_id {
        assert!(copies.iter().all(|c| c == &copies[0]), "redeliveries of {id} differ");
        let event = &copies[0];
        assert_eq!(event["type"], "dev.tollgate.usage.v1");
        assert_eq!(event["subject"], gateway.workspace_id.as_str());
        assert_eq!(event["data"]["request_id"], id.as_str());
        assert_eq!(event["data"]["provider"], "mock");
        assert_eq!(event["data"]["outcome"], "success");
    }
    let event_total: i64 = by_id.values().map(|copies| cost_nano(&copies[0])).sum();
    assert!(event_total > 0);
    assert_eq!(event_total, spent(&gateway), "Σ event costs = Σ ledger posts");
    let verified = gateway.admin(&["ledger-verify"]);
    assert!(verified.contains("verified"), "{verified}");
}

/// Settles `requests` while the sink is down, stops the gateway with `stop`,
/// brings the sink up and restarts: every event arrives within `within`, and
/// the events reconcile with the ledger.
async fn events_survive_a_restart(lease_ms: u64, requests: usize, stop: fn(&mut Gateway), within: Duration) {
    let mock = start_mock(Default::default()).await;
    let (sink, address) = TestSink::start(false).await;
    let metering = metering_config(&http_sink(address)).replace("lease_ms = 1000", &format!("lease_ms = {lease_ms}"));
    let mut gateway = Gateway::start(&standard_config(mock, &metering)).await;
    let ids = send_requests(&gateway, requests, 8).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(sink.events().is_empty());
    stop(&mut gateway);

    sink.up.store(true, Ordering::SeqCst);
    let restarted = gateway.restart().await;
    let by_id = sink.wait_for(&ids, within).await;
    assert_eq!(
        by_id.keys().cloned().collect::<BTreeSet<_>>(),
        ids,
        "every event after the restart"
    );
    let event_total: i64 = by_id.values().map(|copies| cost_nano(&copies[0])).sum();
    assert_eq!(event_total, spent(&restarted));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_survive_a_gateway_crash() {
    // kill -9: the dead gateway's cursor lease (1 s here) runs out first.
    events_survive_a_restart(1_000, 60, Gateway::kill, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_restart_hands_the_sink_over_at_once() {
    // A lease far longer than the test waits: only the release on shutdown lets
    // the restarted gateway deliver in time.
    events_survive_a_restart(600_000, 30, Gateway::terminate, Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_share_a_postgres_ledger_and_its_events() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let (sink, address) = TestSink::start(true).await;
    let config = format!(
        "database_url = \"{}\"\n{}",
        schema.url,
        standard_config(mock, &metering_config(&http_sink(address)))
    );
    let first = Gateway::start(&config).await;
    let second = first.another().await;
    let mut ids = send_requests(&first, 40, 8).await;
    ids.extend(send_requests(&second, 40, 8).await);
    let by_id = sink.wait_for(&ids, Duration::from_secs(30)).await;
    assert_eq!(by_id.keys().cloned().collect::<BTreeSet<_>>(), ids);
    let event_total: i64 = by_id.values().map(|copies| cost_nano(&copies[0])).sum();
    assert_eq!(event_total, spent(&first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nats_jetstream_receives_one_event_per_request() {
    let Some(nats) = common::nats::Nats::connect().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, &metering_config(&nats.sink()))).await;
    let ids = send_requests(&gateway, 25, 5).await;

    let delivered = nats
        .drain(|delivered| delivered.len() >= ids.len(), Duration::from_secs(30))
        .await;
    let mut seen = Vec::new();
    for Delivered { event, message_id } in delivered {
        assert_eq!(message_id.as_deref(), event["id"].as_str());
        seen.push(event["id"].as_str().unwrap().to_string());
    }
    assert_eq!(seen.len(), ids.len(), "one message per request");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_default_sink_writes_json_lines_and_the_schema_is_served() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[metering]\nlinger_ms = 5\n")).await;
    let ids = send_requests(&gateway, 5, 5).await;
    let path = gateway.dir.path().join("data").join("events").join("usage.jsonl");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        lines = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        if lines.len() >= ids.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen: BTreeSet<String> = lines.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(seen, ids);
    let schema_url = lines[0]["dataschema"].as_str().unwrap();
    assert!(schema_url.ends_with("/schemas/usage.v1.json"), "{schema_url}");
    let schema: Value = gateway.http.get(schema_url).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        schema["title"].as_str().unwrap(),
        "Tollgate usage event data (dev.tollgate.usage.v1, dev.tollgate.tool.call.v1, dev.tollgate.skill.run.v1)"
    );
}

/// kill -9 in the middle of sustained load, on SQLite and on Postgres: every
/// request that got its answer has its usage event after the restart, the
/// events add up to what the wallets were charged, and the books verify.
async fn kill_9_under_load_loses_no_answered_event(database_url: Option<String>) {
    let mock = start_mock(Default::default()).await;
    let (sink, address) = TestSink::start(true).await;
    let prefix = database_url.map_or_else(String::new, |url| format!("database_url = \"{url}\"\n"));
    let config = format!(
        "{prefix}{}",
        standard_config(
            mock,
            &format!(
                "{}\n[ledger]\nlease_ttl_secs = 1\n",
                metering_config(&http_sink(address))
            )
        )
    );
    let mut gateway = Gateway::start(&config).await;
    let answered = Arc::new(Mutex::new(BTreeSet::new()));
    let mut workers = Vec::new();
    for worker in 0..16 {
        let answered = answered.clone();
        let (http, url, key) = (gateway.http.clone(), gateway.url.clone(), gateway.api_key.clone());
        workers.push(tokio::spawn(async move {
            for i in 0.. {
                let body = json!({"model": "mock/small", "messages": [{"role": "user", "content": format!("w{worker} r{i}")}]});
                let sent = http
                    .post(format!("{url}/v1/chat/completions"))
                    .bearer_auth(&key)
                    .json(&body)
                    .send()
                    .await;
                let Ok(response) = sent else { return };
                let Some(id) = response.headers().get("x-request-id") else {
                    return;
                };
                let id = id.to_str().unwrap().to_string();
                // Answered means the whole body arrived.
                if response.status() == 200 && response.bytes().await.is_ok() {
                    answered.lock().unwrap().insert(id);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    gateway.kill();
    for worker in workers {
        worker.await.unwrap();
    }
    let answered = answered.lock().unwrap().clone();
    assert!(
        answered.len() > 50,
        "load ran before the kill: {} answered",
        answered.len()
    );

    let restarted = gateway.restart().await;
    let by_id = sink.wait_for(&answered, Duration::from_secs(30)).await;
    let missing: Vec<_> = answered.iter().filter(|id| !by_id.contains_key(*id)).collect();
    assert!(missing.is_empty(), "answered without a usage event: {missing:?}");
    // Settled but cut off before the answer arrived: billed and evented too.
    // Those events may still be on their way once the answered ones are in.
    let charged = spent(&restarted);
    let deadline = Instant::now() + Duration::from_secs(30);
    let event_total = loop {
        let mut first_copies: BTreeMap<String, Value> = BTreeMap::new();
        for event in sink.events() {
            first_copies
                .entry(event["id"].as_str().unwrap().to_string())
                .or_insert(event);
        }
        let total: i64 = first_copies.values().map(cost_nano).sum();
        if total == charged || Instant::now() > deadline {
            break total;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(event_total, charged, "events add up to the charges");
    let verified = restarted.admin(&["ledger-verify"]);
    assert!(verified.contains("verified"), "{verified}");
    eprintln!("{} answered before kill -9, all with events", answered.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_no_answered_event_on_sqlite() {
    kill_9_under_load_loses_no_answered_event(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_no_answered_event_on_postgres() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    kill_9_under_load_loses_no_answered_event(Some(schema.url.clone())).await;
}
