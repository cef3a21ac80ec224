//! Who is calling, and on whose behalf: the identity concern of the gateway.
//! - [`auth`]: API keys and the principals they stand for, roles and
//!   permissions, the `Caller` extractor, console sessions and sign-in (an API
//!   key or OIDC);
//! - [`accounts`]: accounts, users, workspaces, memberships and keys, the
//!   owner of their tables.
//!
//! Sign-in creates accounts and accounts mint keys that auth resolves, so the
//! two live in one crate; nothing here knows billing, the data plane or the
//! control plane.

#![forbid(unsafe_code)]

pub mod accounts;
pub mod auth;
