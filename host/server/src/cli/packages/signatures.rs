//! The CLI's side of signed packages (docs/registry.md, "Signed packages"):
//! making a key (`tollgate package keygen`), signing a manifest for `publish
//! --signing-key`, and the lines installs print about a package's signer and
//! what it asks for.

use std::path::Path;

use serde_json::{Value, json};
use tollgate_registry::signing::{self, PublicKey};
use tollgate_registry::{Manifest, PackageSignature};

/// Writes a new private key file at `out`; answers its id and public key.
pub fn keygen(out: &Path) -> anyhow::Result<Value> {
    let key = signing::generate_key();
    signing::write_key_file(out, &key).map_err(anyhow::Error::msg)?;
    let public = PublicKey::of(&key);
    Ok(json!({"key_id": public.key_id(), "public_key": public.to_text(), "private_key_file": out}))
}

pub fn keygen_text(result: &Value) -> String {
    let text = |field: &str| result[field].as_str().unwrap_or("?").to_string();
    format!(
        "wrote the private key to {} (keep it secret)\nkey id      {}\npublic key  {}\nregister it: tollgate namespaces keys add NAMESPACE {}",
        text("private_key_file"),
        text("key_id"),
        text("public_key"),
        text("public_key")
    )
}

/// The signature of `manifest` with the private key file at `path`.
pub fn sign(manifest: &Manifest, path: &Path) -> anyhow::Result<PackageSignature> {
    let key = signing::read_key_file(path).map_err(anyhow::Error::msg)?;
    Ok(signing::sign(manifest, &key)?)
}

/// `signed by key K of namespace N (verified)`, or why it is not.
pub fn signed_line(signature: &Value) -> String {
    let Some(key_id) = signature["key_id"].as_str() else {
        return "unsigned".into();
    };
    let namespace = signature["namespace"].as_str().unwrap_or("?");
    let state = match (signature["verified"].as_bool(), signature["problem"].as_str()) {
        (Some(true), _) => "verified".to_string(),
        (_, Some(problem)) => format!("NOT verified: {}", problem.replace('_', " ")),
        _ => "NOT verified".into(),
    };
    format!("signed by key {key_id} of namespace '{namespace}' ({state})")
}

/// `asks for: egress to a.example; model calls; …`, from `capabilities`.
pub fn asks_line(capabilities: &Value) -> String {
    let mut asks = Vec::new();
    let hosts: Vec<&str> = capabilities["egress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !hosts.is_empty() {
        asks.push(format!("outbound HTTP to {}", hosts.join(", ")));
    }
    for (field, what) in [
        ("models", "model calls (billed to the caller)"),
        ("tools", "the workspace's tools"),
        ("credentials", "credentials placed on its requests"),
    ] {
        if capabilities[field] == true {
            asks.push(what.to_string());
        }
    }
    match asks.is_empty() {
        true => "asks for: nothing".into(),
        false => format!("asks for: {}", asks.join("; ")),
    }
}
