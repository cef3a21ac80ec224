//! A checked [`Document`] and its resolved references → the pinned IR, its
//! canonical bytes and its id.

use std::collections::BTreeMap;

use super::document::{Document, PromptDef};
use super::error::{CompileError, CompileErrors, Location};
use super::references::{RefKind, Reference, Resolutions, Resolved};
use super::steps::{ActionDef, StepDef};
use super::{checks, template};
use crate::ActorId;
use crate::ir::{self, Ir};

/// A compiled actor: its IR, the RFC 8785 bytes of that IR, and their SHA-1.
#[derive(Clone, Debug, PartialEq)]
pub struct Compiled {
    pub ir: Ir,
    pub id: ActorId,
    pub canonical: Vec<u8>,
}

impl Document {
    /// Pins every reference with `resolutions`, runs the checks that need
    /// the sub-actors (their input and output types), and identifies the IR.
    pub fn compile(&self, resolutions: &Resolutions) -> Result<Compiled, CompileErrors> {
        let mut errors = Vec::new();
        let mut tools = BTreeMap::new();
        let mut skills = BTreeMap::new();
        let mut prompts = BTreeMap::new();
        let mut actors = BTreeMap::new();
        for (name, prompt) in &self.prompts {
            if let PromptDef::Inline { source, .. } = prompt {
                let inline = ir::Prompt {
                    source: source.clone(),
                    package: None,
                };
                prompts.insert(name.clone(), inline);
            }
        }
        for reference in self.references() {
            let resolved = resolutions.get(reference.kind, &reference.alias);
            match (reference.kind, resolved) {
                (_, None) => errors.push(refer(&reference, "was not resolved")),
                (_, Some(Resolved::Failed(reason))) => errors.push(refer(&reference, reason)),
                (RefKind::Tool, Some(Resolved::Component(pin))) => {
                    tools.insert(reference.alias, pin.clone());
                }
                (RefKind::Skill, Some(Resolved::Component(pin))) => {
                    skills.insert(reference.alias, pin.clone());
                }
                (RefKind::Prompt, Some(Resolved::Prompt(prompt))) => {
                    if let Err(problems) = template::validate_prompt_template(&prompt.source) {
                        let detail: Vec<String> = problems.errors().iter().map(|e| e.message.clone()).collect();
                        errors.push(refer(&reference, &detail.join("; ")));
                    }
                    prompts.insert(reference.alias, prompt.clone());
                }
                (RefKind::Actor, Some(Resolved::Actor { id, ir })) => {
                    // The id pins the sub-actor; its IR only lends types, so
                    // they must be the same actor.
                    match ir.identify() {
                        Ok((_, actual)) if actual == *id => {
                            actors.insert(reference.alias, id.clone());
                        }
                        _ => errors.push(refer(&reference, &format!("the IR given for {id} is not that actor"))),
                    }
                }
                (kind, Some(other)) => {
                    let message = format!(
                        "resolved to {} where a {} was expected",
                        resolved_kind(other),
                        kind.as_str()
                    );
                    errors.push(refer(&reference, &message));
                }
            }
        }
        let ctx = checks::Context {
            resolutions: Some(resolutions),
        };
        checks::check(self, &ctx, &mut errors);
        CompileErrors::check(errors)?;
        let ir = Ir {
            ir_version: ir::IR_VERSION,
            metadata: self.metadata.clone(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            models: self.models.clone(),
            prompts,
            tools,
            skills,
            actors,
            budget: self.budget.clone(),
            steps: self.steps.iter().map(lower_step).collect(),
        };
        let (canonical, id) = ir
            .identify()
            .map_err(|e| CompileError::at(Location::new(1, 1), e.to_string()))?;
        Ok(Compiled { ir, id, canonical })
    }
}

fn refer(reference: &Reference, reason: &str) -> CompileError {
    CompileError::at(
        reference.location,
        format!(
            "{} '{}' ({}): {reason}",
            reference.kind.as_str(),
            reference.alias,
            reference.spec
        ),
    )
}

fn resolved_kind(resolved: &Resolved) -> &'static str {
    match resolved {
        Resolved::Component(_) => "a component",
        Resolved::Prompt(_) => "a prompt",
        Resolved::Actor { .. } => "an actor",
        Resolved::Failed(_) => "a failure",
    }
}

fn lower_step(step: &StepDef) -> ir::Step {
    let action = match &step.action {
        ActionDef::Llm {
            model,
            system,
            prompt,
            response,
        } => ir::Action::Llm(ir::LlmStep {
            model: model.name.clone(),
            system: system.as_ref().map(|t| t.template.clone()),
            prompt: prompt.template.clone(),
            response: response.clone(),
        }),
        ActionDef::Agent {
            model,
            system,
            prompt,
            tools,
            max_iterations,
        } => ir::Action::Agent(ir::AgentStep {
            model: model.name.clone(),
            system: system.as_ref().map(|t| t.template.clone()),
            prompt: prompt.template.clone(),
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            max_iterations: *max_iterations,
        }),
        ActionDef::Tool {
            server,
            tool,
            arguments,
        } => ir::Action::Tool(ir::ToolStep {
            server: server.name.clone(),
            tool: tool.clone(),
            arguments: arguments.shape.clone(),
        }),
        ActionDef::Subtask {
            actor,
            input,
            max_cost_nanos,
        } => ir::Action::Subtask(ir::SubtaskStep {
            actor: actor.name.clone(),
            input: input.shape.clone(),
            max_cost_nanos: *max_cost_nanos,
        }),
        ActionDef::Map {
            items,
            max_items,
            concurrency,
            actor,
            input,
            max_cost_nanos,
        } => ir::Action::Map(ir::MapStep {
            items: items.template.clone(),
            max_items: *max_items,
            concurrency: *concurrency,
            actor: actor.name.clone(),
            input: input.shape.clone(),
            max_cost_nanos: *max_cost_nanos,
        }),
        ActionDef::If {
            condition,
            then,
            otherwise,
        } => ir::Action::If(ir::IfStep {
            condition: condition.template.clone(),
            then: then.iter().map(lower_step).collect(),
            otherwise: otherwise.iter().map(lower_step).collect(),
        }),
        ActionDef::Return(value) => ir::Action::Return(value.shape.clone()),
    };
    ir::Step {
        id: step.id.clone(),
        action,
    }
}
