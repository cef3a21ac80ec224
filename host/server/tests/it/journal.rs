//! The ledger's local journal against the real binary: answers that never
//! waited on the database, `kill -9` while settlements are being appended
//! and applied, a journal the database never saw applied at the next start,
//! and a torn record at the journal's end dropped at start.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Gateway, PgSchema, nanos, standard_config, start_mock};
use serde_json::{Value, json};
use sqlx::Connection;

fn sqlite_url(gateway: &Gateway) -> String {
    format!(
        "sqlite://{}",
        gateway.dir.path().join("data").join("tollgate.db").display()
    )
}

/// One chat request; its request id and exact cost when it was answered.
async fn answered(gateway: &Gateway, http: &reqwest::Client, n: usize) -> Option<(String, i64)> {
    answered_at(&gateway.url, &gateway.api_key, http, n).await
}

async fn answered_at(url: &str, key: &str, http: &reqwest::Client, n: usize) -> Option<(String, i64)> {
    let stream = n % 3 == 0;
    let response = http
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({
            "model": "mock/small",
            "messages": [{"role": "user", "content": format!("request {n}")}],
            "stream": stream,
            "stream_options": {"include_usage": true},
            "max_tokens": 20,
        }))
        .send()
        .await
        .ok()?;
    if response.status() != 200 {
        return None;
    }
    let id = response.headers()["x-request-id"].to_str().unwrap().to_string();
    let text = response.text().await.ok()?;
    let cost = if stream {
        // Answered means the closing chunk with the cost, then [DONE].
        if !text.trim_end().ends_with("data: [DONE]") {
            return None;
        }
        text.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            .find_map(|chunk| chunk["service"]["cost_usd"].as_str().map(nanos))?
    } else {
        let body: Value = serde_json::from_str(&text).ok()?;
        nanos(body["service"]["cost_usd"].as_str()?)
    };
    Some((id, cost))
}

/// What the database holds for the workspace: each logged request's cost,
/// and each posting.
async fn books(url: &str) -> (HashMap<String, i64>, HashMap<String, i64>) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let logged: Vec<(String, i64)> =
        sqlx::query_as("SELECT request_id, cost_nano FROM request_log WHERE kind = 'chat'")
            .fetch_all(&pool)
            .await
            .unwrap();
    let posted: Vec<(String, i64)> = sqlx::query_as("SELECT id, amount_nano FROM ledger_entries WHERE kind = 'post'")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    (logged.into_iter().collect(), posted.into_iter().collect())
}

/// Every answered request is logged once at its cost and posted once at its
/// cost; the ledger verifies.
async fn assert_every_answer_billed_once(gateway: &Gateway, url: &str, answers: &HashMap<String, i64>) {
    let (logged, posted) = books(url).await;
    for (id, cost) in answers {
        assert_eq!(
            logged.get(id),
            Some(cost),
            "answered request {id} is logged at its cost"
        );
        assert_eq!(
            posted.get(id),
            Some(cost),
            "answered request {id} is posted once at its cost"
        );
    }
    // Rows the log holds beyond the answers were settled just before a kill
    // took their answer: billed at most once (the keys are unique), and at
    // the logged cost.
    for (id, amount) in &posted {
        assert_eq!(logged.get(id), Some(amount), "posting {id} matches its row");
    }
    let verify = gateway.admin(&["ledger-verify"]);
    assert!(verify.contains("verified"), "{verify}");
}

/// Requests keep being answered while SQLite's write lock is held by
/// someone else (the writer cannot apply anything), the gateway is killed
/// with every one of them only in its journal, and the next start applies
/// them all before it serves.
#[tokio::test(flavor = "multi_thread")]
async fn a_journal_the_database_never_saw_is_applied_at_the_next_start() {
    let mock = start_mock(Default::default()).await;
    let mut gateway = Gateway::start(&standard_config(mock, "")).await;
    let http = reqwest::Client::new();
    let mut answers = HashMap::new();
    // The first request takes the wallet's lease and caches the key.
    let (id, cost) = answered(&gateway, &http, 1).await.unwrap();
    answers.insert(id, cost);
    assert!(gateway.get("/readyz").send().await.unwrap().status().is_success());

    let url = sqlite_url(&gateway);
    sqlx::any::install_default_drivers();
    let mut blocker = sqlx::AnyConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut blocker).await.unwrap();
    // Ten: the plan's request slice the first request claimed (15 of the free
    // plan's 1,000 a month) covers them; a claim past it would need the
    // database (the documented 503 `ledger_unavailable`).
    for n in 2..=11 {
        let (id, cost) = answered(&gateway, &http, n)
            .await
            .expect("answered while the database cannot be written");
        answers.insert(id, cost);
    }
    let ready: Value = gateway.get("/readyz").send().await.unwrap().json().await.unwrap();
    let lag = ready["ledger"]["lag"].as_u64().unwrap();
    assert!(lag >= 10, "the 10 answers wait in the journal: {ready}");

    gateway.kill();
    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    blocker.close().await.unwrap();
    let (logged, _) = books(&url).await;
    assert!(
        answers.keys().filter(|id| !logged.contains_key(*id)).count() >= 10,
        "the database never saw the answers before the kill"
    );

    let restarted = gateway.restart().await;
    // The start applied the journal before serving: no wait needed.
    assert_every_answer_billed_once(&restarted, &url, &answers).await;
    let ready: Value = restarted.get("/readyz").send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["ledger"]["lag"], 0, "{ready}");
    assert_eq!(ready["status"], "ready", "{ready}");
}

/// Load from 16 clients, killed with -9 at a random moment, three times:
/// records are being appended and applied at every kill. After each restart
/// no answered request is missing from the log or billed twice, and the
/// ledger verifies.
async fn kill_9_under_load(postgres: bool) {
    let (database_url, _schema) = match postgres {
        false => (String::new(), None),
        true => {
            let Some(schema) = PgSchema::create().await else { return };
            (format!("database_url = \"{}\"\n", schema.url), Some(schema))
        }
    };
    let url = match &_schema {
        Some(schema) => schema.url.clone(),
        None => String::new(),
    };
    let mock = start_mock(Default::default()).await;
    let extra = "[ledger]\nlease_ttl_secs = 2\nsweep_interval_ms = 200\n";
    let mut gateway = Gateway::start(&format!("{database_url}{}", standard_config(mock, extra))).await;
    let url = if url.is_empty() { sqlite_url(&gateway) } else { url };
    let mut answers = HashMap::new();
    let mut n = 0;
    for round in 0..3 {
        let stop = Arc::new(AtomicBool::new(false));
        let answered_this_round = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..16)
            .map(|client| {
                let stop = stop.clone();
                let answered_this_round = answered_this_round.clone();
                let gateway_url = gateway.url.clone();
                let key = gateway.api_key.clone();
                tokio::spawn(async move {
                    let http = reqwest::Client::new();
                    let mut answered_here = Vec::new();
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        match answered_at(&gateway_url, &key, &http, client * 100_000 + round * 10_000 + i).await {
                            Some(answer) => {
                                answered_here.push(answer);
                                answered_this_round.fetch_add(1, Ordering::Relaxed);
                            }
                            None => break,
                        }
                    }
                    answered_here
                })
            })
            .collect();
        // Kill only once the load is running (a loaded CI machine can take a
        // second to answer the first), then at a random moment after.
        let running = tokio::time::timeout(Duration::from_secs(30), async {
            while answered_this_round.load(Ordering::Relaxed) < 40 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        assert!(running.await.is_ok(), "round {round}: the load never got going");
        let wait = (uuid::Uuid::now_v7().as_u128() % 500) as u64;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        gateway.kill();
        stop.store(true, Ordering::Relaxed);
        for client in clients {
            for (id, cost) in client.await.unwrap() {
                n += 1;
                answers.insert(id, cost);
            }
        }
        gateway = gateway.restart().await;
        assert_every_answer_billed_once(&gateway, &url, &answers).await;
    }
    eprintln!("{n} answers over three kills, every one billed once");
    assert!(n >= 120, "the load ran: {n} answers");
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_kill_9_while_appending_and_applying_loses_and_doubles_nothing() {
    kill_9_under_load(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_kill_9_while_appending_and_applying_loses_and_doubles_nothing() {
    kill_9_under_load(true).await;
}

/// A record cut short at the end of the journal (a write the process died
/// in) is dropped at start, and the gateway serves with the rest.
#[tokio::test(flavor = "multi_thread")]
async fn a_torn_record_at_the_journals_end_is_dropped_and_the_gateway_starts() {
    let mock = start_mock(Default::default()).await;
    let mut gateway = Gateway::start(&standard_config(mock, "")).await;
    let http = reqwest::Client::new();
    let (id, cost) = answered(&gateway, &http, 1).await.unwrap();
    gateway.kill();
    let journal = gateway.dir.path().join("data").join("journal");
    let segment = std::fs::read_dir(&journal)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "journal"))
        .max()
        .unwrap();
    // A record's header announcing 100 bytes, and only 10 of them.
    let mut torn = Vec::new();
    torn.extend_from_slice(&100u32.to_le_bytes());
    torn.extend_from_slice(&[0u8; 12]);
    torn.extend_from_slice(b"{\"holder\":");
    let mut file = std::fs::OpenOptions::new().append(true).open(&segment).unwrap();
    std::io::Write::write_all(&mut file, &torn).unwrap();
    drop(file);
    let size = std::fs::metadata(&segment).unwrap().len();

    let restarted = gateway.restart().await;
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        size - torn.len() as u64,
        "the torn record was cut off"
    );
    let again = answered(&restarted, &http, 2)
        .await
        .expect("serves after dropping the tail");
    let answers = HashMap::from([(id, cost), again]);
    assert!(restarted.get("/readyz").send().await.unwrap().status().is_success());
    // The second answer is applied within the read wait the control plane uses.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_every_answer_billed_once(&restarted, &sqlite_url(&restarted), &answers).await;
}
