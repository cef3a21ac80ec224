//! AWS Signature Version 4 for adapters that name the `aws-sigv4(service)` auth slot
//! (Bedrock). The signature is computed by the `aws-sigv4` crate over the final
//! method, URL, headers and body, so it must run after everything else is set.
//!
//! The credential string is `ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]`; the
//! service and region are the provider's declared ones (`tollgate_routing::aws`).
//!
//! No secret ever reaches an error message: errors name the problem, not the value.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use reqwest::header::{HeaderName, HeaderValue};

/// Splits a credential string; the error never repeats any part of it.
fn parse_credential(credential: &str) -> Result<Credentials, String> {
    let mut parts = credential.splitn(3, ':');
    let id = parts.next().unwrap_or_default().trim();
    let secret = parts.next().unwrap_or_default().trim();
    let token = parts.next().map(str::trim).filter(|t| !t.is_empty());
    if id.is_empty() || secret.is_empty() {
        return Err("the AWS credential must be ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]".into());
    }
    Ok(Credentials::new(
        id,
        secret,
        token.map(str::to_string),
        None,
        "tollgate",
    ))
}

/// Signs `request` in place for `service` in `region`, adding `x-amz-date`,
/// `authorization` and (with a session token) `x-amz-security-token`, all
/// marked sensitive where they carry secrets.
pub fn sign_request(
    request: &mut reqwest::Request,
    service: &str,
    region: &str,
    credential: &str,
    time: SystemTime,
) -> Result<(), String> {
    let identity = parse_credential(credential)?.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("cannot sign the request: {e}"))?
        .into();
    let body: &[u8] = request.body().and_then(|b| b.as_bytes()).unwrap_or_default();
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            Ok((
                name.as_str(),
                value.to_str().map_err(|_| format!("header '{name}' is not text"))?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let signable = SignableRequest::new(
        request.method().as_str(),
        request.url().as_str(),
        headers.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("cannot sign the request: {e}"))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| format!("cannot sign the request: {e}"))?
        .into_parts();
    let (signed_headers, _params) = instructions.into_parts();
    for header in signed_headers {
        let name = HeaderName::from_static(header.name());
        let mut value = HeaderValue::from_str(header.value()).map_err(|_| "credential is not a valid header value")?;
        // The signature and the session token are both credentials.
        value.set_sensitive(header.sensitive() || name == reqwest::header::AUTHORIZATION);
        request.headers_mut().insert(name, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    /// The `get-vanilla` case of the AWS SigV4 test suite (service `service`,
    /// region `us-east-1`, 2015-08-30T12:36:00Z, the suite's example keys).
    #[test]
    fn matches_the_aws_test_suite_get_vanilla() {
        let mut request =
            reqwest::Request::new(reqwest::Method::GET, "https://example.amazonaws.com/".parse().unwrap());
        let time = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        sign_request(
            &mut request,
            "service",
            "us-east-1",
            "AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            time,
        )
        .unwrap();
        let auth = request.headers()["authorization"].to_str().unwrap();
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        assert!(request.headers()["authorization"].is_sensitive());
        assert_eq!(request.headers()["x-amz-date"], "20150830T123600Z");
    }

    /// A Bedrock Converse call (escaped `:` in the model id, JSON body, session
    /// token), with the signature botocore 1.44.5's `SigV4Auth` computes for it.
    #[test]
    fn matches_botocore_for_a_converse_call() {
        let mut request = reqwest::Request::new(
            reqwest::Method::POST,
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
                .parse()
                .unwrap(),
        );
        request
            .headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
        *request.body_mut() = Some(br#"{"messages":[]}"#.to_vec().into());
        let time = UNIX_EPOCH + Duration::from_secs(1_795_405_785);
        sign_request(
            &mut request,
            "bedrock",
            "us-east-1",
            "AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY:TOKEN123",
            time,
        )
        .unwrap();
        assert_eq!(
            request.headers()["authorization"].to_str().unwrap(),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/us-east-1/bedrock/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, \
             Signature=e45533fb7415b4c00f31989e3a6ff0a4580cfb763896cbd7ee66fd50fbb695cc"
        );
    }

    #[test]
    fn session_token_is_sent_and_sensitive() {
        let mut request = reqwest::Request::new(
            reqwest::Method::POST,
            "https://bedrock-runtime.eu-west-3.amazonaws.com/model/m/converse"
                .parse()
                .unwrap(),
        );
        *request.body_mut() = Some(b"{}".to_vec().into());
        let region =
            tollgate_routing::aws::default_region("https://bedrock-runtime.eu-west-3.amazonaws.com", &|_| None);
        sign_request(&mut request, "bedrock", &region, "AKID:SECRET:TOKEN", SystemTime::now()).unwrap();
        let token = &request.headers()["x-amz-security-token"];
        assert_eq!(token, "TOKEN");
        assert!(token.is_sensitive());
        let auth = request.headers()["authorization"].to_str().unwrap();
        assert!(auth.contains("/eu-west-3/bedrock/aws4_request"), "{auth}");
        assert!(!auth.contains("SECRET"));
    }

    #[test]
    fn bad_credentials_do_not_leak() {
        let mut request = reqwest::Request::new(
            reqwest::Method::GET,
            "https://x.us-east-1.amazonaws.com/".parse().unwrap(),
        );
        let error = sign_request(
            &mut request,
            "bedrock",
            "us-east-1",
            "justonesecretvalue",
            SystemTime::now(),
        )
        .unwrap_err();
        assert!(!error.contains("justonesecretvalue"));
    }
}
