//! The checks that read the whole document: names that must match an entry
//! of a section, step ids, where `return` may stand, what each template may
//! read at its place, and the static types that flow between steps.
//!
//! Types are JSON Schemas: an `llm` text step gives a string, an `llm` JSON
//! step its `schema`, an `agent` a string, a `tool` anything, a `subtask` the
//! sub-actor's `outputs`, a `map` a list of those. Only what is known is
//! checked: an unknown type never makes an error.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::document::{Document, PromptDef};
use super::error::{CompileError, Location};
use super::references::Resolutions;
use super::schema::{self, Ty};
use super::steps::{ActionDef, Named, ShapeDef, StepDef, Tpl};
use super::template::{self, GLOBALS};
use crate::ir::{ResponseFormat, Shape, Template};

/// What is known beyond the document: at parse time nothing, at compile
/// time the resolved references (sub-actor IRs, package prompt texts).
#[derive(Default)]
pub(crate) struct Context<'a> {
    pub resolutions: Option<&'a Resolutions>,
}

#[derive(Clone, Debug)]
enum Output {
    Value(Ty),
    /// An `if` or a `return`: nothing to read.
    None(&'static str),
}

struct Checker<'a> {
    doc: &'a Document,
    ctx: &'a Context<'a>,
    /// Every step id in the document, to tell "not yet" from "no such step".
    all_ids: BTreeMap<String, Location>,
    errors: &'a mut Vec<CompileError>,
}

/// What a template sees at one place.
#[derive(Clone)]
struct Scope {
    steps: BTreeMap<String, Output>,
    /// Inside a map's `input`: the type of `item`.
    item: Option<Ty>,
}

pub(crate) fn check(doc: &Document, ctx: &Context<'_>, errors: &mut Vec<CompileError>) {
    let mut checker = Checker {
        doc,
        ctx,
        all_ids: BTreeMap::new(),
        errors,
    };
    checker.sections();
    checker.ids(&doc.steps);
    checker.returns(&doc.steps, true);
    let mut scope = Scope {
        steps: BTreeMap::new(),
        item: None,
    };
    checker.block(&doc.steps, &mut scope);
}

impl Checker<'_> {
    fn error(&mut self, loc: Location, message: impl Into<String>) {
        self.errors.push(CompileError::at(loc, message));
    }

    fn sections(&mut self) {
        let doc = self.doc;
        for (alias, def) in &doc.skills {
            if doc.tools.contains_key(alias) {
                self.error(
                    def.loc,
                    format!("'{alias}' is both a tool and a skill alias; agent steps could not tell them apart"),
                );
            }
        }
        for (name, prompt) in &doc.prompts {
            if let PromptDef::Inline { source, loc } = prompt
                && let Err(message) = template::variables(&Template::Text(source.clone()))
            {
                self.error(*loc, format!("prompt '{name}': template syntax error: {message}"));
            }
        }
    }

    fn ids(&mut self, steps: &[StepDef]) {
        for step in steps {
            if let Some(first) = self.all_ids.get(&step.id) {
                let message = format!("duplicate step id '{}' (first used at line {})", step.id, first.line);
                self.error(step.loc, message);
            } else {
                self.all_ids.insert(step.id.clone(), step.loc);
            }
            if let ActionDef::If { then, otherwise, .. } = &step.action {
                self.ids(then);
                self.ids(otherwise);
            }
        }
    }

    fn returns(&mut self, steps: &[StepDef], top: bool) {
        for (index, step) in steps.iter().enumerate() {
            let last = index + 1 == steps.len();
            if matches!(step.action, ActionDef::Return(_)) && !last {
                if top {
                    let next = &steps[index + 1];
                    self.error(next.loc, "this step never runs: it comes after the top-level `return`");
                } else {
                    self.error(step.loc, "`return` must be the last step of its block");
                }
            }
            if let ActionDef::If { then, otherwise, .. } = &step.action {
                self.returns(then, false);
                self.returns(otherwise, false);
            }
        }
    }

    fn block(&mut self, steps: &[StepDef], scope: &mut Scope) {
        for step in steps {
            let output = self.step(step, scope);
            scope.steps.insert(step.id.clone(), output);
        }
    }

    fn step(&mut self, step: &StepDef, scope: &mut Scope) -> Output {
        match &step.action {
            ActionDef::Llm {
                model,
                system,
                prompt,
                response,
            } => {
                self.model(model);
                self.texts([system.as_ref(), Some(prompt)], scope);
                match response {
                    ResponseFormat::Text => Output::Value(Some(json!({"type": "string"}))),
                    ResponseFormat::Json { schema } => Output::Value(schema.clone()),
                }
            }
            ActionDef::Agent {
                model,
                system,
                prompt,
                tools,
                ..
            } => {
                self.model(model);
                self.texts([system.as_ref(), Some(prompt)], scope);
                for tool in tools {
                    if !self.doc.tools.contains_key(&tool.name) && !self.doc.skills.contains_key(&tool.name) {
                        let known = names(self.doc.tools.keys().chain(self.doc.skills.keys()));
                        self.error(tool.loc, format!("unknown tool or skill alias '{}'{known}", tool.name));
                    }
                }
                Output::Value(Some(json!({"type": "string"})))
            }
            ActionDef::Tool { server, arguments, .. } => {
                if self.doc.skills.contains_key(&server.name) && !self.doc.tools.contains_key(&server.name) {
                    let message = format!(
                        "'{}' is a skill; a tool step calls a tool server from `tools`",
                        server.name
                    );
                    self.error(server.loc, message);
                } else if !self.doc.tools.contains_key(&server.name) {
                    let known = names(self.doc.tools.keys());
                    self.error(server.loc, format!("unknown tool alias '{}'{known}", server.name));
                }
                self.shape(arguments, scope);
                Output::Value(None)
            }
            ActionDef::Subtask { actor, input, .. } => {
                let outputs = self.sub_actor(actor, input, scope);
                Output::Value(outputs)
            }
            ActionDef::Map {
                items, actor, input, ..
            } => {
                self.template(items, scope);
                let items_ty = self.expression_type(&items.template, scope);
                let mut item = None;
                if let Some(ty) = &items_ty {
                    if !schema::allows(ty, "array") {
                        let Template::Expr(expr) = &items.template else {
                            unreachable!()
                        };
                        let message = format!("a map's items must be a list, but `{expr}` is {}", schema::describe(ty));
                        self.error(items.loc, message);
                    }
                    item = schema::items(ty);
                }
                let mut inner = scope.clone();
                inner.item = Some(item);
                let outputs = self.sub_actor(actor, input, &inner);
                let mut list = json!({"type": "array"});
                if let Some(outputs) = outputs {
                    list["items"] = outputs;
                }
                Output::Value(Some(list))
            }
            ActionDef::If {
                condition,
                then,
                otherwise,
            } => {
                self.template(condition, scope);
                // A branch's steps are readable after the `if` (when they ran).
                let mut then_scope = scope.clone();
                self.block(then, &mut then_scope);
                let mut else_scope = scope.clone();
                self.block(otherwise, &mut else_scope);
                scope.steps.extend(then_scope.steps);
                scope.steps.extend(else_scope.steps);
                Output::None("an `if`")
            }
            ActionDef::Return(value) => {
                self.shape(value, scope);
                if let Some(outputs) = &self.doc.outputs {
                    let actual = self.shape_type(&value.shape, scope);
                    if let Some(actual) = actual
                        && !schema::compatible(&actual, outputs)
                    {
                        let message = format!(
                            "the actor's outputs must be {}, but this returns {}",
                            schema::describe(outputs),
                            schema::describe(&actual)
                        );
                        self.error(value.loc, message);
                    }
                }
                Output::None("a `return`")
            }
        }
    }

    fn model(&mut self, model: &Named) {
        if !self.doc.models.contains_key(&model.name) {
            let known = names(self.doc.models.keys());
            self.error(model.loc, format!("unknown model profile '{}'{known}", model.name));
        }
    }

    fn texts<'t>(&mut self, texts: impl IntoIterator<Item = Option<&'t Tpl>>, scope: &Scope) {
        for text in texts.into_iter().flatten() {
            self.template(text, scope);
        }
    }

    /// A subtask's or map's sub-actor: the alias exists; its input gives
    /// every property the sub-actor requires, of the right types. Returns
    /// the sub-actor's output type.
    fn sub_actor(&mut self, actor: &Named, input: &ShapeDef, scope: &Scope) -> Ty {
        self.shape(input, scope);
        if !self.doc.actors.contains_key(&actor.name) {
            let known = names(self.doc.actors.keys());
            self.error(actor.loc, format!("unknown actor alias '{}'{known}", actor.name));
            return None;
        }
        let sub = self.ctx.resolutions.and_then(|r| r.actor_ir(&actor.name))?;
        if let Shape::Object(fields) = &input.shape {
            let required = sub.inputs.get("required").and_then(Value::as_array);
            for name in required.into_iter().flatten().filter_map(Value::as_str) {
                if !fields.contains_key(name) {
                    let message = format!(
                        "the input of sub-actor '{}' is missing '{name}', which its inputs require",
                        actor.name
                    );
                    self.error(input.loc, message);
                }
            }
            let properties = sub.inputs.get("properties");
            for (name, value) in fields {
                let Some(expected) = properties.and_then(|p| p.get(name)) else {
                    continue;
                };
                let Some(actual) = self.shape_type(value, scope) else {
                    continue;
                };
                if !schema::compatible(&actual, expected) {
                    let loc = input.keys.get(name).copied().unwrap_or(input.loc);
                    let message = format!(
                        "'{name}' of sub-actor '{}' must be {}, but this gives {}",
                        actor.name,
                        schema::describe(expected),
                        schema::describe(&actual)
                    );
                    self.error(loc, message);
                }
            }
        }
        sub.outputs.clone()
    }

    fn shape(&mut self, shape: &ShapeDef, scope: &Scope) {
        for template in &shape.templates {
            self.template(template, scope);
        }
    }

    /// The static type of a shape: a literal's, a text template's (a
    /// string), or a plain path expression's.
    fn shape_type(&mut self, shape: &Shape, scope: &Scope) -> Ty {
        match shape {
            Shape::Literal(value) => Some(json!({"type": schema::json_type(value)})),
            Shape::Template(template) => self.expression_type(template, scope),
            Shape::Object(_) => Some(json!({"type": "object"})),
            Shape::Array(_) => Some(json!({"type": "array"})),
        }
    }

    fn expression_type(&mut self, template: &Template, scope: &Scope) -> Ty {
        match template {
            Template::Text(_) | Template::Prompt(_) => Some(json!({"type": "string"})),
            Template::Expr(expr) if is_path(expr) => self.path(expr, scope).ok().flatten(),
            Template::Expr(_) => None,
        }
    }

    /// Every path the template reads must be in scope, and typed right.
    fn template(&mut self, tpl: &Tpl, scope: &Scope) {
        let vars = match &tpl.template {
            Template::Prompt(name) => match self.prompt_vars(name, tpl.loc) {
                Some(vars) => vars,
                None => return,
            },
            _ => tpl.vars.iter().cloned().collect(),
        };
        for var in vars {
            if let Err(message) = self.path(&var, scope) {
                self.error(tpl.loc, message);
            }
        }
    }

    fn prompt_vars(&mut self, name: &str, loc: Location) -> Option<Vec<String>> {
        let source = match self.doc.prompts.get(name) {
            Some(PromptDef::Inline { source, .. }) => source.as_str(),
            Some(PromptDef::Package(_)) => self.ctx.resolutions?.prompt_source(name)?,
            None => {
                let known = names(self.doc.prompts.keys());
                self.error(loc, format!("unknown prompt '{name}'{known}"));
                return None;
            }
        };
        template::variables(&Template::Text(source.to_string()))
            .ok()
            .map(|vars| vars.into_iter().collect())
    }

    /// The type of a dotted path read at this place, or why it cannot be read.
    fn path(&self, path: &str, scope: &Scope) -> Result<Ty, String> {
        let segments: Vec<&str> = path.split('.').collect();
        let (mut ty, rest, mut shown) = match segments[0] {
            "input" => (Some(self.doc.inputs.clone()), &segments[1..], "input".to_string()),
            "steps" => {
                let Some(id) = segments.get(1) else {
                    return Ok(None);
                };
                let output = match scope.steps.get(*id) {
                    Some(Output::Value(ty)) => ty.clone(),
                    Some(Output::None(kind)) => {
                        return Err(format!("`steps.{id}`: step '{id}' is {kind}; it has no output"));
                    }
                    None if self.all_ids.contains_key(*id) => {
                        return Err(format!(
                            "`steps.{id}`: step '{id}' does not run before this point, so its output cannot be read here"
                        ));
                    }
                    None => return Err(format!("`steps.{id}`: there is no step '{id}'")),
                };
                match segments.get(2) {
                    None => return Ok(None),
                    Some(&"output") => (output, &segments[3..], format!("steps.{id}.output")),
                    Some(other) => {
                        return Err(format!("`steps.{id}.{other}`: a step has only `output`"));
                    }
                }
            }
            "item" | "index" if scope.item.is_some() => {
                let ty = if segments[0] == "index" {
                    Some(json!({"type": "integer"}))
                } else {
                    scope.item.clone().flatten()
                };
                (ty, &segments[1..], segments[0].to_string())
            }
            root if GLOBALS.contains(&root) => return Ok(None),
            root => {
                let map_note = if matches!(root, "item" | "index") {
                    " (`item` and `index` exist only in a map's input)"
                } else {
                    ""
                };
                return Err(format!(
                    "unknown variable `{root}`: templates read `input` and `steps` (and, in a map's input, `item` and `index`){map_note}"
                ));
            }
        };
        for segment in rest {
            let Some(current) = &ty else { return Ok(None) };
            ty = schema::attribute(current, segment).map_err(|reason| format!("`{shown}` {reason}"))?;
            shown = format!("{shown}.{segment}");
        }
        Ok(ty)
    }
}

/// ` (defined: a, b)`, or ` (none are defined)`.
fn names<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        " (none are defined)".to_string()
    } else {
        format!(" (defined: {})", names.join(", "))
    }
}

/// `steps.plan.output.questions`: a chain of attribute reads, whose type
/// can be followed.
fn is_path(expr: &str) -> bool {
    expr.split('.').all(|segment| {
        segment.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}
