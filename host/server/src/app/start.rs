//! Starting a gateway, in stages read top to bottom: the database and keys;
//! the adapters, the registry and the route table; the books (request log,
//! wallet, metering, retention); billing; the data plane and the concerns on
//! top of it; sign-in and auth. Each stage takes what the earlier ones built.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::{AppState, Gateway};
use crate::config::Config;
use tollgate_billing::Billing;
use tollgate_control::ControlPlane;
use tollgate_core::db::Database;
use tollgate_core::money::Nanos;
use tollgate_core::sealed::SealingKey;
use tollgate_gateway::{DataLimits, DataPlane, RouteTable, Routing, upstream::Upstream};
use tollgate_hosted_actors::Actors;
use tollgate_identity::accounts::Accounts;
use tollgate_identity::auth::{AuthState, KeyResolver};
use tollgate_ledger::Ledger;
use tollgate_metering::Metering;
use tollgate_packages::{Installs, Packages};
use tollgate_plugin_host::Adapters;
use tollgate_tools::{Components, Store as InstallStore};
use tollgate_web::rate_limit::KeyRateLimiter;
use tollgate_web::server::{Admission, Origins, Readiness};

impl Gateway {
    pub async fn start(config: Config) -> anyhow::Result<Arc<Self>> {
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create data dir {}", config.data_dir.display()))?;
        ControlPlane::check(&config.control_plane)?;
        config.server.check()?;
        config.batches.check()?;
        config.cache.check()?;
        let database = Database::open_for_server(&config.database_url(), config.ledger.sqlite_sync).await?;
        let keys = KeyResolver::start(&database, &config.database_url()).await?;
        let catalog = Catalog::open(&config, &database).await?;
        let books = Books::start(&config, &database).await?;
        let readiness = Arc::new(Readiness::new(
            database.clone(),
            {
                let routes = catalog.routes.clone();
                Box::new(move || routes.unloaded_adapters())
            },
            {
                let ledger = books.request_log.clone();
                Box::new(move || serde_json::to_value(ledger.health()).unwrap_or_default())
            },
        ));
        let accounts = Accounts::new(database.clone(), keys.clone());
        let billing = Arc::new(Billing::new(&config.billing, accounts.clone(), database.clone())?);
        billing.check_plans_in_use().await?;
        billing.return_idle_slices();
        if let Some(wallet) = &books.wallet {
            billing.budgets().start(wallet.clone());
        }
        let data = Arc::new(data_plane(&config, &catalog, &books, billing.clone())?);
        tollgate_gateway::probe::start(&data);
        let components = Arc::new(Components::new(
            catalog.component_installs.clone(),
            data.clone(),
            database.clone(),
            Arc::new(config.actors.engine()),
            tollgate_tools::prices::ToolPrices::from_config(&config.tool_prices)?,
        ));
        data.guard_with(tollgate_tools::guardrails::InstalledGuardrails::load(&components, &config.guardrails).await?);
        let actors = Arc::new(Actors::new(
            database.clone(),
            data.clone(),
            components.clone(),
            catalog.packages.clone(),
            tollgate_hosted_actors::load_or_create_signing_key(&config.provenance_key_file())?,
            &config.actors,
            tollgate_hosted_actors::trails::Trails::open(&config.registry.storage, &config.data_dir)?,
            billing.clone(),
        ));
        data.delegate(vec![Arc::new(tollgate_hosted_actors::chat::ActorModels(
            actors.clone(),
        ))]);
        let origins = Arc::new(Origins::new(
            config.control_plane.public_url.clone(),
            config.control_plane.allowed_origins.clone(),
            &config.listen,
        ));
        let batches = tollgate_batches::Batches::new(
            database.clone(),
            files_store(&config, &database)?,
            data.clone(),
            accounts.clone(),
            config.batches.clone(),
        );
        batches.start();
        let scim = Arc::new(tollgate_scim::Provisioning::new(
            database.clone(),
            accounts.clone(),
            billing.clone(),
            origins.clone(),
        ));
        let control = ControlPlane::new(
            &config.control_plane,
            origins.clone(),
            tollgate_control::Concerns {
                accounts,
                billing: billing.clone(),
                ledger: tollgate_ledger::Views::new(database.clone(), Some(books.request_log.clone())),
                packages: catalog.packages.clone(),
                components: catalog.component_installs,
                actors: actors.clone(),
                audit: tollgate_audit::AuditLog::new(database.clone()),
                scim: scim.clone(),
            },
            database.clone(),
            config.auth.key_requests_per_minute,
        );
        let auth = auth_state(&config, &database, keys, &books.request_log)?;
        Ok(Arc::new(Self {
            state: AppState {
                data,
                auth: Arc::new(auth),
                control: Arc::new(control),
                packages: catalog.packages,
                components,
                actors,
                billing: billing.clone(),
                origins,
                scim,
                batches,
            },
            admission: Arc::new(Admission::new(&config.server)),
            readiness,
            config,
            database,
            metering: books.metering,
            ledger: Some(books.request_log),
            billing,
        }))
    }
}

impl Config {
    /// The key that seals install credentials and first sign-in keys at rest.
    fn credential_key_file(&self) -> PathBuf {
        self.credential_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("credentials.key"))
    }

    /// The key that signs actor runs' provenance trails.
    fn provenance_key_file(&self) -> PathBuf {
        self.provenance_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("provenance.key"))
    }
}

/// What can be called, and through what: the adapters, the registry with
/// the workspaces' adapter and component installs, and the route table built
/// over them. Installs made on other gateways are followed from here on.
struct Catalog {
    adapters: Arc<Adapters>,
    routes: Arc<RouteTable>,
    packages: Arc<Packages>,
    component_installs: Arc<tollgate_tools::Installs>,
}

impl Catalog {
    async fn open(config: &Config, database: &Database) -> anyhow::Result<Self> {
        let files: Vec<(String, &std::path::Path)> = config
            .adapters
            .iter()
            .map(|(name, file)| (name.clone(), file.path.as_path()))
            .collect();
        let adapters = Arc::new(Adapters::load(&config.plugins, &config.cache_dir(), &files)?);
        let registry = tollgate_packages::open(&config.registry, &config.data_dir, database)?;
        tollgate_packages::seed_builtins(&registry).await?;
        // Blobs stored before gateways kept database copies, shared now.
        match registry.blobs.share_missing_copies().await {
            Ok(0) => {}
            Ok(shared) => tracing::info!(
                shared,
                "copied earlier package blobs to the database for other gateways"
            ),
            Err(error) => tracing::warn!(%error, "could not copy earlier package blobs to the database"),
        }
        let poll = Duration::from_millis(config.registry.install_poll_ms);
        let component_host =
            tollgate_components::ComponentHost::new(adapters.engine(), &config.cache_dir(), config.components.clone())?;
        let component_installs = tollgate_tools::Installs::load(
            InstallStore::new(database.clone()),
            component_host,
            registry.clone(),
            SealingKey::load_or_create(&config.credential_key_file())?,
        )
        .await?;
        component_installs.follow(poll);
        let installs = Installs::load(
            database,
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
        let packages = Arc::new(Packages::new(
            registry,
            installs,
            routes.clone(),
            adapters.clone(),
            database.clone(),
            config.registry.workspace_quota_bytes,
        ));
        tollgate_packages::installs::follow(&packages, poll);
        Ok(Self {
            adapters,
            routes,
            packages,
            component_installs,
        })
    }
}

/// Where requests are written down: the request log (always), the wallet
/// (when `ledger.enabled`), the metering that follows the log, and the log's
/// retention.
struct Books {
    request_log: Ledger,
    wallet: Option<Ledger>,
    metering: Option<Metering>,
}

impl Books {
    async fn start(config: &Config, database: &Database) -> anyhow::Result<Self> {
        // Usage events ride on ledger settlements, so metering needs the ledger.
        let metering = match config.ledger.enabled {
            true => Metering::new(&config.metering, &config.data_dir, &config.listen)?,
            false => None,
        };
        if let Some(metering) = &metering {
            metering.start(database).await?;
            tollgate_telemetry::watch_outbox_backlog(metering.backlog_gauge());
        }
        // The writer runs whether or not the wallet is on: every request
        // leaves a request-log row (spec §1.11); with the wallet off, rows
        // bill nothing.
        let journal_dir = config
            .ledger
            .journal_dir
            .clone()
            .unwrap_or_else(|| config.data_dir.join("journal"));
        let request_log = Ledger::start(
            database.clone(),
            &config.ledger,
            &journal_dir,
            tollgate_metering::instance_source(&config.metering),
            metering.as_ref().map(Metering::notifier),
        )
        .await?;
        tollgate_telemetry::watch_ledger_journal({
            let ledger = request_log.clone();
            move || {
                let health = ledger.health();
                (health.lag, health.database_reachable)
            }
        });
        let archive = config.retention.open_archive(&config.data_dir)?;
        crate::retention::start(database.clone(), archive, config.retention.clone());
        Ok(Self {
            wallet: config.ledger.enabled.then(|| request_log.clone()),
            request_log,
            metering,
        })
    }
}

fn data_plane(config: &Config, catalog: &Catalog, books: &Books, billing: Arc<Billing>) -> anyhow::Result<DataPlane> {
    config
        .routing
        .validate(&catalog.routes.current().catalog)
        .context("[routing]")?;
    Ok(DataPlane::new(
        catalog.routes.clone(),
        catalog.adapters.clone(),
        Upstream::new(&config.timeouts)?,
        Routing::new(config.breaker.clone(), config.routing.clone()),
        tollgate_gateway::Books {
            request_log: books.request_log.clone(),
            wallet: books.wallet.clone(),
        },
        billing,
        DataLimits {
            max_body_bytes: config.server.max_body_bytes,
            max_upload_bytes: config.server.max_upload_bytes,
            max_upstream_body_bytes: config.upstream.max_body_bytes,
            default_max_output_tokens: config.ledger.default_max_output_tokens,
            log_prompts: config.telemetry.log_prompts,
            guard_window_chars: config.guardrails.stream_window_chars,
            cache: config.cache.clone(),
        },
    ))
}

/// What the `Caller` extractor needs: keys, the per-key rate, console
/// sign-in (key or OIDC, into cookie sessions) and the refusal log.
fn auth_state(
    config: &Config,
    database: &Database,
    keys: KeyResolver,
    request_log: &Ledger,
) -> anyhow::Result<AuthState> {
    let signup_credit = Nanos::from_usd(&config.control_plane.signup_credit_usd)
        .map_err(|e| anyhow::anyhow!("control_plane.signup_credit_usd: {e}"))?;
    let signin = tollgate_identity::auth::signin::SignIn::new(
        &config.auth,
        database.clone(),
        keys.clone(),
        SealingKey::load_or_create(&config.credential_key_file())?,
        config.control_plane.public_url.clone(),
        signup_credit,
        tollgate_identity::auth::sessions::PlainHttp::new(config.control_plane.public_url.as_deref(), &config.listen),
        config.control_plane.trusted_proxies.clone(),
    )?;
    let state = AuthState::new(
        keys,
        KeyRateLimiter::new(config.auth.key_requests_per_minute),
        signin,
        Some(tollgate_identity::auth::refusals::RefusalLog::new(request_log.clone())),
    );
    // Gateways may share Postgres, never SQLite: only there is a key's rate
    // also held across them.
    Ok(match database.backend {
        tollgate_core::db::Backend::Postgres => state.with_cluster_rates(database.pool.clone()),
        tollgate_core::db::Backend::Sqlite => state,
    })
}

/// Where the Files API keeps its bytes: the registry's storage choice, in a
/// folder of its own on the local backend (with copies in a shared Postgres,
/// so any gateway of a cluster serves a file another stored).
fn files_store(config: &Config, database: &Database) -> anyhow::Result<tollgate_registry::blobs::BlobStore> {
    use tollgate_registry::blobs::{BlobStore, StorageConfig};
    let mut blobs =
        BlobStore::open(&config.registry.storage, &config.data_dir.join("files")).context("file storage")?;
    if config.registry.storage == StorageConfig::Local && database.backend == tollgate_core::db::Backend::Postgres {
        blobs = blobs.with_database_copies(database.pool.clone());
    }
    Ok(blobs)
}
