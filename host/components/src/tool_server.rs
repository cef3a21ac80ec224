//! A loaded tool server: its pre-linked component, the tools it listed when
//! loaded (checked once, served from memory), and calls, each in a fresh store.

use std::sync::Arc;

use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::tool_server::{ToolServer as ToolServerWorld, ToolServerPre};
use crate::bindings::{CallContext, Content};
use crate::grants::Grants;
use crate::state::{CallState, Capabilities, Invocation, describe_fault, new_store};
use crate::{CallError, ComponentFault, ComponentHost};

/// Most tools one server may offer.
const MAX_TOOLS: usize = 128;

/// One tool, as the server described it when loaded.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Annotations,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

pub struct ToolServer {
    name: Arc<str>,
    host: ComponentHost,
    pre: ToolServerPre<CallState>,
    tools: Vec<ToolSpec>,
}

impl ToolServer {
    /// Compiles (or takes from the cache) `bytes`, links the tool-server
    /// world's host interfaces, and asks the component for its tools.
    /// Blocking: call it off the async workers.
    pub(crate) fn load(host: &ComponentHost, name: &str, bytes: &[u8]) -> anyhow::Result<Self> {
        let component = host.compile(bytes)?;
        let mut linker = Linker::new(host.engine());
        ToolServerWorld::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        // Anything else it imports (WASI, which Rust's std declares) traps.
        linker.define_unknown_imports_as_traps(&component)?;
        let pre = ToolServerPre::new(linker.instantiate_pre(&component)?)
            .map_err(|e| anyhow::anyhow!("not a tollgate:tool/tool-server@0.1.0 component: {e}"))?;
        let mut server = Self {
            name: Arc::from(name),
            host: host.clone(),
            pre,
            tools: Vec::new(),
        };
        server.tools = server.list()?;
        Ok(server)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// Calls tool `name` with `arguments` (a JSON object) in a fresh store, on
    /// a blocking thread. A failure the component reports is
    /// [`CallError::Tool`]; a crash, a limit or a bad answer is a fault.
    pub async fn call(
        self: &Arc<Self>,
        invocation: Invocation,
        grants: Arc<Grants>,
        name: &str,
        arguments: String,
    ) -> Result<Vec<Content>, CallError> {
        let this = self.clone();
        let runtime = tokio::runtime::Handle::current();
        // A call from an async handler (depth 0) on the multi-threaded runtime
        // runs in place, its worker's other tasks handed to another thread for
        // the while: no hop to the blocking pool, which halves a pure call's
        // cost. A nested call (a skill's tool call) already runs on a thread
        // blocked in a host call, so it goes to the blocking pool.
        let in_place = invocation.depth == 0 && runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
        if in_place {
            return tokio::task::block_in_place(|| self.call_blocking(runtime, invocation, grants, name, &arguments));
        }
        let name = name.to_string();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            this.call_blocking(runtime, invocation, grants, &name, &arguments)
        })
        .await
        .unwrap_or_else(|e| Err(self.fault(format!("its call was lost: {e}"))))
    }

    fn call_blocking(
        &self,
        runtime: tokio::runtime::Handle,
        invocation: Invocation,
        grants: Arc<Grants>,
        name: &str,
        arguments: &str,
    ) -> Result<Vec<Content>, CallError> {
        let context = CallContext {
            request_id: invocation.request_id.clone(),
            workspace: invocation.workspace.clone(),
            install: invocation.install.clone(),
        };
        let state = self
            .host
            .call_state(invocation, grants, Capabilities::default(), runtime);
        let mut store = new_store(self.host.engine(), state);
        let answer = self
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| {
                bindings
                    .tollgate_tool_tools()
                    .call_call_tool(&mut store, &context, name, arguments)
            })
            .map_err(|error| self.fault(describe_fault(&store, &error)))?;
        let content = answer.map_err(CallError::Tool)?;
        self.check_output(&content)?;
        Ok(content)
    }

    /// Content must fit the output cap, and JSON parts must be JSON.
    fn check_output(&self, content: &[Content]) -> Result<(), CallError> {
        let mut size = 0usize;
        for part in content {
            match part {
                Content::Text(text) => size += text.len(),
                Content::Json(json) => {
                    size += json.len();
                    serde_json::from_str::<serde::de::IgnoredAny>(json)
                        .map_err(|e| self.fault(format!("answered a JSON part that is not JSON: {e}")))?;
                }
            }
        }
        let cap = self.host.limits().max_output_bytes;
        if size > cap {
            return Err(self.fault(format!("answered {size} bytes, more than the {cap}-byte limit")));
        }
        Ok(())
    }

    /// `list-tools`, once, checked: names unique and well formed, schemas JSON.
    fn list(&self) -> anyhow::Result<Vec<ToolSpec>> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("tool servers are loaded inside the gateway's runtime"))?;
        let invocation = Invocation {
            request_id: "load".into(),
            workspace: String::new(),
            install: self.name.to_string(),
            depth: 0,
            logs: None,
        };
        let state = self
            .host
            .call_state(invocation, Arc::default(), Capabilities::default(), runtime);
        let mut store = new_store(self.host.engine(), state);
        let listed = self
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.tollgate_tool_tools().call_list_tools(&mut store))
            .map_err(|error| anyhow::anyhow!("list-tools {}", describe_fault(&store, &error)))?;
        anyhow::ensure!(
            listed.len() <= MAX_TOOLS,
            "it lists {} tools; at most {MAX_TOOLS} are allowed",
            listed.len()
        );
        let mut tools: Vec<ToolSpec> = Vec::with_capacity(listed.len());
        for tool in listed {
            anyhow::ensure!(
                valid_tool_name(&tool.name),
                "tool name '{}' must be 1-64 letters, digits, '_' or '-'",
                tool.name
            );
            anyhow::ensure!(
                tools.iter().all(|t| t.name != tool.name),
                "tool '{}' is listed twice",
                tool.name
            );
            let input_schema: Value = serde_json::from_str(&tool.input_schema)
                .map_err(|e| anyhow::anyhow!("tool '{}': the input schema is not JSON: {e}", tool.name))?;
            anyhow::ensure!(
                input_schema.is_object(),
                "tool '{}': the input schema must be a JSON object",
                tool.name
            );
            let output_schema = match &tool.output_schema {
                Some(text) => Some(
                    serde_json::from_str::<Value>(text)
                        .map_err(|e| anyhow::anyhow!("tool '{}': the output schema is not JSON: {e}", tool.name))?,
                ),
                None => None,
            };
            tools.push(ToolSpec {
                name: tool.name,
                description: tool.description,
                input_schema,
                output_schema,
                annotations: Annotations {
                    read_only: tool.annotations.read_only,
                    destructive: tool.annotations.destructive,
                    idempotent: tool.annotations.idempotent,
                    open_world: tool.annotations.open_world,
                },
            });
        }
        Ok(tools)
    }

    fn fault(&self, reason: String) -> CallError {
        CallError::Fault(ComponentFault {
            component: self.name.clone(),
            reason,
        })
    }
}

/// MCP clients accept `[A-Za-z0-9_-]{1,64}`; the host prefixes the install.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
