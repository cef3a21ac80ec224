//! Credentials that never print. Provider keys and other secrets live in a
//! [`Secret`]: `Debug` shows `Secret([redacted])`, there is no `Display`, and
//! the value is reached only through [`Secret::expose`], at the one place that
//! puts it on the wire. Backed by `secrecy`, so it is zeroed when dropped.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone)]
pub struct Secret(SecretString);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(SecretString::from(value.into()))
    }

    /// The value, for the code that sends it. Never format it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    pub fn is_empty(&self) -> bool {
        self.expose().is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret::new)
    }
}

/// Configuration layering (figment) round-trips values through serde, so a
/// secret serialises as itself. Nothing else serialises configuration.
impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.expose())
    }
}

/// `url` with any password replaced by `***`, for error text and logs.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_string(),
        // Unparseable: show the scheme and host part only, up to any '@'.
        Err(_) => match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints() {
        let secret = Secret::new("sk-very-secret");
        assert_eq!(format!("{secret:?}"), "Secret([redacted])");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(Secret([redacted]))");
        assert_eq!(secret.expose(), "sk-very-secret");
    }

    #[test]
    fn passwords_leave_urls() {
        assert_eq!(
            redact_url("postgres://app:hunter2@db:5432/test"),
            "postgres://app:***@db:5432/test"
        );
        assert_eq!(redact_url("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
        assert!(!redact_url("postgres://app:hun ter2@db/x").contains("hun"));
    }
}
