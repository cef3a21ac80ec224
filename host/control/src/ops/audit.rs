//! `audit.list`: a workspace's audit log, newest first (docs/audit.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_audit::{AuditLog, Filter, Record};

const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 500;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Only this op (`keys.create`, `auth.signin`, …).
    #[serde(default)]
    pub op: Option<String>,
    /// Only changes by this user, key or console session (its id).
    #[serde(default)]
    pub actor: Option<String>,
    /// Only changes at or after this time (Unix milliseconds).
    #[serde(default)]
    pub since_ms: Option<i64>,
    /// Only changes before this time (Unix milliseconds).
    #[serde(default)]
    pub until_ms: Option<i64>,
    /// Page size, 1 to 500 (default 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`.
    #[serde(default)]
    pub cursor: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct AuditPage {
    pub entries: Vec<Record>,
    /// Pass as `cursor` for the next (older) page; `null` on the last.
    pub next_cursor: Option<String>,
}

pub async fn list(audit: &AuditLog, ctx: &Ctx, params: ListParams) -> Result<AuditPage, OpError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(OpError::InvalidParams(format!("limit must be 1 to {MAX_PAGE}")));
    }
    let before_seq = params
        .cursor
        .map(|cursor| {
            cursor
                .parse::<i64>()
                .map_err(|_| OpError::InvalidParams("cursor is not one this op gave".into()))
        })
        .transpose()?;
    let filter = Filter {
        workspace_id: ctx.scope().workspace_id.clone(),
        op: params.op,
        actor: params.actor,
        since_ms: params.since_ms,
        until_ms: params.until_ms,
        before_seq,
        limit: limit as usize + 1,
    };
    let mut entries = audit.list(&filter).await.map_err(OpError::Internal)?;
    let more = entries.len() > limit as usize;
    entries.truncate(limit as usize);
    let next_cursor = more.then(|| entries.last().map(|e| e.seq.to_string())).flatten();
    Ok(AuditPage { entries, next_cursor })
}
