//! Routing over a model group of three mock providers at different prices
//! and latencies: `provider.sort`, `max_price`, `only`/`ignore`, and cache
//! affinity measured against mocks that simulate a prompt cache each.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use common::{Gateway, mock_chat_requests, start_mock};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tollgate_mock_upstream::MockOptions;

/// Providers `cheap`, `mid` and `dear` serving model `m` (prices rising),
/// each on its own mock with its own latency, grouped as `m` (or as the
/// strategy says).
fn config(mocks: &[SocketAddr; 3], strategy: &str) -> String {
    let mut text = String::from(
        "[breaker]\nfailure_threshold = 3\ncooldown_ms = 300\n[billing.plans.free]\nmonthly_requests = 100000\n",
    );
    for (name, mock, input, output) in [
        ("cheap", mocks[0], "1", "2"),
        ("mid", mocks[1], "2", "4"),
        ("dear", mocks[2], "3", "6"),
    ] {
        text.push_str(&format!(
            "[providers.{name}]\nbase_url = \"http://{mock}/v1\"\napi_key = \"sk-{name}\"\n\
             models = [{{ id = \"m\", upstream = \"small\", input_price_per_mtok = \"{input}\", \
             output_price_per_mtok = \"{output}\" }}]\n"
        ));
    }
    text.push_str(&format!(
        "[routing.groups.m]\nstrategy = \"{strategy}\"\n\
         deployments = [{{ model = \"cheap/m\" }}, {{ model = \"mid/m\" }}, {{ model = \"dear/m\" }}]\n"
    ));
    text
}

async fn mocks(latencies: [u64; 3], prompt_cache: bool) -> [SocketAddr; 3] {
    let mut started = Vec::new();
    for latency_ms in latencies {
        started.push(
            start_mock(MockOptions {
                latency_ms,
                prompt_cache,
                ..Default::default()
            })
            .await,
        );
    }
    started.try_into().unwrap()
}

/// Sends `requests` at concurrency 16; counts the providers that answered.
async fn spread(gateway: &Arc<Gateway>, body: Value, requests: usize) -> BTreeMap<String, usize> {
    let answers: Vec<(u16, Value)> = futures_util::stream::iter(0..requests)
        .map(|_| {
            let gateway = gateway.clone();
            let body = body.clone();
            async move {
                let (status, _, answer) = gateway.chat(body).await;
                (status, answer)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut counts = BTreeMap::new();
    for (status, answer) in answers {
        assert_eq!(status, 200, "{answer}");
        *counts
            .entry(answer["provider"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    counts
}

fn ask(provider: Value) -> Value {
    json!({"model": "m", "provider": provider, "messages": [{"role": "user", "content": "route me"}]})
}

#[tokio::test]
async fn sort_by_price_and_by_latency_pick_the_best_deployment() {
    // The cheapest is the slowest. The gaps are wide because the latency
    // measured includes this machine's own scheduling: on two loaded cores a
    // 2 ms deployment at c=16 can measure over 12 ms.
    let mocks = mocks([60, 2, 40], false).await;
    let gateway = Arc::new(Gateway::start(&config(&mocks, "weighted")).await);

    let by_price = spread(&gateway, ask(json!({"sort": "price"})), 500).await;
    let cheap = by_price.get("cheap").copied().unwrap_or(0);
    assert!(
        cheap * 100 >= 95 * 500,
        "sort: price sends ≥ 95% to the cheapest: {by_price:?}"
    );

    let by_latency = spread(&gateway, ask(json!({"sort": "latency"})), 500).await;
    let fast = by_latency.get("mid").copied().unwrap_or(0);
    eprintln!("sort price: {by_price:?}; sort latency: {by_latency:?}");
    assert!(
        fast * 100 >= 90 * 500,
        "sort: latency sends ≥ 90% to the fastest: {by_latency:?}"
    );

    // The decision is in the answer, and in the request log.
    let (status, _, answer) = gateway.chat(ask(json!({"sort": "price", "ignore": ["dear"]}))).await;
    assert_eq!(status, 200, "{answer}");
    let route = &answer["service"]["route"];
    assert_eq!(route["strategy"], "sort:price", "{route}");
    assert_eq!(route["group"], "m");
    assert_eq!(route["order"], json!(["cheap/m", "mid/m"]));
    assert_eq!(route["excluded"][0]["model"], "dear/m");
    let request_id = answer["service"]["request_id"].as_str().unwrap();
    let logged: Value = serde_json::from_str(&gateway.admin(&["request", request_id])).unwrap();
    assert_eq!(logged["route"], *route, "{logged}");

    // The models list shows what was measured.
    let listed = gateway.model("mid/m").await;
    let health = &listed["service"]["health"];
    assert_eq!(health["breaker"], "closed", "{health}");
    assert!(health["requests"].as_u64().unwrap() >= 450, "{health}");
    assert!(health["p50_latency_ms"].as_f64().unwrap() >= 2.0, "{health}");
    assert_eq!(health["success_rate"], 1.0);
}

#[tokio::test]
async fn preferences_filter_before_any_upstream_call() {
    let mocks = mocks([0, 0, 0], false).await;
    let gateway = Arc::new(Gateway::start(&config(&mocks, "weighted")).await);
    let calls = |mocks: [SocketAddr; 3]| async move {
        let mut total = 0;
        for mock in mocks {
            total += mock_chat_requests(mock).await;
        }
        total
    };
    // The group is a model of the list, priced at its dearest deployment.
    let group = gateway.model("m").await;
    assert_eq!(group["service"]["group"]["strategy"], "weighted", "{group}");
    assert_eq!(group["service"]["group"]["deployments"].as_array().unwrap().len(), 3);
    assert_eq!(group["pricing"]["input_per_mtok"], "3.000000", "{group}");
    assert_eq!(group["service"]["available"], true);
    let list: Value = gateway.get("/v1/models").send().await.unwrap().json().await.unwrap();
    assert!(list["data"].as_array().unwrap().iter().any(|m| m["id"] == "m"));

    let before = calls(mocks).await;
    let (status, _, error) = gateway
        .chat(ask(json!({"max_price": {"prompt": 0.5, "completion": 10}})))
        .await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["code"], "no_eligible_provider");
    assert_eq!(error["error"]["param"], "provider");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("max_price.prompt"),
        "{error}"
    );
    assert_eq!(calls(mocks).await, before, "no upstream call");

    // (One body repeated is one conversation, so affinity keeps it on one deployment.)
    let only = spread(&gateway, ask(json!({"only": ["mid", "dear"]})), 40).await;
    assert!(!only.contains_key("cheap"), "{only:?}");
    let ignore = spread(&gateway, ask(json!({"ignore": ["mid/m"]})), 40).await;
    assert!(!ignore.contains_key("mid"), "{ignore:?}");
    let pinned = spread(&gateway, ask(json!({"order": ["dear"], "allow_fallbacks": false})), 10).await;
    assert_eq!(pinned, BTreeMap::from([("dear".to_string(), 10)]));

    for (provider, says) in [
        (json!({"data_collection": "deny"}), "data_collection"),
        (json!({"sort": "cheapest"}), "cheapest"),
        (json!(["cheap"]), "object"),
    ] {
        let (status, _, error) = gateway.chat(ask(provider)).await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["error"]["param"], "provider");
        assert!(error["error"]["message"].as_str().unwrap().contains(says), "{error}");
    }
    // The gateway's own fields never reach the upstream.
    let (status, _, _) = gateway
        .chat(
            json!({"model": "cheap/m", "session_id": "s", "provider": {"sort": "price"},
                     "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(status, 200);
    let recorded: Value = reqwest::get(format!("http://{}/__mock/requests", mocks[0]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = &recorded.as_array().unwrap().last().unwrap()["body"];
    assert!(
        last.get("provider").is_none() && last.get("session_id").is_none(),
        "{last}"
    );
}

/// One conversation's turn `turn` (0-based): the same opening, then every
/// earlier exchange, then a new question.
fn turn(conversation: usize, turn: usize, session: bool) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": format!("You are assistant number {conversation}, with a long shared preamble that every turn repeats word for word.")}),
        json!({"role": "user", "content": format!("Conversation {conversation} opens with a question.")}),
    ];
    for earlier in 0..turn {
        messages.push(json!({"role": "assistant", "content": format!("Answer {earlier}.")}));
        messages.push(json!({"role": "user", "content": format!("Follow-up {earlier} of {conversation}.")}));
    }
    let mut body = json!({"model": "m", "messages": messages});
    if session {
        body["session_id"] = json!(format!("conversation-{conversation}"));
    }
    body
}

struct Turns {
    prompt: u64,
    cached: u64,
    /// Each conversation's providers, turn by turn.
    served: HashMap<usize, Vec<String>>,
}

async fn converse(
    gateway: &Arc<Gateway>,
    conversations: std::ops::Range<usize>,
    turns: std::ops::Range<usize>,
    session: bool,
    totals: &mut Turns,
) {
    for t in turns {
        let answers: Vec<(usize, Value)> = futures_util::stream::iter(conversations.clone())
            .map(|c| {
                let gateway = gateway.clone();
                async move {
                    let (status, _, answer) = gateway.chat(turn(c, t, session)).await;
                    assert_eq!(status, 200, "{answer}");
                    (c, answer)
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        for (c, answer) in answers {
            let usage = &answer["usage"];
            totals.prompt += usage["prompt_tokens"].as_u64().unwrap();
            totals.cached += usage["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0);
            totals
                .served
                .entry(c)
                .or_default()
                .push(answer["provider"].as_str().unwrap().to_string());
        }
    }
}

#[tokio::test]
async fn affinity_keeps_conversations_on_their_cache_and_moves_them_once_on_failure() {
    let mocks = mocks([0, 0, 0], true).await;
    let gateway = Arc::new(Gateway::start(&config(&mocks, "weighted")).await);
    let single = start_mock(MockOptions {
        prompt_cache: true,
        ..Default::default()
    })
    .await;
    let alone = Arc::new(Gateway::start(&config(&[single, single, single], "ordered")).await);

    // 200 conversations of 5 turns: half named by session_id, half by their prefix.
    let mut spread = Turns {
        prompt: 0,
        cached: 0,
        served: HashMap::new(),
    };
    converse(&gateway, 0..100, 0..5, true, &mut spread).await;
    converse(&gateway, 100..200, 0..5, false, &mut spread).await;
    let mut baseline = Turns {
        prompt: 0,
        cached: 0,
        served: HashMap::new(),
    };
    converse(&alone, 0..100, 0..5, true, &mut baseline).await;
    converse(&alone, 100..200, 0..5, false, &mut baseline).await;
    assert_eq!(spread.prompt, baseline.prompt);
    eprintln!(
        "cached prompt tokens: three providers {}/{}, one provider {}/{}",
        spread.cached, spread.prompt, baseline.cached, baseline.prompt
    );
    assert!(baseline.cached > 0);
    assert!(
        spread.cached * 100 >= baseline.cached * 90,
        "cached share over three providers {}/{} vs one provider {}/{}",
        spread.cached,
        spread.prompt,
        baseline.cached,
        baseline.prompt
    );
    let providers: std::collections::BTreeSet<&String> = spread.served.values().flatten().collect();
    assert_eq!(providers.len(), 3, "conversations spread over every provider");
    for (c, served) in &spread.served {
        assert!(
            served.iter().all(|p| *p == served[0]),
            "conversation {c} stayed: {served:?}"
        );
    }

    // One provider goes down: its conversations move, and stay where they moved.
    let down = spread.served[&0][0].clone();
    let index = ["cheap", "mid", "dear"].iter().position(|p| **p == down).unwrap();
    reqwest::Client::new()
        .put(format!("http://{}/__mock/outage", mocks[index]))
        .json(&json!({"status": 503}))
        .send()
        .await
        .unwrap();
    let mut after = Turns {
        prompt: 0,
        cached: 0,
        served: HashMap::new(),
    };
    converse(&gateway, 0..100, 5..8, true, &mut after).await;
    reqwest::Client::new()
        .delete(format!("http://{}/__mock/outage", mocks[index]))
        .send()
        .await
        .unwrap();
    // Past the breaker's cooldown: the provider is callable again, and the
    // conversations that moved stay where their cache now is.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    converse(&gateway, 0..100, 8..9, true, &mut after).await;
    let mut moved = 0;
    for c in 0..100 {
        let before = &spread.served[&c][0];
        let served = &after.served[&c];
        assert!(
            served.iter().all(|p| *p == served[0]),
            "conversation {c} is sticky after moving: {served:?}"
        );
        if *before == down {
            assert_ne!(served[0], down, "conversation {c} moved off the failed provider");
            moved += 1;
        } else {
            assert_eq!(
                served[0], *before,
                "conversation {c} was not on the failed provider and stays"
            );
        }
    }
    assert!(moved > 0);
    eprintln!("{moved} of 100 conversations moved off '{down}' and stayed");
}

#[tokio::test]
async fn the_probe_measures_models_nobody_has_called() {
    let mocks = mocks([5, 0, 0], false).await;
    let config = config(&mocks, "weighted") + "[routing.probe]\ninterval_secs = 1\nmodels = [\"cheap/m\"]\n";
    let gateway = Gateway::start(&config).await;
    let mut health = Value::Null;
    for _ in 0..50 {
        health = gateway.model("cheap/m").await["service"]["health"].clone();
        if health["requests"].as_u64().unwrap_or(0) >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(health["requests"].as_u64().unwrap() >= 2, "{health}");
    assert!(health["p50_latency_ms"].as_f64().unwrap() >= 5.0, "{health}");
    assert_eq!(
        gateway.model("mid/m").await["service"]["health"]["requests"],
        0,
        "only the listed model"
    );
    assert!(mock_chat_requests(mocks[0]).await >= 2);
}
