//! JSON-lines file sink: one structured CloudEvent per line, synced to disk
//! before the batch counts as delivered, rotated by size and by UTC day
//! (`file/rotate.rs` owns the rotated files: names, compression, retention).
//!
//! The dispatcher delivers at least once: a crash, a failed cursor write or a
//! lost lease between writing a batch and recording it sends the same events
//! again, from the sink's cursor. The file keeps each event once all the same.
//! Redelivery starts at the cursor and carries at most one batch, and the
//! unrecorded events were written by one append: the tail of the last file
//! written. So the sink remembers the ids of the last events it wrote (read
//! back from that tail when it starts) and skips those when they come again.
//! Rotation happens only between batches, before a write, and never moves an
//! event: a rename is the whole step, so every event stays in exactly one file.

mod rotate;

use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{Delivery, DeliveryFuture, Sink, StoredEvent};
use rotate::Layout;
pub use rotate::Rotation;

/// Milliseconds since the Unix epoch; UTC days for rotation come from it.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

const DAY_MS: i64 = 86_400_000;

pub struct FileSink {
    layout: Arc<Layout>,
    state: Arc<Mutex<State>>,
    clock: Clock,
}

/// What the writer knows about the active file.
struct State {
    /// False at start and after a failed write: the next delivery first
    /// repairs the file's tail and reads back the ids it ends with.
    ready: bool,
    active_bytes: u64,
    /// The UTC day (days since the epoch) the active file's events belong to.
    active_day: i64,
    recent: Recent,
}

/// The ids of the last `capacity` events written, oldest first.
struct Recent {
    capacity: usize,
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl Recent {
    fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            order: VecDeque::new(),
            ids: HashSet::new(),
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    fn push(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.order.push_back(id);
        }
        while self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
    }
}

impl FileSink {
    /// `remember`: how many of the last written ids to skip when they come
    /// again; at least the dispatcher's batch size.
    pub fn new(path: PathBuf, rotation: Rotation, remember: usize, clock: Clock) -> Self {
        Self {
            layout: Arc::new(Layout::new(path, rotation)),
            state: Arc::new(Mutex::new(State {
                ready: false,
                active_bytes: 0,
                active_day: 0,
                recent: Recent::new(remember),
            })),
            clock,
        }
    }
}

impl Sink for FileSink {
    fn deliver<'a>(&'a self, events: &'a [StoredEvent]) -> DeliveryFuture<'a> {
        Box::pin(async move {
            let (layout, state, now) = (self.layout.clone(), self.state.clone(), (self.clock)());
            let batch = events.to_vec();
            let written = tokio::task::spawn_blocking(move || {
                let mut state = state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                state.append(&layout, &batch, now)
            })
            .await;
            match written {
                Ok(Ok(rotated)) => {
                    if rotated {
                        // Compression and retention run beside the dispatcher,
                        // which goes on writing the new active file.
                        let layout = self.layout.clone();
                        tokio::task::spawn_blocking(move || layout.maintain());
                    }
                    Delivery::all(events.len())
                }
                Ok(Err(e)) => Delivery::failed_at(0, format!("{}: {e}", self.layout.active.display())),
                Err(e) => Delivery::failed_at(0, format!("file sink task failed: {e}")),
            }
        })
    }
}

impl State {
    /// Writes the events not written before; returns whether the active file
    /// was rotated (or found rotated files to look after at start). After a
    /// failure the next delivery starts from what is on disk.
    fn append(&mut self, layout: &Layout, events: &[StoredEvent], now_ms: i64) -> std::io::Result<bool> {
        let appended = self.try_append(layout, events, now_ms);
        if appended.is_err() {
            self.ready = false;
        }
        appended
    }

    fn try_append(&mut self, layout: &Layout, events: &[StoredEvent], now_ms: i64) -> std::io::Result<bool> {
        let mut maintain = false;
        if !self.ready {
            self.recover(layout)?;
            maintain = true;
        }
        let mut text = String::new();
        let mut fresh = Vec::new();
        for event in events.iter().filter(|e| !self.recent.contains(&e.id)) {
            text.push_str(&event.json);
            text.push('\n');
            fresh.push(event.id.clone());
        }
        if fresh.is_empty() {
            return Ok(maintain);
        }

        let today = now_ms.div_euclid(DAY_MS);
        let rotation = &layout.rotation;
        let new_day = rotation.rotate_daily && today != self.active_day;
        let too_big = rotation.max_bytes > 0 && self.active_bytes + text.len() as u64 > rotation.max_bytes;
        if self.active_bytes > 0 && (new_day || too_big) {
            layout.rotate(self.active_day)?;
            self.active_bytes = 0;
            maintain = true;
        }
        if self.active_bytes == 0 {
            self.active_day = today;
        }

        // One write of whole lines. If it fails, cut the file back to where it
        // was; should that fail too, the next delivery drops any torn line and
        // reads back which events did arrive.
        append_lines(&layout.active, &text, self.active_bytes)?;
        self.active_bytes += text.len() as u64;
        for id in fresh {
            self.recent.push(id);
        }
        Ok(maintain)
    }

    /// Drops a torn last line from the active file, learns its size and day,
    /// and reads back the ids of the last events written: from the active file,
    /// or, when it is empty, from the newest rotated one (a crash between a
    /// rotation and the next write).
    fn recover(&mut self, layout: &Layout) -> std::io::Result<()> {
        if let Some(dir) = layout.active.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut tail = Vec::new();
        match OpenOptions::new().read(true).write(true).open(&layout.active) {
            Ok(mut file) => {
                // Its last write's day is its events' day: a file never spans two.
                let modified = file.metadata()?.modified()?;
                let modified_ms = chrono::DateTime::<chrono::Utc>::from(modified).timestamp_millis();
                self.active_day = modified_ms.div_euclid(DAY_MS);
                let whole = last_lines(&mut file, self.recent.capacity, &mut tail)?;
                file.set_len(whole)?;
                file.sync_data()?;
                self.active_bytes = whole;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.active_bytes = 0,
            Err(e) => return Err(e),
        }
        if tail.is_empty() {
            tail = layout.newest_rotated_tail(self.recent.capacity)?;
        }
        self.recent = Recent::new(self.recent.capacity);
        for id in tail {
            self.recent.push(id);
        }
        self.ready = true;
        Ok(())
    }
}

/// Appends `text` and syncs it; on failure, cuts the file back to `keep` bytes.
fn append_lines(path: &std::path::Path, text: &str, keep: u64) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_data());
    if written.is_err() {
        let _ = file.set_len(keep);
    }
    written
}

/// The ids of up to `count` last whole lines of `file`, oldest first, and
/// the length of its whole lines (a torn last line excluded). Reads backwards
/// in growing chunks, so a large file costs only its tail.
fn last_lines(file: &mut File, count: usize, ids: &mut Vec<String>) -> std::io::Result<u64> {
    let len = file.metadata()?.len();
    let mut chunk = 64 * 1024u64;
    loop {
        let start = len.saturating_sub(chunk);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::with_capacity((len - start) as usize);
        (&mut *file).take(len - start).read_to_end(&mut bytes)?;
        let whole_end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let whole = start + whole_end as u64;
        // Without the file's start, the first line may be cut: skip it.
        let from = match start {
            0 => 0,
            _ => bytes.iter().position(|b| *b == b'\n').map_or(whole_end, |i| i + 1),
        };
        let lines: Vec<&[u8]> = bytes[from.min(whole_end)..whole_end]
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        if lines.len() >= count || start == 0 {
            ids.clear();
            let skip = lines.len().saturating_sub(count);
            ids.extend(lines[skip..].iter().filter_map(|line| event_id(line)));
            return Ok(whole);
        }
        chunk *= 2;
    }
}

/// The `id` of one event line; `None` for a line that is not an event.
fn event_id(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    serde_json::from_slice::<Id>(line).ok().map(|e| e.id)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;

    fn event(n: usize) -> StoredEvent {
        StoredEvent {
            id: format!("req_{n:04}"),
            json: format!(r#"{{"id":"req_{n:04}","data":{{"pad":"{}"}}}}"#, "x".repeat(60)),
        }
    }

    fn ids_in(text: &str) -> Vec<String> {
        text.lines().map(|l| event_id(l.as_bytes()).unwrap()).collect()
    }

    fn sink(path: &std::path::Path, rotation: Rotation, now: &Arc<AtomicI64>) -> FileSink {
        let now = now.clone();
        FileSink::new(
            path.to_path_buf(),
            rotation,
            8,
            Arc::new(move || now.load(Ordering::SeqCst)),
        )
    }

    fn no_rotation() -> Rotation {
        Rotation {
            max_bytes: 0,
            rotate_daily: false,
            keep: 10,
            compress: false,
        }
    }

    #[tokio::test]
    async fn a_redelivered_batch_is_written_once_also_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.jsonl");
        let now = Arc::new(AtomicI64::new(1_700_000_000_000));
        let events: Vec<StoredEvent> = (0..6).map(event).collect();

        let first = sink(&path, no_rotation(), &now);
        assert_eq!(first.deliver(&events[..4]).await.delivered, 4);
        // The cursor write failed: the dispatcher reads from the old cursor again.
        assert_eq!(first.deliver(&events[..5]).await.delivered, 5);
        drop(first);
        // A crash before the cursor moved; the torn line of a write cut short
        // is dropped at the next start.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(br#"{"id":"req_0005","da"#)
            .unwrap();
        let restarted = sink(&path, no_rotation(), &now);
        assert_eq!(restarted.deliver(&events[2..]).await.delivered, 4);

        let expected: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
        assert_eq!(ids_in(&std::fs::read_to_string(&path).unwrap()), expected);
    }

    #[tokio::test]
    async fn size_and_day_rotate_between_batches_and_nothing_is_lost_or_repeated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.jsonl");
        // 2023-11-14T23:59:00Z
        let now = Arc::new(AtomicI64::new(1_700_006_340_000));
        let rotation = Rotation {
            max_bytes: 400,
            rotate_daily: true,
            keep: 100,
            compress: true,
        };
        let events: Vec<StoredEvent> = (0..20).map(event).collect();
        let sink = sink(&path, rotation, &now);
        for batch in events[..10].chunks(2) {
            sink.deliver(batch).await;
        }
        now.fetch_add(120_000, Ordering::SeqCst);
        for batch in events[10..].chunks(3) {
            sink.deliver(batch).await;
        }
        // A batch delivered again right after a rotation: its events are in
        // the rotated file now, and still not written twice.
        sink.deliver(&events[18..]).await;
        sink.layout.maintain();

        let mut seen = ids_in(&std::fs::read_to_string(&path).unwrap());
        let rotated = sink.layout.rotated().unwrap();
        assert!(rotated.iter().all(|r| r.compressed), "{rotated:?}");
        let days: HashSet<&str> = rotated.iter().map(|r| r.day.as_str()).collect();
        assert_eq!(days, HashSet::from(["2023-11-14", "2023-11-15"]));
        for file in &rotated {
            let bytes = zstd::decode_all(File::open(dir.path().join(&file.name)).unwrap()).unwrap();
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.len() <= 400, "{} holds {} bytes", file.name, text.len());
            let ids = ids_in(&text);
            let first_of_next_day = ids.iter().any(|id| id.as_str() >= "req_0010");
            assert_eq!(file.day == "2023-11-15", first_of_next_day, "{}: {ids:?}", file.name);
            seen.extend(ids);
        }
        seen.sort();
        let expected: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
        assert_eq!(seen, expected);
    }
}
