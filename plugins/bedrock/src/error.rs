//! Bedrock errors → error classes.
//!
//! An HTTP error names its type in the `x-amzn-ErrorType` header
//! (`ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/`)
//! or, for some front-end errors, in a body `__type`
//! (`com.amazon.coral.service#UnrecognizedClientException`); the body is
//! `{"message": …}` (`"Message"` on some authentication errors). A stream
//! exception arrives as an event named by its `:exception-type`
//! (`throttlingException`) with the same `{"message": …}` payload.

use serde_json::Value;
use tollgate_plugin_sdk::openai::{self, ErrorDetail};
use tollgate_plugin_sdk::{AdapterError, ErrorClass, ResponseHead};

/// Error types that mean the credential or its permissions are wrong.
const AUTH_TYPES: [&str; 9] = [
    "accessdeniedexception",
    "unrecognizedclientexception",
    "invalidsignatureexception",
    "signaturedoesnotmatch",
    "incompletesignatureexception",
    "missingauthenticationtokenexception",
    "expiredtokenexception",
    "invalidclienttokenid",
    "unauthorizedexception",
];

/// Classifies a non-2xx Converse answer.
pub fn classify_http(head: &ResponseHead, body: &[u8]) -> AdapterError {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let kind = openai::header(&head.headers, "x-amzn-errortype")
        .or_else(|| parsed.get("__type").and_then(Value::as_str))
        .map(short_type)
        .filter(|k| !k.is_empty());
    let message = message_of(&parsed);
    let retry_after = openai::retry_after(&head.headers);
    match kind {
        Some(kind) => match classify_type(kind, message.as_deref(), retry_after, &parsed) {
            Some(class) => AdapterError::new(class, describe(kind, message.as_deref())),
            None => AdapterError::new(
                openai::classify_status(head.status, retry_after, &detail(&message)).class,
                describe(kind, message.as_deref()),
            ),
        },
        None => openai::classify_status(head.status, retry_after, &detail(&message)),
    }
}

/// Classifies an in-stream exception event (`name` is its `:exception-type`,
/// or an `error` message's `:error-code`).
pub fn classify_exception(name: &str, data: &[u8]) -> AdapterError {
    let parsed: Value = serde_json::from_slice(data).unwrap_or(Value::Null);
    let message = message_of(&parsed);
    let class = classify_type(name, message.as_deref(), None, &parsed).unwrap_or(ErrorClass::Upstream(500));
    AdapterError::new(class, describe(&upper_first(name), message.as_deref()))
}

/// Whether a stream event name is an exception rather than a data event.
pub fn is_exception(name: &str) -> bool {
    name.ends_with("Exception") || name.ends_with("exception")
}

/// `ThrottlingException:http://…` → `ThrottlingException`;
/// `com.amazon.coral.service#UnrecognizedClientException` → `UnrecognizedClientException`.
fn short_type(raw: &str) -> &str {
    let raw = raw.split(':').next().unwrap_or(raw).trim();
    raw.rsplit('#').next().unwrap_or(raw)
}

fn message_of(body: &Value) -> Option<String> {
    ["message", "Message"]
        .iter()
        .find_map(|key| body.get(key).and_then(Value::as_str))
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
}

fn detail(message: &Option<String>) -> ErrorDetail {
    ErrorDetail {
        message: message.clone(),
        ..ErrorDetail::default()
    }
}

/// `ThrottlingException: Too many requests…`, so the caller sees Bedrock's type.
fn describe(kind: &str, message: Option<&str>) -> String {
    match message {
        Some(message) => format!("{kind}: {message}"),
        None => kind.to_owned(),
    }
}

fn upper_first(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// The class of a Bedrock error type (case-insensitive: HTTP errors are
/// `ThrottlingException`, stream exceptions `throttlingException`); `None` for
/// a type this table does not know.
fn classify_type(kind: &str, message: Option<&str>, retry_after: Option<u32>, body: &Value) -> Option<ErrorClass> {
    let kind = kind.to_ascii_lowercase();
    let class = match kind.as_str() {
        "throttlingexception" | "servicequotaexceededexception" | "toomanyrequestsexception" => {
            ErrorClass::RateLimited(retry_after)
        }
        "serviceunavailableexception" | "modelnotreadyexception" => ErrorClass::Overloaded,
        "validationexception" if message.is_some_and(is_context_length) => ErrorClass::ContextLength,
        "validationexception" | "resourcenotfoundexception" | "serializationexception" => ErrorClass::InvalidRequest,
        k if AUTH_TYPES.contains(&k) => ErrorClass::Auth,
        "modeltimeoutexception" => ErrorClass::Upstream(408),
        "modelerrorexception" => ErrorClass::Upstream(424),
        "modelstreamerrorexception" => {
            // The model's own failure status, when Bedrock passes it on.
            let original = body
                .get("originalStatusCode")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| (400..600).contains(s));
            match original {
                Some(429) => ErrorClass::RateLimited(None),
                Some(503) => ErrorClass::Overloaded,
                _ => ErrorClass::Upstream(424),
            }
        }
        "internalserverexception" | "internalfailure" => ErrorClass::Upstream(500),
        _ => return None,
    };
    Some(class)
}

/// Bedrock reports an over-long prompt as a ValidationException: "Input is too
/// long for requested model.", or the model's own words ("prompt is too long:
/// 210000 tokens > 200000 maximum", "…exceeds the context window…").
fn is_context_length(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "too long",
        "context length",
        "context window",
        "maximum context",
        "too many input tokens",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, kind: Option<&str>) -> ResponseHead {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if let Some(kind) = kind {
            headers.push(("x-amzn-ErrorType".to_owned(), kind.to_owned()));
        }
        ResponseHead { status, headers }
    }

    #[test]
    fn http_errors_by_type_then_status() {
        let e = classify_http(
            &head(
                429,
                Some("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            ),
            br#"{"message":"Too many requests, please wait before trying again."}"#,
        );
        assert_eq!(e.class, ErrorClass::RateLimited(None));
        assert_eq!(
            e.message,
            "ThrottlingException: Too many requests, please wait before trying again."
        );
        let e = classify_http(
            &head(403, None),
            br#"{"__type":"com.amazon.coral.service#UnrecognizedClientException","Message":"The security token included in the request is invalid."}"#,
        );
        assert_eq!(e.class, ErrorClass::Auth);
        assert_eq!(
            e.message,
            "UnrecognizedClientException: The security token included in the request is invalid."
        );
        let e = classify_http(
            &head(400, Some("ValidationException")),
            br#"{"message":"Input is too long for requested model."}"#,
        );
        assert_eq!(e.class, ErrorClass::ContextLength);
        let e = classify_http(&head(418, Some("SomethingNewException")), br#"{"message":"x"}"#);
        assert_eq!(e.class, ErrorClass::Upstream(418));
        let e = classify_http(&head(502, None), b"<html>bad gateway</html>");
        assert_eq!(e.class, ErrorClass::Upstream(502));
        assert_eq!(e.message, "upstream returned HTTP 502");
    }

    #[test]
    fn stream_exceptions() {
        let e = classify_exception("throttlingException", br#"{"message":"slow down"}"#);
        assert_eq!(e.class, ErrorClass::RateLimited(None));
        assert_eq!(e.message, "ThrottlingException: slow down");
        let e = classify_exception(
            "modelStreamErrorException",
            br#"{"message":"m","originalStatusCode":503,"originalMessage":"busy"}"#,
        );
        assert_eq!(e.class, ErrorClass::Overloaded);
        assert_eq!(
            classify_exception("weirdException", b"").class,
            ErrorClass::Upstream(500)
        );
        assert!(is_exception("validationException") && !is_exception("messageStop"));
    }
}
