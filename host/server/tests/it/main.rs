//! The server's integration tests, linked into one binary: each module starts
//! the real `tollgate` binary (or opens the databases) on its own ports and
//! data directory, so they run side by side. One binary instead of one per
//! file keeps linking — which pulls in wasmtime each time — to once.

mod actors;
mod actors_cli;
mod actors_limits;
mod audit;
mod billing;
mod breakers;
mod budgets;
mod caching;
mod catalog;
mod cluster;
mod common;
mod components;
mod connection_limits;
mod console;
mod control_plane;
mod data_plane;
mod egress;
mod endpoints;
mod errors;
mod fallback;
mod guardrails;
mod ingress;
mod journal;
mod keys_and_abuse;
mod ledger;
mod mcp_authorization;
mod mcp_catalog;
mod mcp_elicitation;
mod mcp_policy;
mod mcp_prices;
mod mcp_remote;
mod mcp_sampling;
mod mcp_servers_cli;
mod mcp_sessions;
mod mcp_templates;
mod metering;
mod metering_feed;
mod metering_rotation;
mod models;
mod outage;
mod payments;
mod registry;
mod responses_upstream;
mod retention;
mod routing;
mod sandbox;
mod signing;
mod tenancy;
mod tidy;
mod truncation;
