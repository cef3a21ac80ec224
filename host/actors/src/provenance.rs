//! A run's provenance trail, and its signature: the trail is canonicalized
//! with RFC 8785 and signed with the gateway's ed25519 key, so anyone with
//! the public key can check that a stored trail is the one the gateway
//! wrote, byte for byte of its canonical form.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::ir::PackagePin;

/// One run of an actor (or of a sub-actor inside one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunTrail {
    pub run_id: String,
    pub actor_id: String,
    /// `namespace/name` of the actor.
    pub actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// 0 for the run a caller started; each sub-actor level adds one.
    pub depth: u32,
    /// `succeeded` or `failed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TrailError>,
    pub input_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_digest: Option<String>,
    /// Exact USD, the sum of the run's model calls (sub-actors included).
    pub cost_usd: String,
    pub started_at_ms: i64,
    pub duration_ms: u64,
    pub steps: Vec<StepTrail>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrailError {
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepTrail {
    pub id: String,
    /// `llm`, `agent`, `tool`, `subtask`, `map`, `if` or `return`.
    pub kind: String,
    /// `succeeded`, `failed` or `skipped` (an `if` branch not taken is not listed).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_digest: Option<String>,
    /// Exact USD spent by this step (its model calls and sub-runs).
    pub cost_usd: String,
    pub started_at_ms: i64,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_calls: Vec<ModelCallTrail>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallTrail>,
    /// Sub-actor runs: one for a subtask, one per item for a map.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub child_runs: Vec<RunTrail>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelCallTrail {
    /// The model call's own request id (its request-log row).
    pub request_id: String,
    /// The profile's candidates, in order.
    pub models_requested: Vec<String>,
    pub model_served: String,
    pub provider: String,
    /// The data plane's attempts, as in `service.attempts`.
    pub attempts: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    pub cost_usd: String,
    pub input_digest: String,
    pub output_digest: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallTrail {
    pub request_id: String,
    /// The tool as the model or step named it (`<alias>__<tool>` in agents).
    pub tool: String,
    pub component: PackagePin,
    pub input_digest: String,
    pub output_digest: String,
    pub is_error: bool,
}

/// `sha256:<hex>` of a value's canonical bytes.
pub fn digest(value: &Value) -> String {
    let bytes = crate::canonical_bytes(value).unwrap_or_else(|_| value.to_string().into_bytes());
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the signature does not match the trail: it was altered or signed by another key")]
    Mismatch,
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("the trail cannot be canonicalized: {0}")]
    Canonical(String),
}

/// The signature over `trail`'s canonical bytes, base64url without padding.
pub fn sign(trail: &Value, key: &SigningKey) -> Result<String, crate::CanonicalError> {
    let bytes = crate::canonical_bytes(trail)?;
    Ok(URL_SAFE_NO_PAD.encode(key.sign(&bytes).to_bytes()))
}

/// Checks `signature` (base64url) over `trail` with `public_key` (32 bytes,
/// base64url).
pub fn verify(trail: &Value, signature: &str, public_key: &str) -> Result<(), VerifyError> {
    let key: [u8; 32] = URL_SAFE_NO_PAD
        .decode(public_key)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(VerifyError::Malformed("public key"))?;
    let key = VerifyingKey::from_bytes(&key).map_err(|_| VerifyError::Malformed("public key"))?;
    let signature: [u8; 64] = URL_SAFE_NO_PAD
        .decode(signature)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(VerifyError::Malformed("signature"))?;
    let bytes = crate::canonical_bytes(trail).map_err(|e| VerifyError::Canonical(e.to_string()))?;
    key.verify(&bytes, &Signature::from_bytes(&signature))
        .map_err(|_| VerifyError::Mismatch)
}

/// The public half of `key`, base64url: what `verify` takes.
pub fn public_key(key: &SigningKey) -> String {
    URL_SAFE_NO_PAD.encode(key.verifying_key().to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_signed_trail_verifies_and_any_change_breaks_it() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let trail = json!({"run_id": "run_1", "cost_usd": "0.000001", "steps": [{"id": "greet"}]});
        let signature = sign(&trail, &key).unwrap();
        verify(&trail, &signature, &public_key(&key)).unwrap();
        // Key order is not content: the canonical form is the same.
        let reordered: Value =
            serde_json::from_str(r#"{"steps":[{"id":"greet"}],"cost_usd":"0.000001","run_id":"run_1"}"#).unwrap();
        verify(&reordered, &signature, &public_key(&key)).unwrap();
        let altered = json!({"run_id": "run_1", "cost_usd": "0.000002", "steps": [{"id": "greet"}]});
        assert_eq!(
            verify(&altered, &signature, &public_key(&key)),
            Err(VerifyError::Mismatch)
        );
        let other = SigningKey::from_bytes(&[8; 32]);
        assert_eq!(
            verify(&trail, &signature, &public_key(&other)),
            Err(VerifyError::Mismatch)
        );
    }
}
