//! HTTP sink in the three CloudEvents HTTP binding modes: structured
//! (`application/cloudevents+json`, one event per request), binary (`ce-*`
//! headers, one event per request) and batch (`application/cloudevents-batch+json`).

use std::collections::BTreeMap;
use std::time::Duration;

use cloudevents::Event;
use cloudevents::binding::reqwest::RequestBuilderExt;
use cloudevents::message::StructuredDeserializer;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::{Delivery, DeliveryFuture, Sink, StoredEvent};
use crate::config::HttpMode;

pub struct HttpSink {
    client: reqwest::Client,
    url: reqwest::Url,
    mode: HttpMode,
}

impl HttpSink {
    pub fn new(
        url: &str,
        mode: HttpMode,
        headers: &BTreeMap<String, String>,
        timeout_ms: Option<u64>,
    ) -> anyhow::Result<Self> {
        let url = reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("metering sink url '{url}': {e}"))?;
        let mut default_headers = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| anyhow::anyhow!("metering sink header name '{name}' is invalid"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| anyhow::anyhow!("metering sink header '{name}' has an invalid value"))?;
            // Sink credentials must not show up in debug output.
            value.set_sensitive(true);
            default_headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .default_headers(default_headers)
            .timeout(Duration::from_millis(timeout_ms.unwrap_or(10_000)))
            .tcp_nodelay(true)
            .build()?;
        Ok(Self { client, url, mode })
    }

    async fn post_one(&self, event: &StoredEvent) -> Result<(), String> {
        let builder = self.client.post(self.url.clone());
        let request = match self.mode {
            HttpMode::Structured => {
                let parsed = parse(event)?;
                StructuredDeserializer::deserialize_structured(
                    parsed,
                    cloudevents::binding::reqwest::RequestSerializer::new(builder),
                )
            }
            _ => builder.event(parse(event)?),
        }
        .map_err(|e| format!("cannot encode event {}: {e}", event.id))?;
        check(request.send().await).await
    }

    async fn post_batch(&self, events: &[StoredEvent]) -> Result<(), String> {
        let parsed = events.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
        let request = self
            .client
            .post(self.url.clone())
            .events(parsed)
            .map_err(|e| format!("cannot encode batch: {e}"))?;
        check(request.send().await).await
    }
}

fn parse(event: &StoredEvent) -> Result<Event, String> {
    serde_json::from_str(&event.json).map_err(|e| format!("stored event {} is not a CloudEvent: {e}", event.id))
}

async fn check(sent: reqwest::Result<reqwest::Response>) -> Result<(), String> {
    match sent {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(format!("sink answered {}", response.status())),
        Err(e) => Err(format!("sink unreachable: {}", tollgate_core::error_text::describe(e))),
    }
}

impl Sink for HttpSink {
    fn deliver<'a>(&'a self, events: &'a [StoredEvent]) -> DeliveryFuture<'a> {
        Box::pin(async move {
            if self.mode == HttpMode::Batch {
                return match self.post_batch(events).await {
                    Ok(()) => Delivery::all(events.len()),
                    Err(e) => Delivery::failed_at(0, e),
                };
            }
            for (index, event) in events.iter().enumerate() {
                if let Err(e) = self.post_one(event).await {
                    return Delivery::failed_at(index, e);
                }
            }
            Delivery::all(events.len())
        })
    }
}
