//! Deployments: binding `namespace/name` (`POST /v1/actors/{namespace}/{name}`)
//! to a published actor, under the plan's limit on endpoints, and removing a
//! binding. The rows are `store.rs`'s; the control plane's `deployments.*`
//! operations call these.

use super::store::Deployment;
use super::{ActorError, Actors};

impl Actors {
    /// The deployments the workspace may have: its plan's endpoints, or the
    /// operator's cap if lower; `None`: no limit.
    pub async fn deployment_limit(&self, workspace_id: &str) -> Result<Option<u32>, ActorError> {
        let plan = self
            .billing
            .plan_of(workspace_id)
            .await
            .map_err(|e| ActorError::Internal(e.into()))?;
        Ok(tollgate_billing::lower_limit(plan.endpoints, self.max_deployments))
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
        let limit = tollgate_billing::lower_limit(plan.endpoints, self.max_deployments);
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
