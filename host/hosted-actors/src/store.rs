//! The only code that issues SQL against `actors` and `actor_deployments`.
//! An actor row is written once and never changed (its id is its content);
//! a deployment row is the one mutable pointer. Runs are request-log rows,
//! the ledger's.

use serde::Serialize;
use sqlx::Row;
use tollgate_core::db::{Database, now_ms};

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ActorRecord {
    pub id: String,
    pub workspace_id: String,
    /// The registry package holding the IR, `namespace/name`.
    pub package: String,
    pub version: String,
    /// `sha256:` digest of the IR's canonical bytes in the registry.
    pub digest: String,
    #[serde(skip)]
    pub ir: String,
    pub created_at_ms: i64,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Deployment {
    pub workspace_id: String,
    pub namespace: String,
    pub name: String,
    pub actor_id: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

#[derive(Clone)]
pub struct Store {
    database: Database,
}

impl Store {
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Records a published actor; an id already present is left as it is
    /// (same id, same content).
    pub async fn insert_actor(&self, record: &ActorRecord) -> sqlx::Result<()> {
        sqlx::query(concat!(
            "INSERT INTO actors (id, workspace_id, package, version, digest, ir, created_at_ms) ",
            "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING"
        ))
        .bind(&record.id)
        .bind(&record.workspace_id)
        .bind(&record.package)
        .bind(&record.version)
        .bind(&record.digest)
        .bind(&record.ir)
        .bind(record.created_at_ms)
        .execute(&self.database.pool)
        .await?;
        Ok(())
    }

    pub async fn actor(&self, id: &str) -> sqlx::Result<Option<ActorRecord>> {
        let row = sqlx::query(
            "SELECT id, workspace_id, package, version, digest, ir, created_at_ms FROM actors WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.database.pool)
        .await?;
        row.map(|row| actor_from(&row)).transpose()
    }

    /// The actors a workspace published, newest first.
    pub async fn actors(&self, workspace_id: &str) -> sqlx::Result<Vec<ActorRecord>> {
        let rows = sqlx::query(concat!(
            "SELECT id, workspace_id, package, version, digest, ir, created_at_ms FROM actors ",
            "WHERE workspace_id = $1 ORDER BY created_at_ms DESC, id LIMIT 500"
        ))
        .bind(workspace_id)
        .fetch_all(&self.database.pool)
        .await?;
        rows.iter().map(actor_from).collect()
    }

    /// Points `namespace/name` at `actor_id`, creating the deployment if new
    /// and the workspace has fewer than `limit` (`None`: no limit); past it,
    /// `Err` with the workspace's count. The count and the write share one
    /// transaction under the workspace's lock, so concurrent creates on any
    /// gateway cannot pass the limit together.
    pub async fn deploy(
        &self,
        workspace_id: &str,
        namespace: &str,
        name: &str,
        actor_id: &str,
        limit: Option<u32>,
    ) -> sqlx::Result<Result<Deployment, i64>> {
        let now = now_ms();
        let mut tx = self.database.begin_write().await?;
        tollgate_identity::accounts::lock_workspace(&mut tx, workspace_id).await?;
        if let Some(limit) = limit {
            let exists: Option<String> =
                sqlx::query_scalar("SELECT workspace_id FROM actor_deployments WHERE namespace = $1 AND name = $2")
                    .bind(namespace)
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
            if exists.is_none() {
                let count: i64 = sqlx::query_scalar(
                    "SELECT CAST(COUNT(*) AS BIGINT) FROM actor_deployments WHERE workspace_id = $1",
                )
                .bind(workspace_id)
                .fetch_one(&mut *tx)
                .await?;
                if count >= i64::from(limit) {
                    return Ok(Err(count));
                }
            }
        }
        sqlx::query(concat!(
            "INSERT INTO actor_deployments (workspace_id, namespace, name, actor_id, created_at_ms, updated_at_ms) ",
            "VALUES ($1, $2, $3, $4, $5, $5) ",
            "ON CONFLICT (namespace, name) DO UPDATE SET actor_id = excluded.actor_id, updated_at_ms = excluded.updated_at_ms"
        ))
        .bind(workspace_id)
        .bind(namespace)
        .bind(name)
        .bind(actor_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(self
            .deployment(namespace, name)
            .await?
            .expect("a deployment just written is there")))
    }

    pub async fn deployment(&self, namespace: &str, name: &str) -> sqlx::Result<Option<Deployment>> {
        let row = sqlx::query(concat!(
            "SELECT workspace_id, namespace, name, actor_id, created_at_ms, updated_at_ms ",
            "FROM actor_deployments WHERE namespace = $1 AND name = $2"
        ))
        .bind(namespace)
        .bind(name)
        .fetch_optional(&self.database.pool)
        .await?;
        row.map(|row| deployment_from(&row)).transpose()
    }

    pub async fn deployments(&self, workspace_id: &str) -> sqlx::Result<Vec<Deployment>> {
        let rows = sqlx::query(concat!(
            "SELECT workspace_id, namespace, name, actor_id, created_at_ms, updated_at_ms ",
            "FROM actor_deployments WHERE workspace_id = $1 ORDER BY namespace, name"
        ))
        .bind(workspace_id)
        .fetch_all(&self.database.pool)
        .await?;
        rows.iter().map(deployment_from).collect()
    }

    pub async fn undeploy(&self, workspace_id: &str, namespace: &str, name: &str) -> sqlx::Result<bool> {
        let done =
            sqlx::query("DELETE FROM actor_deployments WHERE workspace_id = $1 AND namespace = $2 AND name = $3")
                .bind(workspace_id)
                .bind(namespace)
                .bind(name)
                .execute(&self.database.pool)
                .await?;
        Ok(done.rows_affected() > 0)
    }
}

fn actor_from(row: &sqlx::any::AnyRow) -> sqlx::Result<ActorRecord> {
    Ok(ActorRecord {
        id: row.try_get("id")?,
        workspace_id: row.try_get("workspace_id")?,
        package: row.try_get("package")?,
        version: row.try_get("version")?,
        digest: row.try_get("digest")?,
        ir: row.try_get("ir")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

fn deployment_from(row: &sqlx::any::AnyRow) -> sqlx::Result<Deployment> {
    Ok(Deployment {
        workspace_id: row.try_get("workspace_id")?,
        namespace: row.try_get("namespace")?,
        name: row.try_get("name")?,
        actor_id: row.try_get("actor_id")?,
        created_at_ms: row.try_get("created_at_ms")?,
        updated_at_ms: row.try_get("updated_at_ms")?,
    })
}
