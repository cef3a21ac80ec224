//! The operations on actors, deployments and runs (`actors.*`,
//! `deployments.*`, `runs.get`), over the hosted actors' API
//! (`tollgate_hosted_actors`). The registry (`control/registry.rs`) authenticates
//! and checks `actor.read` / `actor.write` before these run.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::OpError;
use crate::registry::Ctx;
use tollgate_hosted_actors::Actors;
use tollgate_hosted_actors::publish::{PublishedActor, Sources};
use tollgate_hosted_actors::store::{ActorRecord, Deployment};
use tollgate_packages::Packages;

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

pub async fn compile(actors: &Actors, ctx: &Ctx, params: SourceParams) -> Result<CompiledActor, OpError> {
    let sources = Sources {
        source: params.source,
        files: params.files,
    };
    let tree = actors.compile(&ctx.scope().workspace_id, &sources).await?;
    Ok(CompiledActor {
        id: tree.root.id.to_string(),
        ir: serde_json::to_value(&tree.root.ir).map_err(|e| OpError::Internal(e.into()))?,
        children: tree.children.iter().map(|c| c.id.to_string()).collect(),
    })
}

pub async fn publish(
    (actors, packages): (&Actors, &Packages),
    ctx: &Ctx,
    params: PublishParams,
) -> Result<PublishedActor, OpError> {
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
    let visibility = super::packages::parse_visibility(params.visibility.as_deref())?;
    let published = actors
        .publish(workspace, &publisher, &sources, version, &license)
        .await?;
    if let Some(visibility) = visibility {
        let package: tollgate_registry::PackageName = published
            .package
            .parse()
            .map_err(|e| OpError::Internal(anyhow::anyhow!("{e}")))?;
        packages
            .set_visibility(&package, visibility)
            .await
            .map_err(|e| OpError::Internal(e.into()))?;
    }
    Ok(published)
}

pub async fn get((actors, packages): (&Actors, &Packages), ctx: &Ctx, params: IdParams) -> Result<ActorShown, OpError> {
    let record = actors
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
        if !packages
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

pub async fn list(actors: &Actors, ctx: &Ctx, _params: WorkspaceParams) -> Result<ActorList, OpError> {
    let actors = actors
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

pub async fn deploy(actors: &Actors, ctx: &Ctx, params: DeployParams) -> Result<DeploymentShown, OpError> {
    let workspace = &ctx.scope().workspace_id;
    let deployment = actors
        .deploy(workspace, &params.namespace, &params.name, &params.actor_id)
        .await?;
    Ok(shown(deployment))
}

pub async fn deployments(actors: &Actors, ctx: &Ctx, _params: WorkspaceParams) -> Result<DeploymentList, OpError> {
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

pub async fn deployment(actors: &Actors, ctx: &Ctx, params: DeploymentParams) -> Result<DeploymentShown, OpError> {
    actors
        .store()
        .deployment(&params.namespace, &params.name)
        .await
        .map_err(|e| OpError::Internal(e.into()))?
        .filter(|d| d.workspace_id == ctx.scope().workspace_id)
        .map(shown)
        .ok_or_else(|| OpError::NotFound(format!("deployment {}/{}", params.namespace, params.name)))
}

pub async fn undeploy(actors: &Actors, ctx: &Ctx, params: DeploymentParams) -> Result<Undeployed, OpError> {
    let deleted = actors
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

pub async fn run(actors: &Actors, ctx: &Ctx, params: RunParams) -> Result<RunShown, OpError> {
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
