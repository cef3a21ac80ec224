//! An install's credentials: checked and sealed when given, opened only to
//! build the grants a call runs with. The plaintext never reaches the store,
//! and a sealed set is bound to its workspace and install name, so a sealed
//! value copied to another install does not open.

use std::collections::BTreeMap;

use tollgate_components::{Credential, Grants, Origin, Placement};
use tollgate_core::secret::Secret;

use super::{InstallError, Installs, NewCredential};
use crate::store::{CredentialGrant, InstallRecord};

impl Installs {
    /// Checks `credentials` against the install and seals their values into
    /// `record` (names, placement and origins stay readable).
    pub(super) fn grant_credentials(
        &self,
        record: &mut InstallRecord,
        credentials: BTreeMap<String, NewCredential>,
    ) -> Result<(), InstallError> {
        if credentials.len() > 16 {
            return Err(InstallError::Invalid(
                "an install may have at most 16 credentials".into(),
            ));
        }
        let mut values = BTreeMap::new();
        record.credentials.clear();
        for (name, credential) in credentials {
            let valid_name = (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid_name {
                return Err(InstallError::Invalid(format!(
                    "credential name '{name}' must be 1-64 letters, digits, '-' or '_'"
                )));
            }
            if credential.value.is_empty() || credential.value.len() > 4096 {
                return Err(InstallError::Invalid(format!(
                    "credential '{name}': the value must be 1-4096 bytes"
                )));
            }
            parse_placement(&credential.placement).map_err(InstallError::Invalid)?;
            let origins = match credential.origins {
                Some(origins) => origins
                    .iter()
                    .map(|o| Origin::parse(o).map(|o| o.to_string()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(InstallError::Invalid)?,
                None => record.origins.clone(),
            };
            record.credentials.insert(
                name.clone(),
                CredentialGrant {
                    placement: credential.placement,
                    origins,
                },
            );
            values.insert(name, credential.value);
        }
        check_credential_origins(record)?;
        record.sealed_credentials = match values.is_empty() {
            true => String::new(),
            false => {
                let plaintext = serde_json::to_vec(&values).map_err(|e| InstallError::Internal(e.into()))?;
                self.sealing.seal(&plaintext, &sealing_context(record))
            }
        };
        Ok(())
    }

    /// What the install may use: its origins, its settings, and its
    /// credentials, opened from the store.
    pub(super) fn grants_of(&self, record: &InstallRecord) -> Result<Grants, InstallError> {
        let origins = record
            .origins
            .iter()
            .map(|o| Origin::parse(o))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| InstallError::Internal(anyhow::anyhow!("stored origin: {e}")))?;
        let mut credentials = BTreeMap::new();
        if !record.sealed_credentials.is_empty() {
            let opened = self
                .sealing
                .open(&record.sealed_credentials, &sealing_context(record))
                .map_err(InstallError::Internal)?;
            let mut values: BTreeMap<String, String> =
                serde_json::from_slice(&opened).map_err(|e| InstallError::Internal(e.into()))?;
            for (name, grant) in &record.credentials {
                let (Some(value), Ok(placement)) = (values.remove(name), parse_placement(&grant.placement)) else {
                    continue;
                };
                let origins = grant.origins.iter().filter_map(|o| Origin::parse(o).ok()).collect();
                credentials.insert(
                    name.clone(),
                    Credential {
                        value: Secret::new(value),
                        placement,
                        origins,
                    },
                );
            }
        }
        Ok(Grants {
            origins,
            credentials,
            config: record.config.clone(),
        })
    }
}

/// Each credential's origins must be among the install's.
pub(super) fn check_credential_origins(record: &InstallRecord) -> Result<(), InstallError> {
    for (name, grant) in &record.credentials {
        if let Some(origin) = grant.origins.iter().find(|o| !record.origins.contains(o)) {
            return Err(InstallError::Invalid(format!(
                "credential '{name}' names origin {origin}, which is not one of the install's origins"
            )));
        }
    }
    Ok(())
}

fn parse_placement(text: &str) -> Result<Placement, String> {
    let valid_name = |name: &str| {
        !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    match text.split_once(':') {
        None if text == "bearer" => Ok(Placement::Bearer),
        Some(("header", name))
            if valid_name(name) && !["host", "content-length"].contains(&name.to_ascii_lowercase().as_str()) =>
        {
            Ok(Placement::Header(name.to_ascii_lowercase()))
        }
        Some(("query", name)) if valid_name(name) => Ok(Placement::Query(name.to_string())),
        _ => Err(format!(
            "placement '{text}' must be bearer, header:<name> or query:<name>"
        )),
    }
}

/// What a sealed credential set is bound to: its workspace and install name.
fn sealing_context(record: &InstallRecord) -> Vec<u8> {
    format!("component-install\0{}\0{}", record.workspace_id, record.name).into_bytes()
}
