//! The usage event: one CloudEvents 1.0 envelope per metered request, built with
//! the `cloudevents-sdk` and stored in structured JSON form. Its schema is
//! `docs/schemas/usage.v1.json` (served at [`SCHEMA_PATH`]).

use cloudevents::{EventBuilder, EventBuilderV10};
use serde::Serialize;

use crate::ledger::RequestLogRow;
use crate::money::Nanos;

pub const EVENT_TYPE: &str = "dev.tollgate.usage.v1";
/// Where the gateway serves the data schema.
pub const SCHEMA_PATH: &str = "/schemas/usage.v1.json";
/// The JSON Schema of the event's `data`.
pub const SCHEMA: &str = include_str!("../../../docs/schemas/usage.v1.json");

/// The event's `data`.
#[derive(Serialize)]
struct UsageData<'a> {
    request_id: &'a str,
    workspace_id: &'a str,
    key_id: &'a str,
    model: &'a str,
    provider: Option<&'a str>,
    upstream_model: Option<&'a str>,
    input_tokens: u64,
    output_tokens: u64,
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
    usage_source: &'a str,
    /// Exact decimal USD, the amount posted to the ledger.
    cost: String,
    cost_nano: i64,
    currency: &'static str,
    pricing_snapshot_id: Option<i64>,
    attempts: u32,
    streamed: bool,
    outcome: &'a str,
    status: Option<u16>,
    duration_ms: i64,
}

/// The event identity shared by every event of this gateway.
#[derive(Clone, Debug)]
pub struct Identity {
    pub source: String,
    pub dataschema: String,
}

/// Builds the structured-mode JSON of the usage event for a settled request.
/// `cost` is what the ledger posted, so Σ event costs = Σ ledger posts.
pub fn structured_json(
    identity: &Identity,
    log: &RequestLogRow,
    cost: Nanos,
    outcome: &str,
    settled_at_ms: i64,
) -> anyhow::Result<String> {
    let data = UsageData {
        request_id: &log.request_id,
        workspace_id: &log.workspace_id,
        key_id: &log.key_id,
        model: &log.model,
        provider: log.provider.as_deref(),
        upstream_model: log.upstream_model.as_deref(),
        input_tokens: log.input_tokens.unwrap_or(0),
        output_tokens: log.output_tokens.unwrap_or(0),
        cached_tokens: log.cached_tokens,
        reasoning_tokens: log.reasoning_tokens,
        usage_source: log.usage_source,
        cost: cost.usd_string(),
        cost_nano: cost.0,
        currency: "USD",
        pricing_snapshot_id: log.snapshot_id,
        attempts: log.attempt_count,
        streamed: log.streamed,
        outcome,
        status: log.status,
        duration_ms: log.duration_ms,
    };
    let time = chrono::DateTime::from_timestamp_millis(settled_at_ms).unwrap_or_default();
    let event = EventBuilderV10::new()
        .id(log.request_id.as_str())
        .source(identity.source.as_str())
        .ty(EVENT_TYPE)
        .subject(log.workspace_id.as_str())
        .time(time)
        .data_with_schema(
            "application/json",
            identity.dataschema.as_str(),
            serde_json::to_value(&data)?,
        )
        .build()?;
    Ok(serde_json::to_string(&event)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn row() -> RequestLogRow {
        RequestLogRow {
            request_id: "req_1".into(),
            key_id: "key_1".into(),
            workspace_id: "ws_1".into(),
            model: "acme/small".into(),
            provider: Some("acme".into()),
            upstream_model: Some("small".into()),
            streamed: true,
            outcome: "ok".into(),
            status: Some(200),
            input_tokens: Some(9),
            output_tokens: Some(3),
            cached_tokens: None,
            reasoning_tokens: Some(1),
            usage_source: "upstream",
            reserved: Nanos(100_000),
            snapshot_id: Some(4),
            attempts: "[]".into(),
            attempt_count: 2,
            started_at_ms: 0,
            duration_ms: 12,
        }
    }

    #[test]
    fn builds_a_complete_cloudevent() {
        let identity = Identity {
            source: "urn:tollgate:instance:test".into(),
            dataschema: "http://127.0.0.1:8080/schemas/usage.v1.json".into(),
        };
        let json = structured_json(&identity, &row(), Nanos(9_500), "ok", 1_700_000_000_123).unwrap();
        let event: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(event["specversion"], "1.0");
        assert_eq!(event["id"], "req_1");
        assert_eq!(event["type"], EVENT_TYPE);
        assert_eq!(event["source"], "urn:tollgate:instance:test");
        assert_eq!(event["subject"], "ws_1");
        assert_eq!(event["datacontenttype"], "application/json");
        assert_eq!(event["dataschema"], identity.dataschema);
        assert!(event["time"].as_str().unwrap().starts_with("2023-11-14T22:13:20.123"));
        let data = &event["data"];
        assert_eq!(data["cost"], "0.000009500");
        assert_eq!(data["cost_nano"], 9_500);
        assert_eq!(data["currency"], "USD");
        assert_eq!(data["attempts"], 2);
        assert_eq!(data["pricing_snapshot_id"], 4);
        assert_eq!(data["cached_tokens"], Value::Null);
        // The event round-trips through the SDK's own parser.
        let parsed: cloudevents::Event = serde_json::from_str(&json).unwrap();
        assert_eq!(cloudevents::AttributesReader::id(&parsed), "req_1");
    }

    #[test]
    fn the_published_schema_is_valid_json() {
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for field in [
            "request_id",
            "model",
            "provider",
            "cost",
            "currency",
            "attempts",
            "streamed",
            "outcome",
        ] {
            assert!(required.contains(&field), "{field} should be required");
        }
    }
}
