//! Tollgate: a metered AI gateway. See docs/ARCHITECTURE.md for the map.

pub mod accounts;
pub mod auth;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod control;
pub mod data_plane;
pub mod db;
pub mod error;
pub mod health;
pub mod ledger;
pub mod metering;
pub mod money;
pub mod packages;
pub mod plugins;
pub mod server;
pub mod snapshots;
pub mod telemetry;
