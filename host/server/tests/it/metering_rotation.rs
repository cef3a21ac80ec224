//! The metering file sink's rotation against the real binary: a run that
//! crosses the size limit and a UTC midnight (the gateway's rotation clock is
//! shifted, so midnight comes 30 s after the start) leaves zstd-compressed
//! rotated files named by day, and every request of the log is in exactly one
//! file, once.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Gateway, standard_config, start_mock};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tollgate_core::db::{Database, SqliteSync, now_ms, sqlite_url};

const DAY_MS: i64 = 86_400_000;
const MAX_BYTES: usize = 20_000;

/// Sends `count` chat requests, 8 at a time; returns their request ids.
async fn send(gateway: &Gateway, count: usize, phase: &str) -> BTreeSet<String> {
    let requests = (0..count).map(|i| {
        gateway
            .post("/v1/chat/completions")
            .json(&json!({"model": "mock/small", "messages": [{"role": "user", "content": format!("{phase} {i}")}]}))
            .send()
    });
    let responses: Vec<_> = futures_util::stream::iter(requests).buffer_unordered(8).collect().await;
    responses
        .into_iter()
        .map(|response| {
            let response = response.unwrap();
            assert_eq!(response.status(), 200);
            response.headers()["x-request-id"].to_str().unwrap().to_string()
        })
        .collect()
}

/// Every event line in `dir`, by file name: the active file, rotated plain
/// files and rotated `.zst` files.
fn events_by_file(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let bytes = match std::fs::read(dir.join(&name)) {
            Ok(bytes) => bytes,
            Err(_) => continue, // compressed and removed meanwhile
        };
        let text = match name.ends_with(".zst") {
            true => zstd::decode_all(&bytes[..]).unwrap(),
            false if name.ends_with(".jsonl") => bytes,
            false => continue,
        };
        let ids = String::from_utf8(text)
            .unwrap()
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        out.insert(name, ids);
    }
    out
}

/// Waits until every one of `ids` is in some file.
async fn wait_for_events(dir: &Path, ids: &BTreeSet<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: BTreeSet<String> = events_by_file(dir).into_values().flatten().collect();
        if ids.is_subset(&seen) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} events never reached the files",
            ids.difference(&seen).count()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn day(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .format("%Y-%m-%d")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotation_across_the_size_limit_and_midnight_keeps_every_event_once() {
    let mock = start_mock(Default::default()).await;
    // The gateway's rotation clock reaches the next UTC midnight 30 s from now: time to start
    // and to write the first requests before it, on a loaded machine too.
    let start = now_ms();
    let midnight = (start / DAY_MS + 1) * DAY_MS;
    let offset = midnight - (start + 30_000);
    let metering = format!(
        "[metering]\nlinger_ms = 5\npoll_interval_ms = 100\n\
         [[metering.sinks]]\nkind = \"file\"\nmax_bytes = {MAX_BYTES}\nkeep = 1000\n"
    );
    let gateway = Gateway::start_with_env(
        &standard_config(mock, &metering),
        "100",
        &[("TOLLGATE_TEST_CLOCK_OFFSET_MS", &offset.to_string())],
    )
    .await;
    let events = gateway.dir.path().join("data").join("events");

    let before = send(&gateway, 150, "before").await;
    wait_for_events(&events, &before).await;
    assert!(
        now_ms() + offset < midnight - 1_000,
        "the first requests took too long to reach the file before the gateway's midnight"
    );
    let wait = midnight + 1_000 - (now_ms() + offset);
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    let after = send(&gateway, 150, "after").await;
    wait_for_events(&events, &after).await;

    // Compression runs beside delivery: wait until no rotated file is plain.
    let deadline = Instant::now() + Duration::from_secs(30);
    let files = loop {
        let files = events_by_file(&events);
        let pending: Vec<&String> = files
            .keys()
            .filter(|n| n.as_str() != "usage.jsonl" && !n.ends_with(".zst"))
            .collect();
        if pending.is_empty() {
            break files;
        }
        assert!(Instant::now() < deadline, "rotated files never compressed: {pending:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let listing: Vec<String> = files
        .iter()
        .map(|(name, ids)| format!("{name}: {}", ids.len()))
        .collect();
    eprintln!("event files: {listing:?}");

    // Each event in exactly one file, once.
    let mut copies: BTreeMap<&String, usize> = BTreeMap::new();
    for id in files.values().flatten() {
        *copies.entry(id).or_default() += 1;
    }
    let repeated: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "events written twice: {repeated:?}");
    let written: BTreeSet<String> = copies.keys().map(|id| id.to_string()).collect();
    let sent: BTreeSet<String> = before.union(&after).cloned().collect();
    assert_eq!(written, sent, "the files hold exactly the requests sent");

    // … and exactly the request log's rows.
    let database = Database::open(
        &sqlite_url(&gateway.dir.path().join("data").join("tollgate.db")),
        SqliteSync::Normal,
    )
    .await
    .unwrap();
    let logged: Vec<String> = sqlx::query_scalar("SELECT request_id FROM request_log")
        .fetch_all(&database.pool)
        .await
        .unwrap();
    assert_eq!(logged.len(), sent.len());
    assert_eq!(logged.into_iter().collect::<BTreeSet<_>>(), written);
    let shown = gateway.admin(&["request", after.first().unwrap()]);
    assert!(shown.contains(after.first().unwrap().as_str()), "{shown}");

    // Rotated by size within each day (a file passes max_bytes only by its
    // last delivery) and at midnight; named by the day of their events, which
    // never mix across the day.
    let (yesterday, today) = (day(midnight - 1), day(midnight));
    let rotated_on = |d: &str| -> Vec<&String> {
        files
            .keys()
            .filter(|n| n.starts_with(&format!("usage.{d}.")) && n.ends_with(".jsonl.zst"))
            .collect()
    };
    assert!(
        rotated_on(&yesterday).len() >= 2,
        "size and midnight rotations: {:?}",
        files.keys()
    );
    assert!(
        !rotated_on(&today).is_empty(),
        "size rotations after midnight: {:?}",
        files.keys()
    );
    for (name, ids) in &files {
        let phase = match name.contains(&yesterday) {
            true => &before,
            false => &after,
        };
        assert!(ids.iter().all(|id| phase.contains(id)), "{name} mixes the days");
    }
    // Readable with the standard tool, where it is installed.
    let first = rotated_on(&yesterday)[0];
    if let Ok(output) = std::process::Command::new("zstd")
        .arg("-dc")
        .arg(events.join(first))
        .output()
    {
        assert!(output.status.success());
        let lines = String::from_utf8(output.stdout).unwrap().lines().count();
        assert_eq!(lines, files[first].len());
    }
}
