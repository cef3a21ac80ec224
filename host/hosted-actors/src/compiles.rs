//! Bounds on compiles running at once: gateway-wide and per workspace. A
//! compile holds a parsed tree, compiled schemas and templates (about 8 MiB
//! for a large actor), so 48 at once from one key peaked at 400 MiB. A
//! compile past either bound is refused at once, never queued: the caller
//! retries, and nothing piles up in memory meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ActorError;

/// How long a refused compile is told to wait, in seconds.
pub const RETRY_AFTER_SECS: u32 = 1;

/// Workspaces with a semaphore kept before idle ones are dropped.
const MAX_TRACKED_WORKSPACES: usize = 10_000;

pub struct Compiles {
    gateway: Arc<Semaphore>,
    per_workspace: usize,
    workspaces: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A running compile's slots, released when it is dropped.
pub struct CompileSlot {
    _gateway: OwnedSemaphorePermit,
    _workspace: OwnedSemaphorePermit,
}

impl Compiles {
    pub fn new(gateway: usize, per_workspace: usize) -> Self {
        Self {
            gateway: Arc::new(Semaphore::new(gateway.max(1))),
            per_workspace: per_workspace.max(1),
            workspaces: Mutex::new(HashMap::new()),
        }
    }

    /// A slot for one compile of `workspace_id`, or `Busy` when the
    /// workspace or the gateway already runs as many as it may.
    pub fn slot(&self, workspace_id: &str) -> Result<CompileSlot, ActorError> {
        let semaphore = {
            let mut workspaces = self.workspaces.lock().expect("compile slots lock");
            if workspaces.len() >= MAX_TRACKED_WORKSPACES {
                let idle = self.per_workspace;
                workspaces.retain(|_, semaphore| semaphore.available_permits() < idle);
            }
            workspaces
                .entry(workspace_id.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_workspace)))
                .clone()
        };
        let workspace = semaphore.try_acquire_owned().map_err(|_| {
            ActorError::Busy(format!(
                "This workspace already runs {} actor compiles at once, the most it may; try again in {RETRY_AFTER_SECS} s.",
                self.per_workspace
            ))
        })?;
        let gateway = self.gateway.clone().try_acquire_owned().map_err(|_| {
            ActorError::Busy(format!(
                "The gateway is compiling as many actors as it may at once; try again in {RETRY_AFTER_SECS} s."
            ))
        })?;
        Ok(CompileSlot {
            _gateway: gateway,
            _workspace: workspace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_and_the_gateway_each_have_a_bound() {
        let compiles = Compiles::new(3, 2);
        let a1 = compiles.slot("a").unwrap();
        let _a2 = compiles.slot("a").unwrap();
        assert!(matches!(compiles.slot("a"), Err(ActorError::Busy(m)) if m.contains("workspace")));
        let _b1 = compiles.slot("b").unwrap();
        assert!(matches!(compiles.slot("b"), Err(ActorError::Busy(m)) if m.contains("gateway")));
        drop(a1);
        compiles.slot("b").unwrap();
    }
}
