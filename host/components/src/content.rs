//! Tool content across WIT versions. The host knows one shape, 0.2.0's
//! [`Content`] (text, JSON, image, audio, embedded resource); 0.1.0's (text,
//! JSON) converts into it, and a skill, whose world sees 0.1.0's, gets the
//! newer parts as JSON parts in MCP's shapes ([`mcp_content`]). Also what an
//! answer weighs against the output cap, and the checks every part passes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::bindings::{Content, ContentV1, ResourceBody, ResourceContents};

/// Longest media type kept, in bytes.
const MAX_MIME: usize = 255;

pub(crate) fn from_v1(part: ContentV1) -> Content {
    match part {
        ContentV1::Text(text) => Content::Text(text),
        ContentV1::Json(json) => Content::Json(json),
    }
}

/// A part as a 0.1.0 component (a skill) reads it: text and JSON as they are,
/// anything else as its MCP content object in a JSON part.
pub(crate) fn to_v1(part: Content) -> ContentV1 {
    match part {
        Content::Text(text) => ContentV1::Text(text),
        Content::Json(json) => ContentV1::Json(json),
        other => ContentV1::Json(mcp_content(&other).to_string()),
    }
}

/// One part as MCP's content object: JSON goes as text, bytes as base64.
pub fn mcp_content(part: &Content) -> Value {
    match part {
        Content::Text(text) | Content::Json(text) => json!({"type": "text", "text": text}),
        Content::Image(media) => {
            json!({"type": "image", "data": STANDARD.encode(&media.data), "mimeType": media.mime_type})
        }
        Content::Audio(media) => {
            json!({"type": "audio", "data": STANDARD.encode(&media.data), "mimeType": media.mime_type})
        }
        Content::Resource(contents) => json!({"type": "resource", "resource": mcp_resource(contents)}),
    }
}

/// A resource's contents as MCP's `TextResourceContents` or `BlobResourceContents`.
pub fn mcp_resource(contents: &ResourceContents) -> Value {
    let mut value = json!({"uri": contents.uri});
    if let Some(mime) = &contents.mime_type {
        value["mimeType"] = json!(mime);
    }
    match &contents.body {
        ResourceBody::Text(text) => value["text"] = json!(text),
        ResourceBody::Blob(bytes) => value["blob"] = json!(STANDARD.encode(bytes)),
    }
    value
}

/// The bytes a part adds to an answer (bytes as their base64).
pub(crate) fn weight(part: &Content) -> usize {
    match part {
        Content::Text(text) | Content::Json(text) => text.len(),
        Content::Image(media) | Content::Audio(media) => encoded(media.data.len()) + media.mime_type.len(),
        Content::Resource(contents) => resource_weight(contents),
    }
}

pub(crate) fn resource_weight(contents: &ResourceContents) -> usize {
    let body = match &contents.body {
        ResourceBody::Text(text) => text.len(),
        ResourceBody::Blob(bytes) => encoded(bytes.len()),
    };
    contents.uri.len() + contents.mime_type.as_ref().map_or(0, String::len) + body
}

fn encoded(bytes: usize) -> usize {
    bytes.div_ceil(3) * 4
}

/// A JSON part must be JSON; media types must be present and short; a
/// resource needs a URI.
pub(crate) fn check(part: &Content) -> Result<(), String> {
    match part {
        Content::Text(_) => Ok(()),
        Content::Json(json) => serde_json::from_str::<serde::de::IgnoredAny>(json)
            .map(|_| ())
            .map_err(|e| format!("answered a JSON part that is not JSON: {e}")),
        Content::Image(media) | Content::Audio(media) => check_mime(&media.mime_type),
        Content::Resource(contents) => check_resource(contents),
    }
}

pub(crate) fn check_resource(contents: &ResourceContents) -> Result<(), String> {
    if contents.uri.is_empty() {
        return Err("answered a resource without a URI".into());
    }
    contents.mime_type.as_deref().map_or(Ok(()), check_mime)
}

fn check_mime(mime: &str) -> Result<(), String> {
    match !mime.is_empty() && mime.len() <= MAX_MIME && !mime.chars().any(char::is_control) {
        true => Ok(()),
        false => Err(format!(
            "answered a media type that is empty, longer than {MAX_MIME} bytes or not text"
        )),
    }
}
