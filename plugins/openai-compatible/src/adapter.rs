//! The OpenAI-compatible adapter: the SDK's `openai::Compatible` protocol, as
//! it is (the upstream already speaks chat completions).
//!
//! This file only refers to `tollgate_plugin_sdk`, never to `crate::`, so a
//! wrapping adapter can still compile it into its own component with
//! `#[path = ".../plugins/openai-compatible/src/adapter.rs"] mod ...;` (see
//! `tests/plugins/misbehaving`). New wrappers need not: they use
//! `tollgate_plugin_sdk::openai::Compatible` directly, as
//! `plugins/azure-openai` does.

use tollgate_plugin_sdk::{Exchange, openai};

/// One exchange with an OpenAI-compatible upstream.
pub type OpenAiCompatible = Exchange<openai::Compatible>;
