//! The live routing table: the current [`Routes`], swapped whole when the
//! providers change (a reload, an install). Owned by the data plane; the
//! packages concern rebuilds it through [`RouteTable::rebuild`] after an
//! install, and never touches the table itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use tollgate_core::db::Database;
use tollgate_plugin_host::Adapters;
use tollgate_routing::ProviderConfig;
use tollgate_routing::catalog::Catalog;
use tollgate_routing::prices::PriceTable;

use super::Routes;

pub struct RouteTable {
    current: RwLock<Arc<Routes>>,
    /// Where pricing snapshots are registered.
    database: Database,
    adapters: Arc<Adapters>,
    /// `catalog.prices_file`, re-read on every rebuild; the built-in table
    /// when unset.
    prices_file: Option<PathBuf>,
}

impl RouteTable {
    pub async fn build(
        database: Database,
        adapters: Arc<Adapters>,
        providers: &BTreeMap<String, ProviderConfig>,
        prices_file: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        let routes = build_routes(&database, &adapters, providers, prices_file.as_deref()).await?;
        Ok(Self {
            current: RwLock::new(Arc::new(routes)),
            database,
            adapters,
            prices_file,
        })
    }

    /// The routing table for a new request.
    pub fn current(&self) -> Arc<Routes> {
        self.current.read().expect("routes lock poisoned").clone()
    }

    /// Rebuilds the catalog from `providers` (prices, keys, adapters) and
    /// freezes its prices as a pricing snapshot, whose id it returns.
    /// Requests already running keep the table they started with.
    pub async fn rebuild(&self, providers: &BTreeMap<String, ProviderConfig>) -> anyhow::Result<i64> {
        let routes = build_routes(&self.database, &self.adapters, providers, self.prices_file.as_deref()).await?;
        let snapshot_id = routes.snapshot_id;
        *self.current.write().expect("routes lock poisoned") = Arc::new(routes);
        Ok(snapshot_id)
    }

    /// Adapters the current routes name that are not loaded (for readiness;
    /// a table is only built when none are, so this stays empty unless an
    /// adapter is lost after the fact).
    pub fn unloaded_adapters(&self) -> Vec<String> {
        let routes = self.current();
        serving_adapters(&routes.catalog)
            .into_iter()
            .filter(|name| self.adapters.get(name).is_none())
            .map(str::to_string)
            .collect()
    }

    /// Whether the current table has a route through `provider`.
    pub fn serves(&self, provider: &str) -> bool {
        self.current()
            .catalog
            .routes()
            .any(|route| route.provider.id == provider)
    }
}

async fn build_routes(
    database: &Database,
    adapters: &Arc<Adapters>,
    providers: &BTreeMap<String, ProviderConfig>,
    prices_file: Option<&std::path::Path>,
) -> anyhow::Result<Routes> {
    let env = |name: &str| std::env::var(name).ok();
    let catalog = match prices_file {
        Some(path) => Catalog::build_priced(providers, &env, &PriceTable::load(path)?)?,
        None => Catalog::build(providers, &env)?,
    };
    if let Some(name) = catalog.adapter_names().find(|name| !adapters.knows(name)) {
        anyhow::bail!("a provider uses adapter '{name}', which is neither built in nor configured under [adapters]");
    }
    // Built-ins compile when a provider that can serve first names them (a
    // fraction of a second each on a cold cache): off the workers.
    let names: Vec<String> = serving_adapters(&catalog).into_iter().map(str::to_string).collect();
    let loader = Arc::clone(adapters);
    tokio::task::spawn_blocking(move || names.iter().try_for_each(|name| loader.ensure(name).map(drop))).await??;
    let snapshot_id = tollgate_routing::snapshots::register(database, &catalog).await?;
    Ok(Routes { catalog, snapshot_id })
}

/// The adapters of providers that can serve: a provider without its key (or a
/// `base_url` placeholder) answers 503 before its adapter is asked anything,
/// so its adapter need not be loaded.
fn serving_adapters(catalog: &Catalog) -> BTreeSet<&str> {
    catalog
        .routes()
        .filter(|route| route.provider.is_available())
        .map(|route| route.provider.adapter.as_str())
        .collect()
}
