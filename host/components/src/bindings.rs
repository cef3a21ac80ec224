//! Host bindings for the component worlds: tool servers at 0.1.0 to 0.4.0,
//! skills and guardrails. The other worlds reuse the 0.1.0 tool-server
//! world's (and the skill's `models`) generated host interfaces (`with`), so
//! each host capability is implemented once for [`CallState`](crate::state::CallState).
//! Content of the newest tool world is the host's one shape ([`Content`]);
//! 0.1.0's converts into it (`content.rs`).

pub mod tool_server {
    wasmtime::component::bindgen!({
        path: ["../../wit/host/0.1.0", "../../wit/tool/0.1.0"],
        world: "tollgate:tool/tool-server@0.1.0",
        additional_derives: [PartialEq, Eq],
    });
}

/// `tollgate:tool@0.2.0`: 0.1.0's host interfaces, plus `progress`, richer
/// content, prompts, resources and completion.
pub mod tool_server_v2 {
    wasmtime::component::bindgen!({
        path: ["../../wit/host/0.1.0", "../../wit/tool/0.2.0"],
        world: "tollgate:tool/tool-server@0.2.0",
        additional_derives: [PartialEq],
        with: {
            "tollgate:host/types@0.1.0": crate::bindings::tool_server::tollgate::host::types,
            "tollgate:host/config@0.1.0": crate::bindings::tool_server::tollgate::host::config,
            "tollgate:host/log@0.1.0": crate::bindings::tool_server::tollgate::host::log,
            "tollgate:host/http@0.1.0": crate::bindings::tool_server::tollgate::host::http,
        },
    });
}

/// `tollgate:tool@0.3.0`: 0.2.0 plus the `elicitation` import. Its `types`
/// are 0.2.0's Rust types; its `progress` is linked under its own name (the
/// linker matches imports by name and version) to the same host code; its
/// exports' records have 0.2.0's shapes and convert into them
/// (`tool_server/v3.rs`).
pub mod tool_server_v3 {
    wasmtime::component::bindgen!({
        path: ["../../wit/host/0.1.0", "../../wit/tool/0.3.0"],
        world: "tollgate:tool/tool-server@0.3.0",
        additional_derives: [PartialEq],
        with: {
            "tollgate:host/types@0.1.0": crate::bindings::tool_server::tollgate::host::types,
            "tollgate:host/config@0.1.0": crate::bindings::tool_server::tollgate::host::config,
            "tollgate:host/log@0.1.0": crate::bindings::tool_server::tollgate::host::log,
            "tollgate:host/http@0.1.0": crate::bindings::tool_server::tollgate::host::http,
            "tollgate:tool/types@0.3.0": crate::bindings::tool_server_v2::tollgate::tool::types,
        },
    });
}

/// `tollgate:tool@0.4.0`: 0.3.0 plus the host's `models` import, linked to
/// the skill world's `models` (the same interface, `tollgate:host/models@0.1.0`,
/// implemented once). Like 0.3.0, its `types` are 0.2.0's Rust types, and its
/// `progress` and `elicitation` are linked under their own names to the same
/// host code (`tool_server/v4.rs`).
pub mod tool_server_v4 {
    wasmtime::component::bindgen!({
        path: ["../../wit/host/0.1.0", "../../wit/tool/0.4.0"],
        world: "tollgate:tool/tool-server@0.4.0",
        additional_derives: [PartialEq],
        with: {
            "tollgate:host/types@0.1.0": crate::bindings::tool_server::tollgate::host::types,
            "tollgate:host/config@0.1.0": crate::bindings::tool_server::tollgate::host::config,
            "tollgate:host/log@0.1.0": crate::bindings::tool_server::tollgate::host::log,
            "tollgate:host/http@0.1.0": crate::bindings::tool_server::tollgate::host::http,
            "tollgate:host/models@0.1.0": crate::bindings::skill::tollgate::host::models,
            "tollgate:tool/types@0.4.0": crate::bindings::tool_server_v2::tollgate::tool::types,
        },
    });
}

pub mod skill {
    wasmtime::component::bindgen!({
        path: ["../../wit/host/0.1.0", "../../wit/skill/0.1.0"],
        world: "tollgate:skill/skill@0.1.0",
        additional_derives: [PartialEq, Eq],
        with: {
            "tollgate:host/types@0.1.0": crate::bindings::tool_server::tollgate::host::types,
            "tollgate:host/config@0.1.0": crate::bindings::tool_server::tollgate::host::config,
            "tollgate:host/log@0.1.0": crate::bindings::tool_server::tollgate::host::log,
        },
    });
}

pub mod guardrail {
    wasmtime::component::bindgen!({
        path: ["../../wit/host/0.1.0", "../../wit/guardrail/0.1.0"],
        world: "tollgate:guardrail/guardrail@0.1.0",
        additional_derives: [PartialEq, Eq],
        with: {
            "tollgate:host/types@0.1.0": crate::bindings::tool_server::tollgate::host::types,
            "tollgate:host/config@0.1.0": crate::bindings::tool_server::tollgate::host::config,
            "tollgate:host/log@0.1.0": crate::bindings::tool_server::tollgate::host::log,
            "tollgate:host/http@0.1.0": crate::bindings::tool_server::tollgate::host::http,
            "tollgate:host/models@0.1.0": crate::bindings::skill::tollgate::host::models,
        },
    });
}

pub use skill::tollgate::host::models::ModelError;
pub use tool_server::tollgate::host::types::{CallContext, Content as ContentV1, ToolError};
pub use tool_server_v2::exports::tollgate::tool::completion::Reference;
pub use tool_server_v2::exports::tollgate::tool::prompts::{
    Argument as PromptArgument, Message as PromptMessage, Prompt, PromptMessages, Role,
};
pub use tool_server_v2::exports::tollgate::tool::resources::{Resource, ResourceTemplate};
pub use tool_server_v2::tollgate::tool::types::{Content, Media, ResourceBody, ResourceContents};
pub use tool_server_v3::tollgate::tool::elicitation::{Action as ElicitAction, Answer as Elicited, ElicitError};
