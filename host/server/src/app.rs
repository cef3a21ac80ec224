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

use crate::accounts::Accounts;
use crate::actors::Actors;
use crate::auth::{AuthState, KeyResolver};
use crate::billing::Billing;
use crate::components::{Components, Store as InstallStore};
use crate::config::Config;
use crate::control::ControlPlane;
use crate::data_plane::{DataLimits, DataPlane, RouteTable, upstream::Upstream};
use crate::packages::{Installs, Packages};
use crate::rate_limit::KeyRateLimiter;
use crate::server::Origins;
use tollgate_core::db::Database;
use tollgate_core::money::Nanos;
use tollgate_ledger::Ledger;
use tollgate_metering::Metering;
use tollgate_plugin_host::Adapters;
use tollgate_routing::health::Health;

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
    pub(crate) admission: Arc<crate::server::Admission>,
    pub(crate) readiness: Arc<crate::server::Readiness>,
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
        let registry = crate::packages::open(&config.registry, &config.data_dir, database.pool.clone())?;
        crate::packages::seed_builtins(&registry).await?;
        let component_host =
            tollgate_components::ComponentHost::new(adapters.engine(), &config.cache_dir(), config.components.clone())?;
        let credential_key = config
            .credential_key_file
            .clone()
            .unwrap_or_else(|| config.data_dir.join("credentials.key"));
        let component_installs = crate::components::Installs::load(
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
        crate::packages::installs::load_references(&registry, &adapters, &config.providers).await?;
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
        crate::packages::installs::follow(
            &packages,
            std::time::Duration::from_millis(config.registry.install_poll_ms),
        );
        let readiness = Arc::new(crate::server::Readiness::new(database.clone(), {
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
            crate::data_plane::Books {
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
            crate::actors::load_or_create_signing_key(&provenance_key)?,
            &config.actors,
            crate::actors::trails::Trails::open(&config.registry.storage, &config.data_dir)?,
            billing.clone(),
        ));
        let origins = Arc::new(Origins::new(
            config.control_plane.public_url.clone(),
            config.control_plane.allowed_origins.clone(),
        ));
        data.delegate(vec![Arc::new(crate::actors::chat::ActorModels(actors.clone()))]);
        let control = ControlPlane::new(
            &config.control_plane,
            origins.clone(),
            crate::control::Concerns {
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
        let signin = crate::auth::signin::SignIn::new(
            &config.auth,
            database.clone(),
            keys.clone(),
            tollgate_core::sealed::SealingKey::load_or_create(&credential_key)?,
            config.control_plane.public_url.clone(),
            Nanos::from_usd(&config.control_plane.signup_credit_usd)
                .map_err(|e| anyhow::anyhow!("control_plane.signup_credit_usd: {e}"))?,
            crate::auth::sessions::PlainHttp::new(config.control_plane.public_url.as_deref(), &config.listen),
        )?;
        let auth = AuthState::new(
            keys,
            KeyRateLimiter::new(config.auth.key_requests_per_minute),
            signin,
            Some(crate::auth::refusals::RefusalLog::new(request_log.clone())),
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
            admission: Arc::new(crate::server::Admission::new(&config.server)),
            readiness,
            config,
            database,
            metering,
            ledger: Some(request_log),
            billing,
        }))
    }

    /// Every concern's routes; serving adds health, the fallbacks and the
    /// layers (`server::router`).
    pub(crate) fn routes(&self) -> axum::Router<AppState> {
        axum::Router::new()
            .merge(crate::data_plane::routes())
            .merge(crate::control::routes(&self.config.control_plane))
            .merge(crate::packages::api::routes())
            .merge(crate::components::routes())
            .merge(crate::actors::http::routes())
            .merge(crate::auth::signin::routes())
            .merge(crate::console::routes())
            .merge(crate::billing::payments::http::routes())
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
