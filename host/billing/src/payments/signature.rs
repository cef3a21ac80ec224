//! Stripe's webhook signature: `Stripe-Signature: t=<unix secs>,v1=<hex>[,v1=…]`,
//! each `v1` an HMAC-SHA256 of `"<t>.<payload>"` under an endpoint secret.
//! During a secret rotation Stripe sends one `v1` per secret, so a delivery is
//! genuine when any `v1` matches any secret we hold. The timestamp bounds
//! replays: a delivery outside the tolerance is refused even if its signature
//! is right.
//!
//! The endpoint takes no key, so the check itself must be cheap for anyone:
//! the header is bounded before it is read, the body is hashed once per
//! secret (never once per `v1`), and at most [`MAX_SIGNATURES`] tags are
//! compared against each digest.

use hmac::{Hmac, KeyInit, Mac};
use sha2_hmac::Sha256;
use subtle::ConstantTimeEq;

/// Longest `Stripe-Signature` header read. A genuine one is `t=` plus one
/// 67-byte `v1=` per secret (and maybe a `v0=`): well under 1 KiB.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// Most `v1` entries one header may carry. Stripe sends one per endpoint
/// secret, and an endpoint has at most two during a rotation.
pub const MAX_SIGNATURES: usize = 8;
/// An HMAC-SHA256 tag in hex.
const SIGNATURE_HEX_LEN: usize = 64;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing")]
    Missing,
    #[error("the Stripe-Signature header is longer than {MAX_HEADER_BYTES} bytes")]
    TooLong,
    #[error("the Stripe-Signature header has more than {MAX_SIGNATURES} v1 signatures")]
    TooMany,
    #[error("the Stripe-Signature header has no timestamp (t=) or no v1 signature")]
    Malformed,
    #[error("the signature's timestamp is {age_secs} s from now, past the {tolerance_secs} s tolerance")]
    Stale { age_secs: i64, tolerance_secs: u64 },
    #[error("no v1 signature matches the payload under this endpoint's secrets")]
    NoMatch,
}

/// Checks `header` for `payload` at `now` (unix seconds) against `secrets`.
pub fn verify(
    header: Option<&str>,
    payload: &[u8],
    secrets: &[String],
    now: i64,
    tolerance_secs: u64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    if header.len() > MAX_HEADER_BYTES {
        return Err(SignatureError::TooLong);
    }
    let mut timestamp = None;
    let mut signatures: Vec<[u8; 32]> = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => timestamp = value.parse::<i64>().ok(),
            // An empty or odd-length entry can match nothing: it is skipped
            // without counting against the limit.
            Some(("v1", value)) if value.len() == SIGNATURE_HEX_LEN => {
                let mut tag = [0u8; 32];
                if hex::decode_to_slice(value, &mut tag).is_ok() {
                    if signatures.len() == MAX_SIGNATURES {
                        return Err(SignatureError::TooMany);
                    }
                    signatures.push(tag);
                }
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    let age_secs = now.saturating_sub(timestamp);
    if age_secs.unsigned_abs() > tolerance_secs {
        return Err(SignatureError::Stale {
            age_secs,
            tolerance_secs,
        });
    }
    let mut genuine = subtle::Choice::from(0);
    for secret in secrets {
        let expected = mac(secret, timestamp, payload).finalize().into_bytes();
        for signature in &signatures {
            // Every pair is compared, so the time says nothing about which matched.
            genuine |= expected.as_slice().ct_eq(signature);
        }
    }
    if bool::from(genuine) {
        Ok(())
    } else {
        Err(SignatureError::NoMatch)
    }
}

fn mac(secret: &str, timestamp: i64, payload: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(payload);
    mac
}

/// The header Stripe would send for `payload` at `timestamp`, one `v1` per
/// secret: for this module's tests and the gateway's own.
#[cfg(test)]
pub fn sign(payload: &[u8], secrets: &[&str], timestamp: i64) -> String {
    let mut header = format!("t={timestamp}");
    for secret in secrets {
        let tag = mac(secret, timestamp, payload).finalize().into_bytes();
        header.push_str(&format!(",v1={}", hex::encode(tag)));
    }
    header
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn secrets(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn matches_a_vector_computed_elsewhere() {
        // python3 -c 'import hmac,hashlib;print(hmac.new(b"whsec_test",
        //   b"1700000000.{}", hashlib.sha256).hexdigest())'
        let expected = "35495024f4ef3f94e5a93e22221544c4b75e9a42300cd965ab81cb85cd994e91";
        assert_eq!(sign(b"{}", &["whsec_test"], NOW), format!("t={NOW},v1={expected}"));
        let header = format!("t={NOW},v1={expected}");
        assert_eq!(
            verify(Some(&header), b"{}", &secrets(&["whsec_test"]), NOW, 300),
            Ok(())
        );
    }

    #[test]
    fn any_v1_under_any_secret_is_genuine_during_a_rotation() {
        let header = sign(b"{\"id\":1}", &["whsec_old", "whsec_new"], NOW);
        assert_eq!(
            verify(Some(&header), b"{\"id\":1}", &secrets(&["whsec_new"]), NOW, 300),
            Ok(())
        );
        assert_eq!(
            verify(Some(&header), b"{\"id\":1}", &secrets(&["whsec_old"]), NOW, 300),
            Ok(())
        );
        assert_eq!(
            verify(Some(&header), b"{\"id\":1}", &secrets(&["whsec_other"]), NOW, 300),
            Err(SignatureError::NoMatch)
        );
    }

    #[test]
    fn refuses_a_changed_payload_a_stale_timestamp_and_junk() {
        let ok = secrets(&["whsec_a"]);
        let header = sign(b"{\"amount\":100}", &["whsec_a"], NOW);
        assert_eq!(
            verify(Some(&header), b"{\"amount\":999}", &ok, NOW, 300),
            Err(SignatureError::NoMatch)
        );
        assert!(matches!(
            verify(Some(&header), b"{\"amount\":100}", &ok, NOW + 301, 300),
            Err(SignatureError::Stale { age_secs: 301, .. })
        ));
        assert_eq!(verify(Some(&header), b"{\"amount\":100}", &ok, NOW + 300, 300), Ok(()));
        assert_eq!(verify(None, b"", &ok, NOW, 300), Err(SignatureError::Missing));
        assert_eq!(
            verify(Some("v1=00"), b"", &ok, NOW, 300),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(Some("t=1,v0=ab"), b"", &ok, 1, 300),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(Some(&header), b"{\"amount\":100}", &[], NOW, 300),
            Err(SignatureError::NoMatch)
        );
    }

    /// CPU time of the calling thread: what the check costs, whatever else
    /// the machine is doing.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    fn thread_cpu() -> std::time::Duration {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `now` is a valid timespec for the call to fill.
        assert_eq!(
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) },
            0
        );
        std::time::Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_header_of_95000_entries_over_a_500_kb_body_is_refused_in_under_10_ms_of_cpu() {
        let payload = vec![b'x'; 500 * 1024];
        let secrets = secrets(&["whsec_a", "whsec_b"]);
        let empty = format!("t={NOW}{}", ",v1=".repeat(95_000));
        let junk = format!("t={NOW}{}", format!(",v1={}", "ab".repeat(32)).repeat(95_000));
        for header in [empty, junk] {
            let started = thread_cpu();
            let verdict = verify(Some(&header), &payload, &secrets, NOW, 300);
            let spent = thread_cpu() - started;
            assert_eq!(verdict, Err(SignatureError::TooLong));
            assert!(spent < std::time::Duration::from_millis(10), "took {spent:?} of CPU");
        }
    }

    #[test]
    fn more_v1_entries_than_the_limit_are_refused_and_empty_ones_skipped() {
        let ok = secrets(&["whsec_a"]);
        let genuine = sign(b"{}", &["whsec_a"], NOW);
        let tag = genuine.split_once(",v1=").unwrap().1;
        // Within the size limit, but past the count: refused before any HMAC.
        let many = format!(
            "t={NOW}{},v1={tag}",
            format!(",v1={}", "00".repeat(32)).repeat(MAX_SIGNATURES)
        );
        assert!(many.len() <= MAX_HEADER_BYTES);
        assert_eq!(verify(Some(&many), b"{}", &ok, NOW, 300), Err(SignatureError::TooMany));
        // Empty and malformed entries count for nothing, however many there are.
        let padded = format!("t={NOW}{},v1=zz,v1={tag}", ",v1=".repeat(1_000));
        assert_eq!(verify(Some(&padded), b"{}", &ok, NOW, 300), Ok(()));
        let only_empty = format!("t={NOW},v1=,v1=");
        assert_eq!(
            verify(Some(&only_empty), b"{}", &ok, NOW, 300),
            Err(SignatureError::Malformed)
        );
        // The most a header may carry still verifies.
        let full = format!(
            "t={NOW}{},v1={tag}",
            format!(",v1={}", "00".repeat(32)).repeat(MAX_SIGNATURES - 1)
        );
        assert_eq!(verify(Some(&full), b"{}", &ok, NOW, 300), Ok(()));
    }
}
