//! `tollgate catalog import-prices FILE`: refresh the price table from a
//! LiteLLM-format price file (docs/pricing.md). It prices every model the
//! catalog (with this configuration's providers) lists, reports what changed,
//! and writes the table; pricing snapshots in the database are not touched (a
//! gateway takes the new table on its next start or SIGHUP, as a new snapshot).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};

use super::ConfigArgs;
use tollgate_routing::catalog::Catalog;
use tollgate_routing::prices::{self, PriceTable, Source, Wanted};

#[derive(Subcommand, Debug)]
pub enum CatalogCommand {
    /// Refresh the price table from a LiteLLM `model_prices_and_context_window.json`
    /// and report what changed. Models the file lacks keep their price.
    ImportPrices(ImportArgs),
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
    }
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
    let catalog = Catalog::build_priced(&config.providers, &|name| std::env::var(name).ok(), &current)?;
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
    let (table, report) = prices::import_litellm(&json, &wanted, &current, source)?;

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
    if args.dry_run {
        println!("dry run: {} not written", out.display());
        return Ok(());
    }
    write(&out, &table.to_toml())?;
    println!(
        "wrote {} ({} models priced); pricing snapshots are unchanged: a gateway using it takes the new prices on its next start or SIGHUP",
        out.display(),
        table.prices.len()
    );
    Ok(())
}

/// Writes through a temporary file, so a gateway never reads half a table.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    let partial = path.with_extension("toml.partial");
    std::fs::write(&partial, text).with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))
}
