//! Runs a batch: each line without a result yet goes through the data
//! plane as a request of its own (its parent: the batch), at most
//! `batches.concurrency` at a time, and its result is recorded as it ends.
//! The lease is renewed as lines finish; a cancel or the batch's expiry
//! stops it between lines. When every line has a result (or it stopped),
//! the results become the output and error files.

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::Batches;
use super::api::{Line, read_lines};
use super::store::{StoredPrincipal, Transition};
use tollgate_core::db::now_ms;
use tollgate_gateway::pipeline::{Answer, CallSite, ChatCall, Operation, OperationCall, StreamFailure};
use tollgate_identity::auth::Caller;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

/// Starts running the batch on this gateway if it can claim it.
pub fn spawn(batches: Arc<Batches>, id: String) {
    tokio::spawn(async move {
        if let Err(error) = run(&batches, &id).await {
            tracing::warn!(batch = %id, %error, "batch run stopped; it resumes once its lease lapses");
        }
    });
}

async fn run(batches: &Arc<Batches>, id: &str) -> anyhow::Result<()> {
    let store = &batches.store;
    let Some(mut lease) = store.claim(id, batches.config.lease_ms, None).await? else {
        return Ok(());
    };
    let Some(batch) = store.batch(None, id).await? else {
        return Ok(());
    };
    let caller = Caller(Arc::new(StoredPrincipal::read(&batch.principal)?));
    let input = store
        .file(&batch.workspace_id, &batch.input_file_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the input file {} is gone", batch.input_file_id))?;
    let bytes = batches.blobs.get(&input.digest.parse()?).await?;
    let lines =
        read_lines(&bytes, &batch.endpoint, batches.config.max_lines).map_err(|e| anyhow::anyhow!(e.message))?;
    let lines: Arc<Vec<Line>> = Arc::new(lines);
    let caller = Arc::new(caller);
    let done: HashSet<i64> = store.done_lines(id).await?.into_iter().collect();
    let pending: Vec<i64> = (0..lines.len() as i64).filter(|i| !done.contains(i)).collect();
    let key_active = || batches.accounts.key_active(&batch.workspace_id, &caller.0.key_id);
    let mut revoked = !key_active().await?;
    let mut stopped = revoked || batch.status == "cancelling" || now_ms() > batch.expires_at_ms;
    let mut results = futures_util::stream::iter(pending)
        .map(|index| {
            let (batches, lines, caller, id) = (batches.clone(), lines.clone(), caller.clone(), id.to_string());
            async move {
                let line = &lines[index as usize];
                (index, run_line(&batches, &id, &caller, line).await)
            }
        })
        .buffer_unordered(batches.config.concurrency);
    while !stopped && let Some((index, (ok, result))) = results.next().await {
        store.record(id, index, ok, &result).await?;
        // Between lines: renew the lease, and stop on a cancel or expiry.
        lease = store
            .claim(id, batches.config.lease_ms, Some(lease))
            .await?
            .ok_or_else(|| anyhow::anyhow!("lost the lease"))?;
        if index % 16 == 0 || now_ms() > batch.expires_at_ms {
            let status = store.batch(None, id).await?.map(|b| b.status).unwrap_or_default();
            revoked = !key_active().await?;
            stopped = revoked || status == "cancelling" || now_ms() > batch.expires_at_ms;
        }
    }
    drop(results);
    let current = store.batch(None, id).await?.map(|b| b.status).unwrap_or_default();
    let ending = if revoked {
        let errors = json!({"object": "list", "data": [{"code": "key_revoked",
            "message": "The API key this batch runs as was revoked; the lines not yet run were not run."}]});
        store.set_errors(id, &errors.to_string()).await?;
        Transition::Fail
    } else if current == "cancelling" {
        Transition::Cancelled
    } else if stopped {
        Transition::Expire
    } else {
        store.transition(id, Transition::Finalize).await?;
        Transition::Complete
    };
    finalize(batches, &batch.workspace_id, id).await?;
    store.transition(id, ending).await?;
    tracing::info!(batch = %id, ending = ?ending, "batch ended");
    Ok(())
}

/// Runs one line through the data plane; its result line for the output
/// file (ok) or the error file.
async fn run_line(batches: &Batches, batch_id: &str, caller: &Caller, line: &Line) -> (bool, String) {
    let request_id = RequestId::new();
    let site = CallSite {
        request_id: &request_id,
        parent: Some(batch_id),
        ceiling: None,
        stream_failure: StreamFailure::Status,
        checked_as: Some(tollgate_gateway::pipeline::GuardRoute::Chat),
    };
    let body = Bytes::from(serde_json::to_vec(&line.body).expect("a JSON object serializes"));
    let operation = match line.url.as_str() {
        "/v1/embeddings" => Operation::Model(OperationCall::json(tollgate_plugin_host::Operation::Embeddings, body)),
        _ => Operation::Chat(ChatCall::body(body)),
    };
    let answer = batches.data.run(operation, caller, site).await;
    let (ok, status, body) = match answer {
        Ok(Answer::Whole(completion)) => {
            let rendered: Value = serde_json::from_slice(&completion.render()).unwrap_or(Value::Null);
            (true, 200, rendered)
        }
        Ok(Answer::Stream(_)) | Ok(Answer::Media(_)) => {
            let error =
                ApiError::invalid_request("a batch line must ask for a whole JSON answer ('stream' is not allowed)");
            (false, error.status.as_u16(), error_body(&error))
        }
        Err(error) => (false, error.status.as_u16(), error_body(&error)),
    };
    let result = json!({
        "id": format!("batch_req_{}", &request_id.0[4..]),
        "custom_id": line.custom_id,
        "response": {"status_code": status, "request_id": &*request_id.0, "body": body},
        "error": null,
    });
    (ok, result.to_string())
}

fn error_body(error: &ApiError) -> Value {
    json!({"error": {"message": error.message, "type": error.kind, "code": error.code, "param": error.param}})
}

/// Writes the results as the output (ok) and error files, and names them on
/// the batch.
pub async fn finalize(batches: &Batches, workspace_id: &str, id: &str) -> anyhow::Result<()> {
    let results = batches.store.results(id).await?;
    let mut output = String::new();
    let mut errors = String::new();
    for (ok, line) in results {
        let file = if ok { &mut output } else { &mut errors };
        file.push_str(&line);
        file.push('\n');
    }
    let stored = |text: String, name: &'static str| async move {
        if text.is_empty() {
            return anyhow::Ok(None);
        }
        let file = super::api::store_file(
            batches,
            workspace_id,
            "batch_output",
            &format!("{id}_{name}.jsonl"),
            Bytes::from(text),
        )
        .await?;
        Ok(Some(file.id))
    };
    let output_id = stored(output, "output").await?;
    let error_id = stored(errors, "error").await?;
    batches
        .store
        .set_outputs(id, output_id.as_deref(), error_id.as_deref())
        .await?;
    Ok(())
}
