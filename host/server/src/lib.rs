//! Tollgate: a metered AI gateway. This crate is the server and the CLI: the
//! HTTP data plane, the A2A control plane, the registry API, accounts and keys,
//! and the configuration that combines every concern's own. The concerns below
//! it are crates of their own (docs/ARCHITECTURE.md): `tollgate-core`,
//! `tollgate-routing`, `tollgate-plugin-host`, `tollgate-components`,
//! `tollgate-actors`, `tollgate-ledger`, `tollgate-metering` and
//! `tollgate-telemetry`.

pub mod accounts;
pub mod actors;
pub mod app;
pub mod auth;
pub mod billing;
pub mod cli;
pub mod components;
pub mod config;
pub mod console;
pub mod control;
pub mod data_plane;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod packages;
pub mod rate_limit;
pub mod retention;
pub mod server;
