//! The install records of tool servers, skills, guardrails and prompt
//! templates: the only code that issues SQL against `component_installs` and
//! `component_install_changes`. Every
//! change (create, update, delete) takes the next revision in the same
//! transaction, so a gateway that sees a newer revision knows to reload.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sqlx::Row;
use tollgate_core::db::{Database, now_ms};

/// One install, as stored and as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallRecord {
    pub workspace_id: String,
    pub name: String,
    /// `tool-server`, `skill` or `guardrail`.
    pub kind: String,
    pub package: String,
    /// The semver requirement the install asked for; upgrades resolve it again.
    pub requirement: String,
    pub version: String,
    pub digest: String,
    pub config: BTreeMap<String, String>,
    pub origins: Vec<String>,
    /// Dependencies pinned at install: name → {version, digest}.
    pub lock: BTreeMap<String, Pinned>,
    /// Credentials granted to the install, without their values.
    pub credentials: BTreeMap<String, CredentialGrant>,
    /// Where a guardrail applies, in what order and mode; `None` for tool
    /// servers and skills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrail: Option<crate::guardrails::Placement>,
    /// The credentials' values (name → value, as JSON), sealed with the
    /// gateway's key for this workspace and install name; empty when none.
    #[serde(skip)]
    pub sealed_credentials: String,
    pub revision: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// Where the host puts a credential, and for which origins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialGrant {
    /// `bearer`, `header:<name>` or `query:<name>`.
    pub placement: String,
    pub origins: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinned {
    pub version: String,
    pub digest: String,
}

pub struct Store {
    database: Database,
}

/// The columns, in one place; a macro because sqlx takes only literal SQL.
macro_rules! columns {
    () => {
        "workspace_id, name, kind, package, requirement, version, digest, config, origins, pinned, credentials, \
         sealed_credentials, revision, created_at, updated_at, guardrail"
    };
}

impl Store {
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    pub fn database(&self) -> &Database {
        &self.database
    }

    /// The newest revision any gateway has written (0 when none).
    pub async fn revision(&self) -> anyhow::Result<i64> {
        let row = sqlx::query("SELECT COALESCE(MAX(revision), 0) AS revision FROM component_install_changes")
            .fetch_one(&self.database.pool)
            .await?;
        Ok(row.try_get::<i64, _>("revision")?)
    }

    pub async fn all(&self) -> anyhow::Result<Vec<InstallRecord>> {
        let rows = sqlx::query(concat!("SELECT ", columns!(), " FROM component_installs"))
            .fetch_all(&self.database.pool)
            .await?;
        rows.iter().map(decode).collect()
    }

    /// Writes `record` as new (`create`) or over the existing row. Answers
    /// the stored record (with its revision), or `None` when `create` finds
    /// the name taken, or an update finds it gone.
    pub async fn put(&self, mut record: InstallRecord, create: bool) -> anyhow::Result<Option<InstallRecord>> {
        let mut tx = self.database.begin_write().await?;
        let exists = sqlx::query("SELECT created_at FROM component_installs WHERE workspace_id = $1 AND name = $2")
            .bind(&record.workspace_id)
            .bind(&record.name)
            .fetch_optional(&mut *tx)
            .await?;
        match (&exists, create) {
            (Some(_), true) | (None, false) => return Ok(None),
            (Some(row), false) => record.created_at_ms = row.try_get("created_at")?,
            (None, true) => record.created_at_ms = now_ms(),
        }
        record.updated_at_ms = now_ms();
        record.revision = next_revision(&mut tx, &record.workspace_id, &record.name).await?;
        sqlx::query("DELETE FROM component_installs WHERE workspace_id = $1 AND name = $2")
            .bind(&record.workspace_id)
            .bind(&record.name)
            .execute(&mut *tx)
            .await?;
        sqlx::query(concat!(
            "INSERT INTO component_installs (",
            columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
        ))
        .bind(&record.workspace_id)
        .bind(&record.name)
        .bind(&record.kind)
        .bind(&record.package)
        .bind(&record.requirement)
        .bind(&record.version)
        .bind(&record.digest)
        .bind(serde_json::to_string(&record.config)?)
        .bind(serde_json::to_string(&record.origins)?)
        .bind(serde_json::to_string(&record.lock)?)
        .bind(serde_json::to_string(&record.credentials)?)
        .bind(&record.sealed_credentials)
        .bind(record.revision)
        .bind(record.created_at_ms)
        .bind(record.updated_at_ms)
        .bind(record.guardrail.as_ref().map(serde_json::to_string).transpose()?)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(record))
    }

    /// Removes an install; `false` when there was none.
    pub async fn delete(&self, workspace_id: &str, name: &str) -> anyhow::Result<bool> {
        let mut tx = self.database.begin_write().await?;
        let deleted = sqlx::query("DELETE FROM component_installs WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted == 0 {
            return Ok(false);
        }
        next_revision(&mut tx, workspace_id, name).await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// The next revision, recorded in the change log inside `tx`. On Postgres two
/// gateways may pick the same number; the primary key refuses the second, and
/// its caller retries the whole change.
async fn next_revision(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    workspace_id: &str,
    name: &str,
) -> anyhow::Result<i64> {
    let row = sqlx::query("SELECT COALESCE(MAX(revision), 0) + 1 AS next FROM component_install_changes")
        .fetch_one(&mut **tx)
        .await?;
    let revision: i64 = row.try_get("next")?;
    sqlx::query("INSERT INTO component_install_changes (revision, workspace_id, name) VALUES ($1, $2, $3)")
        .bind(revision)
        .bind(workspace_id)
        .bind(name)
        .execute(&mut **tx)
        .await?;
    Ok(revision)
}

fn decode(row: &sqlx::any::AnyRow) -> anyhow::Result<InstallRecord> {
    let json = |column: &str| -> anyhow::Result<String> { Ok(row.try_get::<String, _>(column)?) };
    Ok(InstallRecord {
        workspace_id: row.try_get("workspace_id")?,
        name: row.try_get("name")?,
        kind: row.try_get("kind")?,
        package: row.try_get("package")?,
        requirement: row.try_get("requirement")?,
        version: row.try_get("version")?,
        digest: row.try_get("digest")?,
        config: serde_json::from_str(&json("config")?)?,
        origins: serde_json::from_str(&json("origins")?)?,
        lock: serde_json::from_str(&json("pinned")?)?,
        credentials: serde_json::from_str(&json("credentials")?)?,
        sealed_credentials: row.try_get("sealed_credentials")?,
        revision: row.try_get("revision")?,
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
        guardrail: row
            .try_get::<Option<String>, _>("guardrail")?
            .map(|text| serde_json::from_str(&text))
            .transpose()?,
    })
}
