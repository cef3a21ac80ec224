//! What an install is granted: the origins it may call, the credentials the
//! host puts on its requests (by name; the component never reads one), and
//! its settings. Built by the server from the install record.

use std::collections::BTreeMap;

use tollgate_core::secret::Secret;

/// An origin as `scheme://host[:port]` (the port only when not the scheme's
/// default), the form [`url::Origin::ascii_serialization`] gives.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin(String);

impl Origin {
    /// Parses `https://api.example.com` (a path, if any, is ignored). Only
    /// `http` and `https` with a host are origins a component may call.
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = url::Url::parse(text).map_err(|e| format!("'{text}' is not a URL: {e}"))?;
        Self::of(&url).ok_or_else(|| format!("'{text}' is not an http(s) origin"))
    }

    /// The origin of `url`, when it is http(s) with a host.
    pub fn of(url: &url::Url) -> Option<Self> {
        match url.scheme() {
            "http" | "https" if url.host().is_some() => Some(Origin(url.origin().ascii_serialization())),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a manifest's `allowed_hosts` entry covers this origin: `*`
    /// covers any; `*.example.com` covers its subdomains; a host without a
    /// port covers only the scheme's default port.
    pub fn matches(&self, pattern: &str) -> bool {
        if pattern == "*" {
            return true;
        }
        let Ok(url) = url::Url::parse(&self.0) else {
            return false;
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        let (pattern_host, pattern_port) = match pattern.rsplit_once(':') {
            Some((name, port)) => (name, port.parse::<u16>().ok()),
            None => (
                pattern,
                url::Url::parse(&format!("{}://x", url.scheme()))
                    .ok()
                    .and_then(|u| u.port_or_known_default()),
            ),
        };
        let host_matches = match pattern_host.strip_prefix("*.") {
            Some(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix)
                    && host[..host.len() - suffix.len()].ends_with('.')
            }
            None => host == pattern_host,
        };
        host_matches && pattern_port == Some(port)
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where the host puts a credential on an outbound request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// `Authorization: Bearer <value>`.
    Bearer,
    /// A header carrying the raw value, e.g. `x-api-key`.
    Header(String),
    /// A query parameter carrying the raw value.
    Query(String),
}

#[derive(Clone, Debug)]
pub struct Credential {
    pub value: Secret,
    pub placement: Placement,
    /// The origins it may be sent to; a subset of the install's origins.
    pub origins: Vec<Origin>,
}

#[derive(Clone, Debug, Default)]
pub struct Grants {
    pub origins: Vec<Origin>,
    pub credentials: BTreeMap<String, Credential>,
    pub config: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_drop_default_ports_and_paths() {
        assert_eq!(
            Origin::parse("https://api.example.com/v1").unwrap().as_str(),
            "https://api.example.com"
        );
        assert_eq!(
            Origin::parse("https://api.example.com:443").unwrap().as_str(),
            "https://api.example.com"
        );
        assert_eq!(
            Origin::parse("http://127.0.0.1:8080/x").unwrap().as_str(),
            "http://127.0.0.1:8080"
        );
        assert!(Origin::parse("file:///etc/passwd").is_err());
        assert!(Origin::parse("not a url").is_err());
    }

    #[test]
    fn manifest_host_patterns_cover_origins() {
        let origin = |text| Origin::parse(text).unwrap();
        assert!(origin("https://api.example.com").matches("api.example.com"));
        assert!(!origin("https://api.example.com:8443").matches("api.example.com"));
        assert!(origin("https://api.example.com:8443").matches("api.example.com:8443"));
        assert!(origin("http://127.0.0.1:9000").matches("127.0.0.1:9000"));
        assert!(origin("https://a.example.com").matches("*.example.com"));
        assert!(!origin("https://example.com").matches("*.example.com"));
        assert!(!origin("https://badexample.com").matches("*.example.com"));
        assert!(origin("https://anything.test").matches("*"));
        assert!(!origin("https://api.example.com").matches("example.com"));
    }
}
