//! The MCP conformance fixture (`tests/python/fixtures/mcp_conformance_tools.rs`)
//! as a test-only tool server on tool WIT 0.3.0, built beside the built-in
//! components, so the gateway's own MCP tests and the conformance suite use
//! the same tools, prompts and resources. The fixture exports itself with
//! `tollgate_plugin_sdk::export_tool_server!(Fixture)`, whose generated
//! exports are `unsafe`, so this crate cannot forbid unsafe code.

#[path = "../../../python/fixtures/mcp_conformance_tools.rs"]
pub mod fixture;
