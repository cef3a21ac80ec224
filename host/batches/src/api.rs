//! `/v1/files` and `/v1/batches`, in OpenAI's shapes, for data-plane keys:
//! a workspace sees only its own files and batches.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Router;
use axum::body::{Bytes, to_bytes};
use axum::extract::{FromRef, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Batches;
use super::store::{BatchRow, FileRow, StoredPrincipal};
use tollgate_core::db::now_ms;
use tollgate_identity::auth::{AuthState, Caller};
use tollgate_registry::Digest;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// The endpoints a batch line may call.
const ENDPOINTS: [&str; 2] = ["/v1/chat/completions", "/v1/embeddings"];
/// The longest a batch may take: OpenAI's one window, `24h`. A shorter one
/// (`"30m"`, `"90s"`) is the gateway's own extension.
const MAX_WINDOW_MS: i64 = 24 * 3600 * 1000;

/// A completion window (`24h`, `30m`, `90s`) in milliseconds, up to a day.
fn window_ms(window: &str) -> Option<i64> {
    let unit = match window.chars().last()? {
        'h' => 3_600_000,
        'm' => 60_000,
        's' => 1_000,
        _ => return None,
    };
    let count: i64 = window[..window.len() - 1].parse().ok().filter(|n| *n > 0)?;
    count.checked_mul(unit).filter(|ms| *ms <= MAX_WINDOW_MS)
}

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Batches>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    Router::new()
        .route("/v1/files", post(upload).get(list_files))
        .route("/v1/files/{id}", get(get_file).delete(delete_file))
        .route("/v1/files/{id}/content", get(file_content))
        .route("/v1/batches", post(create).get(list_batches))
        .route("/v1/batches/{id}", get(get_batch))
        .route("/v1/batches/{id}/cancel", post(cancel))
}

type Answer = Result<Response, ApiError>;

fn answered(result: Answer, request_id: &RequestId) -> Response {
    result.unwrap_or_else(|error| error.with_request_id(&request_id.0).into_response())
}

fn internal(error: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!("the batch store failed: {error}"))
}

fn not_found(what: &str, id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "not_found",
        format!("No {what} '{id}' in this workspace."),
    )
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(rand::random::<[u8; 12]>()))
}

fn file_json(file: &FileRow) -> Value {
    json!({
        "id": file.id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": file.created_at_ms / 1000,
        "filename": file.filename,
        "purpose": file.purpose,
        "status": "processed",
        "status_details": null,
    })
}

/// Stores `content` in the blob store and a row naming it.
pub async fn store_file(
    batches: &Batches,
    workspace_id: &str,
    purpose: &str,
    filename: &str,
    content: Bytes,
) -> anyhow::Result<FileRow> {
    let digest = Digest::of(&content);
    let bytes = content.len() as i64;
    batches.blobs.put(&digest, content).await?;
    let file = FileRow {
        id: new_id("file-"),
        workspace_id: workspace_id.to_string(),
        purpose: purpose.to_string(),
        filename: filename.to_string(),
        bytes,
        digest: digest.to_string(),
        created_at_ms: now_ms(),
    };
    batches.store.insert_file(&file).await?;
    Ok(file)
}

/// `POST /v1/files`: a form with `file` and `purpose`, bounded by
/// `server.max_upload_bytes`.
async fn upload(
    State(batches): State<Arc<Batches>>,
    request_id: RequestId,
    caller: Caller,
    request: Request,
) -> Response {
    let result = async {
        let limit = batches.data.max_upload_bytes();
        let (parts, body) = request.into_parts();
        let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if declared.is_some_and(|length| length > limit) {
            return Err(ApiError::body_too_large(limit));
        }
        let body = to_bytes(body, limit)
            .await
            .map_err(|_| ApiError::body_too_large(limit))?;
        let form = tollgate_gateway::parse_form(content_type, body).await?;
        let purpose = form
            .iter()
            .find(|p| p.name == "purpose" && p.filename.is_none())
            .map(|p| String::from_utf8_lossy(&p.data).into_owned())
            .ok_or_else(|| ApiError::invalid_request("'purpose' is required.").with_param("purpose"))?;
        if purpose != "batch" {
            return Err(ApiError::invalid_request(format!(
                "purpose '{purpose}' is not served: files are for batches ('batch')."
            ))
            .with_param("purpose"));
        }
        let file = form
            .into_iter()
            .find(|p| p.name == "file" && p.filename.is_some())
            .ok_or_else(|| ApiError::invalid_request("'file' is required.").with_param("file"))?;
        let filename = file.filename.clone().unwrap_or_default();
        let stored = store_file(
            &batches,
            &caller.0.workspace_id,
            &purpose,
            &filename,
            Bytes::from(file.data),
        )
        .await
        .map_err(internal)?;
        Ok(axum::Json(file_json(&stored)).into_response())
    }
    .await;
    answered(result, &request_id)
}

async fn list_files(State(batches): State<Arc<Batches>>, request_id: RequestId, caller: Caller) -> Response {
    let result = async {
        let files = batches
            .store
            .files(&caller.0.workspace_id, 10_000)
            .await
            .map_err(internal)?;
        let data: Vec<Value> = files.iter().map(file_json).collect();
        Ok(axum::Json(json!({"object": "list", "data": data, "has_more": false})).into_response())
    }
    .await;
    answered(result, &request_id)
}

async fn find_file(batches: &Batches, caller: &Caller, id: &str) -> Result<FileRow, ApiError> {
    batches
        .store
        .file(&caller.0.workspace_id, id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found("file", id))
}

async fn get_file(
    State(batches): State<Arc<Batches>>,
    request_id: RequestId,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    let result = async { Ok(axum::Json(file_json(&find_file(&batches, &caller, &id).await?)).into_response()) }.await;
    answered(result, &request_id)
}

async fn file_content(
    State(batches): State<Arc<Batches>>,
    request_id: RequestId,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    let result = async {
        let file = find_file(&batches, &caller, &id).await?;
        let digest: Digest = file.digest.parse().map_err(internal)?;
        let bytes = batches.blobs.get(&digest).await.map_err(internal)?;
        let mut response = (StatusCode::OK, bytes).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        Ok(response)
    }
    .await;
    answered(result, &request_id)
}

async fn delete_file(
    State(batches): State<Arc<Batches>>,
    request_id: RequestId,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    let result = async {
        match batches
            .store
            .delete_file(&caller.0.workspace_id, &id)
            .await
            .map_err(internal)?
        {
            true => Ok(axum::Json(json!({"id": id, "object": "file", "deleted": true})).into_response()),
            false => Err(not_found("file", &id)),
        }
    }
    .await;
    answered(result, &request_id)
}

/// One line of a batch file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Line {
    pub custom_id: String,
    pub method: String,
    pub url: String,
    pub body: serde_json::Map<String, Value>,
}

/// A batch file's lines, each checked: a JSON object with a unique
/// `custom_id`, `POST` to the batch's `endpoint`, a body that does not stream.
pub fn read_lines(bytes: &[u8], endpoint: &str, max_lines: usize) -> Result<Vec<Line>, ApiError> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| ApiError::invalid_request("The input file is not UTF-8 text."))?;
    let mut lines = Vec::new();
    let mut seen = HashSet::new();
    for (number, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let invalid = |why: String| {
            ApiError::invalid_request(format!("Line {} of the input file: {why}", number + 1))
                .with_param("input_file_id")
        };
        if lines.len() == max_lines {
            return Err(invalid(format!("a batch may have at most {max_lines} lines")));
        }
        let line: Line = serde_json::from_str(raw).map_err(|e| invalid(e.to_string()))?;
        if line.method != "POST" {
            return Err(invalid(format!("method must be POST, not '{}'", line.method)));
        }
        if line.url != endpoint {
            return Err(invalid(format!(
                "url must be the batch's endpoint '{endpoint}', not '{}'",
                line.url
            )));
        }
        if line.body.get("stream").and_then(Value::as_bool) == Some(true) {
            return Err(invalid("a batch line may not stream".into()));
        }
        if !seen.insert(line.custom_id.clone()) {
            return Err(invalid(format!("custom_id '{}' is used twice", line.custom_id)));
        }
        lines.push(line);
    }
    if lines.is_empty() {
        return Err(ApiError::invalid_request("The input file has no lines.").with_param("input_file_id"));
    }
    Ok(lines)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBatch {
    input_file_id: String,
    endpoint: String,
    completion_window: String,
    #[serde(default)]
    metadata: Option<Value>,
}

async fn batch_json(batches: &Batches, batch: &BatchRow) -> Result<Value, ApiError> {
    let (completed, failed) = batches.store.counts(&batch.id).await.map_err(internal)?;
    let seconds = |ms: Option<i64>| ms.map(|ms| ms / 1000);
    Ok(json!({
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": batch.errors.as_deref().and_then(|e| serde_json::from_str::<Value>(e).ok()),
        "input_file_id": batch.input_file_id,
        "completion_window": batch.completion_window,
        "status": batch.status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": batch.created_at_ms / 1000,
        "in_progress_at": seconds(batch.in_progress_at_ms),
        "expires_at": batch.expires_at_ms / 1000,
        "finalizing_at": seconds(batch.finalizing_at_ms),
        "completed_at": seconds(batch.completed_at_ms),
        "failed_at": seconds(batch.failed_at_ms),
        "expired_at": seconds(batch.expired_at_ms),
        "cancelling_at": seconds(batch.cancelling_at_ms),
        "cancelled_at": seconds(batch.cancelled_at_ms),
        "request_counts": {"total": batch.total, "completed": completed, "failed": failed},
        "metadata": batch.metadata.as_deref().and_then(|m| serde_json::from_str::<Value>(m).ok()),
    }))
}

/// `POST /v1/batches`: checks the input file's lines now, then runs them.
async fn create(
    State(batches): State<Arc<Batches>>,
    request_id: RequestId,
    caller: Caller,
    body: Result<axum::Json<CreateBatch>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let result = async {
        let axum::Json(create) = body.map_err(|e| ApiError::invalid_request(e.body_text()))?;
        if !ENDPOINTS.contains(&create.endpoint.as_str()) {
            return Err(ApiError::invalid_request(format!(
                "endpoint '{}' is not served in batches (served: {}).",
                create.endpoint,
                ENDPOINTS.join(", ")
            ))
            .with_param("endpoint"));
        }
        let window = window_ms(&create.completion_window).ok_or_else(|| {
            ApiError::invalid_request("completion_window must be '24h' (or a shorter '<n>h', '<n>m' or '<n>s').")
                .with_param("completion_window")
        })?;
        let running = batches.store.running(&caller.0.workspace_id).await.map_err(internal)?;
        if running >= batches.config.max_running_per_workspace as i64 {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "too_many_batches",
                format!(
                    "This workspace has {running} batches running, the most it may (batches.max_running_per_workspace); \
                     wait for one to end or cancel one."
                ),
            ));
        }
        let file = find_file(&batches, &caller, &create.input_file_id).await?;
        let digest: Digest = file.digest.parse().map_err(internal)?;
        let bytes = batches.blobs.get(&digest).await.map_err(internal)?;
        let lines = read_lines(&bytes, &create.endpoint, batches.config.max_lines)?;
        let now = now_ms();
        let batch = BatchRow {
            id: new_id("batch_"),
            workspace_id: caller.0.workspace_id.clone(),
            principal: StoredPrincipal::of(&caller.0),
            endpoint: create.endpoint,
            input_file_id: create.input_file_id,
            completion_window: create.completion_window,
            metadata: create.metadata.map(|m| m.to_string()),
            status: "in_progress".into(),
            total: lines.len() as i64,
            output_file_id: None,
            error_file_id: None,
            created_at_ms: now,
            expires_at_ms: now + window,
            in_progress_at_ms: Some(now),
            finalizing_at_ms: None,
            completed_at_ms: None,
            expired_at_ms: None,
            cancelling_at_ms: None,
            cancelled_at_ms: None,
            failed_at_ms: None,
            errors: None,
        };
        batches.store.insert_batch(&batch).await.map_err(internal)?;
        super::runner::spawn(batches.clone(), batch.id.clone());
        Ok(axum::Json(batch_json(&batches, &batch).await?).into_response())
    }
    .await;
    answered(result, &request_id)
}

async fn find_batch(batches: &Batches, caller: &Caller, id: &str) -> Result<BatchRow, ApiError> {
    batches
        .store
        .batch(Some(&caller.0.workspace_id), id)
        .await
        .map_err(internal)?
        .ok_or_else(|| not_found("batch", id))
}

async fn get_batch(
    State(batches): State<Arc<Batches>>,
    request_id: RequestId,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    let result = async {
        let batch = find_batch(&batches, &caller, &id).await?;
        Ok(axum::Json(batch_json(&batches, &batch).await?).into_response())
    }
    .await;
    answered(result, &request_id)
}

async fn list_batches(State(batches): State<Arc<Batches>>, request_id: RequestId, caller: Caller) -> Response {
    let result = async {
        let rows = batches
            .store
            .batches(&caller.0.workspace_id, 100)
            .await
            .map_err(internal)?;
        let mut data = Vec::with_capacity(rows.len());
        for batch in &rows {
            data.push(batch_json(&batches, batch).await?);
        }
        Ok(axum::Json(json!({"object": "list", "data": data, "has_more": false})).into_response())
    }
    .await;
    answered(result, &request_id)
}

/// `POST /v1/batches/{id}/cancel`: the runner stops between lines and
/// writes what ran.
async fn cancel(
    State(batches): State<Arc<Batches>>,
    request_id: RequestId,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    let result = async {
        find_batch(&batches, &caller, &id).await?;
        batches
            .store
            .transition(&id, super::store::Transition::Cancel)
            .await
            .map_err(internal)?;
        let batch = find_batch(&batches, &caller, &id).await?;
        Ok(axum::Json(batch_json(&batches, &batch).await?).into_response())
    }
    .await;
    answered(result, &request_id)
}
