//! Serving through a database outage (docs/operations.md, "Database
//! outages"): two gateways on one Postgres, reached through a proxy the test
//! cuts. Keys they have seen keep answering while it is cut; a key neither
//! has seen gets 503 `auth_unavailable`, not a 401, and the gateways keep
//! serving; once the database is back, a revocation is refused within the
//! second docs/control-plane.md promises. The wallet is off (`[ledger]
//! enabled = false`): settling through an outage is the ledger's own concern.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use crate::common::db_proxy::DbProxy;
use crate::common::{Gateway, PgSchema, assert_error_shape, standard_config, start_mock};
use crate::control_plane::helpers::{EXTRA, chat_with, method, post};

/// How long the proxy stays cut.
const OUTAGE: Duration = Duration::from_secs(10);

/// A control-plane op that may fail while the database comes back: retried
/// until it succeeds, for at most `limit`.
async fn op_until_done(gateway: &Gateway, key: &str, op: &str, params: Value, limit: Duration) -> Value {
    let start = Instant::now();
    loop {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": op.replacen('.', "/", 1), "params": params});
        let (status, answer) = post(gateway, Some(key), &body).await;
        if status == 200
            && let Some(result) = answer.get("result")
        {
            return result.clone();
        }
        assert!(
            start.elapsed() < limit,
            "{op} still fails after {:?}: {status} {answer}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// Two workers: the proxy forwards on one while the harness blocks the other
// on `tollgate admin`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_already_seen_keep_answering_while_the_database_is_unreachable() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let proxy = DbProxy::start(DbProxy::upstream_of(&schema.url)).await;
    let mock = start_mock(Default::default()).await;
    let config = format!(
        "database_url = \"{}\"\n{}",
        proxy.url_for(&schema.url),
        standard_config(mock, &format!("{EXTRA}[ledger]\nenabled = false\n"))
    );
    let first = Gateway::start(&config).await;
    let second = first.another_host("second-host").await;

    let seen = method(&first, Some(&first.api_key), "keys.create", json!({"name": "seen"}))
        .await
        .unwrap();
    let seen_key = seen["api_key"].as_str().unwrap().to_string();
    let unseen = method(&first, Some(&first.api_key), "keys.create", json!({"name": "unseen"}))
        .await
        .unwrap();
    let unseen_key = unseen["api_key"].as_str().unwrap().to_string();
    for gateway in [&first, &second] {
        let (status, _, body) = chat_with(gateway, &seen_key).await;
        assert_eq!(status, 200, "{body}");
    }

    proxy.cut();
    let cut_at = Instant::now();
    let mut answered = 0;
    let mut refused_unseen = false;
    while cut_at.elapsed() < OUTAGE {
        for gateway in [&first, &second] {
            let sent = Instant::now();
            let (status, _, body) = chat_with(gateway, &seen_key).await;
            assert_eq!(
                status,
                200,
                "a key already seen, {:?} into the outage: {body}",
                cut_at.elapsed()
            );
            assert!(
                sent.elapsed() < Duration::from_secs(3),
                "answered, but only after {:?}",
                sent.elapsed()
            );
            answered += 1;
        }
        // Past the first second, when the feed is known lost and every
        // cached key has been marked stale and re-read (and failed).
        if !refused_unseen && cut_at.elapsed() > Duration::from_secs(2) {
            let sent = Instant::now();
            let (status, headers, body) = chat_with(&second, &unseen_key).await;
            assert_eq!(status, 503, "a key never seen: no verdict without the database: {body}");
            assert_eq!(assert_error_shape(&body)["code"], "auth_unavailable", "{body}");
            assert!(headers.contains_key("retry-after"), "{headers:?}");
            assert!(
                sent.elapsed() < Duration::from_secs(3),
                "refused only after {:?}",
                sent.elapsed()
            );
            refused_unseen = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused_unseen);
    assert!(
        answered >= 2 * 10 * 2,
        "several requests a second on each gateway: {answered}"
    );
    eprintln!(
        "{answered} requests answered in {:?} without the database",
        cut_at.elapsed()
    );

    proxy.restore();
    // Back: the key is read from the database again on both gateways…
    let restored = Instant::now();
    for gateway in [&first, &second] {
        let (status, _, body) = chat_with(gateway, &seen_key).await;
        assert_eq!(status, 200, "{body}");
    }
    op_until_done(&first, &first.api_key, "keys.list", json!({}), Duration::from_secs(15)).await;
    eprintln!("the control plane answers {:?} after the restore", restored.elapsed());
    // …and a revocation made through one gateway reaches the other within
    // the documented second (docs/control-plane.md, "Immediate effect").
    op_until_done(
        &first,
        &first.api_key,
        "keys.revoke",
        json!({"key_id": seen["key_id"]}),
        Duration::from_secs(5),
    )
    .await;
    let revoked = Instant::now();
    loop {
        let (status, _, body) = chat_with(&second, &seen_key).await;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200, "{body}");
        assert!(
            revoked.elapsed() < Duration::from_secs(1),
            "a revoked key still answers {:?} after the revocation",
            revoked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("revocation seen after {:?}", revoked.elapsed());
    // The gateway that revoked it dropped it from its cache; until its
    // first read after the outage (within a second of its last failed
    // one) it has no verdict, never a 200.
    until_status(&first, &seen_key, 401, &[503], Duration::from_secs(2)).await;
    // The key never seen is now read and served like any other.
    until_status(&second, &unseen_key, 200, &[503], Duration::from_secs(2)).await;
    second.assert_still_serving().await;
}

/// Polls `gateway` with `key` until a chat answers `status`, allowing only
/// the statuses in `meanwhile` before it, for at most `limit`.
async fn until_status(gateway: &Gateway, key: &str, status: u16, meanwhile: &[u16], limit: Duration) {
    let start = Instant::now();
    loop {
        let (got, _, body) = chat_with(gateway, key).await;
        if got == status {
            return;
        }
        assert!(meanwhile.contains(&got), "{got} before {status}: {body}");
        assert!(
            start.elapsed() < limit,
            "still {got} after {:?}, expected {status}: {body}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Seconds of load before, during and after the cut; the run is
/// `TOLLGATE_OUTAGE_TEST_SECS=600` (a 5-minute cut in 10 minutes).
fn outage_test_secs() -> u64 {
    std::env::var("TOLLGATE_OUTAGE_TEST_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(24)
}

/// Two gateways on one Postgres with the wallet on, 16 clients, the
/// database cut for the middle half of the run: every request answers, from
/// the wallet grants and the journal; once the database is back both
/// journals drain, the ledger verifies, the wallet's spend is the sum of
/// the answered costs, and the NATS sink holds exactly one event per answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_through_an_outage_are_billed_and_evented_exactly_once() {
    let Some(nats) = common::nats::Nats::connect().await else {
        return;
    };
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let proxy = DbProxy::start(DbProxy::upstream_of(&schema.url)).await;
    let mock = start_mock(Default::default()).await;
    // The free plan without its monthly request limit: its slices would
    // otherwise run out during the cut (a documented 503, not what this
    // test measures).
    let extra = format!(
        "{}\n[billing.plans.free]\n",
        crate::metering::metering_config(&nats.sink())
    );
    let config = format!(
        "database_url = \"{}\"\n{}",
        proxy.url_for(&schema.url),
        standard_config(mock, &extra)
    );
    let first = Gateway::start_with(&config, "100").await;
    let second = first.another_host("second-host").await;
    let posted = |gateway: &Gateway| common::nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    let initial = posted(&first);

    let total = Duration::from_secs(outage_test_secs());
    let started = Instant::now();
    let workers: Vec<_> = (0..16)
        .map(|worker| {
            let gateway = if worker % 2 == 0 { &first } else { &second };
            let (http, url, key) = (gateway.http.clone(), gateway.url.clone(), gateway.api_key.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut failures = Vec::new();
                let mut i = 0;
                while started.elapsed() < total {
                    i += 1;
                    let response = http
                        .post(format!("{url}/v1/chat/completions"))
                        .bearer_auth(&key)
                        .json(&json!({"model": "mock/small", "messages": [{"role": "user", "content": format!("w{worker} r{i}")}]}))
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await;
                    let (status, body) = match response {
                        Ok(response) => (response.status().as_u16(), response.json::<Value>().await.unwrap_or_default()),
                        Err(error) => (0, json!(error.to_string())),
                    };
                    match status {
                        200 => answers.push((
                            common::nanos(body["service"]["cost_usd"].as_str().unwrap()),
                            body["service"]["request_id"].as_str().unwrap().to_string(),
                        )),
                        _ => failures.push((started.elapsed(), status, body)),
                    }
                }
                (answers, failures)
            })
        })
        .collect();
    tokio::time::sleep(total / 4).await;
    proxy.cut();
    let cut_at = Instant::now();
    tokio::time::sleep(total / 2).await;
    proxy.restore();
    eprintln!("the database was cut for {:?}", cut_at.elapsed());
    let mut answered = Vec::new();
    for worker in workers {
        let (answers, failures) = worker.await.unwrap();
        assert!(
            failures.is_empty(),
            "requests failed: {:?}",
            &failures[..failures.len().min(5)]
        );
        answered.extend(answers);
    }
    assert!(answered.len() > 100, "the load ran: {} answers", answered.len());

    // Both journals drain once the database is back (a long cut leaves a
    // long journal: allow as long as the cut).
    let drained_by = Instant::now() + (total / 2).max(Duration::from_secs(60));
    for gateway in [&first, &second] {
        let deadline = drained_by;
        loop {
            let ready: Value = gateway.get("/readyz").send().await.unwrap().json().await.unwrap();
            if ready["ledger"]["lag"] == 0 && ready["ledger"]["database_reachable"] == true {
                break;
            }
            assert!(Instant::now() < deadline, "the journal did not drain: {ready}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let verify = first.admin(&["ledger-verify"]);
    assert!(verify.contains("verified"), "{verify}");
    let billed: i64 = answered.iter().map(|(cost, _)| cost).sum();
    assert_eq!(
        initial - posted(&first),
        billed,
        "the spend is the sum of the answered costs"
    );

    // One event per answer at the sink, none twice.
    let delivered = nats
        .drain(|delivered| delivered.len() >= answered.len(), Duration::from_secs(60))
        .await;
    let mut events: std::collections::BTreeMap<String, usize> = Default::default();
    for delivered in delivered {
        *events
            .entry(delivered.event["id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let missing = answered.iter().filter(|(_, id)| !events.contains_key(id)).count();
    let doubled = events.values().filter(|copies| **copies > 1).count();
    assert_eq!((missing, doubled), (0, 0), "events missing, events delivered twice");
    assert_eq!(
        events.len(),
        answered.len(),
        "no event for a request that was not answered"
    );
    eprintln!(
        "{} answers, {:?} of them without the database; every one billed and evented once",
        answered.len(),
        total / 2
    );
}
