//! The parsers that read untrusted bytes, re-exported for the fuzz targets in
//! `fuzz/` (cargo-fuzz, run outside CI; see fuzz/README.md). Not an API: it is
//! hidden from the docs and changes with the targets. Each item stays where it
//! lives; this module only names it. The JSON-RPC envelope's target imports
//! the control plane's public parser itself.

pub use crate::chunk::{ChunkError, write_chunk};
pub use crate::envelope::{ChatEnvelope, MAX_CANDIDATES};
pub use crate::framing::{FrameError, Framing, frame_chunks};
pub use tollgate_core::money::{MoneyError, Nanos, PicoPerToken, Price, TokenCounts};
pub use tollgate_plugin_host::Event;
