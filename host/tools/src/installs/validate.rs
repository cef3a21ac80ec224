//! What an install request must satisfy before anything is resolved or
//! loaded: its name, its settings and the origins it asks for. Names become
//! MCP tool-name prefixes and URL segments, and origins are where a tenant's
//! component may send traffic, so these are checked strictly.

use std::collections::BTreeMap;

use tollgate_components::{Egress, Origin};
use tollgate_registry::VersionRecord;

use super::InstallError;

/// Install names become MCP tool-name prefixes (`<install>__<tool>`) and URL
/// path segments: lowercase letters, digits and single `-`.
pub(crate) fn check_install_name(name: &str) -> Result<(), InstallError> {
    let ok = (1..=48).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(InstallError::Invalid(format!(
            "install name '{name}' must be 1-48 lowercase letters, digits and single '-'"
        )))
    }
}

pub(super) fn check_config(config: &BTreeMap<String, String>) -> Result<(), InstallError> {
    if config.len() > 64 {
        return Err(InstallError::Invalid("config may have at most 64 settings".into()));
    }
    if let Some((key, _)) = config
        .iter()
        .find(|(k, v)| k.is_empty() || k.len() > 64 || v.len() > 4096)
    {
        return Err(InstallError::Invalid(format!(
            "config setting '{key}': keys are 1-64 bytes and values at most 4096"
        )));
    }
    Ok(())
}

/// The approved origins, each covered by the manifest's `allowed_hosts`, and
/// none internal unless the operator allowed it.
pub(super) fn approve_origins(
    version: &VersionRecord,
    origins: &[String],
    egress: &Egress,
) -> Result<Vec<Origin>, InstallError> {
    let allowed = &version.manifest.metadata.allowed_hosts;
    let mut approved = Vec::new();
    for text in origins {
        let origin = Origin::parse(text).map_err(InstallError::Invalid)?;
        if !allowed.iter().any(|pattern| origin.matches(pattern)) {
            return Err(InstallError::Invalid(format!(
                "origin {origin} is not among the hosts {}@{} may call ({})",
                version.name,
                version.version,
                if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                }
            )));
        }
        egress.check_origin(&origin).map_err(InstallError::Invalid)?;
        if !approved.contains(&origin) {
            approved.push(origin);
        }
    }
    Ok(approved)
}
