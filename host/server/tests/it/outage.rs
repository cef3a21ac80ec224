//! Serving through a database outage (docs/operations.md, "Database
//! outages"): two gateways on one Postgres, reached through a proxy the test
//! cuts. Keys they have seen keep answering while it is cut; a key neither
//! has seen gets 503 `auth_unavailable`, not a 401, and the gateways keep
//! serving; once the database is back, a revocation is refused within the
//! second docs/control-plane.md promises. The wallet is off (`[ledger]
//! enabled = false`): settling through an outage is the ledger's own concern.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

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
