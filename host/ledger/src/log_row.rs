//! The request log row: the auditable trace of one request, written in the
//! same transaction as the money it moved (see `writer.rs`).

use std::sync::LazyLock;

use super::batch_insert::BatchInsert;
use super::json_text::JsonText;
use super::sql::{self, WriteResult, WriteTx};
use serde_json::{Map, Value};
use tollgate_core::db::Backend;
use tollgate_core::money::Nanos;

/// One row of the request log: the auditable trace of a request. It is
/// serialized into the ledger's journal (see `entry.rs`) before it reaches
/// the database.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RequestLogRow {
    pub request_id: String,
    pub key_id: String,
    pub workspace_id: String,
    pub model: String,
    pub provider: Option<String>,
    pub upstream_model: Option<String>,
    pub streamed: bool,
    pub outcome: String,
    pub status: Option<u16>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// Where the token counts came from.
    pub usage_source: UsageSource,
    pub reserved: Nanos,
    /// The plan's gateway fee within the posted amount (never more than it).
    pub fee: Nanos,
    pub snapshot_id: Option<i64>,
    /// The attempts, as [`StoredAttempt::compact`] stores them.
    pub attempts: JsonText,
    /// How many upstream attempts `attempts` lists.
    pub attempt_count: u32,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// What the row records: a chat request, a tool call, a skill run or an actor run.
    pub kind: RequestKind,
    /// The request this one ran inside (a skill's model or tool call).
    pub parent_request_id: Option<String>,
    /// An actor run's signed provenance trail, kept with its row.
    pub provenance: Option<RunProvenance>,
    /// What a row carries beside its columns, as a JSON object: a chat
    /// request's routing decision (`{"route": …}`, when routing chose), or a
    /// budget alert's budget, period, threshold, limit and spend.
    pub detail: Option<JsonText>,
}

impl RequestLogRow {
    /// A row that bills nothing by itself (a tool call, a skill run, an
    /// actor run: their model calls are rows of their own): no tokens, no
    /// hold, no attempts. Callers fill in what they know with `..`.
    pub fn unbilled(
        kind: RequestKind,
        request_id: String,
        key_id: String,
        workspace_id: String,
        model: String,
    ) -> Self {
        Self {
            request_id,
            key_id,
            workspace_id,
            model,
            provider: None,
            upstream_model: None,
            streamed: false,
            outcome: String::new(),
            status: None,
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            reasoning_tokens: None,
            usage_source: UsageSource::None,
            reserved: Nanos::ZERO,
            fee: Nanos::ZERO,
            snapshot_id: None,
            attempts: JsonText::empty_array(),
            attempt_count: 0,
            started_at_ms: 0,
            duration_ms: 0,
            kind,
            parent_request_id: None,
            provenance: None,
            detail: None,
        }
    }
}

/// What an actor run's row carries besides the log: its run id, its trail
/// (JSON) and the trail's signature.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunProvenance {
    pub run_id: String,
    pub trail: String,
    pub signature: String,
}

/// Where a row's token counts came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// The provider reported them.
    Upstream,
    /// The gateway counted them (the provider reported none).
    Estimated,
    /// No model answered.
    #[default]
    None,
}

impl UsageSource {
    /// As the request log and the usage event show it.
    pub fn as_str(self) -> &'static str {
        match self {
            UsageSource::Upstream => "upstream",
            UsageSource::Estimated => "estimated",
            UsageSource::None => "none",
        }
    }
}

/// What a request-log row records. Tool calls and skill runs are logged beside
/// chat requests, with their own usage-event types; they post nothing
/// themselves (a skill's model calls are chat requests of their own). A
/// budget alert is no request at all: a spend-control threshold crossed, kept
/// as a row (with a deterministic id) so that it is written once and
/// delivered by the metering feed like every event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    #[default]
    Chat,
    ToolCall,
    SkillRun,
    ActorRun,
    BudgetAlert,
    // The model operations besides chat, named as in the catalog's
    // operations: priced and billed like chat, each its own kind in the log.
    Embeddings,
    ImageGeneration,
    ImageEdit,
    Speech,
    Transcription,
    Translation,
    Moderation,
    Rerank,
    /// An answer served from the response cache: billed at the operator's
    /// cache price (by default the plan's fee only), no provider cost.
    CacheHit,
}

impl RequestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Chat => "chat",
            RequestKind::ToolCall => "tool_call",
            RequestKind::SkillRun => "skill_run",
            RequestKind::ActorRun => "actor_run",
            RequestKind::BudgetAlert => "budget_alert",
            RequestKind::Embeddings => "embeddings",
            RequestKind::ImageGeneration => "image_generation",
            RequestKind::ImageEdit => "image_edit",
            RequestKind::Speech => "speech",
            RequestKind::Transcription => "transcription",
            RequestKind::Translation => "translation",
            RequestKind::Moderation => "moderation",
            RequestKind::Rerank => "rerank",
            RequestKind::CacheHit => "cache_hit",
        }
    }
}

/// What settlement decided about a request, beside what the request reported.
pub(crate) struct Settlement<'a> {
    pub cost: Nanos,
    pub outcome: &'a str,
    pub settled_at_ms: i64,
    pub source: &'a str,
}

const LOG_COLUMNS: &str = "request_id, key_id, workspace_id, model, provider, upstream_model, streamed, outcome, \
     status, input_tokens, output_tokens, cached_tokens, reasoning_tokens, usage_source, cost_nano, reserved_nano, \
     snapshot_id, attempts, attempt_count, started_at_ms, duration_ms, settled_at_ms, source, kind, \
     parent_request_id, run_id, provenance, provenance_signature, fee_nano, detail";
const LOG_COLUMN_COUNT: usize = 30;

static LOG_INSERT: LazyLock<BatchInsert> = LazyLock::new(|| {
    BatchInsert::new(
        "request_log",
        LOG_COLUMNS,
        LOG_COLUMN_COUNT,
        "ON CONFLICT (request_id) DO NOTHING",
    )
});

/// Writes the request log rows of one commit.
pub(crate) async fn write_logs(
    tx: &mut impl WriteTx,
    backend: Backend,
    rows: &[(&RequestLogRow, Settlement<'_>)],
) -> WriteResult<()> {
    let tokens = |v: Option<u64>| sql::Value::Int(v.map(|n| i64::try_from(n).unwrap_or(i64::MAX)));
    let mut values = Vec::new();
    for (statement, run) in LOG_INSERT.runs(backend, rows) {
        values.clear();
        for (log, settlement) in run {
            values.extend::<[sql::Value; LOG_COLUMN_COUNT]>([
                (&log.request_id).into(),
                (&log.key_id).into(),
                (&log.workspace_id).into(),
                (&log.model).into(),
                (&log.provider).into(),
                (&log.upstream_model).into(),
                i64::from(log.streamed).into(),
                settlement.outcome.into(),
                log.status.map(i64::from).into(),
                tokens(log.input_tokens),
                tokens(log.output_tokens),
                tokens(log.cached_tokens),
                tokens(log.reasoning_tokens),
                log.usage_source.as_str().into(),
                settlement.cost.0.into(),
                log.reserved.0.into(),
                log.snapshot_id.into(),
                log.attempts.as_str().into(),
                i64::from(log.attempt_count).into(),
                log.started_at_ms.into(),
                log.duration_ms.into(),
                settlement.settled_at_ms.into(),
                settlement.source.into(),
                log.kind.as_str().into(),
                (&log.parent_request_id).into(),
                log.provenance.as_ref().map(|p| p.run_id.as_str()).into(),
                log.provenance.as_ref().map(|p| p.trail.as_str()).into(),
                log.provenance.as_ref().map(|p| p.signature.as_str()).into(),
                // A settlement that posted less (an expired hold posts
                // nothing) keeps the fee inside what was posted.
                log.fee.0.min(settlement.cost.0).max(0).into(),
                log.detail.as_ref().map(JsonText::as_str).into(),
            ]);
        }
        tx.execute(statement, &values).await?;
    }
    Ok(())
}

/// The fields of one attempt as `service.attempts` shows it, in the order the
/// log stores them: each attempt is kept as an array of its values (nulls
/// included, cost in nano-USD), which is about a third the size of the
/// object, the bulk of a row.
const ATTEMPT_FIELDS: [&str; 12] = [
    "provider",
    "model",
    "adapter",
    "outcome",
    "status",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost_usd",
];
const COST: usize = 11;

/// One attempt as the log stores it: its values in [`ATTEMPT_FIELDS`] order,
/// written as a JSON array. Built straight from the request's attempts, so a
/// settlement does not build `service.attempts`' objects a second time only
/// to take them apart.
#[derive(Debug)]
pub struct StoredAttempt<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub adapter: &'a str,
    pub outcome: &'a str,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub cost: Nanos,
}

impl StoredAttempt<'_> {
    /// The attempts in the form [`expand_attempts`] reads.
    pub fn compact(attempts: &[StoredAttempt<'_>]) -> JsonText {
        let rows: Vec<_> = attempts.iter().map(StoredAttempt::values).collect();
        JsonText::of(&rows).unwrap_or_else(JsonText::empty_array)
    }

    fn values(&self) -> impl serde::Serialize + '_ {
        (
            self.provider,
            self.model,
            self.adapter,
            self.outcome,
            self.status,
            self.latency_ms,
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.reasoning_tokens,
            self.cost.0,
        )
    }
}

/// The attempts of a stored row as `service.attempts` showed them. Rows
/// written before the compact form kept the objects themselves.
pub fn expand_attempts(stored: &str) -> Value {
    let Ok(Value::Array(attempts)) = serde_json::from_str::<Value>(stored) else {
        return Value::Null;
    };
    let expand = |attempt: Value| match attempt {
        Value::Array(values) => {
            let mut object = Map::new();
            for (index, (field, value)) in ATTEMPT_FIELDS.iter().zip(values).enumerate() {
                let value = match (index, value) {
                    (COST, Value::Number(nanos)) => {
                        Value::String(Nanos(nanos.as_i64().unwrap_or_default()).usd_string())
                    }
                    (_, value) => value,
                };
                object.insert((*field).into(), value);
            }
            Value::Object(object)
        }
        legacy => legacy,
    };
    Value::Array(attempts.into_iter().map(expand).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attempts_round_trip_through_the_compact_form() {
        let attempts = [
            StoredAttempt {
                provider: "a",
                model: "m-1",
                adapter: "openai",
                outcome: "upstream_error",
                status: Some(503),
                latency_ms: 12,
                input_tokens: None,
                output_tokens: None,
                cache_read_tokens: None,
                cache_write_tokens: None,
                reasoning_tokens: None,
                cost: Nanos(0),
            },
            StoredAttempt {
                provider: "b",
                model: "m-2",
                adapter: "anthropic",
                outcome: "success",
                status: Some(200),
                latency_ms: 80,
                input_tokens: Some(10),
                output_tokens: Some(20),
                cache_read_tokens: Some(4),
                cache_write_tokens: Some(2),
                reasoning_tokens: Some(1),
                cost: Nanos(12_345),
            },
        ];
        let shown = json!([
            {"provider": "a", "model": "m-1", "adapter": "openai", "outcome": "upstream_error", "status": 503,
             "latency_ms": 12, "input_tokens": null, "output_tokens": null, "cache_read_tokens": null,
             "cache_write_tokens": null, "reasoning_tokens": null, "cost_usd": "0.000000000"},
            {"provider": "b", "model": "m-2", "adapter": "anthropic", "outcome": "success", "status": 200,
             "latency_ms": 80, "input_tokens": 10, "output_tokens": 20, "cache_read_tokens": 4,
             "cache_write_tokens": 2, "reasoning_tokens": 1, "cost_usd": "0.000012345"}
        ]);
        let compact = StoredAttempt::compact(&attempts);
        let stored = compact.as_str();
        assert_eq!(
            stored,
            r#"[["a","m-1","openai","upstream_error",503,12,null,null,null,null,null,0],["b","m-2","anthropic","success",200,80,10,20,4,2,1,12345]]"#
        );
        assert!(stored.len() * 2 < shown.to_string().len(), "{stored}");
        assert_eq!(expand_attempts(stored), shown);
    }

    #[test]
    fn rows_written_before_the_compact_form_read_as_they_were() {
        let legacy = json!([{"provider": "a", "outcome": "success", "cost_usd": "0.000000001"}]);
        assert_eq!(expand_attempts(&legacy.to_string()), legacy);
        assert_eq!(expand_attempts("[]"), json!([]));
    }
}
