//! The gateway's wiring, in one place: [`Gateway::start`] builds each
//! concern's state once, and [`AppState`] hands every handler only the state
//! of its own concern through axum's `FromRef`: the data plane
//! ([`DataPlane`]), auth ([`AuthState`], all the `Caller` extractor needs),
//! the control plane ([`ControlPlane`]), packages ([`Packages`]) and tool
//! servers and skills ([`Components`]), hosted actors ([`Actors`]), and the
//! browser-origin rule ([`Origins`]). [`Gateway::routes`] merges every
//! concern's routes. A concern
//! that acts on another goes through the other's API (an install rebuilds the
//! routes through `RouteTable::rebuild`; the control plane reads the ledger
//! through `tollgate_ledger`'s views), never through a shared struct's fields.

use std::sync::Arc;

use anyhow::Context;
use axum::extract::FromRef;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::config::Config;
use tollgate_billing::Billing;
use tollgate_control::ControlPlane;
use tollgate_core::db::Database;
use tollgate_core::money::Nanos;
use tollgate_gateway::{DataLimits, DataPlane, RouteTable, upstream::Upstream};
use tollgate_hosted_actors::Actors;
use tollgate_identity::accounts::Accounts;
use tollgate_identity::auth::{AuthState, KeyResolver};
use tollgate_ledger::Ledger;
use tollgate_metering::Metering;
use tollgate_packages::{Installs, Packages};
use tollgate_plugin_host::Adapters;
use tollgate_routing::health::Health;
use tollgate_tools::{Components, Store as InstallStore};
use tollgate_web::rate_limit::KeyRateLimiter;
use tollgate_web::server::Origins;

/// The router's state: one handle per concern.
#[derive(Clone)]
pub struct AppState {
    data: Arc<DataPlane>,
    auth: Arc<AuthState>,
    control: Arc<ControlPlane>,
    packages: Arc<Packages>,
    components: Arc<Components>,
    actors: Arc<Actors>,
    billing: Arc<Billing>,
    origins: Arc<Origins>,
}

impl FromRef<AppState> for Arc<Origins> {
    fn from_ref(state: &AppState) -> Self {
        state.origins.clone()
    }
}

impl FromRef<AppState> for Arc<Billing> {
    fn from_ref(state: &AppState) -> Self {
        state.billing.clone()
    }
}

impl FromRef<AppState> for Arc<Actors> {
    fn from_ref(state: &AppState) -> Self {
        state.actors.clone()
    }
}

impl FromRef<AppState> for Arc<Components> {
    fn from_ref(state: &AppState) -> Self {
        state.components.clone()
    }
}

impl FromRef<AppState> for Arc<DataPlane> {
    fn from_ref(state: &AppState) -> Self {
        state.data.clone()
    }
}

impl FromRef<AppState> for Arc<AuthState> {
    fn from_ref(state: &AppState) -> Self {
        state.auth.clone()
    }
}

impl FromRef<AppState> for Arc<ControlPlane> {
    fn from_ref(state: &AppState) -> Self {
        state.control.clone()
    }
}

impl FromRef<AppState> for Arc<Packages> {
    fn from_ref(state: &AppState) -> Self {
        state.packages.clone()
    }
}

/// A started gateway: the handler state plus what serving and reloading need.
pub struct Gateway {
    pub(crate) state: AppState,
    pub(crate) config: Config,
    pub(crate) database: Database,
    /// `None` when metering (or the ledger it rides on) is off.
    pub(crate) metering: Option<Metering>,
    /// The ledger's writer (also the request log's when the wallet is off):
    /// its grants go back, and its last rows commit, at shutdown.
    pub(crate) ledger: Option<Ledger>,
    /// Plans; unused slices of the month's requests go back at shutdown.
    pub(crate) billing: Arc<Billing>,
    /// Which requests are taken on (load shedding, the drain).
    pub(crate) admission: Arc<tollgate_web::server::Admission>,
    pub(crate) readiness: Arc<tollgate_web::server::Readiness>,
}

/// Serves `gateway` until `shutdown` resolves and its requests have drained,
/// then gives back what it holds for others: wallet grants, unused slices of
/// the month's requests, metering's claims. `ready` gets the bound address.
pub async fn serve_then(
    gateway: Arc<Gateway>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(std::net::SocketAddr),
) -> anyhow::Result<()> {
    tollgate_web::server::serve(
        &gateway.config.listen,
        gateway.router(),
        &gateway.config.server,
        gateway.config.control_plane.trusted_proxies.clone(),
        gateway.lifecycle(),
        shutdown,
        ready,
    )
    .await?;
    if let Some(ledger) = &gateway.ledger {
        ledger.release_grants().await;
    }
    gateway.billing.release_slices().await;
    if let Some(metering) = &gateway.metering {
        metering.release(&gateway.database).await;
    }
    Ok(())
}

impl Gateway {
    pub async fn start(config: Config) -> anyhow::Result<Arc<Self>> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
        ControlPlane::check(&config.control_plane)?;
        config.server.check()?;
        let database = Database::open_for_server(&config.database_url(), config.ledger.sqlite_sync).await?;
        let keys = KeyResolver::start(&database, &config.database_url()).await?;
        let files: Vec<(String, &std::path::Path)> = config
            .adapters
            .iter()
            .map(|(name, file)| (name.clone(), file.path.as_path()))
            .collect();
        let adapters = Arc::new(Adapters::load(&config.plugins, &config.cache_dir(), &files)?);
        let registry = tollgate_packages::open(&config.registry, &config.data_dir, database.pool.clone())?;
        tollgate_packages::seed_builtins(&registry).await?;
        let component_host =
            tollgate_components::ComponentHost::new(adapters.engine(), &config.cache_dir(), config.components.clone())?;
        let credential_key = config
            .credential_key_file
            .clone()
            .unwrap_or_else(|| config.data_dir.join("credentials.key"));
        let component_installs = tollgate_tools::Installs::load(
            InstallStore::new(database.clone()),
            component_host,
            registry.clone(),
            tollgate_core::sealed::SealingKey::load_or_create(&credential_key)?,
        )
        .await?;
        component_installs.follow(std::time::Duration::from_millis(config.registry.install_poll_ms));
        let installs = Installs::load(
            &database,
            &registry,
            &adapters,
            &config.providers,
            &config.registry.operator_workspaces,
        )
        .await?;
        tollgate_packages::installs::load_references(&registry, &adapters, &config.providers).await?;
        let routes = Arc::new(
            RouteTable::build(
                database.clone(),
                adapters.clone(),
                &installs.overlay(None),
                config.catalog.prices_file.clone(),
            )
            .await?,
        );
        // Usage events ride on ledger settlements, so metering needs the ledger.
        let metering = match config.ledger.enabled {
            true => Metering::new(&config.metering, &config.data_dir, &config.listen)?,
            false => None,
        };
        if let Some(metering) = &metering {
            metering.start(&database).await?;
            tollgate_telemetry::watch_outbox_backlog(metering.backlog_gauge());
        }
        // The writer runs whether or not the wallet is on: every request
        // leaves a request-log row (spec §1.11); with the wallet off, rows
        // bill nothing.
        let request_log = Ledger::start(
            database.clone(),
            &config.ledger,
            tollgate_metering::instance_source(&config.metering),
            metering.as_ref().map(Metering::notifier),
        )?;
        let ledger = config.ledger.enabled.then(|| request_log.clone());
        let archive = config.retention.open_archive(&config.data_dir)?;
        crate::retention::start(database.clone(), archive, config.retention.clone());
        let packages = Arc::new(Packages::new(
            registry,
            installs,
            routes.clone(),
            adapters.clone(),
            database.clone(),
            config.registry.workspace_quota_bytes,
        ));
        tollgate_packages::installs::follow(
            &packages,
            std::time::Duration::from_millis(config.registry.install_poll_ms),
        );
        let readiness = Arc::new(tollgate_web::server::Readiness::new(database.clone(), {
            let routes = routes.clone();
            Box::new(move || routes.unloaded_adapters())
        }));
        let accounts = Accounts::new(database.clone(), keys.clone());
        let billing = Arc::new(Billing::new(&config.billing, accounts.clone(), database.clone())?);
        billing.check_plans_in_use().await?;
        billing.return_idle_slices();
        if let Some(ledger) = &ledger {
            billing.budgets().start(ledger.clone());
        }
        let data = DataPlane::new(
            routes,
            adapters,
            Upstream::new(&config.timeouts)?,
            Health::new(config.breaker.clone()),
            tollgate_gateway::Books {
                request_log: request_log.clone(),
                wallet: ledger.clone(),
            },
            billing.clone(),
            DataLimits {
                max_body_bytes: config.server.max_body_bytes,
                max_upstream_body_bytes: config.upstream.max_body_bytes,
                default_max_output_tokens: config.ledger.default_max_output_tokens,
                log_prompts: config.telemetry.log_prompts,
            },
        );
        let data = Arc::new(data);
        let components = Arc::new(Components::new(component_installs.clone(), data.clone()));
        let provenance_key = config
            .provenance_key_file
            .clone()
            .unwrap_or_else(|| config.data_dir.join("provenance.key"));
        let actors = Arc::new(Actors::new(
            database.clone(),
            data.clone(),
            components.clone(),
            packages.clone(),
            tollgate_hosted_actors::load_or_create_signing_key(&provenance_key)?,
            &config.actors,
            tollgate_hosted_actors::trails::Trails::open(&config.registry.storage, &config.data_dir)?,
            billing.clone(),
        ));
        let origins = Arc::new(Origins::new(
            config.control_plane.public_url.clone(),
            config.control_plane.allowed_origins.clone(),
        ));
        data.delegate(vec![Arc::new(tollgate_hosted_actors::chat::ActorModels(
            actors.clone(),
        ))]);
        let control = ControlPlane::new(
            &config.control_plane,
            origins.clone(),
            tollgate_control::Concerns {
                accounts,
                billing: billing.clone(),
                ledger: tollgate_ledger::Views::new(database.clone()),
                packages: packages.clone(),
                components: component_installs,
                actors: actors.clone(),
            },
            database.clone(),
            config.auth.key_requests_per_minute,
        );
        let signin = tollgate_identity::auth::signin::SignIn::new(
            &config.auth,
            database.clone(),
            keys.clone(),
            tollgate_core::sealed::SealingKey::load_or_create(&credential_key)?,
            config.control_plane.public_url.clone(),
            Nanos::from_usd(&config.control_plane.signup_credit_usd)
                .map_err(|e| anyhow::anyhow!("control_plane.signup_credit_usd: {e}"))?,
            tollgate_identity::auth::sessions::PlainHttp::new(
                config.control_plane.public_url.as_deref(),
                &config.listen,
            ),
        )?;
        let auth = AuthState::new(
            keys,
            KeyRateLimiter::new(config.auth.key_requests_per_minute),
            signin,
            Some(tollgate_identity::auth::refusals::RefusalLog::new(request_log.clone())),
        );
        Ok(Arc::new(Self {
            state: AppState {
                data,
                auth: Arc::new(auth),
                control: Arc::new(control),
                packages,
                components,
                actors,
                billing: billing.clone(),
                origins,
            },
            admission: Arc::new(tollgate_web::server::Admission::new(&config.server)),
            readiness,
            config,
            database,
            metering,
            ledger: Some(request_log),
            billing,
        }))
    }

    /// Every concern's routes inside the layers every request passes.
    pub fn router(&self) -> axum::Router {
        tollgate_web::server::router(
            self.routes(),
            self.state.clone(),
            self.config.server.max_body_bytes,
            &self.lifecycle(),
        )
    }

    fn lifecycle(&self) -> tollgate_web::server::Lifecycle {
        tollgate_web::server::Lifecycle {
            admission: self.admission.clone(),
            readiness: self.readiness.clone(),
        }
    }

    fn routes(&self) -> axum::Router<AppState> {
        axum::Router::new()
            .route(tollgate_metering::SCHEMA_PATH, get(usage_schema))
            .route(tollgate_metering::BUDGET_SCHEMA_PATH, get(budget_schema))
            .merge(tollgate_gateway::routes())
            .merge(tollgate_control::routes(&self.config.control_plane))
            .merge(tollgate_packages::api::routes())
            .merge(tollgate_tools::routes())
            .merge(tollgate_hosted_actors::http::routes())
            .merge(tollgate_identity::auth::signin::routes())
            .merge(crate::console::routes())
            .merge(tollgate_billing::payments::http::routes())
    }

    /// Rebuilds the catalog from `config` (providers, prices, keys) with the
    /// installs applied, and freezes its prices as a pricing snapshot.
    /// Requests already running keep theirs.
    pub async fn reload(&self, config: &Config) -> anyhow::Result<i64> {
        self.state
            .packages
            .reload(&config.providers, &config.registry.operator_workspaces)
            .await
    }
}

/// The JSON Schema that usage events name as their `dataschema`.
async fn usage_schema() -> Response {
    (
        [(header::CONTENT_TYPE, "application/schema+json")],
        tollgate_metering::SCHEMA,
    )
        .into_response()
}

/// The JSON Schema that budget threshold events name as their `dataschema`.
async fn budget_schema() -> Response {
    (
        [(header::CONTENT_TYPE, "application/schema+json")],
        tollgate_metering::BUDGET_SCHEMA,
    )
        .into_response()
}
