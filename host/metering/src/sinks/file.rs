//! JSON-lines file sink: one structured CloudEvent per line, synced to disk
//! before the batch counts as delivered.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Delivery, DeliveryFuture, Sink, StoredEvent};

pub struct FileSink {
    path: PathBuf,
}

impl FileSink {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_data()
}

impl Sink for FileSink {
    fn deliver<'a>(&'a self, events: &'a [StoredEvent]) -> DeliveryFuture<'a> {
        Box::pin(async move {
            let mut text = String::with_capacity(events.iter().map(|e| e.json.len() + 1).sum());
            for event in events {
                text.push_str(&event.json);
                text.push('\n');
            }
            // One write of whole lines: a failure leaves at most a torn last
            // line, and the batch is retried as a whole.
            let path = self.path.clone();
            let written = tokio::task::spawn_blocking(move || append(&path, &text)).await;
            match written {
                Ok(Ok(())) => Delivery::all(events.len()),
                Ok(Err(e)) => Delivery::failed_at(0, format!("{}: {e}", self.path.display())),
                Err(e) => Delivery::failed_at(0, format!("file sink task failed: {e}")),
            }
        })
    }
}
