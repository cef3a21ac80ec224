//! The A2A control plane against the real binary: the contract between the
//! SendMessage path and the extension methods, the permission matrix, key
//! lifecycle on the data plane, and malformed JSON-RPC. The tests live in `control_plane/`.

mod common;

#[path = "control_plane/cli.rs"]
mod cli;
#[path = "control_plane/conformance.rs"]
#[cfg(feature = "a2a-conformance")]
mod conformance;
#[path = "control_plane/contract.rs"]
mod contract;
#[path = "control_plane/helpers.rs"]
mod helpers;
#[path = "control_plane/permissions.rs"]
mod permissions;
#[path = "control_plane/protocol.rs"]
mod protocol;
