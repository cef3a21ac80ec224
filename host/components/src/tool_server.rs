//! A loaded tool server: its pre-linked component, by the tool WIT version
//! it exports (0.4.0, 0.3.0, 0.2.0 or 0.1.0, told apart by its exports, like
//! provider adapters are), the tools it listed when loaded (checked once, served from
//! memory), and calls, each in a fresh store. A 0.1.0 server's content
//! converts into 0.2.0's, and 0.3.0's and 0.4.0's records into 0.2.0's ([`v3`],
//! [`v4`]), so callers see one shape. Only a 0.4.0 server imports `models`,
//! so only its calls are given the caller's model access. Prompts, resources and
//! completion (0.2.0) live in [`catalog`].

use std::sync::Arc;

use serde_json::Value;
use wasmtime::Store;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::tool_server::{ToolServer as V1World, ToolServerPre as V1Pre};
use crate::bindings::tool_server_v2::{ToolServer as V2World, ToolServerPre as V2Pre};
use crate::bindings::tool_server_v3::{ToolServer as V3World, ToolServerPre as V3Pre};
use crate::bindings::tool_server_v4::{ToolServer as V4World, ToolServerPre as V4Pre};
use crate::bindings::{CallContext, Content, ToolError};
use crate::grants::Grants;
use crate::state::{CallState, Capabilities, Invocation, ModelAccess, describe_fault, new_store};
use crate::{CallError, ComponentFault, ComponentHost, content};

mod catalog;
mod v3;
mod v4;

pub use catalog::{Catalog, MAX_COMPLETIONS};

/// Most tools one server may offer.
const MAX_TOOLS: usize = 128;

/// The exports that mark tool servers built against tool WIT 0.2.0, 0.3.0 and 0.4.0.
const V2_EXPORT: &str = "tollgate:tool/tools@0.2.0";
const V3_EXPORT: &str = "tollgate:tool/tools@0.3.0";
const V4_EXPORT: &str = "tollgate:tool/tools@0.4.0";

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

/// The pre-linked component, by the WIT version it exports.
enum Pre {
    V1(V1Pre<CallState>),
    V2(V2Pre<CallState>),
    V3(V3Pre<CallState>),
    V4(V4Pre<CallState>),
}

/// An instance's bindings, by WIT version.
enum Bindings {
    V1(V1World),
    V2(V2World),
    V3(V3World),
    V4(V4World),
}

impl Pre {
    fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Bindings> {
        match self {
            Pre::V1(pre) => pre.instantiate(store).map(Bindings::V1),
            Pre::V2(pre) => pre.instantiate(store).map(Bindings::V2),
            Pre::V3(pre) => pre.instantiate(store).map(Bindings::V3),
            Pre::V4(pre) => pre.instantiate(store).map(Bindings::V4),
        }
    }
}

pub struct ToolServer {
    name: Arc<str>,
    host: ComponentHost,
    pre: Pre,
    tools: Vec<ToolSpec>,
    catalog: Catalog,
}

impl ToolServer {
    /// Compiles (or takes from the cache) `bytes`, links the host interfaces
    /// of the tool-server world it exports (0.1.0 to 0.4.0), and asks the
    /// component for its tools (and, at 0.2.0, its prompts and resources).
    /// Blocking: call it off the async workers.
    pub(crate) fn load(host: &ComponentHost, name: &str, bytes: &[u8]) -> anyhow::Result<Self> {
        let component = host.compile(bytes)?;
        let mut linker = Linker::new(host.engine());
        let exports = |name| component.component_type().get_export(host.engine(), name).is_some();
        let pre = if exports(V4_EXPORT) {
            V4World::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
            linker.define_unknown_imports_as_traps(&component)?;
            Pre::V4(
                V4Pre::new(linker.instantiate_pre(&component)?)
                    .map_err(|e| anyhow::anyhow!("not a tollgate:tool/tool-server@0.4.0 component: {e}"))?,
            )
        } else if exports(V3_EXPORT) {
            V3World::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
            // Anything else it imports (WASI, which Rust's std declares) traps.
            linker.define_unknown_imports_as_traps(&component)?;
            Pre::V3(
                V3Pre::new(linker.instantiate_pre(&component)?)
                    .map_err(|e| anyhow::anyhow!("not a tollgate:tool/tool-server@0.3.0 component: {e}"))?,
            )
        } else if exports(V2_EXPORT) {
            V2World::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
            linker.define_unknown_imports_as_traps(&component)?;
            Pre::V2(
                V2Pre::new(linker.instantiate_pre(&component)?)
                    .map_err(|e| anyhow::anyhow!("not a tollgate:tool/tool-server@0.2.0 component: {e}"))?,
            )
        } else {
            V1World::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
            linker.define_unknown_imports_as_traps(&component)?;
            Pre::V1(
                V1Pre::new(linker.instantiate_pre(&component)?)
                    .map_err(|e| anyhow::anyhow!("not a tollgate:tool/tool-server@0.1.0 component: {e}"))?,
            )
        };
        let mut server = Self {
            name: Arc::from(name),
            host: host.clone(),
            pre,
            tools: Vec::new(),
            catalog: Catalog::default(),
        };
        server.list()?;
        Ok(server)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool WIT version the component exports: `0.1.0` to `0.4.0`.
    pub fn wit_version(&self) -> &'static str {
        match self.pre {
            Pre::V1(_) => "0.1.0",
            Pre::V2(_) => "0.2.0",
            Pre::V3(_) => "0.3.0",
            Pre::V4(_) => "0.4.0",
        }
    }

    /// Whether its world imports `models` (tool WIT 0.4.0): only then can a
    /// call use the model access it is given.
    pub fn imports_models(&self) -> bool {
        matches!(self.pre, Pre::V4(_))
    }

    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// Calls tool `name` with `arguments` (a JSON object) in a fresh store, on
    /// a blocking thread. `models` is the caller's model access, used only
    /// by a server that imports it (0.4.0); a tool server never gets `tools`.
    /// A failure the component reports is [`CallError::Tool`]; a crash, a
    /// limit or a bad answer is a fault.
    pub async fn call(
        self: &Arc<Self>,
        invocation: Invocation,
        grants: Arc<Grants>,
        models: Option<Arc<dyn ModelAccess>>,
        name: &str,
        arguments: String,
    ) -> Result<Vec<Content>, CallError> {
        let name = name.to_string();
        let capabilities = Capabilities {
            models: models.filter(|_| self.imports_models()),
            tools: None,
        };
        self.off_thread(invocation.depth, move |this, runtime| {
            let content =
                this.run_with(
                    runtime,
                    invocation,
                    grants,
                    capabilities,
                    |store, bindings, context| match bindings {
                        Bindings::V1(b) => b
                            .tollgate_tool_tools()
                            .call_call_tool(store, context, &name, &arguments)
                            .map(|answer| answer.map(|parts| parts.into_iter().map(content::from_v1).collect())),
                        Bindings::V2(b) => b
                            .tollgate_tool_tools()
                            .call_call_tool(store, context, &name, &arguments),
                        Bindings::V3(b) => b
                            .tollgate_tool_tools()
                            .call_call_tool(store, context, &name, &arguments),
                        Bindings::V4(b) => b
                            .tollgate_tool_tools()
                            .call_call_tool(store, context, &name, &arguments),
                    },
                )?;
            this.check_output(&content, 0)?;
            Ok(content)
        })
        .await
    }

    /// Runs `job` on a thread that may block. A call from an async handler
    /// (depth 0) on the multi-threaded runtime runs in place, its worker's
    /// other tasks handed to another thread for the while: no hop to the
    /// blocking pool, which halves a pure call's cost. A nested call (a
    /// skill's tool call) already runs on a thread blocked in a host call, so
    /// it goes to the blocking pool.
    async fn off_thread<T, F>(self: &Arc<Self>, depth: u32, job: F) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: FnOnce(&Self, tokio::runtime::Handle) -> Result<T, CallError> + Send + 'static,
    {
        let runtime = tokio::runtime::Handle::current();
        let in_place = depth == 0 && runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
        if in_place {
            return tokio::task::block_in_place(|| job(self, runtime));
        }
        let this = self.clone();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            job(&this, runtime)
        })
        .await
        .unwrap_or_else(|e| Err(self.fault(format!("its call was lost: {e}"))))
    }

    /// One export call in a fresh instance, in a fresh store bound to
    /// `invocation`, on this thread, with no capability lent.
    fn run<T>(
        &self,
        runtime: tokio::runtime::Handle,
        invocation: Invocation,
        grants: Arc<Grants>,
        job: impl FnOnce(&mut Store<CallState>, &Bindings, &CallContext) -> wasmtime::Result<Result<T, ToolError>>,
    ) -> Result<T, CallError> {
        self.run_with(runtime, invocation, grants, Capabilities::default(), job)
    }

    /// [`run`](Self::run), lending the call `capabilities`.
    fn run_with<T>(
        &self,
        runtime: tokio::runtime::Handle,
        invocation: Invocation,
        grants: Arc<Grants>,
        capabilities: Capabilities,
        job: impl FnOnce(&mut Store<CallState>, &Bindings, &CallContext) -> wasmtime::Result<Result<T, ToolError>>,
    ) -> Result<T, CallError> {
        let context = CallContext {
            request_id: invocation.request_id.clone(),
            workspace: invocation.workspace.clone(),
            install: invocation.install.clone(),
        };
        let state = self.host.call_state(invocation, grants, capabilities, runtime);
        let mut store = new_store(self.host.engine(), state);
        let answer = self
            .pre
            .instantiate(&mut store)
            .and_then(|bindings| job(&mut store, &bindings, &context))
            .map_err(|error| self.fault(describe_fault(&store, &error)))?;
        answer.map_err(CallError::Tool)
    }

    /// Content must fit the output cap (with `extra` bytes already in the
    /// answer), and every part must pass its checks (JSON is JSON, …).
    fn check_output(&self, content: &[Content], extra: usize) -> Result<(), CallError> {
        let mut size = extra;
        for part in content {
            content::check(part).map_err(|reason| self.fault(reason))?;
            size += content::weight(part);
        }
        self.check_size(size)
    }

    fn check_size(&self, size: usize) -> Result<(), CallError> {
        let cap = self.host.limits().max_output_bytes;
        match size > cap {
            true => Err(self.fault(format!("answered {size} bytes, more than the {cap}-byte limit"))),
            false => Ok(()),
        }
    }

    /// Lists once, at load, in one instance: the tools (names unique and well
    /// formed, schemas JSON) and, at 0.2.0, the prompts and resources.
    fn list(&mut self) -> anyhow::Result<()> {
        // Each WIT version has its own generated `tool` type, with the same fields.
        macro_rules! tools_of {
            ($listed:expr) => {
                $listed
                    .into_iter()
                    .map(|t| {
                        let a = t.annotations;
                        let annotations = Annotations {
                            read_only: a.read_only,
                            destructive: a.destructive,
                            idempotent: a.idempotent,
                            open_world: a.open_world,
                        };
                        (
                            t.name,
                            t.description,
                            t.input_schema,
                            t.output_schema,
                            annotations,
                        )
                    })
                    .collect::<Vec<_>>()
            };
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("tool servers are loaded inside the gateway's runtime"))?;
        let invocation = Invocation {
            request_id: "load".into(),
            workspace: String::new(),
            install: self.name.to_string(),
            depth: 0,
            logs: None,
            progress: None,
            elicit: None,
        };
        let (listed, catalog) = self
            .run(runtime, invocation, Arc::default(), |store, bindings, _| {
                Ok(Ok(match bindings {
                    Bindings::V1(b) => (tools_of!(b.tollgate_tool_tools().call_list_tools(&mut *store)?), None),
                    Bindings::V2(b) => (
                        tools_of!(b.tollgate_tool_tools().call_list_tools(&mut *store)?),
                        Some(catalog::listed(store, b)?),
                    ),
                    Bindings::V3(b) => (
                        tools_of!(b.tollgate_tool_tools().call_list_tools(&mut *store)?),
                        Some(v3::listed(store, b)?),
                    ),
                    Bindings::V4(b) => (
                        tools_of!(b.tollgate_tool_tools().call_list_tools(&mut *store)?),
                        Some(v4::listed(store, b)?),
                    ),
                }))
            })
            .map_err(|e| anyhow::anyhow!("listing its tools: {e}"))?;
        anyhow::ensure!(
            listed.len() <= MAX_TOOLS,
            "it lists {} tools; at most {MAX_TOOLS} are allowed",
            listed.len()
        );
        let mut tools: Vec<ToolSpec> = Vec::with_capacity(listed.len());
        for (name, description, input_schema, output_schema, annotations) in listed {
            anyhow::ensure!(
                valid_tool_name(&name),
                "tool name '{name}' must be 1-64 letters, digits, '_' or '-'"
            );
            anyhow::ensure!(tools.iter().all(|t| t.name != name), "tool '{name}' is listed twice");
            let input_schema: Value = serde_json::from_str(&input_schema)
                .map_err(|e| anyhow::anyhow!("tool '{name}': the input schema is not JSON: {e}"))?;
            anyhow::ensure!(
                input_schema.is_object(),
                "tool '{name}': the input schema must be a JSON object"
            );
            let output_schema = match &output_schema {
                Some(text) => Some(
                    serde_json::from_str::<Value>(text)
                        .map_err(|e| anyhow::anyhow!("tool '{name}': the output schema is not JSON: {e}"))?,
                ),
                None => None,
            };
            tools.push(ToolSpec {
                name,
                description,
                input_schema,
                output_schema,
                annotations,
            });
        }
        self.tools = tools;
        if let Some(listed) = catalog {
            self.catalog = Catalog::checked(listed)?;
        }
        Ok(())
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
