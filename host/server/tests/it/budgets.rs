//! Spend controls against the real gateway (docs/billing.md, "Spend
//! controls"): a key's daily budget refuses with 402 `budget_exceeded`
//! before any upstream call and passes again the next UTC day; its alert
//! thresholds reach the sink once each; budgets need a plan with spend
//! controls; and two gateways on one Postgres never spend past a budget
//! together.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Gateway, PgSchema, mock_chat_requests, nanos, standard_config, start_mock};
use crate::control_plane::helpers::method;

/// A request whose worst case (1,000 output tokens at 1.50 USD/Mtok, plus
/// its body as input) is about 0.00157 USD and whose answer (1,000 words)
/// bills about 0.00150 USD.
fn costly() -> Value {
    json!({"model": "mock/small", "max_tokens": 1000, "mock": {"words": 1000},
           "messages": [{"role": "user", "content": "spend"}]})
}

fn cheap() -> Value {
    json!({"model": "mock/small", "max_tokens": 10, "mock": {"words": 3},
           "messages": [{"role": "user", "content": "spend a little"}]})
}

fn set_clock(path: &Path, at: &str) {
    std::fs::write(path, at).unwrap();
}

fn clocked(clock: &Path, plans: &str) -> String {
    format!(
        "[billing]\ntest_clock_file = \"{}\"\n{plans}[metering]\nlinger_ms = 5\n",
        clock.display()
    )
}

fn posted(gateway: &Gateway) -> i64 {
    nanos(gateway.wallet()["posted_usd"].as_str().unwrap())
}

async fn own_key_id(gateway: &Gateway) -> String {
    let keys = method(gateway, Some(&gateway.api_key), "keys.list", json!({}))
        .await
        .unwrap();
    keys["keys"][0]["key_id"].as_str().unwrap().to_string()
}

/// The budget threshold events in the gateway's default JSON-lines sink.
fn threshold_events(gateway: &Gateway) -> Vec<Value> {
    let path = gateway.dir.path().join("data").join("events").join("usage.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "dev.tollgate.budget.threshold.v1")
        .collect()
}

async fn wait_for_events(gateway: &Gateway, ids: &[String]) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = threshold_events(gateway);
        if ids.iter().all(|id| events.iter().any(|e| e["id"] == id.as_str())) {
            return events;
        }
        assert!(Instant::now() < deadline, "no events {ids:?} in {events:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_key_daily_budget_refuses_with_402_before_any_upstream_call_alerts_once_and_the_next_day_passes() {
    let mock = start_mock(Default::default()).await;
    let clock_dir = tempfile::tempdir().unwrap();
    let clock = clock_dir.path().join("now");
    set_clock(&clock, "2026-11-15T22:00:00Z");
    let plans = "[billing.plans.lab]\nspend_controls = true\n";
    let gateway = Gateway::start(&standard_config(mock, &clocked(&clock, plans))).await;
    let key = Some(gateway.api_key.as_str());
    let key_id = own_key_id(&gateway).await;
    let daily = json!({"scope": "key", "key_id": key_id, "period": "daily", "limit_usd": "0.01",
                       "alert_thresholds": [50, 80]});

    // Free has no spend controls: setting a budget names the plan.
    let (reason, message) = method(&gateway, key, "billing.limits.set", daily.clone())
        .await
        .unwrap_err();
    assert_eq!(reason, "FAILED_PRECONDITION", "{message}");
    assert!(message.contains("'free'"), "{message}");
    gateway.admin(&["plan", "set", "--workspace", &gateway.workspace_id, "--plan", "lab"]);
    // The gateway trusts a workspace's plan for a second.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let limits = method(&gateway, key, "billing.limits.set", daily).await.unwrap();
    let budget = &limits["keys"][0];
    assert_eq!(budget["key_id"], key_id.as_str(), "{limits}");
    assert_eq!(budget["limit_usd"], "0.01");
    assert_eq!(budget["period_start"], "2026-11-15T00:00:00Z");
    assert_eq!(budget["period_end"], "2026-11-16T00:00:00Z");
    assert_eq!(limits["workspace"], Value::Null);
    let budget_id = budget["budget_id"].as_str().unwrap().to_string();

    // Requests pass until the next one's worst case no longer fits.
    let mut passed = 0;
    let refused = loop {
        let before = (posted(&gateway), mock_chat_requests(mock).await);
        let response = gateway
            .post("/v1/chat/completions")
            .json(&costly())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let request_id = response.headers()["x-request-id"].to_str().unwrap().to_string();
        let body: Value = response.json().await.unwrap();
        if status == 200 {
            passed += 1;
            assert!(passed < 10, "the budget never refused");
            continue;
        }
        assert_eq!(status, 402, "{body}");
        assert_eq!(
            (posted(&gateway), mock_chat_requests(mock).await),
            before,
            "nothing went upstream and the wallet was not debited"
        );
        break (request_id, body);
    };
    // 6 × ~0.0015 billed; a 7th worst case of ~0.00157 does not fit 0.01.
    assert_eq!(passed, 6, "{refused:?}");
    let (request_id, body) = refused;
    let error = crate::common::assert_error_shape(&body);
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("billing_error"), Some("budget_exceeded"))
    );
    let message = error["message"].as_str().unwrap();
    for part in [
        key_id.as_str(),
        "daily budget",
        budget_id.as_str(),
        "0.01 USD",
        "2026-11-15",
        "spent",
    ] {
        assert!(message.contains(part), "the message names {part}: {message}");
    }
    let row: Value = serde_json::from_str(&gateway.admin(&["request", &request_id])).unwrap();
    assert_eq!(
        (row["outcome"].as_str(), row["status"].as_i64()),
        (Some("budget_exceeded"), Some(402)),
        "{row}"
    );
    assert_eq!(row["cost_usd"], "0.000000000", "{row}");

    // Another key of the workspace has no budget.
    let other = method(&gateway, key, "keys.create", json!({"name": "other"}))
        .await
        .unwrap();
    let response = gateway
        .http
        .post(format!("{}/v1/chat/completions", gateway.url))
        .bearer_auth(other["api_key"].as_str().unwrap())
        .json(&costly())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // 50% and 80% were crossed: one event each, however many requests follow.
    let ids: Vec<String> = [50, 80]
        .iter()
        .map(|p| format!("budget_{budget_id}_2026-11-15_{p}"))
        .collect();
    wait_for_events(&gateway, &ids).await;
    for _ in 0..5 {
        let (status, _, body) = gateway.chat(cheap()).await;
        assert_eq!(status, 200, "a small request still fits: {body}");
    }
    assert_eq!(gateway.chat(costly()).await.0, 402);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let events = threshold_events(&gateway);
    assert_eq!(events.len(), 2, "{events:?}");
    let eighty = events.iter().find(|e| e["id"] == ids[1].as_str()).unwrap();
    let data = &eighty["data"];
    assert_eq!(eighty["subject"], gateway.workspace_id.as_str());
    assert_eq!(data["budget_id"], budget_id.as_str(), "{data}");
    assert_eq!(data["key_id"], key_id.as_str());
    assert_eq!(data["workspace_id"], gateway.workspace_id.as_str());
    assert_eq!(
        (data["scope"].as_str(), data["period"].as_str()),
        (Some("key"), Some("daily"))
    );
    assert_eq!(data["threshold_percent"], 80);
    assert_eq!(data["limit_usd"], "0.01");
    assert!(nanos(data["spent_usd"].as_str().unwrap()) >= nanos("0.008"), "{data}");
    assert!(
        eighty["dataschema"]
            .as_str()
            .unwrap()
            .ends_with("/schemas/budget-threshold.v1.json")
    );

    // The control plane shows the day's spend.
    let limits = method(&gateway, key, "billing.limits.get", json!({})).await.unwrap();
    let shown = &limits["keys"][0];
    let spent = nanos(shown["spent_usd"].as_str().unwrap());
    assert!(spent > nanos("0.009") && spent <= nanos("0.01"), "{limits}");

    // The next day (UTC) the budget starts again.
    set_clock(&clock, "2026-11-16T00:00:01Z");
    let before = mock_chat_requests(mock).await;
    let (status, _, body) = gateway.chat(costly()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(mock_chat_requests(mock).await, before + 1);

    // Removed, it is gone.
    let removed = method(
        &gateway,
        key,
        "billing.limits.set",
        json!({"scope": "key", "key_id": key_id, "remove": true}),
    )
    .await
    .unwrap();
    assert_eq!(removed["keys"], json!([]), "{removed}");
    // The alert rows move no money: the journal still verifies.
    assert!(gateway.admin(&["ledger-verify"]).contains("verified"));
}

#[tokio::test]
async fn max_request_usd_refuses_a_large_worst_case_and_budgets_survive_a_downgrade() {
    let mock = start_mock(Default::default()).await;
    let extra = "[billing.plans.free]\nspend_controls = true\n[billing.plans.bare]\n";
    let gateway = Gateway::start(&standard_config(mock, extra)).await;
    let key = Some(gateway.api_key.as_str());
    method(
        &gateway,
        key,
        "billing.limits.set",
        json!({"scope": "workspace", "period": "monthly", "limit_usd": "5", "max_request_usd": "0.001"}),
    )
    .await
    .unwrap();
    // Moved to a plan without spend controls, the budget keeps being enforced.
    gateway.admin(&["plan", "set", "--workspace", &gateway.workspace_id, "--plan", "bare"]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let before = mock_chat_requests(mock).await;
    let (status, _, body) = gateway.chat(costly()).await;
    assert_eq!(status, 402, "{body}");
    let error = crate::common::assert_error_shape(&body);
    assert_eq!(error["code"], "budget_exceeded");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("max_tokens") && message.contains("0.001 USD per request"),
        "{message}"
    );
    assert_eq!(mock_chat_requests(mock).await, before);
    let (status, _, body) = gateway.chat(cheap()).await;
    assert_eq!(status, 200, "{body}");
    // But it cannot be set again on that plan.
    let (reason, message) = method(
        &gateway,
        key,
        "billing.limits.set",
        json!({"scope": "workspace", "period": "monthly", "limit_usd": "6"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "FAILED_PRECONDITION");
    assert!(message.contains("'bare'"), "{message}");
    let limits = method(&gateway, key, "billing.limits.get", json!({})).await.unwrap();
    assert_eq!(limits["workspace"]["limit_usd"], "5", "{limits}");
    assert_eq!(limits["spend_controls"], false);
}

/// A workspace budget of 0.03 USD, requests of ~0.0015 from 16 workers on two
/// gateways sharing a Postgres: together they never spend past it, and
/// nothing refused reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_on_one_postgres_never_spend_past_a_budget_together() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let extra = "[billing.plans.free]\nspend_controls = true\n";
    let config = format!("database_url = \"{}\"\n{}", schema.url, standard_config(mock, extra));
    let first = Gateway::start(&config).await;
    let second = first.another().await;
    method(
        &first,
        Some(&first.api_key),
        "billing.limits.set",
        json!({"scope": "workspace", "period": "monthly", "limit_usd": "0.03"}),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (posted_before, upstream_before) = (posted(&first), mock_chat_requests(mock).await);
    let gateways = [&first, &second];
    let workers = (0..16).map(|worker| {
        let gateway = gateways[worker % 2];
        async move {
            let mut statuses = Vec::new();
            for _ in 0..3 {
                statuses.push(gateway.chat(costly()).await.0);
            }
            statuses
        }
    });
    let statuses: Vec<u16> = futures_util::future::join_all(workers).await.concat();
    let passed = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(
        statuses.len(),
        passed + statuses.iter().filter(|s| **s == 402).count(),
        "{statuses:?}"
    );
    let spent = posted_before - posted(&first);
    assert!(spent <= nanos("0.03"), "spent {spent} nano-USD");
    assert!(passed >= 10, "only {passed} passed");
    assert_eq!(mock_chat_requests(mock).await, upstream_before + passed as u64);
}
