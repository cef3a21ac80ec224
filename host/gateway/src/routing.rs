//! The data plane's side of candidate selection: reads what routing needs
//! from the request (the `provider` preferences, the parameters a candidate
//! must support, the conversation), asks [`Selector`], and turns a refusal
//! into the caller's error, before anything is reserved.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;

use super::envelope::{ChatEnvelope, conversation_prefix};
use super::{DataPlane, Routes};
use tollgate_routing::affinity::{Conversation, KeySource};
use tollgate_routing::catalog::ModelRoute;
use tollgate_routing::preferences::Preferences;
use tollgate_routing::select::{Decision, Refusal, Selector, Wants};
use tollgate_web::error::ApiError;

pub fn select(
    data: &DataPlane,
    routes: &Routes,
    envelope: &ChatEnvelope<'_>,
    body: &[u8],
    workspace: &str,
) -> Result<(Vec<Arc<ModelRoute>>, Option<Decision>), ApiError> {
    let preferences = envelope
        .provider
        .map(|raw| Preferences::parse(raw.get()))
        .transpose()
        .map_err(|error| ApiError::invalid_request(error.0).with_param("provider"))?;
    let needs = match &preferences {
        Some(prefs) if prefs.require_parameters => needed_capabilities(body),
        _ => Vec::new(),
    };
    // Keyed by workspace too: one tenant's session id never tells another
    // where a conversation of the same name was served.
    let conversation = |group: &str| {
        let (source, identity) = match envelope.session {
            Some((source, id)) => (source, id.as_bytes().to_vec()),
            None => (KeySource::Prefix, conversation_prefix(body)?),
        };
        let scope = format!("{group}\u{0}{workspace}");
        Some(Conversation::new(&scope, source, &identity))
    };
    let names: Vec<&str> = std::iter::once(&envelope.model)
        .chain(&envelope.fallbacks)
        .map(|name| name.as_ref())
        .collect();
    let selector = Selector {
        catalog: &routes.catalog,
        config: &data.groups,
        health: &data.health,
        traffic: &data.traffic,
        affinity: &data.affinity,
    };
    let wants = Wants {
        names: names.clone(),
        preferences: preferences.as_ref(),
        needs: &needs,
        billing: data.ledger.is_some(),
        conversation: &conversation,
    };
    match selector.select(&wants) {
        Ok(selection) => Ok((selection.candidates, selection.decision)),
        Err(refusal) => Err(refused(refusal, &names)),
    }
}

fn refused(refusal: Refusal, names: &[&str]) -> ApiError {
    let param = |index: usize, error: ApiError| if index == 0 { error } else { error.with_param("models") };
    match refusal {
        Refusal::Unknown { index } => param(index, ApiError::model_not_found(names[index])),
        Refusal::Unpriced { index, reason } => param(
            index,
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "model_unpriced",
                format!("Model '{}' cannot be billed: {reason}.", names[index]),
            ),
        ),
        Refusal::NoneEligible { excluded } => {
            let why: Vec<String> = excluded
                .iter()
                .map(|(model, reason)| format!("{model}: {reason}"))
                .collect();
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "no_eligible_provider",
                format!(
                    "No candidate can serve this request under its provider preferences ({}).",
                    why.join("; ")
                ),
            )
            .with_param("provider")
        }
    }
}

/// What a candidate must support to honour this request, for
/// `require_parameters`: tools, a JSON response format, images.
fn needed_capabilities(body: &[u8]) -> Vec<&'static str> {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let mut needs = Vec::new();
    if request["tools"].as_array().is_some_and(|tools| !tools.is_empty()) {
        needs.push("tools");
    }
    match request["response_format"]["type"].as_str() {
        Some("json_schema") => needs.push("structured_outputs"),
        Some("json_object") => needs.push("json_mode"),
        _ => {}
    }
    let has_image = request["messages"].as_array().is_some_and(|messages| {
        messages.iter().any(|message| {
            message["content"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|part| part["type"] == "image_url"))
        })
    });
    if has_image {
        needs.push("vision");
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_a_candidate_must_support() {
        let body = br#"{"tools":[{"type":"function"}],"response_format":{"type":"json_schema"},
            "messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}"#;
        assert_eq!(needed_capabilities(body), ["tools", "structured_outputs", "vision"]);
        assert!(needed_capabilities(br#"{"tools":[],"messages":[]}"#).is_empty());
    }
}
