//! Whom installs trust (docs/registry.md, "Signed packages"): the signing
//! keys a workspace registers for the namespaces it owns, and its package
//! policy. The tables are the registry crate's (`keys.rs`, `policy.rs`); this
//! is who may change them.

use tollgate_registry::signing::PublicKey;
use tollgate_registry::{NamespaceKey, PackagePolicy, RegistryError};

use super::{BUILTIN_NAMESPACE, PackageError, Packages};

/// A workspace's package policy and when it was set (`None`: never).
pub struct PolicyRecord {
    pub policy: PackagePolicy,
    pub updated_at_ms: Option<i64>,
}

impl Packages {
    /// The namespace must be this workspace's alone (see
    /// [`Packages::namespace_owned_by`]); to others it does not exist.
    async fn own_namespace(&self, workspace_id: &str, namespace: &str) -> Result<(), PackageError> {
        if namespace == BUILTIN_NAMESPACE || !self.namespace_owned_by(workspace_id, namespace).await? {
            return Err(RegistryError::NotFound(format!("namespace '{namespace}' not found")).into());
        }
        Ok(())
    }

    /// Registers a publisher's public key (base64url) for the namespace.
    pub async fn add_signing_key(
        &self,
        workspace_id: &str,
        namespace: &str,
        public_key: &str,
        name: &str,
    ) -> Result<NamespaceKey, PackageError> {
        self.own_namespace(workspace_id, namespace).await?;
        let public_key =
            PublicKey::parse(public_key).map_err(|e| RegistryError::Invalid(format!("public_key: {e}")))?;
        if name.len() > 100 {
            return Err(RegistryError::Invalid("name: at most 100 bytes".into()).into());
        }
        Ok(self
            .registry
            .index
            .add_signing_key(namespace, &public_key, name, workspace_id)
            .await
            .map_err(RegistryError::from)?)
    }

    pub async fn signing_keys(&self, workspace_id: &str, namespace: &str) -> Result<Vec<NamespaceKey>, PackageError> {
        self.own_namespace(workspace_id, namespace).await?;
        Ok(self
            .registry
            .index
            .signing_keys(namespace)
            .await
            .map_err(RegistryError::from)?)
    }

    /// Revokes the key: from now on its signatures verify no more (a
    /// workspace that requires signatures refuses new installs signed by it;
    /// existing installs keep running).
    pub async fn revoke_signing_key(
        &self,
        workspace_id: &str,
        namespace: &str,
        key_id: &str,
    ) -> Result<NamespaceKey, PackageError> {
        self.own_namespace(workspace_id, namespace).await?;
        Ok(self
            .registry
            .index
            .revoke_signing_key(namespace, key_id)
            .await
            .map_err(RegistryError::from)?)
    }

    pub async fn package_policy(&self, workspace_id: &str) -> Result<PolicyRecord, PackageError> {
        let (policy, updated_at_ms) = self
            .registry
            .index
            .package_policy_set_at(workspace_id)
            .await
            .map_err(RegistryError::from)?;
        Ok(PolicyRecord { policy, updated_at_ms })
    }

    /// Replaces the workspace's policy; it applies to the next install.
    pub async fn set_package_policy(
        &self,
        workspace_id: &str,
        policy: PackagePolicy,
    ) -> Result<PolicyRecord, PackageError> {
        let policy = policy.normalized().map_err(RegistryError::Invalid)?;
        let updated_at = self
            .registry
            .index
            .set_package_policy(workspace_id, &policy)
            .await
            .map_err(RegistryError::from)?;
        Ok(PolicyRecord {
            policy,
            updated_at_ms: Some(updated_at),
        })
    }
}
