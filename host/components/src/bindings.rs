//! Host bindings for the three component worlds. The skill and guardrail
//! worlds reuse the tool-server world's (and the skill's `models`) generated
//! host interfaces (`with`), so each host capability is implemented once for [`CallState`](crate::state::CallState).

pub mod tool_server {
    wasmtime::component::bindgen!({
        path: ["../../wit/host/0.1.0", "../../wit/tool/0.1.0"],
        world: "tollgate:tool/tool-server@0.1.0",
        additional_derives: [PartialEq, Eq],
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
pub use tool_server::tollgate::host::types::{CallContext, Content, ToolError};
