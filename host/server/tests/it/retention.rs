//! Request-log retention (docs/ledger.md, "Retention"): rows past the
//! retention period, once every sink has their events, move to the archive
//! (a local directory, or an S3-compatible store) and leave the database;
//! `tollgate admin request` still finds them, and the books still balance.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Gateway, PgSchema, standard_config, start_mock};
use crate::metering::{TestSink, http_sink, metering_config, send_requests};
use crate::registry::start_moto;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// `tollgate admin archive --as-of` `days_ahead` days from now.
fn archive_as_of(gateway: &Gateway, days_ahead: i64) -> Value {
    let at = chrono::Utc::now() + chrono::Duration::milliseconds(days_ahead * DAY_MS);
    let printed = gateway.admin(&["archive", "--as-of", &at.to_rfc3339()]);
    serde_json::from_str(&printed).unwrap()
}

fn request(gateway: &Gateway, id: &str) -> Value {
    serde_json::from_str(&gateway.admin(&["request", id])).unwrap()
}

/// Runs the retention story on the gateway's database, with `store` as the
/// `[retention.store]` table; returns the archive files' paths.
async fn retention_story(database_url: &str, store: &str) -> (Gateway, BTreeSet<String>, Vec<String>) {
    let mock = start_mock(Default::default()).await;
    let (sink, address) = TestSink::start(false).await;
    let extra = format!(
        "{}\n[retention]\nrequest_log_days = 1\nrows_per_file = 7\n{store}",
        metering_config(&http_sink(address))
    );
    let gateway = Gateway::start(&format!("{database_url}{}", standard_config(mock, &extra))).await;
    let ids = send_requests(&gateway, 20, 4).await;
    let posted_before = gateway.wallet()["posted_usd"].clone();

    // Past the retention period, but the sink has not acknowledged them.
    let report = archive_as_of(&gateway, 2);
    assert_eq!(
        report["archived"], 0,
        "nothing is archived before every sink has it: {report}"
    );
    let first = ids.first().unwrap();
    assert!(request(&gateway, first).get("archived_in").is_none());

    sink.up.store(true, Ordering::SeqCst);
    let delivered = sink.wait_for(&ids, Duration::from_secs(60)).await;
    assert_eq!(delivered.len(), ids.len(), "the sink got every event");

    // Delivered, but not yet past the retention period.
    let report = archive_as_of(&gateway, 0);
    assert_eq!(report["archived"], 0, "{report}");

    let report = archive_as_of(&gateway, 2);
    assert_eq!(report["archived"], 20, "{report}");
    assert_eq!(report["deleted"], 20, "{report}");
    let files: Vec<String> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert!(files.len() >= 3, "at most 7 requests per file: {files:?}");
    assert!(
        files
            .iter()
            .all(|f| f.contains("request_log/day=") && f.ends_with(".jsonl.zst")),
        "{files:?}"
    );

    for id in &ids {
        let row = request(&gateway, id);
        assert_eq!(row["request_id"], id.as_str());
        assert!(
            row["archived_in"].as_str().unwrap().contains("request_log/day="),
            "{row}"
        );
        assert_eq!(row["provider"], "mock", "{row}");
        assert_eq!(row["attempts"][0]["outcome"], "success", "the full trace: {row}");
        assert_eq!(
            delivered[id][0]["data"]["cost"], row["cost_usd"],
            "the archive and the event agree on the cost"
        );
    }
    // A second pass finds nothing more; money history is untouched.
    assert_eq!(archive_as_of(&gateway, 2)["archived"], 0);
    assert_eq!(gateway.wallet()["posted_usd"], posted_before);
    let verified = gateway.admin(&["ledger-verify"]);
    assert!(verified.contains("verified"), "{verified}");
    // The gateway keeps serving and logging.
    let more = send_requests(&gateway, 2, 2).await;
    assert!(request(&gateway, more.first().unwrap()).get("archived_in").is_none());
    (gateway, ids, files)
}

#[tokio::test(flavor = "multi_thread")]
async fn old_rows_move_to_a_local_archive_on_sqlite() {
    let (gateway, ids, files) = retention_story("", "").await;
    // Standard tools read the files: zstd-compressed JSON Lines, each request once.
    let root = gateway.dir.path().join("data/archive");
    let mut archived = Vec::new();
    for file in &files {
        let compressed = std::fs::read(root.join(file)).unwrap();
        let lines = zstd::decode_all(compressed.as_slice()).unwrap();
        for line in String::from_utf8(lines).unwrap().lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            archived.push(row["request_id"].as_str().unwrap().to_string());
        }
    }
    archived.sort();
    assert_eq!(
        archived,
        ids.iter().cloned().collect::<Vec<_>>(),
        "each request exactly once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn old_rows_move_to_an_s3_archive_on_postgres() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let Some((_moto, endpoint)) = start_moto().await else {
        return;
    };
    let store = format!(
        "[retention.store]\nbackend = \"s3\"\nbucket = \"tollgate-test\"\nendpoint = \"{endpoint}\"\n\
         access_key_id = \"test\"\nsecret_access_key = \"test\"\nprefix = \"archive\"\n"
    );
    let database_url = format!("database_url = \"{}\"\n", schema.url);
    let (_gateway, _ids, files) = retention_story(&database_url, &store).await;
    let listing = reqwest::get(format!(
        "{endpoint}/tollgate-test?list-type=2&prefix=archive/request_log/"
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    for file in &files {
        assert!(listing.contains(file.as_str()), "{file} is in the bucket: {listing}");
    }
}
