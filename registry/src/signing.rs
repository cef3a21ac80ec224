//! Package signatures: the exact bytes a publisher signs, signing and
//! checking them with ed25519, publishers' public keys and their ids, and the
//! private key file `tollgate package keygen` writes. Pure functions: which
//! keys a namespace has is `keys.rs`, and what an install makes of a
//! signature is `vetting.rs`.
//!
//! What is signed (docs/registry.md, "Signed packages") is the RFC 8785
//! canonical form of
//!
//! ```json
//! {"content_digest": "sha256:…", "manifest_digest": "sha256:…",
//!  "package": "acme/echo", "type": "tollgate.dev/package-signature/v1", "version": "1.0.0"}
//! ```
//!
//! where `manifest_digest` is the SHA-256 of the manifest's own RFC 8785 form
//! (the manifest as the registry stores and serves it). The `type` keeps a
//! signature over a package from meaning anything else.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::{Digest, Manifest};

/// The `type` of a package-signature statement.
pub const STATEMENT_TYPE: &str = "tollgate.dev/package-signature/v1";
/// How a private key file starts, so it is never mistaken for a public key.
const KEY_FILE_PREFIX: &str = "tollgate-signing-key:";
/// How the HTTP publish carries a signature: `KEY_ID:SIGNATURE`.
pub const SIGNATURE_HEADER: &str = "tollgate-signature";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("the manifest cannot be canonicalized: {0}")]
    Canonical(String),
    /// The signature is not over these bytes with this key: the package was
    /// altered after signing, or another key signed it.
    #[error("the signature does not match the package: it was altered after signing, or signed by another key")]
    Mismatch,
}

/// A signature as the registry stores it with a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageSignature {
    /// The signing key's id ([`PublicKey::key_id`]).
    pub key_id: String,
    /// 64 bytes of ed25519 signature, base64url without padding.
    pub signature: String,
}

impl PackageSignature {
    /// `KEY_ID:SIGNATURE`, the value of the `Tollgate-Signature` header.
    pub fn to_header(&self) -> String {
        format!("{}:{}", self.key_id, self.signature)
    }

    pub fn from_header(text: &str) -> Result<Self, SignatureError> {
        let (key_id, signature) = text.trim().split_once(':').ok_or(SignatureError::Malformed(
            "Tollgate-Signature header (expected KEY_ID:SIGNATURE)",
        ))?;
        let parsed = Self {
            key_id: key_id.to_string(),
            signature: signature.to_string(),
        };
        parsed.check_form()?;
        Ok(parsed)
    }

    /// The key id is 16 lowercase hex digits and the signature 64 bytes.
    pub fn check_form(&self) -> Result<(), SignatureError> {
        if !valid_key_id(&self.key_id) {
            return Err(SignatureError::Malformed("key id (16 lowercase hex digits)"));
        }
        self.bytes().map(|_| ())
    }

    fn bytes(&self) -> Result<Signature, SignatureError> {
        let bytes: [u8; 64] = URL_SAFE_NO_PAD
            .decode(&self.signature)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(SignatureError::Malformed("signature (64 bytes, base64url)"))?;
        Ok(Signature::from_bytes(&bytes))
    }
}

pub fn valid_key_id(text: &str) -> bool {
    text.len() == 16 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A publisher's ed25519 public key: 32 bytes, written base64url without
/// padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    pub fn parse(text: &str) -> Result<Self, SignatureError> {
        let bytes: [u8; 32] = URL_SAFE_NO_PAD
            .decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(SignatureError::Malformed("public key (32 bytes, base64url)"))?;
        VerifyingKey::from_bytes(&bytes)
            .map(Self)
            .map_err(|_| SignatureError::Malformed("public key (not an ed25519 point)"))
    }

    pub fn of(key: &SigningKey) -> Self {
        Self(key.verifying_key())
    }

    pub fn to_text(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0.to_bytes())
    }

    /// The first 16 hex digits of the SHA-256 of the 32 key bytes: short
    /// enough to read, and derived, so nobody chooses another key's id.
    pub fn key_id(&self) -> String {
        hex::encode(&Sha256::digest(self.0.to_bytes())[..8])
    }
}

/// `sha256:` of the manifest's RFC 8785 canonical form.
pub fn manifest_digest(manifest: &Manifest) -> Result<Digest, SignatureError> {
    let bytes = tollgate_actors::canonical_bytes(manifest).map_err(|e| SignatureError::Canonical(e.to_string()))?;
    Ok(Digest::of(&bytes))
}

/// The bytes a publisher signs for `manifest` (see the module docs).
pub fn statement(manifest: &Manifest) -> Result<Vec<u8>, SignatureError> {
    let value = serde_json::json!({
        "type": STATEMENT_TYPE,
        "package": manifest.name,
        "version": manifest.version.to_string(),
        "manifest_digest": manifest_digest(manifest)?,
        "content_digest": manifest.content.digest,
    });
    tollgate_actors::canonical_bytes(&value).map_err(|e| SignatureError::Canonical(e.to_string()))
}

pub fn sign(manifest: &Manifest, key: &SigningKey) -> Result<PackageSignature, SignatureError> {
    let signature = key.sign(&statement(manifest)?);
    Ok(PackageSignature {
        key_id: PublicKey::of(key).key_id(),
        signature: URL_SAFE_NO_PAD.encode(signature.to_bytes()),
    })
}

/// Whether `signature` is `key`'s over `manifest`. The key id must be the
/// key's, so a signature never verifies under a key it does not name.
pub fn verify(manifest: &Manifest, signature: &PackageSignature, key: &PublicKey) -> Result<(), SignatureError> {
    if signature.key_id != key.key_id() {
        return Err(SignatureError::Mismatch);
    }
    let bytes = signature.bytes()?;
    key.0
        .verify_strict(&statement(manifest)?, &bytes)
        .map_err(|_| SignatureError::Mismatch)
}

/// A new private key from the operating system's randomness.
pub fn generate_key() -> SigningKey {
    let mut seed = [0u8; 32];
    rand::fill(&mut seed);
    SigningKey::from_bytes(&seed)
}

/// The text of a private key file: `tollgate-signing-key:<base64url seed>`.
pub fn key_file_text(key: &SigningKey) -> String {
    format!("{KEY_FILE_PREFIX}{}\n", URL_SAFE_NO_PAD.encode(key.to_bytes()))
}

pub fn parse_key_file(text: &str) -> Result<SigningKey, SignatureError> {
    let seed: [u8; 32] = text
        .trim()
        .strip_prefix(KEY_FILE_PREFIX)
        .and_then(|b64| URL_SAFE_NO_PAD.decode(b64).ok())
        .and_then(|b| b.try_into().ok())
        .ok_or(SignatureError::Malformed(
            "signing key file (expected `tollgate-signing-key:<base64url seed>`, as `tollgate package keygen` writes)",
        ))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Reads a private key file; the error is a message for people.
pub fn read_key_file(path: &Path) -> Result<SigningKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_key_file(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes a new private key file readable by its owner only; refuses to
/// overwrite one.
pub fn write_key_file(path: &Path, key: &SigningKey) -> Result<(), String> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .and_then(|mut file| file.write_all(key_file_text(key).as_bytes()))
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest::from_json(
            &serde_json::to_vec(&serde_json::json!({
                "schema_version": 1, "kind": "provider-adapter", "name": "acme/echo", "version": "1.0.0",
                "license": "MIT",
                "content": {"digest": Digest::of(b"x").to_string(), "size": 1, "media_type": "application/wasm"},
                "metadata": {"world": "tollgate:provider/provider-adapter@0.1.0"}
            }))
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn the_statement_is_canonical_json_of_the_digests_and_the_name() {
        let manifest = manifest();
        let text = String::from_utf8(statement(&manifest).unwrap()).unwrap();
        let digest = manifest_digest(&manifest).unwrap();
        assert_eq!(
            text,
            format!(
                r#"{{"content_digest":"{}","manifest_digest":"{digest}","package":"acme/echo","type":"{STATEMENT_TYPE}","version":"1.0.0"}}"#,
                Digest::of(b"x")
            )
        );
        // The manifest digest covers the normal form: absent defaults count
        // as the registry writes them.
        let normal = tollgate_actors::canonical_bytes(&manifest).unwrap();
        assert!(
            String::from_utf8(normal)
                .unwrap()
                .contains(r#""dependencies":{},"description":"""#)
        );
    }

    #[test]
    fn a_signature_verifies_and_any_change_breaks_it() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let public = PublicKey::of(&key);
        let manifest = manifest();
        let signature = sign(&manifest, &key).unwrap();
        assert_eq!(signature.key_id, public.key_id());
        verify(&manifest, &signature, &public).unwrap();

        let mut altered = manifest.clone();
        altered.description = "changed".into();
        assert_eq!(verify(&altered, &signature, &public), Err(SignatureError::Mismatch));
        let mut other_content = manifest.clone();
        other_content.content.digest = Digest::of(b"y");
        assert_eq!(
            verify(&other_content, &signature, &public),
            Err(SignatureError::Mismatch)
        );

        let other = PublicKey::of(&SigningKey::from_bytes(&[8; 32]));
        assert_eq!(verify(&manifest, &signature, &other), Err(SignatureError::Mismatch));
        let borrowed_id = PackageSignature {
            key_id: other.key_id(),
            ..signature.clone()
        };
        assert_eq!(verify(&manifest, &borrowed_id, &other), Err(SignatureError::Mismatch));
    }

    #[test]
    fn keys_and_headers_round_trip() {
        let key = generate_key();
        let public = PublicKey::of(&key);
        assert_eq!(PublicKey::parse(&public.to_text()).unwrap(), public);
        assert!(valid_key_id(&public.key_id()));
        assert_eq!(parse_key_file(&key_file_text(&key)).unwrap().to_bytes(), key.to_bytes());
        assert!(
            parse_key_file(&public.to_text()).is_err(),
            "a public key is no key file"
        );
        assert!(PublicKey::parse("not a key").is_err());

        let signature = sign(&manifest(), &key).unwrap();
        assert_eq!(
            PackageSignature::from_header(&signature.to_header()).unwrap(),
            signature
        );
        for bad in ["", "abc", "0123456789abcdef:short", "XYZ:AAAA"] {
            assert!(PackageSignature::from_header(bad).is_err(), "{bad}");
        }

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("signing.key");
        write_key_file(&path, &key).unwrap();
        assert_eq!(read_key_file(&path).unwrap().to_bytes(), key.to_bytes());
        assert!(write_key_file(&path, &key).is_err(), "never overwrites a key");
    }
}
