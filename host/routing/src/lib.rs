//! Routing: which upstream serves a model, at what price, and whether now.
//!
//! - `catalog`: the built-in provider catalog (`catalog/*.toml`, embedded)
//!   merged with the configured providers into `ModelRoute`s;
//! - `egress`: each provider's allowed origins and declared credential slot;
//! - `aws`: the SigV4 region and credential rules a provider is resolved with;
//! - `health`: circuit breakers per `provider/model`;
//! - `traffic`: live latency, throughput, load and rpm/tpm windows per route;
//! - `groups`, `preferences`, `affinity` and `select`: which candidates a
//!   request gets and in what order (docs/routing.md);
//! - `prices`: the sourced model table (`catalog/prices/prices.toml`), whose
//!   models the catalog serves besides its own, and its import;
//! - `snapshots`: content-addressed pricing snapshots (table `pricing_snapshots`).
//!
//! It depends only on `tollgate-core`. It sends nothing: the data plane does.
#![forbid(unsafe_code)]

pub mod affinity;
pub mod aws;
pub mod catalog;
pub mod config;
pub mod egress;
pub mod groups;
pub mod health;
pub mod preferences;
pub mod prices;
pub mod select;
pub mod snapshots;
pub mod traffic;

pub use catalog::{Catalog, ModelConfig, ModelRoute, Provider, ProviderConfig};
