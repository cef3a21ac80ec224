//! Where and how a provider is called: its base URL with `{ENV_VAR}`
//! placeholders filled, and the credential slot its auth style declares.
//! Both are fixed at start, so the egress policy the hot path checks never
//! changes under a request.

use anyhow::Context;

use super::{AuthStyle, CatalogProvider};
use crate::egress::CredentialSlot;

/// The credential slot a provider declares, with the names its `auth` style
/// needs. Adapters may ask only for this slot (see [`crate::egress`]).
pub(super) fn declared_slot(
    entry: &CatalogProvider,
    base_url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<CredentialSlot> {
    let id = &entry.id;
    let named = |value: &Option<String>, key: &str| {
        value
            .clone()
            .filter(|v| !v.is_empty())
            .with_context(|| format!("provider '{id}' has auth = \"{}\" but no {key}", auth_name(entry.auth)))
    };
    Ok(match entry.auth {
        AuthStyle::None => CredentialSlot::None,
        AuthStyle::Bearer => CredentialSlot::Bearer,
        AuthStyle::Header => {
            let name = named(&entry.auth_header, "auth_header")?.to_ascii_lowercase();
            anyhow::ensure!(
                http::HeaderName::from_bytes(name.as_bytes()).is_ok() && !crate::egress::is_reserved_header_name(&name),
                "provider '{id}': auth_header '{name}' is not a header the key may go in"
            );
            CredentialSlot::Header(name)
        }
        AuthStyle::Query => CredentialSlot::Query(named(&entry.auth_query, "auth_query")?),
        AuthStyle::AwsSigv4 => CredentialSlot::AwsSigv4 {
            service: named(&entry.aws_service, "aws_service")?,
            region: match &entry.aws_region {
                Some(region) => region.clone(),
                None => crate::aws::default_region(base_url, env),
            },
        },
    })
}

fn auth_name(style: AuthStyle) -> &'static str {
    match style {
        AuthStyle::None => "none",
        AuthStyle::Bearer => "bearer",
        AuthStyle::Header => "header",
        AuthStyle::Query => "query",
        AuthStyle::AwsSigv4 => "aws-sigv4",
    }
}

/// Replaces each `{NAME}` in `template` whose variable is set; returns the
/// result and the names left unresolved (kept as written, so the URL shows what
/// is missing).
pub fn fill_placeholders(template: &str, env: &dyn Fn(&str) -> Option<String>) -> (String, Vec<String>) {
    let mut out = String::with_capacity(template.len());
    let mut unresolved = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let name = &rest[open + 1..close];
        match env(name).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(&value),
            None => {
                out.push_str(&rest[open..=close]);
                unresolved.push(name.to_string());
            }
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    (out, unresolved)
}
