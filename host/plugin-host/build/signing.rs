//! Signs the built-in components at build time (docs/registry.md, "Built-in
//! packages"): writes each one's registry manifest and a signature over it,
//! exactly as a publisher's `tollgate package publish --signing-key` would,
//! and the public key the gateway trusts them by.
//!
//! The key is `TOLLGATE_BUILTIN_SIGNING_KEY` (a key file as `tollgate package
//! keygen` writes it) when set, so that every build of a release shares one
//! key; otherwise a new key is made for this build and its private half is
//! dropped once the built-ins are signed, so nothing secret is ever written.
//!
//! The manifest must be the registry's normal form (what it stores and
//! serves), and the signed statement the registry's
//! (`registry/src/signing.rs`); `tollgate-packages`' tests check both against
//! the registry's own code.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const KEY_VARIABLE: &str = "TOLLGATE_BUILTIN_SIGNING_KEY";
const KEY_FILE_PREFIX: &str = "tollgate-signing-key:";
const STATEMENT_TYPE: &str = "tollgate.dev/package-signature/v1";

pub struct BuildKey(SigningKey);

/// A built-in's manifest (JSON) and signature (`KEY_ID:SIGNATURE`).
pub struct Signed {
    pub manifest: String,
    pub signature: String,
}

/// What the manifest declares of a built-in besides its bytes.
pub struct Declared<'a> {
    pub name: &'a str,
    pub kind: &'a str,
    pub wit: &'a str,
    pub capabilities: &'a [String],
    pub allowed_hosts: &'a [String],
}

impl BuildKey {
    pub fn load_or_generate() -> Self {
        println!("cargo:rerun-if-env-changed={KEY_VARIABLE}");
        let Some(path) = std::env::var_os(KEY_VARIABLE).filter(|p| !p.is_empty()) else {
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed).expect("the operating system's randomness");
            return Self(SigningKey::from_bytes(&seed));
        };
        println!("cargo:rerun-if-changed={}", std::path::Path::new(&path).display());
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{KEY_VARIABLE}: cannot read {}: {e}", path.to_string_lossy()));
        let seed: [u8; 32] = text
            .trim()
            .strip_prefix(KEY_FILE_PREFIX)
            .and_then(|b64| URL_SAFE_NO_PAD.decode(b64).ok())
            .and_then(|bytes| bytes.try_into().ok())
            .unwrap_or_else(|| panic!("{KEY_VARIABLE} must name a key file written by `tollgate package keygen`"));
        Self(SigningKey::from_bytes(&seed))
    }

    /// The public half, base64url without padding.
    pub fn public_key(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.verifying_key().to_bytes())
    }

    fn key_id(&self) -> String {
        hex::encode(&Sha256::digest(self.0.verifying_key().to_bytes())[..8])
    }

    pub fn sign(&self, declared: &Declared, bytes: &[u8]) -> Signed {
        let manifest = manifest(declared, bytes);
        let statement = json!({
            "type": STATEMENT_TYPE,
            "package": manifest["name"],
            "version": manifest["version"],
            "manifest_digest": digest(&canonical(&manifest)),
            "content_digest": manifest["content"]["digest"],
        });
        let signature = self.0.sign(&canonical(&statement));
        Signed {
            manifest: canonical_text(&manifest),
            signature: format!("{}:{}", self.key_id(), URL_SAFE_NO_PAD.encode(signature.to_bytes())),
        }
    }
}

/// The registry's normal form of a built-in's manifest: every field the
/// registry writes, empty metadata lists left out.
fn manifest(declared: &Declared, bytes: &[u8]) -> Value {
    let content_digest = digest(bytes);
    // The gateway's version with the content's digest as build metadata, so
    // a rebuilt component is a new version, never a rewrite of a published one.
    let hex = &content_digest["sha256:".len()..];
    let version = format!(
        "{}+sha256.{}",
        std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION"),
        &hex[..16]
    );
    let world = match declared.kind {
        "provider-adapter" => format!("tollgate:provider/provider-adapter@{}", declared.wit),
        "tool-server" => format!("tollgate:tool/tool-server@{}", declared.wit),
        other => format!("tollgate:{other}/{other}@{}", declared.wit),
    };
    let mut metadata = json!({"world": world});
    if !declared.capabilities.is_empty() {
        metadata["capabilities"] = json!(declared.capabilities);
    }
    if !declared.allowed_hosts.is_empty() {
        metadata["allowed_hosts"] = json!(declared.allowed_hosts);
    }
    json!({
        "schema_version": 1,
        "kind": declared.kind,
        "name": format!("tollgate/{}", declared.name),
        "version": version,
        "description": format!("Built-in {} '{}'", declared.kind, declared.name),
        "license": std::env::var("CARGO_PKG_LICENSE").expect("cargo sets CARGO_PKG_LICENSE"),
        "content": {"digest": content_digest, "size": bytes.len(), "media_type": "application/wasm"},
        "dependencies": {},
        "metadata": metadata,
    })
}

fn canonical(value: &Value) -> Vec<u8> {
    serde_jcs::to_vec(value).expect("JSON canonicalizes")
}

fn canonical_text(value: &Value) -> String {
    String::from_utf8(canonical(value)).expect("canonical JSON is UTF-8")
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}
