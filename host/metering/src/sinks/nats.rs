//! NATS JetStream sink: each event is published as structured CloudEvents JSON
//! with `Nats-Msg-Id` set to the event id, so JetStream's duplicate window drops
//! redeliveries, and counts as delivered once the stream acknowledged it.

use std::time::Duration;

use async_nats::jetstream;
use tokio::sync::Mutex;

use super::{Delivery, DeliveryFuture, Sink, StoredEvent};

pub struct NatsSink {
    url: String,
    subject: String,
    stream: Option<String>,
    duplicate_window: Duration,
    /// Connected on first use, so a NATS outage at start only delays events.
    context: Mutex<Option<jetstream::Context>>,
}

impl NatsSink {
    pub fn new(url: &str, subject: &str, stream: Option<&str>, duplicate_window: Duration) -> Self {
        Self {
            url: url.to_string(),
            subject: subject.to_string(),
            stream: stream.map(str::to_string),
            duplicate_window,
            context: Mutex::new(None),
        }
    }

    async fn context(&self) -> Result<jetstream::Context, String> {
        let mut slot = self.context.lock().await;
        if let Some(context) = &*slot {
            return Ok(context.clone());
        }
        let client = async_nats::connect(&self.url)
            .await
            .map_err(|e| format!("cannot connect to NATS at {}: {e}", self.url))?;
        let context = jetstream::new(client);
        if let Some(stream) = &self.stream {
            context
                .get_or_create_stream(jetstream::stream::Config {
                    name: stream.clone(),
                    subjects: vec![self.subject.clone()],
                    duplicate_window: self.duplicate_window,
                    ..Default::default()
                })
                .await
                .map_err(|e| format!("cannot create JetStream stream '{stream}': {e}"))?;
        }
        *slot = Some(context.clone());
        Ok(context)
    }
}

impl Sink for NatsSink {
    fn deliver<'a>(&'a self, events: &'a [StoredEvent]) -> DeliveryFuture<'a> {
        Box::pin(async move {
            let context = match self.context().await {
                Ok(context) => context,
                Err(e) => return Delivery::failed_at(0, e),
            };
            // Publish the whole batch, then collect the acknowledgements in
            // order: the delivered prefix ends at the first one missing.
            let mut pending = Vec::with_capacity(events.len());
            for event in events {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
                headers.insert("content-type", "application/cloudevents+json");
                match context
                    .publish_with_headers(self.subject.clone(), headers, event.json.clone().into())
                    .await
                {
                    Ok(ack) => pending.push(ack),
                    Err(e) => {
                        return settle_acks(pending, Some(format!("publish to '{}' failed: {e}", self.subject))).await;
                    }
                }
            }
            settle_acks(pending, None).await
        })
    }
}

async fn settle_acks(pending: Vec<jetstream::context::PublishAckFuture>, error: Option<String>) -> Delivery {
    let mut delivered = 0;
    for ack in pending {
        match ack.await {
            Ok(_) => delivered += 1,
            Err(e) => return Delivery::failed_at(delivered, format!("JetStream did not acknowledge: {e}")),
        }
    }
    match error {
        Some(e) => Delivery::failed_at(delivered, e),
        None => Delivery::all(delivered),
    }
}
