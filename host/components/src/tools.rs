//! The `tools` capability: a skill calls tools of other installs in the
//! caller's workspace through [`ToolAccess`](crate::ToolAccess), which the
//! server binds to the caller, one level deeper. Past the depth limit the
//! call is refused here, before the server sees it. The skill's world reads
//! content as 0.1.0 has it: an image, audio or resource part comes as its MCP
//! content object in a JSON part.

use crate::bindings::skill::tollgate::host::tools::Host;
use crate::bindings::{ContentV1, ToolError};
use crate::state::CallState;

impl Host for CallState {
    fn call(&mut self, tool: String, arguments: String) -> Result<Vec<ContentV1>, ToolError> {
        if self.invocation.depth >= self.limits.max_depth {
            return Err(ToolError {
                message: format!("tool calls may nest at most {} deep", self.limits.max_depth),
            });
        }
        let Some(tools) = self.capabilities.tools.clone() else {
            return Err(ToolError {
                message: "this component may not call tools".into(),
            });
        };
        self.block_on(self.remaining(), tools.call(tool, arguments))
            .map(|answer| answer.map(|parts| parts.into_iter().map(crate::content::to_v1).collect()))
            .unwrap_or_else(|| {
                Err(ToolError {
                    message: format!(
                        "the tool call did not finish within the component's {} ms",
                        self.limits.wall_ms
                    ),
                })
            })
    }
}
