//! The wallet ledger against the real binary, on SQLite and on real Postgres:
//! no overspend under concurrency (one gateway or two sharing Postgres), exact
//! reconciliation, frozen prices across a reload, settled streams, and recovery
//! after kill -9.

use crate::common;

use std::time::Duration;

use common::{Gateway, PgSchema, mock_chat_requests, nanos, standard_config, start_mock};
use serde_json::{Value, json};

/// `database_url` for the backend under test, plus the guard that drops the
/// Postgres schema afterwards. `None` when Postgres is unavailable (skip).
async fn backend(postgres: bool) -> Option<(String, Option<PgSchema>)> {
    if !postgres {
        return Some((String::new(), None));
    }
    let schema = PgSchema::create().await?;
    Some((format!("database_url = \"{}\"\n", schema.url), Some(schema)))
}

fn cost_of(body: &Value) -> i64 {
    let exact = nanos(body["service"]["cost_usd"].as_str().unwrap());
    let shown = (body["usage"]["cost"].as_f64().unwrap() * 1e9).round() as i64;
    assert_eq!(shown, exact, "usage.cost and service.cost_usd disagree: {body}");
    exact
}

async fn no_overspend_one_gateway(postgres: bool) {
    no_overspend(postgres, 1, SMALL_WALLET).await
}

async fn no_overspend_one_gateway_with_leases(postgres: bool) {
    no_overspend(postgres, 1, LEASED_WALLET).await
}

/// Each request holds ≈ 0.000089 USD and costs 0.000013 USD, so 0.003 USD
/// cannot pay for all 300 (3.9 mUSD) and at most ~33 holds fit at once. It is
/// reserved request by request (too small to lease).
const SMALL_WALLET: (&str, u64, Option<u64>) = ("0.003", 20, None);
/// Each request holds ≈ 0.00013 USD and costs ≈ 0.000064 USD, so 0.015 USD is
/// leased at first (it holds more than 64 requests' worth), cannot pay for
/// all 300 (19 mUSD), and is reserved directly once nearly empty.
const LEASED_WALLET: (&str, u64, Option<u64>) = ("0.015", 40, Some(40));

/// 300 concurrent requests against a wallet that cannot pay for all of them,
/// spread over `processes` gateways sharing one database.
async fn no_overspend(postgres: bool, processes: usize, (credit, max_tokens, words): (&str, u64, Option<u64>)) {
    let Some((database_url, _schema)) = backend(postgres).await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let first = Gateway::start_with(&format!("{database_url}{}", standard_config(mock, "")), credit).await;
    let mut gateways = vec![first];
    for _ in 1..processes {
        let next = gateways[0].another().await;
        gateways.push(next);
    }
    let initial = nanos(gateways[0].wallet()["posted_usd"].as_str().unwrap());

    let mut tasks = Vec::new();
    for i in 0..300 {
        let gateway = &gateways[i % gateways.len()];
        let request = gateway.post("/v1/chat/completions").json(&json!({
            "model": "mock/small",
            "messages": [{"role": "user", "content": "count me in please"}],
            "max_tokens": max_tokens,
            "mock": match words {
                Some(words) => json!({"latency_ms": 50, "words": words}),
                None => json!({"latency_ms": 50}),
            },
        }));
        tasks.push(tokio::spawn(async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }));
    }
    let mut ok = 0u64;
    let mut refused = 0;
    let mut billed = 0i64;
    for task in tasks {
        let (status, body) = task.await.unwrap();
        match status {
            200 => {
                ok += 1;
                billed += cost_of(&body);
            }
            402 => {
                refused += 1;
                assert_eq!(body["error"]["code"], "insufficient_balance", "{body}");
            }
            other => panic!("unexpected status {other}: {body}"),
        }
    }
    eprintln!("{processes} gateway(s): {ok} answered, {refused} refused with 402, {billed} nano-USD billed");
    assert!(
        ok > 0 && refused > 0,
        "expected both successes and refusals: {ok} ok, {refused} refused"
    );
    assert_eq!(
        mock_chat_requests(mock).await,
        ok,
        "every upstream call is a 200, and no 402 reached the upstream"
    );

    let wallet = gateways[0].settled_wallet().await;
    assert_eq!(wallet["pending_usd"], "0.000000000", "{wallet}");
    let posted = nanos(wallet["posted_usd"].as_str().unwrap());
    assert!(nanos(wallet["available_usd"].as_str().unwrap()) >= 0);
    assert_eq!(
        initial - posted,
        billed,
        "the wallet decrease equals the sum of usage.cost exactly"
    );
    // ledger-verify checks balance = credits − posts, so the posts sum to the same amount.
    let verified = gateways[0].admin(&["ledger-verify"]);
    assert!(verified.contains("verified"), "{verified}");
}

/// A request in flight is billed at its own snapshot; new requests use the new price.
async fn price_change_mid_flight(postgres: bool) {
    let Some((database_url, _schema)) = backend(postgres).await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&format!("{database_url}{}", standard_config(mock, ""))).await;
    let ask = |latency: u64| {
        gateway.post("/v1/chat/completions").json(&json!({
            "model": "mock/small", "messages": [{"role": "user", "content": "price me"}], "mock": {"latency_ms": latency}
        }))
    };
    let in_flight = tokio::spawn(ask(1500).send());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let config = std::fs::read_to_string(&gateway.config_path).unwrap();
    let raised = config.replacen("input_price_per_mtok = \"0.50\"", "input_price_per_mtok = \"5.00\"", 1);
    assert_ne!(config, raised);
    std::fs::write(&gateway.config_path, raised).unwrap();
    gateway.hangup();
    let mut listed = Value::Null;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        listed = gateway.model("mock/small").await;
        if listed["pricing"]["input_per_mtok"] == "5.000000" {
            break;
        }
    }
    assert_eq!(
        listed["pricing"]["input_per_mtok"], "5.000000",
        "the reload took effect: {listed}"
    );

    let after: Value = ask(0).send().await.unwrap().json().await.unwrap();
    let before: Value = in_flight.await.unwrap().unwrap().json().await.unwrap();
    // Both: prompt = 2 words + 4 = 6 tokens, completion = "You said: price me" = 4 tokens.
    assert_eq!(cost_of(&before), 6 * 500 + 4 * 1500, "old price: {before}");
    assert_eq!(cost_of(&after), 6 * 5000 + 4 * 1500, "new price: {after}");
    assert_ne!(
        before["service"]["pricing_snapshot_id"],
        after["service"]["pricing_snapshot_id"]
    );
}

/// Cut and abandoned streams are settled with 0 < cost ≤ reservation; no hold is left.
async fn streams_are_settled(postgres: bool) {
    let Some((database_url, _schema)) = backend(postgres).await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&format!("{database_url}{}", standard_config(mock, ""))).await;

    let (status, frames) = gateway
        .chat_stream(
            json!({"model": "mock/small", "stream": true, "messages": [{"role": "user", "content": "cut me off"}],
            "mock": {"cut_after": 3}}),
        )
        .await;
    assert_eq!(status, 200);
    let last: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    let cut_id = last["service"]["request_id"].as_str().unwrap().to_string();

    let response = gateway
        .post("/v1/chat/completions")
        .json(
            &json!({"model": "mock/small", "stream": true, "messages": [{"role": "user", "content": "long one"}],
            "mock": {"words": 400, "chunk_delay_ms": 10}}),
        )
        .send()
        .await
        .unwrap();
    let abandoned_id = response.headers()["x-request-id"].to_str().unwrap().to_string();
    let mut body = response;
    let _ = body.chunk().await.unwrap();
    let _ = body.chunk().await.unwrap();
    drop(body);

    for (request_id, outcome) in [(cut_id, "upstream_unreachable"), (abandoned_id, "client_disconnected")] {
        let mut row = None;
        for _ in 0..100 {
            let output = std::process::Command::new(common::BIN)
                .args(["admin", "request", &request_id, "--config"])
                .arg(&gateway.config_path)
                .output()
                .unwrap();
            if output.status.success() {
                row = Some(serde_json::from_slice::<Value>(&output.stdout).unwrap());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let row = row.unwrap_or_else(|| panic!("no request log row for {request_id}"));
        assert_eq!(row["outcome"], outcome, "{row}");
        let cost = nanos(row["cost_usd"].as_str().unwrap());
        let reserved = nanos(row["reserved_usd"].as_str().unwrap());
        assert!(cost > 0 && cost <= reserved, "0 < {cost} ≤ {reserved}: {row}");
        assert_eq!(row["streamed"], true);
        assert!(row["pricing_snapshot_id"].is_i64(), "{row}");
    }
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
    assert!(gateway.admin(&["ledger-verify"]).contains("verified"));
}

/// kill -9 with 100 requests in flight; after restart and the expiry sweep no
/// hold remains and the books balance.
async fn survives_kill_9(postgres: bool) {
    let Some((database_url, _schema)) = backend(postgres).await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let extra = "[ledger]\nreservation_ttl_secs = 2\nsweep_interval_ms = 200\n";
    let mut gateway = Gateway::start(&format!("{database_url}{}", standard_config(mock, extra))).await;
    let mut in_flight = Vec::new();
    for _ in 0..100 {
        let request = gateway.post("/v1/chat/completions").json(&json!({
            "model": "mock/small", "messages": [{"role": "user", "content": "hang on"}], "mock": {"latency_ms": 10_000}
        }));
        in_flight.push(tokio::spawn(async move {
            request.send().await.map(|r| r.status().as_u16())
        }));
    }
    for _ in 0..100 {
        if mock_chat_requests(mock).await == 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        mock_chat_requests(mock).await,
        100,
        "all 100 requests reached the upstream"
    );
    // Holds live in the gateway's memory and reach the wallet's row with the
    // writer's next commit, which is not waited on: poll while the requests
    // are still upstream (they stay 10 s).
    let mut pending = String::new();
    for _ in 0..30 {
        pending = gateway.wallet()["pending_usd"].as_str().unwrap().to_string();
        if nanos(&pending) != 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(nanos(&pending), 0, "holds are pending while requests are in flight");

    gateway.kill();
    for request in in_flight {
        assert!(request.await.unwrap().is_err(), "the killed gateway answered nothing");
    }
    let restarted = gateway.restart().await;
    let mut wallet = Value::Null;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        wallet = restarted.wallet();
        if wallet["pending_usd"] == "0.000000000" {
            break;
        }
    }
    assert_eq!(
        wallet["pending_usd"], "0.000000000",
        "the sweeper released every expired hold: {wallet}"
    );
    assert_eq!(
        wallet["posted_usd"], "100.000000000",
        "nothing was billed for requests that never answered"
    );
    assert!(restarted.admin(&["ledger-verify"]).contains("verified"));
}

/// Credits are journaled, and ledger-verify notices a wallet that disagrees
/// with its journal.
async fn credit_and_verify(postgres: bool) {
    let Some((database_url, schema)) = backend(postgres).await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start_with(&format!("{database_url}{}", standard_config(mock, "")), "1").await;
    gateway.admin(&["credit", "--workspace", &gateway.workspace_id, "--usd", "0.000000007"]);
    assert_eq!(gateway.wallet()["posted_usd"], "1.000000007");
    assert!(gateway.admin(&["ledger-verify"]).contains("verified"));

    // Tamper with the wallet behind the journal's back.
    let url = match &schema {
        Some(schema) => schema.url.clone(),
        None => format!(
            "sqlite://{}",
            gateway.dir.path().join("data").join("tollgate.db").display()
        ),
    };
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    sqlx::query("UPDATE wallets SET balance_nano = balance_nano + 1")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let output = std::process::Command::new(common::BIN)
        .args(["admin", "ledger-verify", "--config"])
        .arg(&gateway.config_path)
        .output()
        .unwrap();
    assert!(!output.status.success(), "drift must fail ledger-verify");
    assert!(String::from_utf8_lossy(&output.stdout).contains("DRIFT"));
}

/// A hold that expired while its request was still running is released by the
/// sweeper; the late settle then fails cleanly: nothing billed, cost shown 0.
async fn late_settle_after_expiry(postgres: bool) {
    let Some((database_url, _schema)) = backend(postgres).await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let extra = "[ledger]\nreservation_ttl_secs = 1\nsweep_interval_ms = 100\n";
    let gateway = Gateway::start(&format!("{database_url}{}", standard_config(mock, extra))).await;
    let (status, _, body) = gateway
        .chat(json!({"model": "mock/small", "messages": [{"role": "user", "content": "too slow"}], "mock": {"latency_ms": 2500}}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["service"]["cost_usd"], "0.000000000",
        "the expired hold was not billed: {body}"
    );
    let request_id = body["service"]["request_id"].as_str().unwrap();
    let row: Value = serde_json::from_str(&gateway.admin(&["request", request_id])).unwrap();
    assert!(row["outcome"].as_str().unwrap().contains("not billed"), "{row}");
    assert_eq!(row["cost_usd"], "0.000000000");
    let wallet = gateway.settled_wallet().await;
    assert_eq!(wallet["posted_usd"], "100.000000000", "{wallet}");
    assert_eq!(wallet["pending_usd"], "0.000000000", "{wallet}");
    assert!(gateway.admin(&["ledger-verify"]).contains("verified"));
}

macro_rules! on_both_backends {
    ($($name:ident => $body:expr;)*) => {
        mod sqlite {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread")] async fn $name() { $body(false).await })*
        }
        mod postgres {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread")] async fn $name() { $body(true).await })*
        }
    };
}

on_both_backends! {
    concurrent_requests_never_overspend => no_overspend_one_gateway;
    concurrent_requests_never_overspend_with_leases => no_overspend_one_gateway_with_leases;
    prices_are_frozen_per_request => price_change_mid_flight;
    cut_and_abandoned_streams_are_settled => streams_are_settled;
    kill_9_leaves_no_pending_holds => survives_kill_9;
    credits_are_journaled_and_drift_is_detected => credit_and_verify;
    a_late_settle_after_expiry_bills_nothing => late_settle_after_expiry;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_gateways_on_one_postgres_never_overspend() {
    no_overspend(true, 2, SMALL_WALLET).await
}

#[tokio::test(flavor = "multi_thread")]
async fn two_gateways_on_one_postgres_never_overspend_with_leases() {
    no_overspend(true, 2, LEASED_WALLET).await
}
