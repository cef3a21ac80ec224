//! A workspace's package policy (`registry_package_policies`, migration
//! 0024): the namespaces whose packages the workspace installs only when they
//! are signed by a registered, unrevoked key of their namespace. Every
//! install into the workspace (tool servers, skills, and adapters an operator
//! of it installs) asks [`PackagePolicy::admit`] after the package was vetted
//! and before anything of it runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::index::{Index, IndexError, now_ms};
use crate::vetting::{Signer, SignerProblem};
use crate::{PackageName, RegistryError};

/// Stands for every namespace in [`PackagePolicy::require_signed`].
pub const ANY_NAMESPACE: &str = "*";
/// Most namespaces one policy lists.
const MAX_NAMESPACES: usize = 100;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackagePolicy {
    /// Namespaces (or `*`: every namespace) whose packages must be signed by
    /// a key registered for their namespace and not revoked.
    pub require_signed: Vec<String>,
}

/// Why a package was refused under the policy: the documented reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Unsigned,
    UnknownKey,
    RevokedKey,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Unsigned => "unsigned",
            Refusal::UnknownKey => "unknown_key",
            Refusal::RevokedKey => "revoked_key",
        }
    }
}

impl PackagePolicy {
    /// Sorted and without repeats; each entry a namespace name or `*`.
    pub fn normalized(mut self) -> Result<Self, String> {
        self.require_signed.sort();
        self.require_signed.dedup();
        if self.require_signed.len() > MAX_NAMESPACES {
            return Err(format!("require_signed lists more than {MAX_NAMESPACES} namespaces"));
        }
        for namespace in &self.require_signed {
            let valid = namespace == ANY_NAMESPACE || format!("{namespace}/x").parse::<PackageName>().is_ok();
            if !valid {
                return Err(format!(
                    "require_signed: '{namespace}' is neither '*' nor a namespace (lowercase letters, digits and '-')"
                ));
            }
        }
        Ok(self)
    }

    pub fn requires_signature(&self, namespace: &str) -> bool {
        self.require_signed.iter().any(|n| n == ANY_NAMESPACE || n == namespace)
    }

    /// Refuses `name@version` when the policy requires its namespace to be
    /// signed and `signer` is not a verified signature.
    pub fn admit(
        &self,
        name: &PackageName,
        version: &semver::Version,
        signer: Option<&Signer>,
    ) -> Result<(), RegistryError> {
        let namespace = name.namespace();
        if !self.requires_signature(namespace) {
            return Ok(());
        }
        let refusal = match signer {
            None => Refusal::Unsigned,
            Some(signer) if signer.verified => return Ok(()),
            Some(Signer {
                problem: Some(SignerProblem::RevokedKey),
                ..
            }) => Refusal::RevokedKey,
            Some(_) => Refusal::UnknownKey,
        };
        let what = match (refusal, signer) {
            (Refusal::Unsigned, _) => "is not signed".to_string(),
            (Refusal::RevokedKey, Some(signer)) => format!("is signed by key {}, which was revoked", signer.key_id),
            (_, Some(signer)) => format!(
                "is signed by key {}, which is not registered for namespace '{namespace}'",
                signer.key_id
            ),
            (_, None) => unreachable!("only an unsigned package has no signer"),
        };
        Err(RegistryError::SignatureRequired {
            refusal,
            message: format!(
                "{name}@{version} {what}, and this workspace's package policy requires packages of namespace '{namespace}' to be signed by a registered key (workspaces.package-policy.get)"
            ),
        })
    }
}

impl Index {
    /// The workspace's policy (none set: requires nothing).
    pub async fn package_policy(&self, workspace_id: &str) -> Result<PackagePolicy, IndexError> {
        Ok(self.package_policy_set_at(workspace_id).await?.0)
    }

    /// The workspace's policy and when it was set (`None`: never).
    pub async fn package_policy_set_at(&self, workspace_id: &str) -> Result<(PackagePolicy, Option<i64>), IndexError> {
        let stored: Option<(String, i64)> =
            sqlx::query_as("SELECT require_signed, updated_at FROM registry_package_policies WHERE workspace_id = $1")
                .bind(workspace_id)
                .fetch_optional(&self.pool)
                .await?;
        let Some((require_signed, updated_at)) = stored else {
            return Ok((PackagePolicy::default(), None));
        };
        let require_signed = serde_json::from_str(&require_signed).map_err(|e| IndexError::Corrupt(e.to_string()))?;
        Ok((PackagePolicy { require_signed }, Some(updated_at)))
    }

    /// Replaces the workspace's policy; answers when it was set.
    pub async fn set_package_policy(&self, workspace_id: &str, policy: &PackagePolicy) -> Result<i64, IndexError> {
        let now = now_ms();
        let stored = serde_json::to_string(&policy.require_signed).expect("strings serialise");
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM registry_package_policies WHERE workspace_id = $1")
            .bind(workspace_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO registry_package_policies (workspace_id, require_signed, updated_at) VALUES ($1, $2, $3)",
        )
        .bind(workspace_id)
        .bind(stored)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer(verified: bool, problem: Option<SignerProblem>) -> Signer {
        Signer {
            key_id: "0123456789abcdef".into(),
            namespace: "acme".into(),
            verified,
            problem,
        }
    }

    #[test]
    fn require_refuses_what_is_not_verified_and_names_why() {
        let policy = PackagePolicy {
            require_signed: vec!["acme".into()],
        };
        let name: PackageName = "acme/echo".parse().unwrap();
        let other: PackageName = "other/echo".parse().unwrap();
        let version = semver::Version::new(1, 0, 0);
        policy.admit(&name, &version, Some(&signer(true, None))).unwrap();
        policy.admit(&other, &version, None).unwrap();
        let cases = [
            (None, Refusal::Unsigned, "is not signed"),
            (
                Some(signer(false, Some(SignerProblem::UnknownKey))),
                Refusal::UnknownKey,
                "not registered",
            ),
            (
                Some(signer(false, Some(SignerProblem::RevokedKey))),
                Refusal::RevokedKey,
                "was revoked",
            ),
        ];
        for (signer, expected, words) in cases {
            match policy.admit(&name, &version, signer.as_ref()) {
                Err(RegistryError::SignatureRequired { refusal, message }) => {
                    assert_eq!(refusal, expected);
                    assert!(message.contains(words), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
        let everything = PackagePolicy {
            require_signed: vec![ANY_NAMESPACE.into()],
        };
        assert!(everything.admit(&other, &version, None).is_err());
    }

    #[test]
    fn a_policy_names_namespaces() {
        let policy = PackagePolicy {
            require_signed: vec!["b".into(), "a".into(), "b".into(), "*".into()],
        };
        assert_eq!(policy.normalized().unwrap().require_signed, ["*", "a", "b"]);
        for bad in ["A", "", "a/b", "-x"] {
            let policy = PackagePolicy {
                require_signed: vec![bad.into()],
            };
            assert!(policy.normalized().is_err(), "{bad}");
        }
    }
}
