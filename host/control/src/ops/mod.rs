//! The operations, one file per category. Each checks its params and rules,
//! then calls the API of the concern that owns the data (accounts, billing,
//! the ledger's views, packages, components, actors); none issues SQL. A
//! concern's error comes back typed and becomes an `OpError` by variant
//! (`control/error.rs`). `control/registry.rs` lists them with their access
//! rules, and checks the caller before any runs.

pub mod actors;
pub mod audit;
pub mod billing;
pub mod budgets;
pub mod components;
pub mod mcp_servers;
pub mod members;
pub mod packages;
pub mod payments;
pub mod scim;
pub mod tool_policy;
pub mod trust;
pub mod workspaces;
