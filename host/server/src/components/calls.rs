//! The tools a workspace offers, and calling one by name. Shared by the MCP
//! endpoint and by skills calling tools, so both see the same names and the
//! same rules: a tool server's tool is `<install>__<tool>`, a skill is
//! `<install>__run`; inside one install's scope the prefix is dropped.

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate_components::{CallError, Capabilities, Content, Invocation, ToolSpec};

use super::installs::{Active, Installs, Loaded};

/// Between the install name and the tool name.
pub const SEPARATOR: &str = "__";
/// The tool name a skill is offered under.
pub const SKILL_TOOL: &str = "run";

/// One tool as a client sees it.
pub struct Listed {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// MCP's `annotations` object (hints), when the component gave any.
    pub annotations: Option<Value>,
}

/// Where a call goes.
pub struct Target {
    pub install: Arc<Active>,
    pub tool: String,
}

/// The tools of `workspace_id` (only of install `only`, when given).
pub fn list(installs: &Installs, workspace_id: &str, only: Option<&str>) -> Vec<Listed> {
    let mut listed = Vec::new();
    for active in installs.in_workspace(workspace_id) {
        if only.is_some_and(|name| name != active.record.name) {
            continue;
        }
        let prefix = |tool: &str| match only {
            Some(_) => tool.to_string(),
            None => format!("{}{SEPARATOR}{tool}", active.record.name),
        };
        match &active.component {
            Loaded::Tool(server) => listed.extend(server.tools().iter().map(|tool| Listed {
                name: prefix(&tool.name),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
                output_schema: tool.output_schema.clone(),
                annotations: annotations(tool),
            })),
            Loaded::Skill(skill) => {
                let spec = skill.spec();
                let description = match spec.instructions.is_empty() {
                    true => spec.description.clone(),
                    false => format!("{}\n\n{}", spec.description, spec.instructions),
                };
                listed.push(Listed {
                    name: prefix(SKILL_TOOL),
                    description,
                    input_schema: spec.input_schema.clone(),
                    output_schema: Some(spec.output_schema.clone()).filter(Value::is_object),
                    annotations: None,
                });
            }
        }
    }
    listed
}

/// Finds the install and tool a name means, in `workspace_id` (inside
/// install `only`'s scope, when given).
pub fn resolve(installs: &Installs, workspace_id: &str, only: Option<&str>, name: &str) -> Option<Target> {
    let (install, tool) = match only {
        Some(install) => (install, name),
        None => name.split_once(SEPARATOR)?,
    };
    let active = installs.get(workspace_id, install)?;
    let known = match &active.component {
        Loaded::Tool(server) => server.tool(tool).is_some(),
        Loaded::Skill(_) => tool == SKILL_TOOL,
    };
    known.then(|| Target {
        install: active,
        tool: tool.to_string(),
    })
}

/// Calls `target` with `arguments` (a JSON object). Skills get
/// `capabilities`; tool servers never do.
pub async fn call(
    target: &Target,
    invocation: Invocation,
    capabilities: Capabilities,
    arguments: String,
) -> Result<Vec<Content>, CallError> {
    let grants = target.install.grants.clone();
    match &target.install.component {
        Loaded::Tool(server) => server.call(invocation, grants, &target.tool, arguments).await,
        Loaded::Skill(skill) => {
            let output = skill.run(invocation, grants, capabilities, arguments).await?;
            Ok(vec![Content::Json(output.to_string())])
        }
    }
}

fn annotations(tool: &ToolSpec) -> Option<Value> {
    let a = tool.annotations;
    let mut object = serde_json::Map::new();
    for (key, value) in [
        ("readOnlyHint", a.read_only),
        ("destructiveHint", a.destructive),
        ("idempotentHint", a.idempotent),
        ("openWorldHint", a.open_world),
    ] {
        if let Some(value) = value {
            object.insert(key.into(), json!(value));
        }
    }
    (!object.is_empty()).then_some(Value::Object(object))
}
