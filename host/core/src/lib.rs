//! Tollgate's core: what every other crate may use and nothing else depends on.
//! Exact money (`money`), secrets that never print (`secret`), the database
//! handle with its migrations (`db`), what a cache does while that database
//! cannot be reached (`outage`), error text that names no secret
//! (`error_text`), and secrets sealed for storage (`sealed`). It knows no
//! provider, wallet, plugin or HTTP route.
#![forbid(unsafe_code)]

pub mod db;
pub mod error_text;
pub mod money;
pub mod outage;
pub mod sealed;
pub mod secret;
pub mod units;
