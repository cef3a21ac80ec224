//! `tollgate catalog import-prices FILE`: refresh the price table from a
//! LiteLLM-format price file (docs/pricing.md). It prices every model the
//! catalog (with this configuration's providers) lists, adds the file's other
//! chat models of those providers, reports what changed, and writes the
//! table; pricing snapshots in the database are not touched (a gateway takes
//! the new table on its next start or SIGHUP, as a new snapshot).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};

use super::ConfigArgs;
use tollgate_routing::catalog::{Catalog, builtin_entries};
use tollgate_routing::prices::{self, PriceTable, Source, Wanted};

#[derive(Subcommand, Debug)]
pub enum CatalogCommand {
    /// Refresh the price table from a LiteLLM `model_prices_and_context_window.json`
    /// and report what changed. Catalog models the file lacks keep their price;
    /// the file's other models of the catalog's providers are added: chat,
    /// embedding and moderation models, and image, speech, transcription and
    /// rerank models priced per unit.
    ImportPrices(ImportArgs),
    /// List the catalog's providers (built in and configured): id, name, how
    /// many models it serves and how many have a price, and whether it is
    /// available with this configuration and environment.
    Providers(ProvidersArgs),
}

#[derive(Args, Debug)]
pub struct ProvidersArgs {
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// The price file (LiteLLM's JSON format).
    file: PathBuf,
    /// Where to write the table (default: `catalog.prices_file` from the config).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The release the file comes from, recorded with the source (e.g. "litellm 1.109.1 (PyPI)").
    #[arg(long, value_name = "TEXT", default_value = "litellm (release not recorded)")]
    release: String,
    /// Report the changes without writing the table.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(command: CatalogCommand) -> anyhow::Result<()> {
    match command {
        CatalogCommand::ImportPrices(args) => import(&args),
        CatalogCommand::Providers(args) => providers(&args),
    }
}

fn providers(args: &ProvidersArgs) -> anyhow::Result<()> {
    let config = super::load(&args.config, None)?;
    let env = |name: &str| std::env::var(name).ok();
    let catalog = match &config.catalog.prices_file {
        Some(path) => Catalog::build_priced(&config.providers, &env, &PriceTable::load(path)?)?,
        None => Catalog::build(&config.providers, &env)?,
    };
    // Routes come in provider order, each provider's together.
    let mut rows: Vec<(&tollgate_routing::Provider, usize, usize)> = Vec::new();
    for route in catalog.routes() {
        match rows.last_mut() {
            Some((provider, models, priced)) if provider.id == route.provider.id => {
                *models += 1;
                *priced += usize::from(route.priced);
            }
            _ => rows.push((&route.provider, 1, usize::from(route.priced))),
        }
    }
    for (provider, models, priced) in &rows {
        let state = provider.unavailable_reason().unwrap_or_else(|| "available".into());
        println!(
            "{}\t{}\t{models} models, {priced} priced\t{state}",
            provider.id, provider.name
        );
    }
    println!("{} providers", rows.len());
    Ok(())
}

fn import(args: &ImportArgs) -> anyhow::Result<()> {
    let config = super::load(&args.config, None)?;
    let out = args
        .out
        .clone()
        .or_else(|| config.catalog.prices_file.clone())
        .context("say where the table goes: --out FILE, or catalog.prices_file in the configuration")?;
    // The table the changes are reported against: the one at the destination
    // if there is one, else the built-in table.
    let current = if out.exists() {
        PriceTable::load(&out)?
    } else {
        PriceTable::builtin().clone()
    };
    let json = std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    // Only the models the catalog and config name are "wanted": the table's
    // own additions come from the file alone, so a model the file drops (or
    // retires) leaves the table.
    let catalog = Catalog::build_priced(
        &config.providers,
        &|name| std::env::var(name).ok(),
        &PriceTable::default(),
    )?;
    let providers: BTreeSet<String> = builtin_entries()?
        .into_iter()
        .map(|(_, entry)| entry.id)
        .chain(config.providers.keys().cloned())
        .collect();
    let providers: Vec<&str> = providers.iter().map(String::as_str).collect();
    let wanted: Vec<Wanted<'_>> = catalog
        .routes()
        .map(|route| Wanted {
            route_id: &route.id,
            provider: &route.provider.id,
            upstream_model: &route.upstream_model,
        })
        .collect();
    let source = Source {
        name: "LiteLLM model_prices_and_context_window.json".into(),
        url: "https://github.com/BerriAI/litellm/blob/main/model_prices_and_context_window.json".into(),
        release: args.release.clone(),
        licence: "MIT".into(),
        copyright: "Copyright (c) 2023 Berri AI".into(),
        retrieved: chrono::Utc::now().format("%Y-%m-%d").to_string(),
    };
    let (table, report) = prices::import_litellm(&json, &wanted, &current, source, &providers)?;

    for (id, price) in &report.added {
        println!("added    {id}: {}", price.describe());
    }
    for (id, old, new) in &report.changed {
        println!("changed  {id}: {} -> {}", old.describe(), new.describe());
    }
    for id in &report.kept {
        println!("kept     {id}: not in the file, price unchanged");
    }
    println!(
        "{} added, {} changed, {} unchanged, {} kept, {} without a price in the table",
        report.added.len(),
        report.changed.len(),
        report.unchanged,
        report.kept.len(),
        report.missing.len()
    );
    let mut by_provider: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &report.models {
        *by_provider
            .entry(id.split_once('/').map_or(id.as_str(), |(p, _)| p))
            .or_default() += 1;
    }
    let counts: Vec<String> = by_provider.iter().map(|(p, n)| format!("{p} {n}")).collect();
    println!(
        "new from the file: {} ({}); retired before {}, left out: {}",
        report.models.len(),
        counts.join(", "),
        table.source.retrieved,
        report.deprecated
    );
    if args.dry_run {
        println!("dry run: {} not written", out.display());
        return Ok(());
    }
    write(&out, &table.to_toml())?;
    println!(
        "wrote {} ({} models priced); pricing snapshots are unchanged: a gateway using it takes the new prices on its next start or SIGHUP",
        out.display(),
        table.models.len()
    );
    Ok(())
}

/// Writes through a temporary file, so a gateway never reads half a table.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    let partial = path.with_extension("toml.partial");
    std::fs::write(&partial, text).with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))
}
