//! Who may read a package: everyone (`public`), or only the workspace that
//! owns its namespace (`private`). A private package's index, manifests and
//! content blobs answer "not found" to everyone else, as if it did not exist.
//! Actors are private unless published otherwise (their IR holds their system
//! prompts); other kinds are public unless published otherwise.

use serde::{Deserialize, Serialize};

use crate::index::{Index, IndexError};
use crate::{Digest, PackageKind, PackageName};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Public,
    Private,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Public => "public",
            Visibility::Private => "private",
        }
    }

    /// What a package gets at its first publish when the publisher says nothing.
    pub fn default_for(kind: PackageKind) -> Visibility {
        match kind {
            PackageKind::Actor => Visibility::Private,
            _ => Visibility::Public,
        }
    }
}

impl std::str::FromStr for Visibility {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "public" => Ok(Visibility::Public),
            "private" => Ok(Visibility::Private),
            other => Err(format!("visibility '{other}' must be 'public' or 'private'")),
        }
    }
}

impl Index {
    pub async fn set_visibility(&self, name: &PackageName, visibility: Visibility) -> Result<(), IndexError> {
        let done = sqlx::query("UPDATE registry_packages SET visibility = $1 WHERE name = $2")
            .bind(visibility.as_str())
            .bind(name.to_string())
            .execute(&self.pool)
            .await?;
        match done.rows_affected() {
            0 => Err(IndexError::NotFound(format!("package {name} not found"))),
            _ => Ok(()),
        }
    }

    /// The package's visibility when `viewer` (a workspace id; `None` for an
    /// anonymous caller) may read it; `None` when it may not, or the package
    /// does not exist.
    pub async fn read_access(
        &self,
        name: &PackageName,
        viewer: Option<&str>,
    ) -> Result<Option<Visibility>, IndexError> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT p.visibility, n.workspace_id FROM registry_packages p \
             LEFT JOIN registry_namespaces n ON n.name = p.namespace WHERE p.name = $1",
        )
        .bind(name.to_string())
        .fetch_optional(&self.pool)
        .await?;
        let Some((visibility, owner)) = row else {
            return Ok(None);
        };
        let visibility: Visibility = visibility.parse().map_err(IndexError::Corrupt)?;
        let own = viewer.is_some() && owner.as_deref() == viewer;
        Ok((visibility == Visibility::Public || own).then_some(visibility))
    }

    /// Whether `viewer` may read the package (see [`Index::read_access`]).
    pub async fn readable_by(&self, name: &PackageName, viewer: Option<&str>) -> Result<bool, IndexError> {
        Ok(self.read_access(name, viewer).await?.is_some())
    }

    /// How `viewer` may read the blob: `Public` when some version of a public
    /// package holds it, `Private` when only its own workspace's packages do,
    /// `None` when it may not (a blob no published version holds, an upload
    /// not yet published, is readable by nobody).
    pub async fn blob_access(&self, digest: &Digest, viewer: Option<&str>) -> Result<Option<Visibility>, IndexError> {
        let found: Vec<String> = sqlx::query_scalar(
            "SELECT p.visibility FROM registry_versions v JOIN registry_packages p ON p.name = v.name \
             LEFT JOIN registry_namespaces n ON n.name = p.namespace \
             WHERE v.digest = $1 AND (p.visibility = 'public' OR n.workspace_id = $2)",
        )
        .bind(digest.to_string())
        .bind(viewer.unwrap_or(""))
        .fetch_all(&self.pool)
        .await?;
        Ok(match found.iter().any(|v| v == "public") {
            true => Some(Visibility::Public),
            false => (!found.is_empty()).then_some(Visibility::Private),
        })
    }

    /// Whether `viewer` may read the blob (see [`Index::blob_access`]).
    pub async fn blob_readable_by(&self, digest: &Digest, viewer: Option<&str>) -> Result<bool, IndexError> {
        Ok(self.blob_access(digest, viewer).await?.is_some())
    }
}
