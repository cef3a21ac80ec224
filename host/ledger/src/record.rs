//! A request-log row read back whole: the one shape `tollgate admin request`
//! prints and the archive keeps (one JSON line per request), so a request
//! reads the same before and after it is archived.

use serde_json::{Value, json};

use tollgate_core::money::Nanos;

/// The columns of [`LoggedRequest`], for `concat!` into literal SQL.
macro_rules! logged_request_columns {
    () => {
        "xid, seq, request_id, key_id, workspace_id, model, provider, upstream_model, streamed, outcome, status, \
         input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, reserved_nano, \
         snapshot_id, attempts, started_at_ms, duration_ms, settled_at_ms, source, kind, parent_request_id, run_id, \
         provenance, provenance_signature, fee_nano, detail"
    };
}
pub(crate) use logged_request_columns;

#[derive(Debug, sqlx::FromRow)]
pub(crate) struct LoggedRequest {
    pub xid: i64,
    pub seq: i64,
    request_id: String,
    key_id: String,
    workspace_id: String,
    model: String,
    provider: Option<String>,
    upstream_model: Option<String>,
    streamed: i64,
    outcome: String,
    status: Option<i64>,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cached_tokens: Option<i64>,
    reasoning_tokens: Option<i64>,
    usage_source: String,
    cost_nano: i64,
    reserved_nano: i64,
    snapshot_id: Option<i64>,
    attempts: String,
    started_at_ms: i64,
    duration_ms: i64,
    pub settled_at_ms: i64,
    source: Option<String>,
    kind: String,
    parent_request_id: Option<String>,
    run_id: Option<String>,
    provenance: Option<String>,
    provenance_signature: Option<String>,
    fee_nano: i64,
    /// A chat request's routing decision (`{"route": …}`), a budget alert's
    /// budget: what the row carries beside its columns.
    detail: Option<String>,
}

impl LoggedRequest {
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The row as `tollgate admin request` shows it: the full trace, with
    /// the attempts expanded and money as decimal USD.
    pub fn render(&self) -> Value {
        let mut row = json!({
            "request_id": self.request_id,
            "key_id": self.key_id,
            "workspace_id": self.workspace_id,
            "model": self.model,
            "provider": self.provider,
            "upstream_model": self.upstream_model,
            "streamed": self.streamed != 0,
            "outcome": self.outcome,
            "status": self.status,
            "tokens": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "cached": self.cached_tokens,
                "reasoning": self.reasoning_tokens,
                "source": self.usage_source,
            },
            "cost_usd": Nanos(self.cost_nano).usd_string(),
            // The plan's gateway fee inside `cost_usd`, and the provider's part.
            "cost_breakdown": {
                "provider_usd": Nanos(self.cost_nano - self.fee_nano).usd_string(),
                "fee_usd": Nanos(self.fee_nano).usd_string(),
            },
            "reserved_usd": Nanos(self.reserved_nano).usd_string(),
            "pricing_snapshot_id": self.snapshot_id,
            "attempts": crate::log_row::expand_attempts(&self.attempts),
            "started_at_ms": self.started_at_ms,
            "duration_ms": self.duration_ms,
            "settled_at_ms": self.settled_at_ms,
            "source": self.source,
            "kind": self.kind,
            "parent_request_id": self.parent_request_id,
        });
        if let Some(run_id) = &self.run_id {
            row["run_id"] = json!(run_id);
        }
        let detail = self
            .detail
            .as_deref()
            .and_then(|d| serde_json::from_str::<Value>(d).ok());
        if let Some(route) = detail.as_ref().and_then(|d| d.get("route")) {
            row["route"] = route.clone();
        }
        if let (Some(trail), Some(signature)) = (&self.provenance, &self.provenance_signature) {
            row["provenance"] = serde_json::from_str(trail).unwrap_or(Value::Null);
            row["provenance_signature"] = json!(signature);
        }
        row
    }
}
