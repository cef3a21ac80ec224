//! The archive in the blob store: the audit log's archived rows under
//! `audit_log/` (one file per stretch of the chain, named by its first and
//! last `seq`), and the request log's: one zstd-compressed JSON Lines
//! file per batch of requests, under `request_log/day=YYYY-MM-DD/` (UTC, by
//! settlement), each line a request exactly as `tollgate admin request`
//! prints it. Readable with standard tools: `zstdcat *.jsonl.zst | jq`.
//!
//! A file is named `<first id>-<last id>-<unique>.jsonl.zst` by the smallest
//! and largest request id it holds. Request ids are time-ordered (UUID v7), so
//! a lookup reads only the days around the id's time and, there, only files
//! whose range covers it.

use std::path::Path;

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::PutPayload;
use object_store::path::Path as ObjectPath;
use serde_json::Value;

use tollgate_ledger::archive::ArchivedRow;
use tollgate_registry::{OpenedStore, StorageConfig};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// zstd's default level: fast, and JSON Lines still shrink about tenfold.
const LEVEL: i32 = 3;

#[derive(Clone)]
pub struct Archive {
    opened: OpenedStore,
}

/// An archived request and the file it was found in.
pub struct Found {
    pub record: Value,
    pub location: String,
}

impl Archive {
    pub fn open(config: &StorageConfig, local_root: &Path) -> anyhow::Result<Self> {
        let opened = OpenedStore::open(config, local_root).map_err(|e| anyhow::anyhow!("archive storage: {e}"))?;
        Ok(Self { opened })
    }

    /// Where the archive is, for messages.
    pub fn describe(&self) -> &str {
        &self.opened.description
    }

    fn day_dir(&self, day: i64) -> String {
        let date = chrono::DateTime::from_timestamp_millis(day * DAY_MS)
            .map(|at| at.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "unknown".into());
        format!("{}request_log/day={date}/", self.opened.prefix)
    }

    /// Writes `rows` (all settled on one UTC day) as one file; returns its
    /// path in the store.
    pub async fn store(&self, rows: &[ArchivedRow]) -> anyhow::Result<String> {
        let day = rows[0].settled_at_ms.div_euclid(DAY_MS);
        let first = rows.iter().map(|r| r.request_id.as_str()).min().unwrap_or_default();
        let last = rows.iter().map(|r| r.request_id.as_str()).max().unwrap_or_default();
        let unique = uuid::Uuid::now_v7().simple();
        let path = format!("{}{first}-{last}-{unique}.jsonl.zst", self.day_dir(day));
        let mut lines = Vec::with_capacity(rows.len() * 512);
        for row in rows {
            serde_json::to_writer(&mut lines, &row.record)?;
            lines.push(b'\n');
        }
        self.put_compressed(&path, lines).await?;
        Ok(path)
    }

    /// Writes audit rows (consecutive in the chain) as one file under
    /// `audit_log/`, named by their first and last `seq`; returns its path.
    pub async fn store_audit(&self, rows: &[tollgate_audit::Record]) -> anyhow::Result<String> {
        let (first, last) = (rows[0].seq, rows[rows.len() - 1].seq);
        let unique = uuid::Uuid::now_v7().simple();
        let path = format!(
            "{}audit_log/{first:012}-{last:012}-{unique}.jsonl.zst",
            self.opened.prefix
        );
        let mut lines = Vec::with_capacity(rows.len() * 1024);
        for row in rows {
            serde_json::to_writer(&mut lines, row)?;
            lines.push(b'\n');
        }
        self.put_compressed(&path, lines).await?;
        Ok(path)
    }

    async fn put_compressed(&self, path: &str, lines: Vec<u8>) -> anyhow::Result<()> {
        let compressed = tokio::task::spawn_blocking(move || zstd::encode_all(lines.as_slice(), LEVEL)).await??;
        self.opened
            .store
            .put(&ObjectPath::from(path), PutPayload::from(compressed))
            .await?;
        Ok(())
    }

    /// Looks `request_id` up in the archive.
    pub async fn find(&self, request_id: &str) -> anyhow::Result<Option<Found>> {
        let prefixes: Vec<String> = match started_day(request_id) {
            // Settled the day it started, or soon after (a long stream).
            Some(day) => (day..=day + 1).map(|d| self.day_dir(d)).collect(),
            None => vec![format!("{}request_log/", self.opened.prefix)],
        };
        for prefix in prefixes {
            let listed: Vec<object_store::ObjectMeta> = self
                .opened
                .store
                .list(Some(&ObjectPath::from(prefix.as_str())))
                .try_collect()
                .await?;
            for meta in listed {
                if !covers(meta.location.filename().unwrap_or_default(), request_id) {
                    continue;
                }
                let content = self.opened.store.get(&meta.location).await?.bytes().await?;
                if let Some(record) = search(content, request_id).await? {
                    return Ok(Some(Found {
                        record,
                        location: meta.location.to_string(),
                    }));
                }
            }
        }
        Ok(None)
    }
}

/// The UTC day a request started, from its id (`req_<UUID v7>`: the first
/// 48 bits are the Unix time in milliseconds).
fn started_day(request_id: &str) -> Option<i64> {
    let hex = request_id.strip_prefix("req_")?;
    let uuid = uuid::Uuid::try_parse(hex).ok()?;
    if uuid.get_version_num() != 7 {
        return None;
    }
    let (seconds, _) = uuid.get_timestamp()?.to_unix();
    Some((seconds as i64 * 1000).div_euclid(DAY_MS))
}

/// Whether a file named `<first>-<last>-<unique>.jsonl.zst` may hold `id`.
fn covers(file_name: &str, id: &str) -> bool {
    let mut parts = file_name.split('-');
    match (parts.next(), parts.next()) {
        (Some(first), Some(last)) => first <= id && id <= last,
        _ => false,
    }
}

async fn search(content: Bytes, request_id: &str) -> anyhow::Result<Option<Value>> {
    let needle = format!("\"request_id\":\"{request_id}\"");
    let found = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<Value>> {
        let lines = zstd::decode_all(content.as_ref())?;
        for line in lines.split(|b| *b == b'\n') {
            let text = std::str::from_utf8(line).unwrap_or_default();
            if text.contains(&needle) {
                return Ok(Some(serde_json::from_str(text)?));
            }
        }
        Ok(None)
    })
    .await??;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_comes_from_the_request_id() {
        // 2026-11-24T12:00:00Z = 1_795_521_600_000 ms.
        let id = format!("req_{:012x}70008000000000000000", 1_795_521_600_000_i64);
        assert_eq!(started_day(&id), Some(1_795_521_600_000 / DAY_MS));
        assert_eq!(started_day("req_tool"), None);
    }

    #[test]
    fn a_file_name_covers_its_id_range() {
        assert!(covers("req_a-req_c-u.jsonl.zst", "req_b"));
        assert!(covers("req_a-req_c-u.jsonl.zst", "req_a"));
        assert!(!covers("req_a-req_c-u.jsonl.zst", "req_d"));
        assert!(!covers("junk", "req_a"));
    }
}
