//! Stripe's webhook signature: `Stripe-Signature: t=<unix secs>,v1=<hex>[,v1=…]`,
//! each `v1` an HMAC-SHA256 of `"<t>.<payload>"` under an endpoint secret.
//! During a secret rotation Stripe sends one `v1` per secret, so a delivery is
//! genuine when any `v1` matches any secret we hold. The timestamp bounds
//! replays: a delivery outside the tolerance is refused even if its signature
//! is right.

use hmac::{Hmac, KeyInit, Mac};
use sha2_hmac::Sha256;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing")]
    Missing,
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
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => timestamp = value.parse::<i64>().ok(),
            Some(("v1", value)) => signatures.extend(hex::decode(value).ok()),
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
    let genuine = secrets.iter().any(|secret| {
        // verify_slice compares in constant time.
        signatures
            .iter()
            .any(|signature| mac(secret, timestamp, payload).verify_slice(signature).is_ok())
    });
    if genuine { Ok(()) } else { Err(SignatureError::NoMatch) }
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
        assert_eq!(verify(Some(&header), b"{}", &secrets(&["whsec_test"]), NOW, 300), Ok(()));
    }

    #[test]
    fn any_v1_under_any_secret_is_genuine_during_a_rotation() {
        let header = sign(b"{\"id\":1}", &["whsec_old", "whsec_new"], NOW);
        assert_eq!(verify(Some(&header), b"{\"id\":1}", &secrets(&["whsec_new"]), NOW, 300), Ok(()));
        assert_eq!(verify(Some(&header), b"{\"id\":1}", &secrets(&["whsec_old"]), NOW, 300), Ok(()));
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
        assert_eq!(verify(Some("v1=00"), b"", &ok, NOW, 300), Err(SignatureError::Malformed));
        assert_eq!(verify(Some("t=1,v0=ab"), b"", &ok, 1, 300), Err(SignatureError::Malformed));
        assert_eq!(verify(Some(&header), b"{\"amount\":100}", &[], NOW, 300), Err(SignatureError::NoMatch));
    }
}
