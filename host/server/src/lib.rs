//! Tollgate: a metered AI gateway. This crate is the binary: `main`, the CLI,
//! the configuration that layers every concern's own section, the wiring that
//! starts the concerns and merges their routes (`app.rs`), the console's
//! files and the ledger's retention. Every concern is a crate of its own,
//! layered one way (docs/ARCHITECTURE.md): the web kit, identity, billing,
//! the gateway (data plane), packages, tools, hosted actors and the control
//! plane, over core, routing, the plugin host, the ledger, metering and
//! telemetry.

// One test sets environment variables (unsafe since edition 2024); nothing else is.
#![deny(unsafe_code)]

pub mod app;
pub mod cli;
pub mod config;
pub mod console;
pub mod retention;
