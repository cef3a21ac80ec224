//! The Azure OpenAI protocol: the SDK's `openai::Compatible` with Azure's URL,
//! auth header, prompt-filter chunks and content-filter errors.

use tollgate_plugin_sdk::json::{RawObject, is_empty_array};
use tollgate_plugin_sdk::openai::operations::{self, OperationShape};
use tollgate_plugin_sdk::openai::{self, Compatible, CompatibleStream};
use tollgate_plugin_sdk::stream::{EventData, event_data};
use tollgate_plugin_sdk::{
    AdapterError, AuthSlot, CallContext, ErrorClass, Event, Exchange, Measured, Operation, OperationAnswer,
    OperationBody, OutboundRequest, Protocol, ResponseHead, StreamTranslator, Translated, Usage,
};

/// Used when `base_url` carries no `?api-version=`: the latest GA version of
/// the Azure OpenAI data-plane API that supports tools, `json_schema` and
/// streamed usage.
pub const DEFAULT_API_VERSION: &str = "2024-10-21";

/// One exchange with an Azure OpenAI deployment.
pub type AzureOpenAi = Exchange<Azure>;

/// Azure OpenAI's flavour of the chat-completions protocol.
pub struct Azure;

impl Azure {
    /// `{resource}/openai/deployments/{deployment}/chat/completions?api-version=…`,
    /// keeping any other query parameters of `base_url`.
    pub fn url(ctx: &CallContext) -> Result<String, AdapterError> {
        Self::url_for(ctx, "chat/completions")
    }

    /// The deployment's URL for an endpoint `path` (`embeddings`,
    /// `audio/speech`, …).
    pub fn url_for(ctx: &CallContext, path: &str) -> Result<String, AdapterError> {
        let deployment = &ctx.upstream_model;
        let valid = !deployment.is_empty()
            && deployment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid {
            return Err(AdapterError::invalid_request(format!(
                "'{deployment}' is not an Azure deployment name (letters, digits, '-', '_', '.')"
            )));
        }
        let (base, query) = ctx.base_url.split_once('?').unwrap_or((&ctx.base_url, ""));
        // Accept the resource URL with or without the `/openai` path users copy
        // from the Azure portal.
        let base = base.trim_end_matches('/');
        let base = base.strip_suffix("/openai").unwrap_or(base);
        let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
        if !params.iter().any(|p| p.starts_with("api-version=")) {
            params.insert(0, "api-version=");
        }
        let query: Vec<String> = params
            .into_iter()
            .map(|p| match p {
                "api-version=" => format!("api-version={DEFAULT_API_VERSION}"),
                other => other.to_owned(),
            })
            .collect();
        Ok(format!(
            "{base}/openai/deployments/{deployment}/{path}?{}",
            query.join("&")
        ))
    }
}

impl Protocol for Azure {
    type Shape = ();
    type Stream = AzureStream;

    fn request(ctx: &CallContext, openai_body: &[u8]) -> Result<(OutboundRequest, ()), AdapterError> {
        let url = Self::url(ctx)?;
        let (mut request, ()) = Compatible::request(ctx, openai_body)?;
        let mut body = RawObject::parse_slice(&request.body)
            .map_err(|e| AdapterError::internal(format!("prepared body is not a JSON object: {e}")))?;
        // The deployment in the URL picks the model.
        body.remove("model");
        request.body = body.to_vec();
        request.url = url;
        request.auth = AuthSlot::Header("api-key".to_owned());
        Ok((request, ()))
    }

    fn response(ctx: &CallContext, shape: &(), head: ResponseHead, body: Vec<u8>) -> Result<Translated, AdapterError> {
        Compatible::response(ctx, shape, head, body)
    }

    fn stream(ctx: &CallContext, shape: &()) -> AzureStream {
        AzureStream(Compatible::stream(ctx, shape))
    }

    /// Azure OpenAI serves every OpenAI operation but rerank.
    fn operations() -> Vec<Operation> {
        operations::ALL
            .into_iter()
            .filter(|op| *op != Operation::Rerank)
            .collect()
    }

    fn operation_request(
        ctx: &CallContext,
        operation: Operation,
        body: &OperationBody,
    ) -> Result<(OutboundRequest, OperationShape), AdapterError> {
        let (mut request, shape) = operations::request(ctx, operation, body)?;
        request.url = Self::url_for(ctx, operations::path(operation))?;
        request.auth = AuthSlot::Header("api-key".to_owned());
        if let OperationBody::Json(_) = body {
            let mut object = RawObject::parse_slice(&request.body)
                .map_err(|e| AdapterError::internal(format!("prepared body is not a JSON object: {e}")))?;
            // The deployment in the URL picks the model.
            object.remove("model");
            request.body = object.to_vec();
        }
        Ok((request, shape))
    }

    fn operation_response(
        operation: Operation,
        shape: &OperationShape,
        head: ResponseHead,
        body: Vec<u8>,
    ) -> Result<(OperationAnswer, Measured), AdapterError> {
        operations::response(operation, shape, &head, body)
    }

    fn classify_error(head: ResponseHead, body: Vec<u8>) -> AdapterError {
        let detail = openai::ErrorDetail::from_body(&body);
        let mut error = openai::classify_status(head.status, openai::retry_after(&head.headers), &detail);
        // A content-filter refusal is about this prompt: not retryable, and the
        // caller should know why.
        if detail.code.as_deref() == Some("content_filter") {
            error = AdapterError::new(
                ErrorClass::InvalidRequest,
                format!("Azure content filter rejected the request: {}", error.message),
            );
        }
        error
    }
}

/// An OpenAI-compatible stream without Azure's prompt-filter chunks.
pub struct AzureStream(CompatibleStream);

impl StreamTranslator for AzureStream {
    fn on_event(&mut self, event: &Event, out: &mut Vec<Vec<u8>>) -> Result<(), AdapterError> {
        if is_prompt_filter_chunk(event) {
            return Ok(());
        }
        self.0.on_event(event, out)
    }

    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.0.finish()
    }

    fn usage(&self) -> Option<Usage> {
        self.0.usage()
    }
}

/// Azure's first stream chunk reports only the prompt's content-filter
/// results, with an empty `id` and `model` and no choices; OpenAI never sends
/// one, so it is dropped.
fn is_prompt_filter_chunk(event: &Event) -> bool {
    let Ok(EventData::Json(text)) = event_data(&event.data) else {
        return false;
    };
    if !text.contains("\"prompt_filter_results\"") {
        return false;
    }
    RawObject::parse(text)
        .is_ok_and(|chunk| chunk.get("choices").is_some_and(is_empty_array) && chunk.get_non_null("usage").is_none())
}
