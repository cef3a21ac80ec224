//! The usage event: one CloudEvents 1.0 envelope per metered request, built with
//! the `cloudevents-sdk` and stored in structured JSON form. Its schema is
//! `docs/schemas/usage.v1.json` (served at [`SCHEMA_PATH`]).

use cloudevents::{EventBuilder, EventBuilderV10};
use serde::Serialize;

use super::feed::SettledRequest;
use tollgate_core::money::Nanos;

pub const EVENT_TYPE: &str = "dev.tollgate.usage.v1";
/// A tool call's event (request-log kind `tool_call`).
pub const TOOL_CALL_EVENT_TYPE: &str = "dev.tollgate.tool.call.v1";
/// A skill run's event (request-log kind `skill_run`).
pub const SKILL_RUN_EVENT_TYPE: &str = "dev.tollgate.skill.run.v1";
/// A hosted actor's run (request-log kind `actor_run`): its model and tool
/// calls are events of their own, linked by `parent_request_id`.
pub const ACTOR_RUN_EVENT_TYPE: &str = "dev.tollgate.actor.run.v1";
/// A spend-control budget crossed one of its alert thresholds (request-log
/// kind `budget_alert`, one row per budget, period and threshold).
pub const BUDGET_THRESHOLD_EVENT_TYPE: &str = "dev.tollgate.budget.threshold.v1";
/// Where the gateway serves the data schema.
pub const SCHEMA_PATH: &str = "/schemas/usage.v1.json";
/// The JSON Schema of the event's `data`.
pub const SCHEMA: &str = include_str!("../../../docs/schemas/usage.v1.json");
/// Where the gateway serves the budget threshold event's data schema.
pub const BUDGET_SCHEMA_PATH: &str = "/schemas/budget-threshold.v1.json";
/// The JSON Schema of the budget threshold event's `data`.
pub const BUDGET_SCHEMA: &str = include_str!("../../../docs/schemas/budget-threshold.v1.json");

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
    /// `cost` split into the provider's part and the plan's gateway fee.
    cost_breakdown: CostBreakdown,
    currency: &'static str,
    pricing_snapshot_id: Option<i64>,
    attempts: u32,
    streamed: bool,
    outcome: &'a str,
    status: Option<u16>,
    duration_ms: i64,
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_request_id: Option<&'a str>,
}

#[derive(Serialize)]
struct CostBreakdown {
    provider_usd: String,
    fee_usd: String,
}

/// This gateway's event identity.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The `source` of events whose request log row predates the `source`
    /// column; every newer row names the gateway that served it.
    pub source: String,
    pub dataschema: String,
}

/// Builds the structured-mode JSON of a settled request's usage event. It is
/// a function of the request log row alone (plus the schema URL), so every
/// redelivery, by any gateway, is the same event; its cost is what the ledger
/// posted, so Σ event costs = Σ ledger posts.
pub fn structured_json(identity: &Identity, request: &SettledRequest) -> anyhow::Result<String> {
    if request.kind == "budget_alert" {
        return budget_threshold_json(identity, request);
    }
    let count = |v: Option<i64>| v.map(|n| u64::try_from(n).unwrap_or(0));
    let cost = Nanos(request.cost_nano);
    let data = UsageData {
        request_id: &request.request_id,
        workspace_id: &request.workspace_id,
        key_id: &request.key_id,
        model: &request.model,
        provider: request.provider.as_deref(),
        upstream_model: request.upstream_model.as_deref(),
        input_tokens: count(request.input_tokens).unwrap_or(0),
        output_tokens: count(request.output_tokens).unwrap_or(0),
        cached_tokens: count(request.cached_tokens),
        reasoning_tokens: count(request.reasoning_tokens),
        usage_source: &request.usage_source,
        cost: cost.usd_string(),
        cost_nano: cost.0,
        cost_breakdown: CostBreakdown {
            provider_usd: Nanos(cost.0 - request.fee_nano).usd_string(),
            fee_usd: Nanos(request.fee_nano).usd_string(),
        },
        currency: "USD",
        pricing_snapshot_id: request.snapshot_id,
        attempts: u32::try_from(request.attempt_count).unwrap_or(0),
        streamed: request.streamed != 0,
        outcome: &request.outcome,
        status: request.status.and_then(|s| u16::try_from(s).ok()),
        duration_ms: request.duration_ms,
        kind: &request.kind,
        parent_request_id: request.parent_request_id.as_deref(),
    };
    // One schema for all three: a tool call or skill run has no tokens and
    // posts nothing (its model calls are chat requests with their own events).
    let event_type = match request.kind.as_str() {
        "tool_call" => TOOL_CALL_EVENT_TYPE,
        "skill_run" => SKILL_RUN_EVENT_TYPE,
        "actor_run" => ACTOR_RUN_EVENT_TYPE,
        _ => EVENT_TYPE,
    };
    let time = chrono::DateTime::from_timestamp_millis(request.settled_at_ms).unwrap_or_default();
    let event = EventBuilderV10::new()
        .id(request.request_id.as_str())
        .source(request.source.as_deref().unwrap_or(&identity.source))
        .ty(event_type)
        .subject(request.workspace_id.as_str())
        .time(time)
        .data_with_schema(
            "application/json",
            identity.dataschema.as_str(),
            serde_json::to_value(&data)?,
        )
        .build()?;
    Ok(serde_json::to_string(&event)?)
}

/// A budget alert's event: its data is the row's `detail` (the budget, the
/// period, the threshold, the limit and the spend when it was crossed), with
/// the row's workspace and key beside it; its schema is
/// `docs/schemas/budget-threshold.v1.json`.
fn budget_threshold_json(identity: &Identity, request: &SettledRequest) -> anyhow::Result<String> {
    let detail = request
        .detail
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("budget alert {} has no detail", request.request_id))?;
    let mut data: serde_json::Map<String, serde_json::Value> = serde_json::from_str(detail)?;
    data.insert("workspace_id".into(), request.workspace_id.clone().into());
    let key_id = (!request.key_id.is_empty()).then(|| request.key_id.clone());
    data.insert("key_id".into(), key_id.into());
    let dataschema = identity.dataschema.replace(SCHEMA_PATH, BUDGET_SCHEMA_PATH);
    let time = chrono::DateTime::from_timestamp_millis(request.settled_at_ms).unwrap_or_default();
    let event = EventBuilderV10::new()
        .id(request.request_id.as_str())
        .source(request.source.as_deref().unwrap_or(&identity.source))
        .ty(BUDGET_THRESHOLD_EVENT_TYPE)
        .subject(request.workspace_id.as_str())
        .time(time)
        .data_with_schema("application/json", dataschema, serde_json::Value::Object(data))
        .build()?;
    Ok(serde_json::to_string(&event)?)
}

/// A complete settled request, to check at startup that this gateway's
/// identity makes valid events.
pub(super) fn probe() -> SettledRequest {
    SettledRequest {
        xid: 0,
        seq: 0,
        request_id: "req_probe".into(),
        key_id: "key_probe".into(),
        workspace_id: "ws_probe".into(),
        model: "probe/model".into(),
        provider: None,
        upstream_model: None,
        streamed: 0,
        outcome: "success".into(),
        status: Some(200),
        input_tokens: Some(0),
        output_tokens: Some(0),
        cached_tokens: None,
        reasoning_tokens: None,
        usage_source: "upstream".into(),
        cost_nano: 0,
        snapshot_id: None,
        attempt_count: 1,
        duration_ms: 0,
        settled_at_ms: 0,
        source: None,
        kind: "chat".into(),
        parent_request_id: None,
        fee_nano: 0,
        detail: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn row() -> SettledRequest {
        SettledRequest {
            xid: 0,
            seq: 7,
            request_id: "req_1".into(),
            key_id: "key_1".into(),
            workspace_id: "ws_1".into(),
            model: "acme/small".into(),
            provider: Some("acme".into()),
            upstream_model: Some("small".into()),
            streamed: 1,
            outcome: "ok".into(),
            status: Some(200),
            input_tokens: Some(9),
            output_tokens: Some(3),
            cached_tokens: None,
            reasoning_tokens: Some(1),
            usage_source: "upstream".into(),
            cost_nano: 9_500,
            snapshot_id: Some(4),
            attempt_count: 2,
            duration_ms: 12,
            settled_at_ms: 1_700_000_000_123,
            source: Some("urn:tollgate:instance:served".into()),
            kind: "chat".into(),
            parent_request_id: None,
            fee_nano: 1_000,
            detail: None,
        }
    }

    #[test]
    fn a_budget_alert_is_a_threshold_event_built_from_its_detail() {
        let identity = Identity {
            source: "urn:tollgate:instance:test".into(),
            dataschema: "http://gw/schemas/usage.v1.json".into(),
        };
        let alert = SettledRequest {
            request_id: "budget_bud_1_2026-11-15_80".into(),
            kind: "budget_alert".into(),
            key_id: "key_7".into(),
            cost_nano: 0,
            fee_nano: 0,
            detail: Some(
                r#"{"budget_id":"bud_1","scope":"key","period":"daily","period_start":"2026-11-15T00:00:00Z","period_end":"2026-11-16T00:00:00Z","threshold_percent":80,"threshold_usd":"0.8","limit_usd":"1","spent_usd":"0.81","currency":"USD"}"#
                    .into(),
            ),
            ..row()
        };
        let event: Value = serde_json::from_str(&structured_json(&identity, &alert).unwrap()).unwrap();
        assert_eq!(event["type"], BUDGET_THRESHOLD_EVENT_TYPE);
        assert_eq!(event["id"], "budget_bud_1_2026-11-15_80");
        assert_eq!(event["dataschema"], "http://gw/schemas/budget-threshold.v1.json");
        let data = &event["data"];
        assert_eq!(data["workspace_id"], "ws_1");
        assert_eq!(data["key_id"], "key_7");
        assert_eq!(data["threshold_percent"], 80);
        assert_eq!(data["spent_usd"], "0.81");
        assert!(data.get("cost").is_none(), "not a usage event: {data}");
        let workspace = SettledRequest {
            key_id: String::new(),
            ..alert
        };
        let event: Value = serde_json::from_str(&structured_json(&identity, &workspace).unwrap()).unwrap();
        assert_eq!(event["data"]["key_id"], Value::Null);
        let schema: Value = serde_json::from_str(BUDGET_SCHEMA).unwrap();
        for field in schema["required"].as_array().unwrap() {
            assert!(data.get(field.as_str().unwrap()).is_some(), "{field} is in the event");
        }
    }

    #[test]
    fn tool_calls_and_skill_runs_have_their_own_types_and_name_their_parent() {
        let identity = Identity {
            source: "urn:tollgate:instance:test".into(),
            dataschema: "http://gw/schemas/usage.v1.json".into(),
        };
        let chat: Value = serde_json::from_str(&structured_json(&identity, &row()).unwrap()).unwrap();
        assert_eq!(chat["type"], EVENT_TYPE);
        assert_eq!(chat["data"]["kind"], "chat");
        assert!(chat["data"].get("parent_request_id").is_none());
        let tool = SettledRequest {
            kind: "tool_call".into(),
            parent_request_id: Some("req_parent".into()),
            ..row()
        };
        let tool: Value = serde_json::from_str(&structured_json(&identity, &tool).unwrap()).unwrap();
        assert_eq!(tool["type"], TOOL_CALL_EVENT_TYPE);
        assert_eq!(tool["data"]["parent_request_id"], "req_parent");
        let run = SettledRequest {
            kind: "skill_run".into(),
            ..row()
        };
        let run: Value = serde_json::from_str(&structured_json(&identity, &run).unwrap()).unwrap();
        assert_eq!(run["type"], SKILL_RUN_EVENT_TYPE);
    }

    #[test]
    fn builds_a_complete_cloudevent() {
        let identity = Identity {
            source: "urn:tollgate:instance:test".into(),
            dataschema: "http://127.0.0.1:8080/schemas/usage.v1.json".into(),
        };
        let json = structured_json(&identity, &row()).unwrap();
        let event: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(event["specversion"], "1.0");
        assert_eq!(event["id"], "req_1");
        assert_eq!(event["type"], EVENT_TYPE);
        assert_eq!(
            event["source"], "urn:tollgate:instance:served",
            "the serving gateway, not the delivering one"
        );
        assert_eq!(event["subject"], "ws_1");
        assert_eq!(event["datacontenttype"], "application/json");
        assert_eq!(event["dataschema"], identity.dataschema);
        assert!(event["time"].as_str().unwrap().starts_with("2023-11-14T22:13:20.123"));
        let data = &event["data"];
        assert_eq!(data["cost"], "0.000009500");
        assert_eq!(data["cost_nano"], 9_500);
        assert_eq!(data["cost_breakdown"]["provider_usd"], "0.000008500");
        assert_eq!(data["cost_breakdown"]["fee_usd"], "0.000001000");
        assert_eq!(data["currency"], "USD");
        assert_eq!(data["attempts"], 2);
        assert_eq!(data["pricing_snapshot_id"], 4);
        assert_eq!(data["cached_tokens"], Value::Null);
        assert_eq!(data["streamed"], true);
        assert_eq!(data["status"], 200);
        // The event round-trips through the SDK's own parser.
        let parsed: cloudevents::Event = serde_json::from_str(&json).unwrap();
        assert_eq!(cloudevents::AttributesReader::id(&parsed), "req_1");
    }

    #[test]
    fn rows_older_than_the_source_column_take_this_gateways_source() {
        let identity = Identity {
            source: "urn:tollgate:instance:here".into(),
            dataschema: "http://h/schemas/usage.v1.json".into(),
        };
        let request = SettledRequest { source: None, ..row() };
        let event: Value = serde_json::from_str(&structured_json(&identity, &request).unwrap()).unwrap();
        assert_eq!(event["source"], "urn:tollgate:instance:here");
        // Same row, same event: redeliveries are identical.
        assert_eq!(
            structured_json(&identity, &request).unwrap(),
            structured_json(&identity, &request).unwrap()
        );
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
