//! Hosted actors: the compiled form (`ir`), its canonical bytes and content
//! id (`canonical`). An actor is authored in YAML, compiled to an [`ir::Ir`]
//! with every reference pinned, and identified by the SHA-1 of the RFC 8785
//! canonical JSON of that IR.

pub mod canonical;
pub mod compile;
pub mod ir;
pub mod provenance;
pub mod runtime;

pub use canonical::{ActorId, CanonicalError, actor_id, canonical_bytes};
pub use ir::Ir;
