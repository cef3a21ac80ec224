//! Egress pinning: where a component's outbound request may go, and how the
//! provider's credential may ride on it.
//!
//! Adapters are untrusted translators. They name the URL of the request they
//! want sent and the slot the credential goes in, but the host decides: the URL
//! must be on one of the provider's origins (scheme, host and port of its
//! `base_url`, plus its `allowed_origins`), and the credential goes only into
//! the slot the provider's catalog entry or configuration declares, under the
//! name and SigV4 service and region declared there. Anything else is refused
//! before a byte is sent, so a key never leaves its provider's origin.
//!
//! One policy per provider, built with the routes; a check is a few string
//! comparisons. Tool servers will get the same check for their granted hosts.

use std::fmt;

use anyhow::Context;
use url::{Origin, Url};

/// Where the host puts the provider's credential, as the provider declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialSlot {
    /// The provider takes no credential.
    None,
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The raw key in this header (lowercase).
    Header(String),
    /// The raw key in this query-string parameter.
    Query(String),
    /// AWS Signature V4 for this service and region.
    AwsSigv4 { service: String, region: String },
}

impl fmt::Display for CredentialSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSlot::None => f.write_str("none"),
            CredentialSlot::Bearer => f.write_str("bearer"),
            CredentialSlot::Header(name) => write!(f, "header '{name}'"),
            CredentialSlot::Query(name) => write!(f, "query parameter '{name}'"),
            CredentialSlot::AwsSigv4 { service, region } => write!(f, "aws-sigv4 '{service}' in '{region}'"),
        }
    }
}

/// The slot an adapter asks for, in the adapter's words.
#[derive(Clone, Copy, Debug)]
pub enum AskedSlot<'a> {
    None,
    Bearer,
    Header(&'a str),
    Query(&'a str),
    AwsSigv4(&'a str),
}

impl fmt::Display for AskedSlot<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskedSlot::None => f.write_str("none"),
            AskedSlot::Bearer => f.write_str("bearer"),
            AskedSlot::Header(name) => write!(f, "header '{name}'"),
            AskedSlot::Query(name) => write!(f, "query parameter '{name}'"),
            AskedSlot::AwsSigv4(service) => write!(f, "aws-sigv4 '{service}'"),
        }
    }
}

/// Why a request was not sent. The message names what was refused, never a secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("refused to send to {refused}: the provider's allowed origins are {allowed}")]
    Origin { refused: String, allowed: String },
    #[error("refused credential slot {asked}: the provider accepts only {declared}")]
    Slot { asked: String, declared: String },
    #[error("refused URL '{0}': not an absolute http(s) URL")]
    BadUrl(String),
}

/// One provider's egress rules.
#[derive(Clone, Debug)]
pub struct EgressPolicy {
    origins: Vec<Origin>,
    slot: CredentialSlot,
}

impl EgressPolicy {
    /// The policy for a provider at `base_url`. `allowed_origins` adds origins
    /// for protocols that need more than one host. A `base_url` that is not a
    /// URL yet (an unfilled `{PLACEHOLDER}`) allows nothing; such a provider is
    /// unavailable anyway.
    pub fn new(base_url: &str, allowed_origins: &[String], slot: CredentialSlot) -> anyhow::Result<Self> {
        let mut origins = Vec::with_capacity(1 + allowed_origins.len());
        if let Some(origin) = http_origin(base_url) {
            origins.push(origin);
        }
        for extra in allowed_origins {
            let origin = http_origin(extra)
                .with_context(|| format!("allowed origin '{extra}' is not an http(s) URL such as https://host:port"))?;
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        Ok(Self { origins, slot })
    }

    pub fn slot(&self) -> &CredentialSlot {
        &self.slot
    }

    /// Checks an adapter's request: its URL must be on an allowed origin, and
    /// the slot it names must be the declared one (or none). Returns the slot
    /// the host fills, taken from the declaration: `None` means no credential.
    pub fn admit(&self, url: &Url, asked: AskedSlot<'_>) -> Result<Option<&CredentialSlot>, Refusal> {
        let origin = match url.scheme() {
            "http" | "https" if url.host().is_some() => url.origin(),
            _ => return Err(Refusal::BadUrl(redacted(url))),
        };
        if !self.origins.contains(&origin) {
            return Err(Refusal::Origin {
                refused: origin.ascii_serialization(),
                allowed: self.allowed_list(),
            });
        }
        // With no credential declared there is nothing to leak or attach.
        if matches!(asked, AskedSlot::None) || self.slot == CredentialSlot::None {
            return Ok(None);
        }
        let granted = match (&self.slot, asked) {
            (CredentialSlot::Bearer, AskedSlot::Bearer) => true,
            (CredentialSlot::Header(declared), AskedSlot::Header(name)) => declared.eq_ignore_ascii_case(name),
            (CredentialSlot::Query(declared), AskedSlot::Query(name)) => declared == name,
            (CredentialSlot::AwsSigv4 { service, .. }, AskedSlot::AwsSigv4(name)) => service == name,
            _ => false,
        };
        if !granted {
            return Err(Refusal::Slot {
                asked: asked.to_string(),
                declared: self.slot.to_string(),
            });
        }
        Ok(Some(&self.slot))
    }

    fn allowed_list(&self) -> String {
        if self.origins.is_empty() {
            return "none".into();
        }
        self.origins
            .iter()
            .map(Origin::ascii_serialization)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Headers the host controls: an adapter cannot set them, and no credential
/// may be declared to go in one.
pub fn is_reserved_header_name(name: &str) -> bool {
    matches!(
        name,
        "authorization" | "host" | "content-length" | "transfer-encoding" | "connection" | "proxy-authorization"
    )
}

fn http_origin(text: &str) -> Option<Origin> {
    let url = Url::parse(text).ok()?;
    (matches!(url.scheme(), "http" | "https") && url.host().is_some()).then(|| url.origin())
}

/// The URL without its query or userinfo, which may carry secrets.
fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    let _ = shown.set_password(None);
    let _ = shown.set_username("");
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn only_the_providers_origins_are_allowed() {
        let policy = EgressPolicy::new(
            "https://api.example.com/v1",
            &["https://uploads.example.com".into()],
            CredentialSlot::Bearer,
        )
        .unwrap();
        let ok = policy.admit(&url("https://api.example.com/v1/chat/completions"), AskedSlot::Bearer);
        assert_eq!(ok, Ok(Some(&CredentialSlot::Bearer)));
        assert!(
            policy
                .admit(&url("https://uploads.example.com/x"), AskedSlot::Bearer)
                .is_ok()
        );
        for bad in [
            "https://api.example.com:8443/v1",
            "http://api.example.com/v1",
            "https://api.example.com.evil.io/v1",
            "https://evil.io/?to=https://api.example.com",
        ] {
            let refused = policy.admit(&url(bad), AskedSlot::Bearer).unwrap_err();
            assert!(matches!(refused, Refusal::Origin { .. }), "{bad}: {refused}");
            assert!(refused.to_string().contains("api.example.com"), "{refused}");
        }
        let userinfo = policy
            .admit(&url("https://user:pw@evil.io/"), AskedSlot::None)
            .unwrap_err();
        assert!(!userinfo.to_string().contains("pw"), "{userinfo}");
        assert!(matches!(
            policy.admit(&url("file:///etc/passwd"), AskedSlot::None),
            Err(Refusal::BadUrl(_))
        ));
    }

    #[test]
    fn the_adapter_chooses_only_the_declared_slot() {
        let header = EgressPolicy::new("http://127.0.0.1:9/", &[], CredentialSlot::Header("x-api-key".into())).unwrap();
        let on = url("http://127.0.0.1:9/v1/messages");
        assert!(header.admit(&on, AskedSlot::Header("X-Api-Key")).is_ok());
        assert_eq!(header.admit(&on, AskedSlot::None), Ok(None));
        for asked in [
            AskedSlot::Bearer,
            AskedSlot::Header("x-stolen-key"),
            AskedSlot::Query("key"),
            AskedSlot::AwsSigv4("s3"),
        ] {
            assert!(matches!(header.admit(&on, asked), Err(Refusal::Slot { .. })), "{asked}");
        }
        let sigv4 = CredentialSlot::AwsSigv4 {
            service: "bedrock".into(),
            region: "us-east-1".into(),
        };
        let aws = EgressPolicy::new("http://127.0.0.1:9", &[], sigv4.clone()).unwrap();
        assert_eq!(aws.admit(&on, AskedSlot::AwsSigv4("bedrock")), Ok(Some(&sigv4)));
        assert!(aws.admit(&on, AskedSlot::AwsSigv4("s3")).is_err());
    }

    #[test]
    fn an_unresolved_base_url_allows_nothing_and_bad_extras_are_config_errors() {
        let policy = EgressPolicy::new("https://{RESOURCE}.example.com", &[], CredentialSlot::None).unwrap();
        assert!(policy.admit(&url("https://x.example.com"), AskedSlot::None).is_err());
        assert!(EgressPolicy::new("https://a.io", &["not a url".into()], CredentialSlot::None).is_err());
    }
}
