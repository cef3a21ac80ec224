//! The control-plane operations on actors, deployments and runs. The
//! registry in `control/registry.rs` authenticates and checks `actor.read` /
//! `actor.write` before these run.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::publish::{PublishedActor, Sources};
use super::store::{ActorRecord, Deployment};
use super::{ActorError, Actors};
use crate::control::error::OpError;
use crate::control::registry::Ctx;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The actor's YAML (docs/actors.md).
    pub source: String,
    /// Sub-actor files its `path` references name: relative path → YAML.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub source: String,
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// The package version to publish as; default: one patch above the newest.
    #[serde(default)]
    pub version: Option<String>,
    /// SPDX license of the package; default `UNLICENSED`.
    #[serde(default)]
    pub license: Option<String>,
    /// `private` (default for a new actor: only this workspace reads its IR,
    /// system prompts included) or `public`. Absent: unchanged.
    #[serde(default)]
    pub visibility: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct CompiledActor {
    /// SHA-1 of the RFC 8785 canonical JSON of `ir`.
    pub id: String,
    pub ir: Value,
    /// Ids of the sub-actors compiled from `files`, children first.
    pub children: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ActorShown {
    #[serde(flatten)]
    pub record: ActorRecord,
    pub ir: Value,
}

#[derive(Serialize, JsonSchema)]
pub struct ActorList {
    pub actors: Vec<ActorRecord>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// One of the workspace's namespaces.
    pub namespace: String,
    /// The deployment's name: `POST /v1/actors/{namespace}/{name}`.
    pub name: String,
    pub actor_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploymentParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    pub namespace: String,
    pub name: String,
}

#[derive(Serialize, JsonSchema)]
pub struct DeploymentShown {
    #[serde(flatten)]
    pub deployment: Deployment,
    /// The stable URL path to POST to.
    pub path: String,
    /// The chat-completions model name that runs it.
    pub model: String,
}

#[derive(Serialize, JsonSchema)]
pub struct DeploymentList {
    pub deployments: Vec<DeploymentShown>,
    /// The plan's limit on deployments, when there is one.
    pub limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
pub struct Undeployed {
    pub namespace: String,
    pub name: String,
    pub deleted: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The run id (`run_…`) or the run's request id (`req_…`).
    pub run_id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct RunShown {
    pub run_id: String,
    pub request_id: String,
    pub actor_id: String,
    pub deployment: Option<String>,
    pub status: String,
    pub cost_usd: String,
    pub created_at_ms: i64,
    /// The provenance trail (docs/actors.md#provenance).
    pub trail: Value,
    /// ed25519 over the trail's RFC 8785 canonical bytes, base64url.
    pub signature: String,
    /// The gateway's public key, base64url (also at `GET /v1/provenance/key`).
    pub public_key: String,
}

impl From<ActorError> for OpError {
    fn from(error: ActorError) -> Self {
        match error {
            ActorError::NotFound(message) => OpError::NotFound(message),
            ActorError::Invalid(message) => OpError::InvalidParams(message),
            ActorError::Forbidden(message) => OpError::PermissionDenied(message),
            ActorError::PlanLimit(message) | ActorError::Busy(message) => OpError::ResourceExhausted(message),
            ActorError::Internal(error) => OpError::Internal(error),
        }
    }
}

fn actors(ctx: &Ctx) -> &std::sync::Arc<Actors> {
    ctx.actors()
}

pub async fn compile(ctx: &Ctx, params: SourceParams) -> Result<CompiledActor, OpError> {
    let sources = Sources {
        source: params.source,
        files: params.files,
    };
    let tree = actors(ctx).compile(&ctx.scope().workspace_id, &sources).await?;
    Ok(CompiledActor {
        id: tree.root.id.to_string(),
        ir: serde_json::to_value(&tree.root.ir).map_err(|e| OpError::Internal(e.into()))?,
        children: tree.children.iter().map(|c| c.id.to_string()).collect(),
    })
}

pub async fn publish(ctx: &Ctx, params: PublishParams) -> Result<PublishedActor, OpError> {
    let version = params
        .version
        .as_deref()
        .map(semver::Version::parse)
        .transpose()
        .map_err(|e| OpError::InvalidParams(format!("version: {e}")))?;
    let caller = ctx.caller()?;
    let workspace = &ctx.scope().workspace_id;
    let publisher = format!("{workspace}:{}", caller.key_id);
    let sources = Sources {
        source: params.source,
        files: params.files,
    };
    let license = params.license.unwrap_or_else(|| "UNLICENSED".into());
    let visibility = crate::packages::ops::parse_visibility(params.visibility.as_deref())?;
    let published = actors(ctx)
        .publish(workspace, &publisher, &sources, version, &license)
        .await?;
    if let Some(visibility) = visibility {
        let package: tollgate_registry::PackageName = published
            .package
            .parse()
            .map_err(|e| OpError::Internal(anyhow::anyhow!("{e}")))?;
        let index = &ctx.packages().registry().index;
        index
            .set_visibility(&package, visibility)
            .await
            .map_err(|e| OpError::Internal(e.into()))?;
    }
    Ok(published)
}

pub async fn get(ctx: &Ctx, params: IdParams) -> Result<ActorShown, OpError> {
    let record = actors(ctx)
        .store()
        .actor(&params.id)
        .await
        .map_err(|e| OpError::Internal(e.into()))?
        .ok_or_else(|| OpError::NotFound(format!("actor {}", params.id)))?;
    // Another workspace's actor shows only when its package is public.
    if record.workspace_id != ctx.scope().workspace_id {
        let package: tollgate_registry::PackageName = record
            .package
            .parse()
            .map_err(|e| OpError::Internal(anyhow::anyhow!("{e}")))?;
        let index = &ctx.packages().registry().index;
        if !index
            .readable_by(&package, None)
            .await
            .map_err(|e| OpError::Internal(e.into()))?
        {
            return Err(OpError::NotFound(format!("actor {}", params.id)));
        }
    }
    let ir = serde_json::from_str(&record.ir).map_err(|e| OpError::Internal(e.into()))?;
    Ok(ActorShown { record, ir })
}

pub async fn list(ctx: &Ctx, _params: WorkspaceParams) -> Result<ActorList, OpError> {
    let actors = actors(ctx)
        .store()
        .actors(&ctx.scope().workspace_id)
        .await
        .map_err(|e| OpError::Internal(e.into()))?;
    Ok(ActorList { actors })
}

fn shown(deployment: Deployment) -> DeploymentShown {
    DeploymentShown {
        path: format!("/v1/actors/{}/{}", deployment.namespace, deployment.name),
        model: format!("actor/{}/{}", deployment.namespace, deployment.name),
        deployment,
    }
}

pub async fn deploy(ctx: &Ctx, params: DeployParams) -> Result<DeploymentShown, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let deployment = actors(ctx)
        .deploy(workspace, &params.namespace, &params.name, &params.actor_id)
        .await?;
    Ok(shown(deployment))
}

pub async fn deployments(ctx: &Ctx, _params: WorkspaceParams) -> Result<DeploymentList, OpError> {
    let actors = actors(ctx);
    let deployments = actors
        .store()
        .deployments(&ctx.scope().workspace_id)
        .await
        .map_err(|e| OpError::Internal(e.into()))?;
    Ok(DeploymentList {
        deployments: deployments.into_iter().map(shown).collect(),
        limit: actors.deployment_limit(&ctx.scope().workspace_id).await?,
    })
}

pub async fn deployment(ctx: &Ctx, params: DeploymentParams) -> Result<DeploymentShown, OpError> {
    actors(ctx)
        .store()
        .deployment(&params.namespace, &params.name)
        .await
        .map_err(|e| OpError::Internal(e.into()))?
        .filter(|d| d.workspace_id == ctx.scope().workspace_id)
        .map(shown)
        .ok_or_else(|| OpError::NotFound(format!("deployment {}/{}", params.namespace, params.name)))
}

pub async fn undeploy(ctx: &Ctx, params: DeploymentParams) -> Result<Undeployed, OpError> {
    let deleted = actors(ctx)
        .undeploy(&ctx.scope().workspace_id, &params.namespace, &params.name)
        .await?;
    if !deleted {
        return Err(OpError::NotFound(format!(
            "deployment {}/{}",
            params.namespace, params.name
        )));
    }
    Ok(Undeployed {
        namespace: params.namespace,
        name: params.name,
        deleted,
    })
}

pub async fn run(ctx: &Ctx, params: RunParams) -> Result<RunShown, OpError> {
    let actors = actors(ctx);
    let run = actors
        .find_run(&ctx.scope().workspace_id, &params.run_id)
        .await?
        .ok_or_else(|| OpError::NotFound(format!("run {}", params.run_id)))?;
    Ok(RunShown {
        trail: serde_json::from_str(&run.trail).map_err(|e| OpError::Internal(e.into()))?,
        run_id: run.run_id,
        request_id: run.request_id,
        actor_id: run.actor_id,
        deployment: run.deployment,
        status: run.status,
        cost_usd: tollgate_core::money::Nanos(run.cost_nanos).usd_string(),
        created_at_ms: run.created_at_ms,
        signature: run.signature,
        public_key: actors.public_key(),
    })
}

impl Actors {
    /// The deployments the workspace may have: its plan's endpoints, or the
    /// operator's cap if lower; `None`: no limit.
    pub async fn deployment_limit(&self, workspace_id: &str) -> Result<Option<u32>, ActorError> {
        let plan = self
            .billing
            .plan_of(workspace_id)
            .await
            .map_err(|e| ActorError::Internal(e.into()))?;
        Ok(crate::billing::lower_limit(plan.endpoints, self.max_deployments))
    }

    pub async fn undeploy(&self, workspace_id: &str, namespace: &str, name: &str) -> Result<bool, ActorError> {
        let deleted = self.store.undeploy(workspace_id, namespace, name).await?;
        self.deployments_changed();
        Ok(deleted)
    }

    /// Binds `namespace/name` to a published actor. The namespace must be
    /// the workspace's, and a new deployment must fit the plan's limit.
    pub async fn deploy(
        &self,
        workspace_id: &str,
        namespace: &str,
        name: &str,
        actor_id: &str,
    ) -> Result<Deployment, ActorError> {
        let valid_name = (1..=64).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid_name || name == "by-id" {
            return Err(ActorError::Invalid(format!(
                "deployment name '{name}' must be 1 to 64 lowercase letters, digits and '-', starting with a letter (and not 'by-id')"
            )));
        }
        let held = self
            .packages
            .namespace_owned_by(workspace_id, namespace)
            .await
            .map_err(|e| ActorError::Internal(anyhow::anyhow!("{e}")))?;
        if !held {
            return Err(ActorError::Forbidden(format!(
                "namespace '{namespace}' is not this workspace's; create it first (`tollgate namespaces create {namespace}`); \
                 a name another workspace holds or has published under cannot be used"
            )));
        }
        if self.store.actor(actor_id).await?.is_none() {
            return Err(ActorError::NotFound(format!(
                "no actor with id {actor_id} is published"
            )));
        }
        let existing = self.store.deployment(namespace, name).await?;
        if let Some(d) = &existing
            && d.workspace_id != workspace_id
        {
            return Err(ActorError::Forbidden(format!(
                "deployment {namespace}/{name} belongs to another workspace"
            )));
        }
        let plan = self
            .billing
            .plan_of(workspace_id)
            .await
            .map_err(|e| ActorError::Internal(e.into()))?;
        let limit = crate::billing::lower_limit(plan.endpoints, self.max_deployments);
        // The count and the insert share one transaction under the
        // workspace's lock, so concurrent creates cannot pass the limit.
        let deployment = match self
            .store
            .deploy(workspace_id, namespace, name, actor_id, limit)
            .await?
        {
            Ok(deployment) => deployment,
            Err(count) => {
                return Err(ActorError::PlanLimit(format!(
                    "plan_limit_reached: this workspace has {count} of the {limit} hosted actor endpoints its '{plan}' plan allows; delete a deployment or move to a plan with more (`billing.plans.list`)",
                    limit = limit.unwrap_or_default(),
                    plan = plan.id
                )));
            }
        };
        self.deployments_changed();
        Ok(deployment)
    }
}
