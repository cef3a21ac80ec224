//! The live view calls read: one map swapped whole, so a lookup is one
//! atomic load and a call already running keeps the install it started
//! with; and the follower that reloads it when any gateway on the database
//! changed an install.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tollgate_registry::{PackageName, RegistryError};

use super::{Active, InstallError, Installs, Loaded, Vetting};
use crate::store::InstallRecord;

impl Installs {
    pub fn get(&self, workspace_id: &str, name: &str) -> Option<Arc<Active>> {
        self.live
            .load()
            .get(&(workspace_id.to_string(), name.to_string()))
            .cloned()
    }

    /// The workspace's installs, by name.
    pub fn in_workspace(&self, workspace_id: &str) -> Vec<Arc<Active>> {
        let live = self.live.load();
        live.range((workspace_id.to_string(), String::new())..)
            .take_while(|((workspace, _), _)| workspace == workspace_id)
            .map(|(_, active)| active.clone())
            .collect()
    }
    /// Whether the workspace has a guardrail install: a range scan of the
    /// live view, no allocation.
    pub fn has_guardrails(&self, workspace_id: &str) -> bool {
        let live = self.live.load();
        live.range((workspace_id.to_string(), String::new())..)
            .take_while(|((workspace, _), _)| workspace == workspace_id)
            .any(|(_, active)| matches!(active.component, Loaded::Guardrail(_)))
    }

    /// Puts a stored record live.
    pub(super) fn publish(
        &self,
        record: InstallRecord,
        component: Loaded,
        vetting: Vetting,
    ) -> Result<(), InstallError> {
        let active = Arc::new(Active {
            grants: Arc::new(self.grants_of(&record)?),
            record,
            component,
            vetting,
        });
        let key = (active.record.workspace_id.clone(), active.record.name.clone());
        self.live.rcu(|live| {
            let mut next = BTreeMap::clone(live);
            next.insert(key.clone(), active.clone());
            next
        });
        Ok(())
    }
    /// Reloads every install when another gateway (or this one) changed any.
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let revision = self.store.revision().await?;
        if revision == self.revision.load(Ordering::Acquire) {
            return Ok(());
        }
        let _serial = self.serial.lock().await;
        let mut next = BTreeMap::new();
        for record in self.store.all().await? {
            match self.activate(record.clone()).await {
                Ok(active) => {
                    next.insert((record.workspace_id.clone(), record.name.clone()), active);
                }
                Err(e) => tracing::error!(
                    workspace = %record.workspace_id,
                    install = %record.name,
                    error = %e,
                    "an install no longer loads; its tools are unavailable"
                ),
            }
        }
        self.live.store(Arc::new(next));
        self.revision.store(revision, Ordering::Release);
        Ok(())
    }

    async fn activate(&self, record: InstallRecord) -> Result<Arc<Active>, InstallError> {
        if let Some(current) = self.get(&record.workspace_id, &record.name)
            && current.record.revision == record.revision
        {
            return Ok(current);
        }
        let package: PackageName = record
            .package
            .parse()
            .map_err(|e| InstallError::Internal(anyhow::anyhow!("stored package name: {e}")))?;
        let version: semver::Version = record
            .version
            .parse()
            .map_err(|e| InstallError::Internal(anyhow::anyhow!("stored version: {e}")))?;
        // A version yanked since it was installed keeps serving its installs.
        let version = self
            .registry
            .index
            .version(&package, &version)
            .await
            .map_err(RegistryError::from)?;
        // Checked again: a version altered in storage since no longer loads.
        let vetting = Vetting {
            signer: self.registry.signer(&version).await?,
            capabilities: tollgate_registry::Capabilities::of(&version.manifest),
        };
        let component = self.compiled(&version).await?;
        Ok(Arc::new(Active {
            grants: Arc::new(self.grants_of(&record)?),
            record,
            component,
            vetting,
        }))
    }

    /// Follows changes made by other gateways, every `every`.
    pub fn follow(self: &Arc<Self>, every: Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(installs) = weak.upgrade() else { return };
                if let Err(e) = installs.refresh().await {
                    tracing::warn!(error = %e, "could not refresh component installs");
                }
            }
        });
    }
}
