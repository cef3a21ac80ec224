//! `POST /v1/chat/completions`: the pipeline's answer rendered for the wire,
//! one JSON body or an SSE stream of `data: <chunk>` frames ending in the
//! closing chunk (with `usage.cost` and `service`) and `data: [DONE]`.
//!
//! Models whose id starts with a delegate's prefix (hosted actors'
//! `actor/`) are served by that delegate, registered at wiring; the data
//! plane owns the route either way.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, BytesMut};
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::DataPlane;
use super::chat::{body_error, refused};
use super::chunk::frame_object;
use super::native;
use super::pipeline::{
    Answer, CacheUse, CallSite, ChatCall, ChatStream, Completion, Ending, Operation, StreamEvent, StreamFailure,
};
use tollgate_identity::auth::Caller;
use tollgate_web::server::RequestId;

/// A concern that serves some models on `/v1/chat/completions` itself.
pub trait ModelDelegate: Send + Sync {
    /// The model ids it serves start with this (e.g. `actor/`).
    fn prefix(&self) -> &'static str;

    /// Answers a request for `model` (the id past the prefix); `request`
    /// is the parsed body.
    fn serve(
        &self,
        caller: Caller,
        model: String,
        request: Value,
        request_id: RequestId,
    ) -> BoxFuture<'static, Response>;
}

pub async fn chat_completions(
    State(data): State<Arc<DataPlane>>,
    request_id: RequestId,
    caller: Caller,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let site = CallSite::top(&request_id, StreamFailure::Chunk);
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let error = refused(&data, &site, &caller, None, body_error(&data, &rejection)).await;
            return error.with_request_id(&request_id.0).into_response();
        }
    };
    if let Some((delegate, model, request)) = data.delegate_for(&body) {
        return delegate.serve(caller, model, request, request_id).await;
    }
    let call = ChatCall {
        cache: CacheUse::from_header(headers.get(header::CACHE_CONTROL).and_then(|v| v.to_str().ok())),
        ..ChatCall::body(body)
    };
    match data.run(Operation::Chat(call), &caller, site).await {
        Ok(Answer::Whole(completion)) => whole_response(completion, &request_id),
        Ok(Answer::Stream(stream)) => sse_response(Body::from_stream(chat_sse(stream)), &request_id),
        Ok(Answer::Media(_)) => unreachable!("a chat answer is JSON or a stream"),
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}

impl DataPlane {
    /// Registers the delegates (at wiring, once).
    pub fn delegate(&self, delegates: Vec<Arc<dyn ModelDelegate>>) {
        let registered = delegates
            .into_iter()
            .map(|handler| Delegate {
                quoted_prefix: memchr::memmem::Finder::new(&format!("\"{}", handler.prefix())).into_owned(),
                handler,
            })
            .collect();
        if self.delegates.set(registered).is_err() {
            tracing::error!("model delegates were registered twice; the first stay");
        }
    }

    /// The delegate whose prefix the body's `model` starts with, the model
    /// past the prefix, and the parsed body. A body that does not name a
    /// prefix anywhere is not parsed here.
    fn delegate_for(&self, body: &[u8]) -> Option<(Arc<dyn ModelDelegate>, String, Value)> {
        let delegates = self.delegates.get()?;
        for delegate in delegates {
            if delegate.quoted_prefix.find(body).is_none() {
                continue;
            }
            let Ok(request) = serde_json::from_slice::<Value>(body) else {
                return None;
            };
            let prefix = delegate.handler.prefix();
            let model = request["model"].as_str()?.strip_prefix(prefix)?.to_string();
            return Some((delegate.handler.clone(), model, request));
        }
        None
    }
}

/// A registered [`ModelDelegate`], with the searcher for its quoted prefix
/// (`"actor/`) built once rather than per request.
pub(crate) struct Delegate {
    quoted_prefix: memchr::memmem::Finder<'static>,
    handler: Arc<dyn ModelDelegate>,
}

/// A whole answer as JSON, with the request id header.
pub(crate) fn whole_response(completion: Completion, request_id: &RequestId) -> Response {
    let mut response = (StatusCode::OK, completion.render()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(value) = HeaderValue::from_str(&request_id.0) {
        headers.insert("x-request-id", value);
    }
    response
}

/// The chat stream as SSE bytes; a native stream's events in their own
/// framing. Dropping it (the caller left) drops the stream.
pub fn chat_sse(stream: ChatStream) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    futures_util::stream::unfold(Some(stream), |stream| async move {
        let mut stream = stream?;
        let event = stream.next().await?;
        let (bytes, more) = match event {
            StreamEvent::Chunks(chunks) => {
                let mut frame = BytesMut::with_capacity(chunks.iter().map(|c| c.len() + 8).sum());
                for chunk in &chunks {
                    frame_object(&mut frame, chunk);
                }
                (frame.freeze(), true)
            }
            StreamEvent::Native(events) => {
                let mut frame = BytesMut::new();
                for event in &events {
                    native::write_event(&mut frame, event.name.as_deref(), &event.data);
                }
                (frame.freeze(), true)
            }
            StreamEvent::End(ending) => (closing_frame(ending), false),
        };
        Some((Ok(bytes), more.then_some(stream)))
    })
}

/// The stream's last frames: the closing chunk and `[DONE]`, or a native
/// stream's error event when it failed.
fn closing_frame(ending: Ending) -> Bytes {
    let mut frame = BytesMut::new();
    match ending.chunk {
        Some(chunk) => {
            frame_object(&mut frame, &Ending::render_chunk(chunk, &ending.service));
            frame.put_slice(b"data: [DONE]\n\n");
        }
        None => {
            if let Some(error) = &ending.error {
                native::write_error(&mut frame, error, ending.service.to_json());
            }
        }
    }
    frame.freeze()
}

/// An SSE answer with the request id header.
pub fn sse_response(body: Body, request_id: &RequestId) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&request_id.0) {
        headers.insert("x-request-id", value);
    }
    response
}
