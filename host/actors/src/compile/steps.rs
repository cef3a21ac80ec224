//! Reading `steps`: each item is a mapping with an optional `id` and exactly
//! one action key. Ids the author leaves out are given from the position
//! (`step-2`, `check.then-1`, `return`, `check.else.return`), so every step
//! of the IR has a unique id.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{CompileError, Location};
use super::fields::{self, Fields};
use super::schema;
use super::template;
use super::yaml::{Node, NodeValue};
use crate::ir::{ResponseFormat, Shape, Template};

#[derive(Clone, Debug)]
pub(crate) struct StepDef {
    pub id: String,
    pub loc: Location,
    pub action: ActionDef,
}

#[derive(Clone, Debug)]
pub(crate) enum ActionDef {
    Llm {
        model: Named,
        system: Option<Tpl>,
        prompt: Tpl,
        response: ResponseFormat,
    },
    Agent {
        model: Named,
        system: Option<Tpl>,
        prompt: Tpl,
        tools: Vec<Named>,
        max_iterations: u32,
    },
    Tool {
        server: Named,
        tool: String,
        arguments: ShapeDef,
    },
    Subtask {
        actor: Named,
        input: ShapeDef,
        max_cost_nanos: Option<i64>,
    },
    Map {
        items: Tpl,
        max_items: u32,
        concurrency: u32,
        actor: Named,
        input: ShapeDef,
        max_cost_nanos: Option<i64>,
    },
    If {
        condition: Tpl,
        then: Vec<StepDef>,
        otherwise: Vec<StepDef>,
    },
    Return(ShapeDef),
}

/// A name that must match an entry of a section (a model profile, a prompt,
/// an alias), where it is written.
#[derive(Clone, Debug)]
pub(crate) struct Named {
    pub name: String,
    pub loc: Location,
}

/// A classified template, where it is written, and the dotted paths it
/// reads (empty for a named prompt: those are read from the prompt).
#[derive(Clone, Debug)]
pub(crate) struct Tpl {
    pub template: Template,
    pub loc: Location,
    pub vars: BTreeSet<String>,
}

/// A value whose string leaves may be templates; for a mapping, where each
/// of its keys is written (to point at a wrong or missing property).
#[derive(Clone, Debug)]
pub(crate) struct ShapeDef {
    pub shape: Shape,
    pub loc: Location,
    pub templates: Vec<Tpl>,
    pub keys: BTreeMap<String, Location>,
}

const ACTIONS: &[&str] = &["llm", "agent", "tool", "subtask", "map", "if", "return"];
const STEP_KEYS: &[&str] = &[
    "id", "llm", "agent", "tool", "subtask", "map", "if", "then", "else", "return",
];

/// How ids are given in one block: top level, or a branch of an `if`.
#[derive(Clone, Copy)]
enum Block<'a> {
    Top,
    Branch { parent: &'a str, branch: &'a str },
}

impl Block<'_> {
    fn position_id(self, position: usize, is_return: bool) -> String {
        match (self, is_return) {
            (Block::Top, false) => format!("step-{position}"),
            (Block::Top, true) => "return".to_string(),
            (Block::Branch { parent, branch }, false) => format!("{parent}.{branch}-{position}"),
            (Block::Branch { parent, branch }, true) => format!("{parent}.{branch}.return"),
        }
    }
}

pub(crate) fn read_steps(node: &Node, errors: &mut Vec<CompileError>) -> Option<Vec<StepDef>> {
    read_block(node, "steps", Block::Top, errors)
}

fn read_block(node: &Node, what: &str, block: Block<'_>, errors: &mut Vec<CompileError>) -> Option<Vec<StepDef>> {
    let NodeValue::Seq(items) = &node.value else {
        errors.push(node.error(format!("{what} must be a list of steps, not {}", node.kind())));
        return None;
    };
    if items.is_empty() {
        errors.push(node.error(format!("{what} must have at least one step")));
        return None;
    }
    let mut steps = Vec::new();
    let mut complete = true;
    for (index, item) in items.iter().enumerate() {
        match read_step(item, index + 1, block, errors) {
            Some(step) => steps.push(step),
            None => complete = false,
        }
    }
    complete.then_some(steps)
}

fn read_step(node: &Node, position: usize, block: Block<'_>, errors: &mut Vec<CompileError>) -> Option<StepDef> {
    let fields = Fields::of(node, "a step", STEP_KEYS, errors)?;
    let actions: Vec<&str> = ACTIONS.iter().copied().filter(|a| fields.has(a)).collect();
    let action = match actions.as_slice() {
        [action] => *action,
        [] => {
            errors.push(node.error(format!("a step needs one of: {}", ACTIONS.join(", "))));
            return None;
        }
        [_, second, ..] => {
            let key = fields.key(second).expect("present");
            errors.push(CompileError::at(
                key.loc,
                format!("a step has exactly one action, but this one also has '{second}'"),
            ));
            return None;
        }
    };
    for branch in ["then", "else"] {
        if action != "if" && fields.has(branch) {
            let key = fields.key(branch).expect("present");
            errors.push(CompileError::at(key.loc, format!("'{branch}' belongs to an `if` step")));
        }
    }
    let id = match fields.get("id") {
        Some(id) => {
            let text = fields::string(id, "a step id", errors)?;
            if !fields::is_step_id(&text) {
                errors.push(id.error(format!(
                    "step id '{text}' must be letters, digits and '_', starting with a letter (templates read it as steps.{text})"
                )));
                return None;
            }
            text
        }
        None => block.position_id(position, action == "return"),
    };
    let body = fields.get(action).expect("present");
    let what = format!("step '{id}'");
    let action = match action {
        "llm" => read_llm(body, &what, errors)?,
        "agent" => read_agent(body, &what, errors)?,
        "tool" => read_tool(body, &what, errors)?,
        "subtask" => read_subtask(body, &what, errors)?,
        "map" => read_map(body, &what, errors)?,
        "if" => read_if(&fields, &id, errors)?,
        "return" => ActionDef::Return(read_shape(body, errors)?),
        _ => unreachable!("ACTIONS lists every action"),
    };
    Some(StepDef {
        id,
        loc: node.loc,
        action,
    })
}

/// An optional field that was read: `Some(None)` when absent, `None` when
/// it was present but wrong (the error is already recorded).
fn present<T>(read: Option<Option<T>>) -> Option<Option<T>> {
    match read {
        None => Some(None),
        Some(value) => value.map(Some),
    }
}

fn named(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<Named> {
    Some(Named {
        name: fields::string(node, what, errors)?,
        loc: node.loc,
    })
}

fn read_llm(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<ActionDef> {
    let what = format!("{what} (llm)");
    let fields = Fields::of(
        node,
        &what,
        &["model", "system", "prompt", "response", "schema"],
        errors,
    )?;
    let model = fields
        .required("model", &what, errors)
        .and_then(|n| named(n, "model", errors));
    let system = fields.get("system").map(|n| read_text(n, "system", errors));
    let prompt = fields
        .required("prompt", &what, errors)
        .and_then(|n| read_text(n, "prompt", errors));
    let response = match fields.get("response").map(|n| (n, n.as_str())) {
        None | Some((_, Some("text"))) => {
            if let Some(schema) = fields.get("schema") {
                errors.push(schema.error("'schema' needs response: json"));
                return None;
            }
            ResponseFormat::Text
        }
        Some((_, Some("json"))) => ResponseFormat::Json {
            schema: match fields.get("schema") {
                Some(n) => Some(schema::read(n, "schema", errors)?),
                None => None,
            },
        },
        Some((n, _)) => {
            errors.push(n.error("response must be 'text' or 'json'"));
            return None;
        }
    };
    Some(ActionDef::Llm {
        model: model?,
        system: present(system)?,
        prompt: prompt?,
        response,
    })
}

fn read_agent(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<ActionDef> {
    let what = format!("{what} (agent)");
    let allowed = ["model", "system", "prompt", "tools", "max_iterations"];
    let fields = Fields::of(node, &what, &allowed, errors)?;
    let model = fields
        .required("model", &what, errors)
        .and_then(|n| named(n, "model", errors));
    let system = fields.get("system").map(|n| read_text(n, "system", errors));
    let prompt = fields
        .required("prompt", &what, errors)
        .and_then(|n| read_text(n, "prompt", errors));
    let tools = fields.required("tools", &what, errors).and_then(|n| match &n.value {
        NodeValue::Seq(items) if !items.is_empty() => items
            .iter()
            .map(|item| named(item, "a tool alias", errors))
            .collect::<Option<Vec<_>>>(),
        _ => {
            errors.push(
                n.error("tools must be a non-empty list of tool or skill aliases (use `llm` for a call without tools)"),
            );
            None
        }
    });
    let max_iterations = match fields.get("max_iterations") {
        Some(n) => fields::integer(n, "max_iterations", 1, 32, errors).map(|n| n as u32),
        None => Some(8),
    };
    Some(ActionDef::Agent {
        model: model?,
        system: present(system)?,
        prompt: prompt?,
        tools: tools?,
        max_iterations: max_iterations?,
    })
}

fn read_tool(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<ActionDef> {
    let what = format!("{what} (tool)");
    let fields = Fields::of(node, &what, &["server", "name", "arguments"], errors)?;
    let server = fields
        .required("server", &what, errors)
        .and_then(|n| named(n, "server", errors));
    let tool = fields
        .required("name", &what, errors)
        .and_then(|n| fields::string(n, "name", errors));
    let arguments = match fields.get("arguments") {
        Some(n) => read_shape(n, errors),
        None => Some(empty_object(node.loc)),
    };
    Some(ActionDef::Tool {
        server: server?,
        tool: tool?,
        arguments: arguments?,
    })
}

fn read_subtask(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<ActionDef> {
    let what = format!("{what} (subtask)");
    let fields = Fields::of(node, &what, &["actor", "input", "max_cost_usd"], errors)?;
    let actor = fields
        .required("actor", &what, errors)
        .and_then(|n| named(n, "actor", errors));
    let input = match fields.get("input") {
        Some(n) => read_shape(n, errors),
        None => Some(empty_object(node.loc)),
    };
    let max_cost_nanos = fields
        .get("max_cost_usd")
        .map(|n| fields::usd(n, "max_cost_usd", errors));
    Some(ActionDef::Subtask {
        actor: actor?,
        input: input?,
        max_cost_nanos: present(max_cost_nanos)?,
    })
}

fn read_map(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<ActionDef> {
    let what = format!("{what} (map)");
    let allowed = ["items", "max_items", "concurrency", "actor", "input", "max_cost_usd"];
    let fields = Fields::of(node, &what, &allowed, errors)?;
    let items = fields
        .required("items", &what, errors)
        .and_then(|n| read_expression(n, "items", errors));
    let max_items = match fields.get("max_items") {
        Some(n) => fields::integer(n, "max_items", 1, 256, errors).map(|n| n as u32),
        None => {
            errors.push(node.error("unbounded map: a map needs max_items (1 to 256), the most items it will run"));
            None
        }
    };
    let concurrency = match fields.get("concurrency") {
        Some(n) => fields::integer(n, "concurrency", 1, 16, errors).map(|n| n as u32),
        None => Some(4),
    };
    let actor = fields
        .required("actor", &what, errors)
        .and_then(|n| named(n, "actor", errors));
    let input = match fields.get("input") {
        Some(n) => read_shape(n, errors),
        None => Some(empty_object(node.loc)),
    };
    let max_cost_nanos = fields
        .get("max_cost_usd")
        .map(|n| fields::usd(n, "max_cost_usd", errors));
    Some(ActionDef::Map {
        items: items?,
        max_items: max_items?,
        concurrency: concurrency?,
        actor: actor?,
        input: input?,
        max_cost_nanos: present(max_cost_nanos)?,
    })
}

fn read_if(fields: &Fields<'_>, id: &str, errors: &mut Vec<CompileError>) -> Option<ActionDef> {
    let condition = read_expression(fields.get("if").expect("present"), "if", errors);
    let then = fields
        .required("then", &format!("step '{id}' (if)"), errors)
        .and_then(|n| {
            read_block(
                n,
                "then",
                Block::Branch {
                    parent: id,
                    branch: "then",
                },
                errors,
            )
        });
    let otherwise = match fields.get("else") {
        Some(n) => read_block(
            n,
            "else",
            Block::Branch {
                parent: id,
                branch: "else",
            },
            errors,
        ),
        None => Some(Vec::new()),
    };
    Some(ActionDef::If {
        condition: condition?,
        then: then?,
        otherwise: otherwise?,
    })
}

fn tpl(template: Template, node: &Node, errors: &mut Vec<CompileError>) -> Option<Tpl> {
    match template::variables(&template) {
        Ok(vars) => Some(Tpl {
            template,
            loc: node.loc,
            vars,
        }),
        Err(message) => {
            errors.push(node.error(format!("template syntax error: {message}")));
            None
        }
    }
}

/// `prompt`/`system`: text (a plain string is text too), or `{use: name}`.
fn read_text(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<Tpl> {
    if let Some(text) = node.as_str() {
        return tpl(Template::Text(text.to_string()), node, errors);
    }
    let fields = Fields::of(node, what, &["use"], errors)?;
    let name = fields.required("use", what, errors)?;
    let name = fields::string(name, &format!("{what}.use"), errors)?;
    Some(Tpl {
        template: Template::Prompt(name),
        loc: node.loc,
        vars: BTreeSet::new(),
    })
}

/// `if`/`items`: exactly one `{{ expression }}`, which keeps its type.
fn read_expression(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<Tpl> {
    match node.as_str().and_then(template::classify) {
        Some(expr @ Template::Expr(_)) => tpl(expr, node, errors),
        _ => {
            errors.push(node.error(format!(
                "{what} must be a single {{{{ expression }}}}, such as \"{{{{ steps.plan.output }}}}\""
            )));
            None
        }
    }
}

fn empty_object(loc: Location) -> ShapeDef {
    ShapeDef {
        shape: Shape::Object(BTreeMap::new()),
        loc,
        templates: Vec::new(),
        keys: BTreeMap::new(),
    }
}

pub(crate) fn read_shape(node: &Node, errors: &mut Vec<CompileError>) -> Option<ShapeDef> {
    let mut templates = Vec::new();
    let before = errors.len();
    let shape = shape_of(node, &mut templates, errors);
    let keys = node
        .as_map()
        .map(|entries| entries.iter().map(|(k, _)| (k.name.clone(), k.loc)).collect())
        .unwrap_or_default();
    (errors.len() == before).then_some(ShapeDef {
        shape,
        loc: node.loc,
        templates,
        keys,
    })
}

fn shape_of(node: &Node, templates: &mut Vec<Tpl>, errors: &mut Vec<CompileError>) -> Shape {
    match &node.value {
        NodeValue::Str(text) => match template::classify(text) {
            Some(template) => match tpl(template.clone(), node, errors) {
                Some(found) => {
                    templates.push(found);
                    Shape::Template(template)
                }
                None => Shape::Template(template),
            },
            None => Shape::Literal(text.clone().into()),
        },
        NodeValue::Map(entries) => Shape::Object(
            entries
                .iter()
                .map(|(key, value)| (key.name.clone(), shape_of(value, templates, errors)))
                .collect(),
        ),
        NodeValue::Seq(items) => Shape::Array(items.iter().map(|item| shape_of(item, templates, errors)).collect()),
        _ => Shape::Literal(node.to_json(errors)),
    }
}
