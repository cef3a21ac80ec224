//! A loaded skill: its pre-linked component, the description it gave when
//! loaded, and runs, each in a fresh store with the caller's model and tool
//! capabilities.

use std::sync::Arc;

use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::CallContext;
use crate::bindings::skill::exports::tollgate::skill::runner::SkillError;
use crate::bindings::skill::{Skill as SkillWorld, SkillPre};
use crate::grants::Grants;
use crate::state::{CallState, Capabilities, Invocation, describe_fault, new_store};
use crate::{CallError, ComponentFault, ComponentHost};

/// What a skill says about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillSpec {
    pub name: String,
    pub description: String,
    pub instructions: String,
    pub input_schema: Value,
    pub output_schema: Value,
}

pub struct Skill {
    name: Arc<str>,
    host: ComponentHost,
    pre: SkillPre<CallState>,
    spec: SkillSpec,
}

impl Skill {
    /// Compiles (or takes from the cache) `bytes`, links the skill world's
    /// host interfaces, and asks the component to describe itself.
    /// Blocking: call it off the async workers.
    pub(crate) fn load(host: &ComponentHost, name: &str, bytes: &[u8]) -> anyhow::Result<Self> {
        let component = host.compile(bytes)?;
        let mut linker = Linker::new(host.engine());
        SkillWorld::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        linker.define_unknown_imports_as_traps(&component)?;
        let pre = SkillPre::new(linker.instantiate_pre(&component)?)
            .map_err(|e| anyhow::anyhow!("not a tollgate:skill/skill@0.1.0 component: {e}"))?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("skills are loaded inside the gateway's runtime"))?;
        let invocation = Invocation {
            request_id: "load".into(),
            workspace: String::new(),
            install: name.into(),
            depth: 0,
            logs: None,
            progress: None,
            elicit: None,
        };
        let state = host.call_state(invocation, Arc::default(), Capabilities::default(), runtime);
        let mut store = new_store(host.engine(), state);
        let described = pre
            .instantiate(&mut store)
            .and_then(|bindings| bindings.tollgate_skill_runner().call_describe(&mut store))
            .map_err(|error| anyhow::anyhow!("describe {}", describe_fault(&store, &error)))?;
        let schema = |what: &str, text: &str| -> anyhow::Result<Value> {
            serde_json::from_str(text).map_err(|e| anyhow::anyhow!("the {what} schema is not JSON: {e}"))
        };
        let spec = SkillSpec {
            input_schema: schema("input", &described.input_schema)?,
            output_schema: schema("output", &described.output_schema)?,
            name: described.name,
            description: described.description,
            instructions: described.instructions,
        };
        Ok(Self {
            name: Arc::from(name),
            host: host.clone(),
            pre,
            spec,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn spec(&self) -> &SkillSpec {
        &self.spec
    }

    /// Runs the skill on `input` (a JSON object) in a fresh store, on a
    /// blocking thread, with the caller's capabilities.
    pub async fn run(
        self: &Arc<Self>,
        invocation: Invocation,
        grants: Arc<Grants>,
        capabilities: Capabilities,
        input: String,
    ) -> Result<Value, CallError> {
        let this = self.clone();
        let span = tracing::Span::current();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            this.run_blocking(runtime, invocation, grants, capabilities, &input)
        })
        .await
        .unwrap_or_else(|e| Err(self.fault(format!("its run was lost: {e}"))))
    }

    fn run_blocking(
        &self,
        runtime: tokio::runtime::Handle,
        invocation: Invocation,
        grants: Arc<Grants>,
        capabilities: Capabilities,
        input: &str,
    ) -> Result<Value, CallError> {
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
            .and_then(|bindings| bindings.tollgate_skill_runner().call_run(&mut store, &context, input))
            .map_err(|error| self.fault(describe_fault(&store, &error)))?;
        let output = answer.map_err(CallError::Skill)?;
        let cap = self.host.limits().max_output_bytes;
        if output.len() > cap {
            return Err(self.fault(format!(
                "answered {} bytes, more than the {cap}-byte limit",
                output.len()
            )));
        }
        serde_json::from_str(&output).map_err(|e| self.fault(format!("answered output that is not JSON: {e}")))
    }

    fn fault(&self, reason: String) -> CallError {
        CallError::Fault(ComponentFault {
            component: self.name.clone(),
            reason,
        })
    }
}

/// A skill's failure as a sentence (the generated `Display` is `Debug`'s).
pub fn describe_skill_error(error: &SkillError) -> String {
    match error {
        SkillError::InvalidInput(message) | SkillError::Failed(message) => message.clone(),
        SkillError::Model(error) => format!(
            "a model call failed ({} {}): {}",
            error.status, error.code, error.message
        ),
    }
}
