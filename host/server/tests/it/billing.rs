//! Plans against the real gateway (docs/billing.md): the monthly request
//! limit (429 `plan_limit_reached` before any upstream call, a new month
//! through the injected clock, never past the limit across two gateways on
//! one Postgres), the gateway fee billed exactly (whole, streamed, the
//! request log, the usage event, the wallet), the seat and endpoint limits,
//! plan changes, and a workspace on a plan the configuration lacks.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{BIN, Gateway, PgSchema, mock_chat_requests, nanos, standard_config, start_mock};
use crate::control_plane::helpers::{method, signup};

fn ask() -> Value {
    json!({"model": "mock/small", "messages": [{"role": "user", "content": "count me"}]})
}

fn set_clock(path: &Path, at: &str) {
    std::fs::write(path, at).unwrap();
}

fn limited(clock: &Path, limit: u64) -> String {
    format!(
        "[billing]\ntest_clock_file = \"{}\"\n[billing.plans.free]\nmonthly_requests = {limit}\n",
        clock.display()
    )
}

#[tokio::test]
async fn the_sixth_request_of_the_month_is_refused_before_any_upstream_call_and_the_next_month_passes() {
    let mock = start_mock(Default::default()).await;
    let clock_dir = tempfile::tempdir().unwrap();
    let clock = clock_dir.path().join("now");
    set_clock(&clock, "2026-11-30T23:59:00Z");
    let gateway = Gateway::start(&standard_config(mock, &limited(&clock, 5))).await;
    for n in 0..5 {
        let (status, _, body) = gateway.chat(ask()).await;
        assert_eq!(status, 200, "request {n}: {body}");
    }
    let upstream_before = mock_chat_requests(mock).await;
    let (status, _, body) = gateway.chat(ask()).await;
    assert_eq!(status, 429, "{body}");
    let error = crate::common::assert_error_shape(&body);
    assert_eq!(error["code"], "plan_limit_reached");
    assert_eq!(error["type"], "billing_error");
    let message = error["message"].as_str().unwrap();
    for part in ["'free' plan", "5 model requests", "2026-11", "billing.plan.change"] {
        assert!(message.contains(part), "the message names {part}: {message}");
    }
    // A stream is refused the same way, before it starts.
    let mut streamed = ask();
    streamed["stream"] = json!(true);
    let (status, _, body) = gateway.chat(streamed).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(mock_chat_requests(mock).await, upstream_before, "nothing went upstream");
    let month = method(&gateway, Some(&gateway.api_key), "billing.usage.month", json!({}))
        .await
        .unwrap();
    assert_eq!(
        (month["month"].as_str(), month["requests"].as_u64()),
        (Some("2026-11"), Some(5))
    );
    assert_eq!(month["remaining"], 0);

    // The month turns (UTC): the counter starts again.
    set_clock(&clock, "2026-12-01T00:00:00Z");
    let (status, _, body) = gateway.chat(ask()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(mock_chat_requests(mock).await, upstream_before + 1);
    let month = method(&gateway, Some(&gateway.api_key), "billing.usage.month", json!({}))
        .await
        .unwrap();
    assert_eq!(
        (month["month"].as_str(), month["requests"].as_u64()),
        (Some("2026-12"), Some(1))
    );

    // A short wallet refuses without using up the month: the count is given back.
    let poor = Gateway::start_with(&standard_config(mock, &limited(&clock, 1)), "0").await;
    let (status, _, body) = poor.chat(ask()).await;
    assert_eq!(status, 402, "{body}");
    poor.admin(&["credit", "--workspace", &poor.workspace_id, "--usd", "1"]);
    let (status, _, body) = poor.chat(ask()).await;
    assert_eq!(status, 200, "the refused request did not count: {body}");
}

/// Free's 1,000: each gateway admits from slices of the month's requests
/// (15 at first, single requests near the limit), and the database never lets
/// the two claim more than the limit together. Once the slices left unused go
/// back (idle), exactly the limit has been admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_on_one_postgres_never_admit_more_than_the_limit() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let clock_dir = tempfile::tempdir().unwrap();
    let clock = clock_dir.path().join("now");
    set_clock(&clock, "2026-11-15T12:00:00Z");
    const LIMIT: usize = 1_000;
    let config = format!(
        "database_url = \"{}\"\n{}",
        schema.url,
        standard_config(mock, &limited(&clock, LIMIT as u64))
    );
    let first = Gateway::start(&config).await;
    let second = first.another().await;
    let upstream_before = mock_chat_requests(mock).await;
    let gateways = [&first, &second];
    let workers = (0..16).map(|worker| {
        let gateway = gateways[worker % 2];
        async move {
            let mut statuses = Vec::new();
            for _ in 0..70 {
                statuses.push(gateway.chat(ask()).await.0);
            }
            statuses
        }
    });
    let statuses: Vec<u16> = futures_util::future::join_all(workers).await.concat();
    let passed = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(statuses.len(), passed + statuses.iter().filter(|s| **s == 429).count());
    assert!(passed <= LIMIT, "{passed} admitted");
    assert!(passed >= LIMIT - 2 * 15, "at most a slice per gateway unused: {passed}");
    // Unused slices go back after two idle seconds; then the rest is admitted.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let mut more = 0;
    for gateway in gateways.iter().cycle().take(2 * (LIMIT + 2 - passed)) {
        if gateway.chat(ask()).await.0 == 200 {
            more += 1;
        }
    }
    assert_eq!(passed + more, LIMIT);
    assert_eq!(mock_chat_requests(mock).await, upstream_before + LIMIT as u64);
}

/// The provider's part of a `mock/small` answer (0.50 / 1.50 USD per Mtok).
fn provider_nanos(usage: &Value) -> i64 {
    usage["prompt_tokens"].as_i64().unwrap() * 500 + usage["completion_tokens"].as_i64().unwrap() * 1500
}

/// `service.cost_usd` in nano-USD, checked against `usage.cost` (the same
/// exact decimal, as a JSON number).
fn shown_cost(body: &Value) -> i64 {
    let exact = body["service"]["cost_usd"].as_str().unwrap();
    assert_eq!(body["usage"]["cost"].as_f64(), exact.parse::<f64>().ok(), "{body}");
    nanos(exact)
}

fn posted(gateway: &Gateway) -> i64 {
    nanos(gateway.wallet()["posted_usd"].as_str().unwrap())
}

#[tokio::test]
async fn the_gateway_fee_is_part_of_the_cost_exactly_whole_streamed_logged_and_metered() {
    let mock = start_mock(Default::default()).await;
    let extra = "[billing.plans.free]\nrequest_fee_usd = \"0.001\"\n[metering]\nlinger_ms = 5\n";
    let gateway = Gateway::start(&standard_config(mock, extra)).await;
    const FEE: i64 = 1_000_000;

    // Whole.
    let before = posted(&gateway);
    let (status, _, body) = gateway.chat(ask()).await;
    assert_eq!(status, 200, "{body}");
    let provider = provider_nanos(&body["usage"]);
    let cost = shown_cost(&body);
    assert_eq!(cost, provider + FEE, "{body}");
    let breakdown = &body["service"]["cost_breakdown"];
    assert_eq!(breakdown["fee_usd"], "0.001000000", "{breakdown}");
    assert_eq!(
        nanos(breakdown["provider_usd"].as_str().unwrap()),
        provider,
        "{breakdown}"
    );
    assert!(breakdown["input"]["tokens"].is_u64(), "the kinds stay: {breakdown}");
    assert_eq!(
        before - posted(&gateway),
        cost,
        "the wallet paid exactly the cost shown"
    );
    let whole_id = body["service"]["request_id"].as_str().unwrap().to_string();

    // Streamed: the closing chunk carries the same split.
    let before = posted(&gateway);
    let mut streamed = ask();
    streamed["stream"] = json!(true);
    let (status, frames) = gateway.chat_stream(streamed).await;
    assert_eq!(status, 200);
    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"));
    let closing: Value = serde_json::from_str(&frames[frames.len() - 2]).unwrap();
    let provider = provider_nanos(&closing["usage"]);
    let cost = shown_cost(&closing);
    assert_eq!(cost, provider + FEE, "{closing}");
    assert_eq!(closing["service"]["cost_breakdown"]["fee_usd"], "0.001000000");
    assert_eq!(
        nanos(closing["service"]["cost_breakdown"]["provider_usd"].as_str().unwrap()),
        provider
    );
    assert_eq!(before - posted(&gateway), cost);

    // The request log keeps the split.
    let row: Value = serde_json::from_str(&gateway.admin(&["request", &whole_id])).unwrap();
    assert_eq!(row["cost_breakdown"]["fee_usd"], "0.001000000", "{row}");
    assert_eq!(
        nanos(row["cost_breakdown"]["provider_usd"].as_str().unwrap()) + FEE,
        nanos(row["cost_usd"].as_str().unwrap())
    );

    // So does the usage event.
    let path = gateway.dir.path().join("data").join("events").join("usage.jsonl");
    let deadline = Instant::now() + Duration::from_secs(20);
    let event = loop {
        let found = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["id"] == whole_id.as_str());
        if let Some(event) = found {
            break event;
        }
        assert!(Instant::now() < deadline, "no usage event for {whole_id}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let data = &event["data"];
    assert_eq!(data["cost_breakdown"]["fee_usd"], "0.001000000", "{data}");
    assert_eq!(
        nanos(data["cost_breakdown"]["provider_usd"].as_str().unwrap()) + FEE,
        data["cost_nano"].as_i64().unwrap()
    );
    let month = method(&gateway, Some(&gateway.api_key), "billing.usage.month", json!({}))
        .await
        .unwrap();
    assert_eq!(month["fee_usd"], "0.002000000", "{month}");
}

#[tokio::test]
async fn seats_and_endpoints_stop_at_the_plan_and_an_owner_changes_only_to_free_plans() {
    let mock = start_mock(Default::default()).await;
    let extra = "[control_plane]\nsignup_per_minute = 1000\n\
                 [billing.plans.free]\nseats = 2\nendpoints = 1\n\
                 [billing.plans.lab]\nendpoints = 3\n";
    let gateway = Gateway::start(&standard_config(mock, extra)).await;
    let key = Some(gateway.api_key.as_str());
    let ada = signup(&gateway, "ada@example.com").await;
    let bob = signup(&gateway, "bob@example.com").await;

    // Seats: the owner and one more.
    method(
        &gateway,
        key,
        "members.add",
        json!({"email": "ada@example.com", "role": "admin"}),
    )
    .await
    .unwrap();
    let (reason, message) = method(
        &gateway,
        key,
        "members.add",
        json!({"email": "bob@example.com", "role": "viewer"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "RESOURCE_EXHAUSTED", "{message}");
    for part in ["plan_limit_reached", "2 seats", "'free'"] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let _ = bob;

    // Endpoints: one on Free.
    let actor = "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {name: hi, namespace: plans}\n\
                 models:\n  default: {candidates: [mock/small]}\n\
                 steps:\n  - id: hi\n    llm: {model: default, prompt: hello}\n";
    method(&gateway, key, "namespaces.create", json!({"name": "plans"}))
        .await
        .unwrap();
    let published = method(&gateway, key, "actors.publish", json!({"source": actor}))
        .await
        .unwrap();
    let id = published["id"].as_str().unwrap();
    let deploy = |name: &'static str| {
        let gateway = &gateway;
        async move {
            method(
                gateway,
                Some(&gateway.api_key),
                "deployments.create",
                json!({"namespace": "plans", "name": name, "actor_id": id}),
            )
            .await
        }
    };
    deploy("one").await.unwrap();
    let (reason, message) = deploy("two").await.unwrap_err();
    assert_eq!(reason, "RESOURCE_EXHAUSTED", "{message}");
    for part in ["plan_limit_reached", "1 hosted actor endpoints", "'free'"] {
        assert!(message.contains(part), "{part}: {message}");
    }

    // An admin may not change the plan; the owner may, to a plan without a price.
    let (reason, _) = method(
        &gateway,
        Some(&ada.key),
        "billing.plan.change",
        json!({"workspace_id": gateway.workspace_id, "plan": "lab"}),
    )
    .await
    .unwrap_err();
    assert_eq!(reason, "PERMISSION_DENIED");
    let (reason, message) = method(&gateway, key, "billing.plan.change", json!({"plan": "team"}))
        .await
        .unwrap_err();
    assert_eq!(reason, "FAILED_PRECONDITION");
    assert!(message.contains("tollgate admin plan set"), "{message}");
    let changed = method(&gateway, key, "billing.plan.change", json!({"plan": "lab"}))
        .await
        .unwrap();
    assert_eq!(changed["plan"]["endpoints"], 3);
    deploy("two").await.unwrap();
    let listed = method(&gateway, key, "deployments.list", json!({})).await.unwrap();
    assert_eq!(listed["limit"], 3);
    // Lab has no seat limit.
    method(
        &gateway,
        key,
        "members.add",
        json!({"email": "bob@example.com", "role": "viewer"}),
    )
    .await
    .unwrap();

    // An operator puts the workspace on a paid plan; every gateway sees it
    // within the plan cache's second.
    gateway.admin(&["plan", "set", "--workspace", &gateway.workspace_id, "--plan", "pro"]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let plan = method(&gateway, key, "billing.plan.get", json!({})).await.unwrap();
    assert_eq!(plan["plan"]["id"], "pro");
    assert_eq!(plan["plan"]["monthly_price_usd"], "29.000000000");
}

#[tokio::test]
async fn a_workspace_on_a_plan_the_configuration_lacks_stops_the_gateway_with_a_clear_error() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "[billing.plans.lab]\nseats = 3\n")).await;
    gateway.admin(&["plan", "set", "--workspace", &gateway.workspace_id, "--plan", "lab"]);
    let without = gateway.dir.path().join("without-lab.toml");
    let config = std::fs::read_to_string(&gateway.config_path)
        .unwrap()
        .replace("[billing.plans.lab]\nseats = 3\n", "");
    std::fs::write(&without, config).unwrap();
    let dir = gateway.dir.clone();
    drop(gateway);
    let output = std::process::Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&without)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("plan 'lab'") && stderr.contains("[billing.plans.lab]"),
        "{stderr}"
    );
    drop(dir);
}
