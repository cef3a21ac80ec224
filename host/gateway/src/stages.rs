//! The stages around an operation, in order: request guardrails (which may
//! refuse or rewrite the request's texts), the response cache (a kept answer
//! is served and billed as a `cache_hit`), the operation itself (`chat`,
//! `operations`), and answer guardrails (on the whole answer, with one retry
//! a guard may ask for, or window by window on a stream). A request with no
//! guardrail and the cache off goes straight to the operation.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tollgate_identity::auth::Caller;
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

use super::DataPlane;
use super::billing::{Bill, Demand};
use super::cache::{self, Entry, Kept, Key};
use super::chat::refused;
use super::guards::texts::{RequestTexts, answer_texts, apply_answer};
use super::guards::{AnswerOutcome, Checks, GuardCall, GuardRoute};
use super::operations::OperationCall;
use super::pipeline::{Answer, CacheUse, CallSite, ChatCall, ChatStream, Completion, Ending, Operation, StreamEvent};
use super::provenance::{Attempt, Metered, Service, Trail};
use tollgate_plugin_host::Usage;

pub async fn run(
    data: &Arc<DataPlane>,
    operation: Operation,
    caller: &Caller,
    site: &CallSite<'_>,
) -> Result<Answer, ApiError> {
    match operation {
        Operation::Chat(call) => chat(data, call, caller, site).await,
        Operation::Model(call) => model(data, call, caller, site).await,
    }
}

/// A chat request through its stages.
async fn chat(
    data: &Arc<DataPlane>,
    mut call: ChatCall,
    caller: &Caller,
    site: &CallSite<'_>,
) -> Result<Answer, ApiError> {
    let caching = data.cache.enabled() && call.cache != CacheUse::None && call.native.is_none();
    let Some(guardrails) = data.guardrails.get().filter(|g| g.any(&caller.0)) else {
        if !caching {
            return super::chat::run(data, call, caller, site).await;
        }
        return cached_chat(data, call, caller, site, None, None).await;
    };
    // Unparseable bodies are the chat operation's to refuse, in its words.
    let Ok(value) = serde_json::from_slice::<Value>(&call.body) else {
        return super::chat::run(data, call, caller, site).await;
    };
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(route) = site.checked_as else {
        return super::chat::run(data, call, caller, site).await;
    };
    let guards = guardrails.select(&caller.0, route, &model);
    if guards.is_empty() {
        if !caching {
            return super::chat::run(data, call, caller, site).await;
        }
        return cached_chat(data, call, caller, site, None, Some(value)).await;
    }
    let mut checks = Checks::new(guards, guard_call(caller, site, route, &model, &call.body));
    let mut value = value;
    let texts = RequestTexts::chat(&value);
    match checks.request(texts.texts.clone()).await {
        Err(error) => return Err(refused(data, site, caller, Some(&model), error).await),
        Ok(Some(rewritten)) => {
            texts.apply(&mut value, &rewritten);
            call.body = Bytes::from(serde_json::to_vec(&value).expect("JSON values serialise"));
            drop_native(&mut call)?;
        }
        Ok(None) => {}
    }
    if checks.checks_responses() {
        // A native answer's texts are in the provider's dialect: answers a
        // guard reads go through the chat form.
        drop_native(&mut call)?;
    }
    let caching = caching && call.native.is_none();
    match caching {
        true => cached_chat(data, call, caller, site, Some(checks), Some(value)).await,
        false => guarded_chat(data, call, caller, site, checks).await,
    }
}

/// The native lane carries the caller's own body, which a guard did not see
/// rewritten: a guarded request goes through the chat form, and one that only
/// the native lane can carry is refused.
fn drop_native(call: &mut ChatCall) -> Result<(), ApiError> {
    if call.native.as_ref().is_some_and(|native| native.required) {
        return Err(ApiError::invalid_request(
            "Guardrails apply to this request, and its content (e.g. 'document' blocks) can only be sent \
             in the provider's own dialect, which they cannot check.",
        ));
    }
    call.native = None;
    Ok(())
}

fn guard_call(caller: &Caller, site: &CallSite<'_>, route: GuardRoute, target: &str, body: &Bytes) -> GuardCall {
    GuardCall {
        caller: caller.0.clone(),
        request_id: site.request_id.0.to_string(),
        route,
        target: target.to_string(),
        request: Arc::from(String::from_utf8_lossy(body).as_ref()),
    }
}

/// The chat operation with answer guardrails: a whole answer checked (and
/// retried once when a guard asks), a stream checked window by window.
async fn guarded_chat(
    data: &Arc<DataPlane>,
    call: ChatCall,
    caller: &Caller,
    site: &CallSite<'_>,
    mut checks: Checks,
) -> Result<Answer, ApiError> {
    let body = call.body.clone();
    let answer = super::chat::run(data, call, caller, site).await?;
    match answer {
        Answer::Stream(stream) if checks.checks_responses() => Ok(Answer::Stream(super::guards::stream::guard(
            stream,
            checks,
            data.limits.guard_window_chars,
        ))),
        Answer::Whole(completion) => {
            let completion = check_whole(data, completion, &body, caller, site, &mut checks).await?;
            Ok(Answer::Whole(completion))
        }
        other => Ok(other),
    }
}

/// A whole answer through the answer guardrails; a guard's retry asks the
/// model once more (billed as a request of its own inside this one), and
/// the answer shows what both cost.
async fn check_whole(
    data: &Arc<DataPlane>,
    mut completion: Completion,
    body: &Bytes,
    caller: &Caller,
    site: &CallSite<'_>,
    checks: &mut Checks,
) -> Result<Completion, ApiError> {
    if !checks.checks_responses() {
        annotate_guardrails(&mut completion.object, checks);
        return Ok(completion);
    }
    let texts = answer_texts(&completion.object, completion.native);
    match checks.answer(texts, true, true).await? {
        AnswerOutcome::Pass(texts) => {
            apply_answer(&mut completion.object, completion.native, texts);
        }
        AnswerOutcome::Retry(reason) => {
            let first = completion.service.billed;
            let said = answer_texts(&completion.object, completion.native).join("\n");
            let retry_body = retry_request(body, &said, &reason)?;
            let retry_id = RequestId::new();
            let retry_site = CallSite {
                request_id: &retry_id,
                parent: Some(&site.request_id.0),
                ceiling: site.ceiling,
                stream_failure: site.stream_failure,
                checked_as: site.checked_as,
            };
            let answer = super::chat::run(data, ChatCall::body(retry_body), caller, &retry_site).await?;
            let Answer::Whole(mut second) = answer else {
                return Err(ApiError::internal("a retried whole answer came back as a stream"));
            };
            let texts = answer_texts(&second.object, second.native);
            let AnswerOutcome::Pass(texts) = checks.answer(texts, true, false).await? else {
                unreachable!("no retry is offered twice")
            };
            apply_answer(&mut second.object, second.native, texts);
            second.service.billed = second.service.billed.plus(first);
            second.service.request_id = site.request_id.0.to_string();
            second.service.annotate(&mut second.object);
            completion = second;
        }
    }
    annotate_guardrails(&mut completion.object, checks);
    Ok(completion)
}

/// The request again, with the refused answer and why it was refused.
fn retry_request(body: &Bytes, said: &str, reason: &str) -> Result<Bytes, ApiError> {
    let mut value: Value = serde_json::from_slice(body).map_err(|e| ApiError::internal(format!("retrying: {e}")))?;
    if let Some(Value::Array(messages)) = value.get_mut("messages") {
        messages.push(json!({"role": "assistant", "content": said}));
        messages.push(json!({"role": "user", "content": format!(
            "That answer was refused: {reason}. Answer the original request again, following its instructions exactly."
        )}));
    }
    value.as_object_mut().map(|o| o.remove("stream"));
    Ok(Bytes::from(serde_json::to_vec(&value).expect("JSON values serialise")))
}

fn annotate_guardrails(object: &mut Map<String, Value>, checks: &Checks) {
    if let Some(Value::Object(service)) = object.get_mut("service") {
        service.insert("guardrails".into(), checks.to_json());
    }
}

/// The chat operation behind the response cache (and the answer guardrails,
/// when `checks` is given). `parsed` is the body as a value when an earlier
/// stage has read it already.
async fn cached_chat(
    data: &Arc<DataPlane>,
    call: ChatCall,
    caller: &Caller,
    site: &CallSite<'_>,
    checks: Option<Checks>,
    parsed: Option<Value>,
) -> Result<Answer, ApiError> {
    let Some(value) = parsed.or_else(|| serde_json::from_slice::<Value>(&call.body).ok()) else {
        return super::chat::run(data, call, caller, site).await;
    };
    let workspace = &caller.0.workspace_id;
    let Some(key) = cache::exact_key(workspace, &value) else {
        return match checks {
            Some(checks) => guarded_chat(data, call, caller, site, checks).await,
            None => super::chat::run(data, call, caller, site).await,
        };
    };
    let stream = value.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let semantic = data.cache.semantic_config().model.clone();
    let mut vector = None;
    if call.cache == CacheUse::Full {
        let mut hit = data
            .cache
            .get(&key)
            .map(|entry| (entry, json!({"hit": true, "kind": "exact"})));
        if hit.is_none()
            && let Some(embedding_model) = &semantic
        {
            vector = embed(data, caller, site, embedding_model, &value).await;
            if let (Some(found), Some(shape)) = (&vector, cache::shape_key(workspace, &value)) {
                let threshold = data.cache.semantic_config().threshold;
                if let Some((near, similarity)) =
                    data.cache.semantic.nearest(&shape, found, threshold, data.cache.ttl())
                    && let Some(entry) = data.cache.get(&near)
                {
                    hit = Some((
                        entry,
                        json!({"hit": true, "kind": "semantic", "similarity": similarity}),
                    ));
                }
            }
        }
        if let Some((entry, mut shown)) = hit
            && matches!(
                (&entry.kept, stream),
                (Kept::Whole(_), false) | (Kept::Stream { .. }, true)
            )
        {
            shown["age_secs"] = json!(entry.stored.elapsed().as_secs());
            return served(data, entry, shown, &value, &call.body, caller, site, checks).await;
        }
    }
    let body = call.body.clone();
    let answer = super::chat::run(data, call, caller, site).await?;
    let keep = Keep {
        data: data.clone(),
        key,
        shape: semantic.as_ref().and_then(|_| cache::shape_key(workspace, &value)),
        vector,
    };
    match answer {
        Answer::Whole(completion) => {
            let kept = Kept::Whole(Bytes::from(
                serde_json::to_vec(&WithoutService(&completion.object)).expect("JSON values serialise"),
            ));
            let route = completion.service.route.clone();
            let usage = completion.service.billed.usage;
            let completion = match checks {
                Some(mut checks) => check_whole(data, completion, &body, caller, site, &mut checks).await?,
                None => completion,
            };
            keep.put(kept, route, usage);
            Ok(Answer::Whole(completion))
        }
        Answer::Stream(stream) => {
            let recorded = record_stream(stream, keep);
            Ok(Answer::Stream(match checks {
                Some(checks) if checks.checks_responses() => {
                    super::guards::stream::guard(recorded, checks, data.limits.guard_window_chars)
                }
                _ => recorded,
            }))
        }
        other => Ok(other),
    }
}

/// Where a miss's answer is kept once it has ended well.
struct Keep {
    data: Arc<DataPlane>,
    key: Key,
    shape: Option<Key>,
    vector: Option<Vec<f32>>,
}

impl Keep {
    fn put(self, kept: Kept, route: Arc<tollgate_routing::catalog::ModelRoute>, usage: Option<Usage>) {
        let bytes = match &kept {
            Kept::Whole(json) => json.len(),
            Kept::Stream { chunks, .. } => chunks.iter().map(Bytes::len).sum(),
        };
        let entry = Entry {
            kept,
            route,
            usage,
            stored: Instant::now(),
            bytes,
        };
        if self.data.cache.put(self.key, entry)
            && let (Some(shape), Some(vector)) = (self.shape, self.vector)
        {
            self.data.cache.semantic.insert(shape, vector, self.key);
        }
    }
}

/// An answer as kept: written once without its `service` block, which a
/// hit shows anew (cheaper than a clone of the answer to remove it from).
struct WithoutService<'a>(&'a Map<String, Value>);

impl serde::Serialize for WithoutService<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.0.iter().filter(|(key, _)| *key != "service") {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

fn without_service(object: &Map<String, Value>) -> Map<String, Value> {
    let mut kept = object.clone();
    kept.remove("service");
    kept
}

/// Passes a stream on as it comes, and keeps it once it ended without error.
fn record_stream(mut inner: ChatStream, keep: Keep) -> ChatStream {
    let (tx, events) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut chunks = Vec::new();
        while let Some(event) = inner.next().await {
            match &event {
                StreamEvent::Chunks(batch) => chunks.extend(batch.iter().cloned()),
                StreamEvent::End(ending) if ending.error.is_none() => {
                    if let Some(closing) = &ending.chunk {
                        let kept = Kept::Stream {
                            chunks: std::mem::take(&mut chunks),
                            closing: without_service(closing),
                        };
                        keep.put(kept, ending.service.route.clone(), ending.service.billed.usage);
                    }
                    let _ = tx.send(event).await;
                    return;
                }
                _ => {}
            }
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    ChatStream { events, native: false }
}

/// The request's texts embedded through the gateway's own metered
/// embeddings (billed to the caller, logged inside this request). `None`
/// when the call fails: the request then goes upstream as a miss.
async fn embed(
    data: &Arc<DataPlane>,
    caller: &Caller,
    site: &CallSite<'_>,
    model: &str,
    value: &Value,
) -> Option<Vec<f32>> {
    let dimensions = data.cache.semantic_config().dimensions;
    let text = RequestTexts::chat(value)
        .texts
        .iter()
        .map(|text| format!("{}: {}", text.role, text.content))
        .collect::<Vec<_>>()
        .join("\n");
    let mut body = json!({"model": model, "input": text, "encoding_format": "float"});
    if let Some(dimensions) = dimensions {
        body["dimensions"] = json!(dimensions);
    }
    let id = RequestId::new();
    let embed_site = CallSite {
        request_id: &id,
        parent: Some(&site.request_id.0),
        ceiling: site.ceiling,
        stream_failure: site.stream_failure,
        checked_as: None,
    };
    let call = OperationCall::json(
        tollgate_plugin_host::Operation::Embeddings,
        Bytes::from(body.to_string()),
    );
    let answer = Box::pin(data.run(Operation::Model(call), caller, embed_site)).await;
    match answer {
        Ok(Answer::Whole(completion)) => completion
            .object
            .get("data")?
            .get(0)?
            .get("embedding")?
            .as_array()?
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect(),
        Ok(_) => None,
        Err(error) => {
            tracing::warn!(request_id = %site.request_id.0, code = error.code, "semantic cache: the embedding failed; treated as a miss");
            None
        }
    }
}

/// A kept answer served to this request: billed as a cache hit, shown with
/// `service.cache`, and through the answer guardrails again.
#[allow(clippy::too_many_arguments)]
async fn served(
    data: &Arc<DataPlane>,
    entry: Arc<Entry>,
    shown: Value,
    value: &Value,
    body: &Bytes,
    caller: &Caller,
    site: &CallSite<'_>,
    checks: Option<Checks>,
) -> Result<Answer, ApiError> {
    let model = value.get("model").and_then(Value::as_str).unwrap_or_default();
    let service = bill_hit(data, &entry, model, caller, site).await?;
    match &entry.kept {
        Kept::Whole(json) => {
            let mut object: Map<String, Value> = serde_json::from_slice(json)
                .map_err(|e| ApiError::internal(format!("a kept answer does not read back: {e}")))?;
            service.annotate(&mut object);
            if let Some(Value::Object(service)) = object.get_mut("service") {
                service.insert("cache".into(), shown);
            }
            let completion = Completion {
                object,
                service,
                native: false,
            };
            let completion = match checks {
                Some(mut checks) => check_whole(data, completion, body, caller, site, &mut checks).await?,
                None => completion,
            };
            Ok(Answer::Whole(completion))
        }
        Kept::Stream { chunks, closing } => {
            let mut closing = closing.clone();
            service.annotate(&mut closing);
            if let Some(Value::Object(service)) = closing.get_mut("service") {
                service.insert("cache".into(), shown);
            }
            let (tx, events) = mpsc::channel(2);
            let chunks = chunks.clone();
            tokio::spawn(async move {
                if tx.send(StreamEvent::Chunks(chunks)).await.is_ok() {
                    let ending = Ending {
                        chunk: Some(closing),
                        service,
                        error: None,
                    };
                    let _ = tx.send(StreamEvent::End(ending)).await;
                }
            });
            let stream = ChatStream { events, native: false };
            Ok(Answer::Stream(match checks {
                Some(checks) if checks.checks_responses() => {
                    super::guards::stream::guard(stream, checks, data.limits.guard_window_chars)
                }
                _ => stream,
            }))
        }
    }
}

/// A hit's bill: the plan admits it, the wallet holds and is charged the
/// cache price plus the plan's fee, and the request log records it as a
/// `cache_hit` (its usage event too), with no tokens.
async fn bill_hit(
    data: &Arc<DataPlane>,
    entry: &Entry,
    model: &str,
    caller: &Caller,
    site: &CallSite<'_>,
) -> Result<Service, ApiError> {
    let admitted = match data.admit(&caller.0).await {
        Ok(admitted) => admitted,
        Err(error) => {
            let error = super::chat::plan_error(error);
            return Err(refused(data, site, caller, Some(model), error).await);
        }
    };
    let routes = data.routes();
    let candidates = [entry.route.clone()];
    let demand = Demand {
        request_id: &site.request_id.0,
        parent_request_id: site.parent,
        requested_model: model,
        kind: tollgate_ledger::RequestKind::CacheHit,
        streamed: false,
        body_bytes: 0,
        messages: 0,
        max_output_tokens: 0,
        may_continue: false,
        ceiling: site.ceiling,
        units: None,
        fixed_cost: data.cache.hit_price(),
        admitted,
    };
    let mut bill = Bill::open(
        data.ledger.as_ref(),
        &data.request_log,
        &caller.0,
        &candidates,
        routes.snapshot_id,
        demand,
    )
    .await?;
    let mut trail = Trail::routed(None);
    trail.push(Attempt {
        route: entry.route.clone(),
        outcome: "cache_hit".into(),
        status: Some(StatusCode::OK.as_u16()),
        latency: std::time::Duration::ZERO,
        metered: Metered {
            usage: Some(Usage {
                input: 0,
                output: 0,
                cache_read: None,
                cache_write: None,
                reasoning: None,
            }),
            cost: data.cache.hit_price(),
            fee: tollgate_core::money::Nanos::ZERO,
        },
    });
    let billed = bill.close(Some(&entry.route), &trail, "success", Some(200)).await;
    Ok(Service {
        route: entry.route.clone(),
        request_id: site.request_id.0.to_string(),
        billed,
        trail,
        snapshot_id: Some(bill.snapshot_id()),
    })
}

/// An operation besides chat: embeddings inputs go through the request
/// guardrails; the others go straight to the operation.
async fn model(
    data: &Arc<DataPlane>,
    mut call: OperationCall,
    caller: &Caller,
    site: &CallSite<'_>,
) -> Result<Answer, ApiError> {
    let Some(guardrails) = data.guardrails.get().filter(|g| g.any(&caller.0)) else {
        return super::operations::run(data, call, caller, site).await;
    };
    let tollgate_plugin_host::OperationBody::Json(body) = &call.body else {
        return super::operations::run(data, call, caller, site).await;
    };
    if call.operation != tollgate_plugin_host::Operation::Embeddings {
        return super::operations::run(data, call, caller, site).await;
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(body) else {
        return super::operations::run(data, call, caller, site).await;
    };
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if site.checked_as.is_none() {
        return super::operations::run(data, call, caller, site).await;
    }
    let guards = guardrails.select(&caller.0, GuardRoute::Embeddings, &model);
    if guards.is_empty() {
        return super::operations::run(data, call, caller, site).await;
    }
    let bytes = Bytes::from(body.clone());
    let mut checks = Checks::new(guards, guard_call(caller, site, GuardRoute::Embeddings, &model, &bytes));
    let texts = RequestTexts::embeddings(&value);
    match checks.request(texts.texts.clone()).await {
        Err(error) => {
            let kind = tollgate_ledger::RequestKind::Embeddings;
            return Err(super::chat::refused_as(data, site, caller, kind, Some(&model), error).await);
        }
        Ok(Some(rewritten)) => {
            texts.apply(&mut value, &rewritten);
            call.body =
                tollgate_plugin_host::OperationBody::Json(serde_json::to_vec(&value).expect("JSON values serialise"));
        }
        Ok(None) => {}
    }
    let answer = super::operations::run(data, call, caller, site).await?;
    Ok(match answer {
        Answer::Whole(mut completion) => {
            annotate_guardrails(&mut completion.object, &checks);
            Answer::Whole(completion)
        }
        other => other,
    })
}
