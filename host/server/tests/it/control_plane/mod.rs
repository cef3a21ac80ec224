//! The A2A control plane against the real binary: the contract between the
//! SendMessage path and the extension methods, the permission matrix, key
//! lifecycle on the data plane, and malformed JSON-RPC.

mod cli;
#[cfg(feature = "a2a-conformance")]
mod conformance;
mod contract;
pub mod helpers;
mod permissions;
mod protocol;
