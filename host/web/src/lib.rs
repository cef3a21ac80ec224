//! Tollgate's web kit: what every HTTP concern of the gateway shares, and
//! nothing of any one concern.
//! - [`error`]: `ApiError`, the one error shape every route answers with, and
//!   the [`error::Failure`] that decisions read;
//! - [`rate_limit`]: per-key and per-IP limits, and the client IP behind
//!   trusted proxies;
//! - [`server`]: request ids, the layers around the routes, and serving (the
//!   listener, connection deadlines, admission, health).

#![forbid(unsafe_code)]

pub mod error;
pub mod rate_limit;
pub mod server;
