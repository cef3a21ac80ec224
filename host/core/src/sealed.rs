//! Secrets at rest: sealed with ChaCha20-Poly1305 (an AEAD) under a key the
//! gateway keeps in a file of its own, so a copy of the database alone reveals
//! none of them. Each sealed value is bound to a context (what it belongs to),
//! so it cannot be moved onto another record and opened there.

use std::path::Path;

use anyhow::Context;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;

const NONCE_BYTES: usize = 12;

pub struct SealingKey {
    cipher: ChaCha20Poly1305,
}

impl SealingKey {
    /// The key in `path`: 32 bytes. A missing file is created with a new
    /// random key, readable only by the gateway's user. Gateways that share a
    /// database must share this file.
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; 32];
                rand::rng().fill_bytes(&mut key);
                write_private(path, &key).with_context(|| format!("cannot create the key file {}", path.display()))?;
                key.to_vec()
            }
            Err(e) => return Err(e).with_context(|| format!("cannot read the key file {}", path.display())),
        };
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| anyhow::anyhow!("{} must hold exactly 32 bytes", path.display()))?;
        Ok(Self {
            cipher: ChaCha20Poly1305::new(&Key::from(key)),
        })
    }

    /// `plaintext` sealed for `context`, as base64 of nonce ‖ ciphertext.
    pub fn seal(&self, plaintext: &[u8], context: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .cipher
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: plaintext,
                    aad: context,
                },
            )
            .expect("sealing in memory does not fail");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    /// Opens what [`seal`](Self::seal) made for the same `context`; fails for
    /// another key, another context, or altered bytes.
    pub fn open(&self, sealed: &str, context: &[u8]) -> anyhow::Result<Vec<u8>> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .context("a sealed value is not base64")?;
        anyhow::ensure!(bytes.len() > NONCE_BYTES, "a sealed value is too short");
        let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().expect("split at the nonce's length");
        self.cipher
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: context,
                },
            )
            .map_err(|_| anyhow::anyhow!("a sealed value does not open with this key (another key file, or altered)"))
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    std::io::Write::write_all(&mut options.open(path)?, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_open_only_with_the_same_key_and_context() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sealing.key");
        let key = SealingKey::load_or_create(&path).unwrap();
        let sealed = key.seal(b"sk-secret", b"ws_1\0install");
        assert!(!sealed.contains("sk-secret"));
        assert_eq!(key.open(&sealed, b"ws_1\0install").unwrap(), b"sk-secret");
        assert!(key.open(&sealed, b"ws_2\0install").is_err(), "bound to its context");
        let again = SealingKey::load_or_create(&path).unwrap();
        assert_eq!(
            again.open(&sealed, b"ws_1\0install").unwrap(),
            b"sk-secret",
            "the file keeps the key"
        );
        let other = SealingKey::load_or_create(&dir.path().join("other.key")).unwrap();
        assert!(other.open(&sealed, b"ws_1\0install").is_err());
        let mut altered = sealed.into_bytes();
        let last = altered.len() - 3;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert!(
            key.open(&String::from_utf8(altered).unwrap(), b"ws_1\0install")
                .is_err()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
