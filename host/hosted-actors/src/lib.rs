//! Hosted actors in the gateway: publishing compiled actors into the
//! registry (`publish.rs`), deployments at stable URLs (`store.rs` owns the
//! `actors` and `actor_deployments` tables), runs and their trails (kept
//! with their request-log rows, through the ledger), the
//! HTTP surface (`http.rs`: `/v1/actors/…`; `chat.rs`: actors as chat
//! models), binding deployments under the plan's limit (`deployments.rs`),
//! and the runtime's host (`host.rs`). The control plane's `actors.*`,
//! `deployments.*` and `runs.get` operations, and each deployment's A2A
//! agent, call this concern's API.
//! The compiler and the interpreter are the `tollgate-actors` crate.
//!
//! A run is billed like any request: each model call is a chat completion
//! for the caller, with its own request-log row linked to the run's; the
//! run's own row (kind `actor_run`) posts nothing, but it counts against the
//! plan's monthly requests like a model request, template-only or not. Its
//! provenance trail is signed with the gateway's ed25519 key and kept in that
//! row, or past `inline_trail_bytes` in the blob store (`trails.rs`) with
//! its digest in the row. Compiles take a slot of a gateway-wide and a
//! per-workspace bound (`compiles.rs`).

#![forbid(unsafe_code)]

pub mod chat;
mod compiles;
mod config;
mod deployments;
pub mod host;
pub mod http;
pub mod publish;
pub mod store;
pub mod trails;

pub use config::ActorsConfig;

pub use chat::input_from_messages;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use ed25519_dalek::SigningKey;
use serde_json::Value;
use tollgate_actors::ActorId;
use tollgate_actors::ir::Ir;
use tollgate_actors::runtime::{Engine, Events, RunError, RunSpec};
use tollgate_core::db::now_ms;
use tollgate_core::money::Nanos;
use tollgate_ledger::{RequestKind, RequestLogRow, RunProvenance};

use store::Store;
use tollgate_gateway::DataPlane;
use tollgate_identity::auth::Principal;
use tollgate_packages::Packages;
use tollgate_tools::Components;
use tollgate_web::server::RequestId;

/// Hosted actors: this concern's handler state.
pub struct Actors {
    store: Store,
    /// The ledger's views read the runs' rows (the request log is the ledger's).
    database: tollgate_core::db::Database,
    data: Arc<DataPlane>,
    components: Arc<Components>,
    packages: Arc<Packages>,
    signing: SigningKey,
    /// Parsed IR by actor id; an id's content never changes, so nothing
    /// expires, but the map is bounded ([`MAX_CACHED_IRS`]).
    irs: Mutex<HashMap<ActorId, Arc<Ir>>>,
    /// `actors.max_deployments_per_workspace`: the operator's cap on top of
    /// the plan's endpoints; `None`: no cap.
    max_deployments: Option<u32>,
    /// Plans: the workspace's hosted actor endpoints.
    billing: Arc<tollgate_billing::Billing>,
    /// Finished runs whose rows are still being written: the answer does
    /// not wait for the commit, and `runs.get` finds them here meanwhile.
    pending_runs: Mutex<HashMap<String, RunRecord>>,
    /// Deployments read recently: a run need not query the database for
    /// its deployment. Changes made here clear it at once; gateways sharing
    /// the database see them within [`DEPLOYMENT_TTL`].
    deployments: Mutex<HashMap<(String, String), CachedDeployment>>,
    /// The operator's per-run limits and the pool templates render on.
    engine: Arc<Engine>,
    /// Trails larger than `inline_trail_bytes` go to the blob store.
    trails: trails::Trails,
    inline_trail_bytes: u64,
    compiles: compiles::Compiles,
}

/// Most actor IRs kept parsed in memory (docs/operations.md, "Memory").
const MAX_CACHED_IRS: usize = 1_000;
/// Most deployments (and misses) kept in memory.
const MAX_CACHED_DEPLOYMENTS: usize = 10_000;

/// A deployment as last read (`None`: there was none), and when.
type CachedDeployment = (Option<store::Deployment>, Instant);

/// How long another gateway's change to a deployment may go unseen here.
const DEPLOYMENT_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// Which actor a request runs.
#[derive(Clone, Debug)]
pub enum Target {
    Deployment { namespace: String, name: String },
    Id(ActorId),
}

impl Target {
    /// How the run's request-log row names it.
    pub fn label(&self) -> String {
        match self {
            Target::Deployment { namespace, name } => format!("actor/{namespace}/{name}"),
            Target::Id(id) => format!("actor/by-id/{id}"),
        }
    }
}

/// A finished run, as every surface answers it.
pub struct Finished {
    pub run_id: String,
    pub request_id: String,
    pub actor_id: ActorId,
    pub result: Result<Value, RunError>,
    pub cost: Nanos,
    /// Model calls made, sub-actors' included.
    pub model_calls: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    PlanLimit(String),
    /// Too many compiles at once (the workspace's or the gateway's): retry.
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for ActorError {
    fn from(error: sqlx::Error) -> Self {
        ActorError::Internal(error.into())
    }
}

impl Actors {
    pub fn new(
        database: tollgate_core::db::Database,
        data: Arc<DataPlane>,
        components: Arc<Components>,
        packages: Arc<Packages>,
        signing: SigningKey,
        config: &ActorsConfig,
        trails: trails::Trails,
        billing: Arc<tollgate_billing::Billing>,
    ) -> Self {
        // One engine for the gateway: prompt templates served over MCP share
        // its limits and render threads.
        let engine = components.templates().clone();
        Self {
            store: Store::new(database.clone()),
            database,
            data,
            components,
            packages,
            signing,
            irs: Mutex::new(HashMap::new()),
            max_deployments: config.max_deployments_per_workspace,
            billing,
            pending_runs: Mutex::new(HashMap::new()),
            deployments: Mutex::new(HashMap::new()),
            engine,
            trails,
            inline_trail_bytes: config.inline_trail_bytes,
            compiles: compiles::Compiles::new(config.max_compiles, config.max_compiles_per_workspace),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The public half of the provenance key, base64url (no padding).
    pub fn public_key(&self) -> String {
        tollgate_actors::provenance::public_key(&self.signing)
    }

    /// A slot to compile for `workspace_id` (held for the compile), or
    /// `Busy`.
    pub fn compile_slot(&self, workspace_id: &str) -> Result<compiles::CompileSlot, ActorError> {
        self.compiles.slot(workspace_id)
    }

    /// A published actor's IR.
    pub async fn ir(&self, id: &ActorId) -> Result<Arc<Ir>, ActorError> {
        if let Some(ir) = self.irs.lock().expect("ir cache lock").get(id) {
            return Ok(ir.clone());
        }
        let record = self
            .store
            .actor(id.as_str())
            .await?
            .ok_or_else(|| ActorError::NotFound(format!("no actor with id {id} is published")))?;
        let ir: Ir = serde_json::from_str(&record.ir).context("a stored actor IR does not parse")?;
        let ir = Arc::new(ir);
        let mut irs = self.irs.lock().expect("ir cache lock");
        // Bounded: a gateway serving more actors than this re-reads some.
        if irs.len() >= MAX_CACHED_IRS {
            irs.clear();
        }
        irs.insert(id.clone(), ir.clone());
        Ok(ir)
    }

    /// A deployment, from the cache when read less than [`DEPLOYMENT_TTL`] ago.
    async fn deployment(&self, namespace: &str, name: &str) -> Result<Option<store::Deployment>, ActorError> {
        let key = (namespace.to_string(), name.to_string());
        if let Some((found, read)) = self.deployments.lock().expect("deployment cache lock").get(&key)
            && read.elapsed() < DEPLOYMENT_TTL
        {
            return Ok(found.clone());
        }
        let found = self.store.deployment(namespace, name).await?;
        let mut cache = self.deployments.lock().expect("deployment cache lock");
        if cache.len() >= MAX_CACHED_DEPLOYMENTS {
            cache.clear();
        }
        cache.insert(key, (found.clone(), Instant::now()));
        Ok(found)
    }

    /// Forgets cached deployments after a change made on this gateway.
    fn deployments_changed(&self) {
        self.deployments.lock().expect("deployment cache lock").clear();
    }

    /// The actor a target names, for `caller`: a deployment must be in the
    /// caller's workspace; an id addresses published (public) content.
    pub async fn resolve(&self, caller: &Principal, target: &Target) -> Result<(ActorId, Arc<Ir>), ActorError> {
        let id = match target {
            Target::Id(id) => id.clone(),
            Target::Deployment { namespace, name } => {
                let deployment = self
                    .deployment(namespace, name)
                    .await?
                    .filter(|d| d.workspace_id == caller.workspace_id)
                    .ok_or_else(|| {
                        ActorError::NotFound(format!("no deployment '{namespace}/{name}' in this workspace"))
                    })?;
                deployment
                    .actor_id
                    .parse()
                    .map_err(|e: String| ActorError::Internal(anyhow::anyhow!(e)))?
            }
        };
        let ir = self.ir(&id).await?;
        Ok((id, ir))
    }

    /// Runs an actor for `caller` to its end, then signs and stores its
    /// trail and logs the run. `events`, when given, receives the run's
    /// progress as it happens.
    pub async fn run(
        self: &Arc<Self>,
        caller: Arc<Principal>,
        target: &Target,
        resolved: (ActorId, Arc<Ir>),
        input: Value,
        max_cost: Option<Nanos>,
        events: Option<Events>,
    ) -> Result<Finished, ActorError> {
        let events_streamed = events.is_some();
        // A run is a request of the plan's month whatever it calls: a
        // template-only run costs the gateway work too.
        let _admitted = self.data.admit(&caller).await.map_err(|error| match error {
            tollgate_billing::BillingError::LimitReached { .. } => ActorError::PlanLimit(error.to_string()),
            other => ActorError::Internal(other.into()),
        })?;
        let (actor_id, ir) = resolved;
        let request_id = RequestId::new().0.to_string();
        let run_id = format!("run_{}", uuid::Uuid::now_v7().simple());
        let started = (now_ms(), Instant::now());
        let host = Arc::new(host::GatewayHost {
            actors: self.clone(),
            caller: caller.clone(),
        });
        let outcome = tollgate_actors::runtime::run(
            host,
            RunSpec {
                ir,
                actor_id: actor_id.clone(),
                input,
                run_id: run_id.clone(),
                request_id: request_id.clone(),
                max_cost_nanos: max_cost.map(|n| n.0),
                events,
                engine: self.engine.clone(),
            },
        )
        .await;
        let model_calls = count_model_calls(&outcome.trail);
        let (trail, signature) = self.sign(outcome.trail).await?;
        let deployment = match target {
            Target::Deployment { namespace, name } => Some(format!("{namespace}/{name}")),
            Target::Id(_) => None,
        };
        let run = RunRecord {
            run_id: run_id.clone(),
            request_id: request_id.clone(),
            workspace_id: caller.workspace_id.clone(),
            actor_id: actor_id.to_string(),
            deployment,
            status: if outcome.result.is_ok() { "succeeded" } else { "failed" }.into(),
            cost_nanos: outcome.cost_nanos,
            trail,
            signature,
            created_at_ms: started.0,
        };
        let row = log_row(&run, &caller, target, &outcome.result, events_streamed, started.1);
        self.record_run(run, row);
        Ok(Finished {
            run_id,
            request_id,
            actor_id,
            model_calls,
            result: outcome.result,
            cost: Nanos(outcome.cost_nanos),
        })
    }

    /// The trail as canonical JSON text and its signature. Canonicalizing
    /// and signing a trail of up to `max_trail_bytes` is CPU work: off the
    /// runtime's workers.
    async fn sign(&self, trail: tollgate_actors::provenance::RunTrail) -> Result<(String, String), ActorError> {
        let signing = self.signing.clone();
        let signed = tokio::task::spawn_blocking(move || -> anyhow::Result<(String, String)> {
            let trail = serde_json::to_value(&trail).context("a trail always serialises")?;
            let signature = tollgate_actors::provenance::sign(&trail, &signing)
                .map_err(|e| anyhow::anyhow!("the trail cannot be signed: {e}"))?;
            Ok((trail.to_string(), signature))
        })
        .await
        .context("signing a run's trail")??;
        Ok(signed)
    }

    /// Writes a finished run's request-log row (kind `actor_run`, with its
    /// signed trail) in the background, batched with the ledger's other
    /// writes. It posts nothing (the run's model calls are rows of their
    /// own, already settled), so the caller need not wait for its commit;
    /// until the row is in, this gateway answers `runs.get` from memory.
    fn record_run(self: &Arc<Self>, run: RunRecord, mut row: RequestLogRow) {
        let ledger = self.data.request_log().clone();
        let (trails, inline) = (self.trails.clone(), self.inline_trail_bytes);
        let run_id = run.run_id.clone();
        self.pending_runs
            .lock()
            .expect("pending runs lock")
            .insert(run_id.clone(), run);
        let actors = self.clone();
        tokio::spawn(async move {
            if let Some(provenance) = row.provenance.as_mut()
                && provenance.trail.len() as u64 > inline
            {
                // A failed store keeps the trail in the row: larger than
                // documented, but not lost.
                match trails.put(provenance.trail.clone()).await {
                    Ok(stored) => provenance.trail = serde_json::json!(stored).to_string(),
                    Err(error) => tracing::error!(%run_id, %error, "could not store an actor run's trail"),
                }
            }
            if let Err(error) = ledger.log(row).await {
                tracing::error!(%run_id, %error, "could not log an actor run and its trail");
            }
            actors.pending_runs.lock().expect("pending runs lock").remove(&run_id);
        });
    }

    /// A run by its run id or request id, in `workspace_id`: logged, or
    /// still being written.
    pub async fn find_run(&self, workspace_id: &str, id: &str) -> Result<Option<RunRecord>, ActorError> {
        let pending = self
            .pending_runs
            .lock()
            .expect("pending runs lock")
            .values()
            .find(|run| run.workspace_id == workspace_id && (run.run_id == id || run.request_id == id))
            .cloned();
        if pending.is_some() {
            return Ok(pending);
        }
        let Some(mut row) = tollgate_ledger::actor_run(&self.database, workspace_id, id).await? else {
            return Ok(None);
        };
        if let Some(stored) = trails::StoredTrail::parse(&row.trail) {
            row.trail = self.trails.get(&stored).await?;
        }
        let cost = serde_json::from_str::<Value>(&row.trail)
            .ok()
            .and_then(|trail| trail["cost_usd"].as_str().and_then(|usd| Nanos::from_usd(usd).ok()))
            .unwrap_or(Nanos::ZERO);
        Ok(Some(RunRecord {
            deployment: row
                .model
                .strip_prefix("actor/")
                .filter(|path| !path.starts_with("by-id/"))
                .map(str::to_string),
            status: if row.outcome == "success" {
                "succeeded"
            } else {
                "failed"
            }
            .into(),
            cost_nanos: cost.0,
            run_id: row.run_id,
            request_id: row.request_id,
            workspace_id: row.workspace_id,
            actor_id: row.actor_id,
            trail: row.trail,
            signature: row.signature,
            created_at_ms: row.started_at_ms,
        }))
    }
}

/// A finished run, as `runs.get` shows it.
#[derive(Clone, Debug)]
pub struct RunRecord {
    pub run_id: String,
    pub request_id: String,
    pub workspace_id: String,
    pub actor_id: String,
    pub deployment: Option<String>,
    /// `succeeded` or `failed`.
    pub status: String,
    pub cost_nanos: i64,
    pub trail: String,
    pub signature: String,
    pub created_at_ms: i64,
}

/// A finished run's request-log row: kind `actor_run`, billing nothing
/// itself (its model calls are rows of their own), with the signed trail.
fn log_row(
    run: &RunRecord,
    caller: &Principal,
    target: &Target,
    result: &Result<Value, RunError>,
    streamed: bool,
    started: Instant,
) -> RequestLogRow {
    let (outcome, status) = match result {
        Ok(_) => ("success".to_string(), 200),
        Err(error) => (error.code.clone(), status_of(&error.code)),
    };
    RequestLogRow {
        provider: Some("actor".into()),
        upstream_model: Some(run.actor_id.clone()),
        streamed,
        outcome,
        status: Some(status),
        started_at_ms: run.created_at_ms,
        duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        provenance: Some(RunProvenance {
            run_id: run.run_id.clone(),
            trail: run.trail.clone(),
            signature: run.signature.clone(),
        }),
        ..RequestLogRow::unbilled(
            RequestKind::ActorRun,
            run.request_id.clone(),
            caller.key_id.clone(),
            caller.workspace_id.clone(),
            target.label(),
        )
    }
}

fn count_model_calls(trail: &tollgate_actors::provenance::RunTrail) -> usize {
    trail
        .steps
        .iter()
        .map(|step| step.model_calls.len() + step.child_runs.iter().map(count_model_calls).sum::<usize>())
        .sum()
}

/// The HTTP status a run error answers with.
pub fn status_of(code: &str) -> u16 {
    match code {
        "invalid_input" => 400,
        "budget_exceeded" | "insufficient_balance" => 402,
        "timeout" => 504,
        "model_error" | "tool_failed" | "actor_unavailable" => 502,
        _ => 422,
    }
}

/// Loads the gateway's ed25519 provenance key from `path`, creating it
/// (owner-only) on first start.
pub fn load_or_create_signing_key(path: &Path) -> anyhow::Result<SigningKey> {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    if path.exists() {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let bytes: [u8; 32] = engine
            .decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .with_context(|| format!("{} does not hold a base64 ed25519 seed (32 bytes)", path.display()))?;
        return Ok(SigningKey::from_bytes(&bytes));
    }
    let mut seed = [0u8; 32];
    rand::fill(&mut seed);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    use std::io::Write as _;
    options
        .open(path)
        .and_then(|mut file| file.write_all(engine.encode(seed).as_bytes()))
        .with_context(|| format!("writing the provenance key {}", path.display()))?;
    Ok(SigningKey::from_bytes(&seed))
}
