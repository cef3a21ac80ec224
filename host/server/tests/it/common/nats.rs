//! A real NATS JetStream as a usage-event sink: a stream of its own per
//! test, the sink's configuration, and the events it received.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;

pub struct Nats {
    client: async_nats::Client,
    url: String,
    subject: String,
    stream: String,
}

/// One message on the stream: the event and its `Nats-Msg-Id` header.
pub struct Delivered {
    pub event: Value,
    pub message_id: Option<String>,
}

impl Nats {
    /// `None` (skipping, with a message) when no NATS answers outside CI;
    /// CI has one and fails without it.
    pub async fn connect() -> Option<Nats> {
        let url = std::env::var("TG_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
        let client = match async_nats::connect(&url).await {
            Ok(client) => client,
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!("SKIPPED: no NATS at {url} ({e}); CI runs this test against a real server");
                return None;
            }
            Err(e) => panic!("NATS at {url} is required in CI: {e}"),
        };
        let run = uuid::Uuid::now_v7().simple().to_string();
        Some(Nats {
            client,
            url,
            subject: format!("tollgate.test.{run}"),
            stream: format!("TGTEST_{run}"),
        })
    }

    /// The `[[metering.sinks]]` entry that delivers to this stream.
    pub fn sink(&self) -> String {
        format!(
            "[[metering.sinks]]\nkind = \"nats\"\nurl = \"{}\"\nsubject = \"{}\"\nstream = \"{}\"\n",
            self.url, self.subject, self.stream
        )
    }

    /// Reads (and acks) what the stream holds until `enough` says so of what
    /// was read or `limit` passes, then deletes the stream.
    pub async fn drain(self, enough: impl Fn(&[Delivered]) -> bool, limit: Duration) -> Vec<Delivered> {
        let jetstream = async_nats::jetstream::new(self.client);
        let deadline = Instant::now() + limit;
        let stream = loop {
            match jetstream.get_stream(&self.stream).await {
                Ok(stream) => break stream,
                Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => panic!("stream {} never appeared: {e}", self.stream),
            }
        };
        let consumer = stream
            .create_consumer(async_nats::jetstream::consumer::pull::Config {
                ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut delivered = Vec::new();
        while !enough(&delivered) && Instant::now() < deadline {
            let mut batch = consumer
                .fetch()
                .max_messages(1000)
                .expires(Duration::from_millis(500))
                .messages()
                .await
                .unwrap();
            while let Some(message) = batch.next().await {
                let message = message.unwrap();
                delivered.push(Delivered {
                    event: serde_json::from_slice(&message.payload).unwrap(),
                    message_id: message
                        .headers
                        .as_ref()
                        .and_then(|headers| headers.get("Nats-Msg-Id"))
                        .map(|id| id.as_str().to_string()),
                });
                message.ack().await.unwrap();
            }
        }
        let _ = jetstream.delete_stream(&self.stream).await;
        delivered
    }
}
