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
    pub async fn visibility(&self, name: &PackageName) -> Result<Option<Visibility>, IndexError> {
        let text: Option<String> = sqlx::query_scalar("SELECT visibility FROM registry_packages WHERE name = $1")
            .bind(name.to_string())
            .fetch_optional(&self.pool)
            .await?;
        text.map(|t| t.parse().map_err(IndexError::Corrupt)).transpose()
    }

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

    /// Whether `viewer` (a workspace id; `None` for an anonymous caller) may
    /// read the package. A package that does not exist is not readable.
    pub async fn readable_by(&self, name: &PackageName, viewer: Option<&str>) -> Result<bool, IndexError> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT p.visibility, n.workspace_id FROM registry_packages p \
             LEFT JOIN registry_namespaces n ON n.name = p.namespace WHERE p.name = $1",
        )
        .bind(name.to_string())
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => false,
            Some((visibility, owner)) => visibility == "public" || (viewer.is_some() && owner.as_deref() == viewer),
        })
    }

    /// Whether `viewer` may read the blob: some version of a package it may
    /// read holds it. A blob no published version holds (an upload not yet
    /// published) is readable by nobody.
    pub async fn blob_readable_by(&self, digest: &Digest, viewer: Option<&str>) -> Result<bool, IndexError> {
        let found: Option<String> = sqlx::query_scalar(
            "SELECT v.name FROM registry_versions v JOIN registry_packages p ON p.name = v.name \
             LEFT JOIN registry_namespaces n ON n.name = p.namespace \
             WHERE v.digest = $1 AND (p.visibility = 'public' OR n.workspace_id = $2) LIMIT 1",
        )
        .bind(digest.to_string())
        .bind(viewer.unwrap_or(""))
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }
}
