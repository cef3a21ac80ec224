//! The parsed actor ([`Document`]): what the YAML says, with the position of
//! everything a later check may need to point at, before its references are
//! resolved. This module reads the top-level sections; `steps.rs` reads the
//! steps.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::{CompileError, CompileErrors, Location};
use super::fields::{self, Fields};
use super::references::RefSpec;
use super::steps::{self, StepDef};
use super::yaml::{self, Node, NodeValue};
use super::{checks, schema};
use crate::ir;

/// The only `apiVersion` this compiler reads.
pub const API_VERSION: &str = "tollgate.dev/v1";

/// A parsed, locally checked actor. Resolve its [`Document::references`] and
/// call [`Document::compile`] to get the pinned IR.
#[derive(Clone, Debug)]
pub struct Document {
    pub(crate) metadata: ir::Metadata,
    pub(crate) inputs: Value,
    pub(crate) outputs: Option<Value>,
    pub(crate) models: BTreeMap<String, ir::ModelProfile>,
    pub(crate) prompts: BTreeMap<String, PromptDef>,
    pub(crate) tools: BTreeMap<String, AliasDef>,
    pub(crate) skills: BTreeMap<String, AliasDef>,
    pub(crate) actors: BTreeMap<String, AliasDef>,
    pub(crate) budget: ir::Budget,
    pub(crate) steps: Vec<StepDef>,
}

#[derive(Clone, Debug)]
pub(crate) enum PromptDef {
    Inline { source: String, loc: Location },
    Package(AliasDef),
}

/// A reference as written: what it points at, and where.
#[derive(Clone, Debug)]
pub(crate) struct AliasDef {
    pub spec: RefSpec,
    pub loc: Location,
}

impl Document {
    pub fn metadata(&self) -> &ir::Metadata {
        &self.metadata
    }
}

const TOP_LEVEL: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "inputs",
    "outputs",
    "models",
    "prompts",
    "tools",
    "skills",
    "actors",
    "budget",
    "steps",
];

/// Parses actor YAML: syntax, the shape of every section, and every check
/// that needs nothing outside the document (aliases, step ids, templates,
/// scopes, types as far as they are known without the sub-actors).
pub fn parse(source: &str) -> Result<Document, CompileErrors> {
    let root = yaml::parse_yaml(source)?;
    let mut errors = Vec::new();
    let document = read_document(&root, &mut errors);
    CompileErrors::check(errors)?;
    let document = document.expect("a document without errors is complete");
    let mut errors = Vec::new();
    checks::check(&document, &checks::Context::default(), &mut errors);
    CompileErrors::check(errors)?;
    Ok(document)
}

fn read_document(root: &Node, errors: &mut Vec<CompileError>) -> Option<Document> {
    let top = Fields::of(root, "the actor", TOP_LEVEL, errors)?;
    match top.required("apiVersion", "the actor", errors) {
        Some(node) if node.as_str() == Some(API_VERSION) => {}
        Some(node) => errors.push(node.error(format!("apiVersion must be '{API_VERSION}'"))),
        None => {}
    }
    match top.required("kind", "the actor", errors) {
        Some(node) if node.as_str() == Some("Actor") => {}
        Some(node) => errors.push(node.error("kind must be 'Actor'")),
        None => {}
    }
    let metadata = top
        .required("metadata", "the actor", errors)
        .and_then(|node| read_metadata(node, errors));
    let inputs = match top.get("inputs") {
        Some(node) => read_schema(node, "inputs", true, errors),
        None => Some(json!({"type": "object"})),
    };
    let outputs = top
        .get("outputs")
        .map(|node| read_schema(node, "outputs", false, errors));
    let models = read_section(top.get("models"), "models", errors, read_model);
    let prompts = read_section(top.get("prompts"), "prompts", errors, read_prompt);
    let tools = read_section(top.get("tools"), "tools", errors, read_component);
    let skills = read_section(top.get("skills"), "skills", errors, read_component);
    let actors = read_section(top.get("actors"), "actors", errors, read_actor);
    let budget = match top.get("budget") {
        Some(node) => read_budget(node, errors),
        None => Some(ir::Budget::default()),
    };
    let steps = top
        .required("steps", "the actor", errors)
        .and_then(|node| steps::read_steps(node, errors));
    Some(Document {
        metadata: metadata?,
        inputs: inputs?,
        outputs: match outputs {
            Some(schema) => Some(schema?),
            None => None,
        },
        models: models?,
        prompts: prompts?,
        tools: tools?,
        skills: skills?,
        actors: actors?,
        budget: budget?,
        steps: steps?,
    })
}

fn read_metadata(node: &Node, errors: &mut Vec<CompileError>) -> Option<ir::Metadata> {
    let fields = Fields::of(node, "metadata", &["name", "namespace", "description"], errors)?;
    let name = fields
        .required("name", "metadata", errors)
        .and_then(|n| fields::name(n, "metadata.name", errors));
    let namespace = fields
        .required("namespace", "metadata", errors)
        .and_then(|n| fields::name(n, "metadata.namespace", errors));
    let description = match fields.get("description") {
        Some(n) => fields::string(n, "metadata.description", errors),
        None => Some(String::new()),
    };
    Some(ir::Metadata {
        name: name?,
        namespace: namespace?,
        description: description?,
    })
}

/// A JSON Schema written in YAML, meta-validated. `inputs` must describe an
/// object: the run's input is always `{…}`.
fn read_schema(node: &Node, what: &str, object: bool, errors: &mut Vec<CompileError>) -> Option<Value> {
    let value = schema::read(node, what, errors)?;
    if object && value.get("type") != Some(&json!("object")) {
        errors.push(node.error(format!("{what} must be an object schema (type: object)")));
        return None;
    }
    Some(value)
}

/// A mapping of alias → entry, each read by `read` (absent: empty).
fn read_section<T>(
    node: Option<&Node>,
    what: &str,
    errors: &mut Vec<CompileError>,
    read: impl Fn(&Node, Location, &str, &mut Vec<CompileError>) -> Option<T>,
) -> Option<BTreeMap<String, T>> {
    let Some(node) = node else {
        return Some(BTreeMap::new());
    };
    let Some(entries) = node.as_map() else {
        errors.push(node.error(format!("{what} must be a mapping of names, not {}", node.kind())));
        return None;
    };
    let mut section = BTreeMap::new();
    let mut complete = true;
    for (key, value) in entries {
        let entry_what = format!("{what}.{}", key.name);
        if !fields::is_alias(&key.name) {
            errors.push(CompileError::at(
                key.loc,
                format!(
                    "the name '{}' in {what} must be 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter",
                    key.name
                ),
            ));
            complete = false;
            continue;
        }
        match read(value, key.loc, &entry_what, errors) {
            Some(entry) => {
                section.insert(key.name.clone(), entry);
            }
            None => complete = false,
        }
    }
    complete.then_some(section)
}

/// Sampling parameters a profile may set, as the chat-completions request
/// takes them.
const MODEL_PARAMS: &[&str] = &[
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
];

fn read_model(node: &Node, _: Location, what: &str, errors: &mut Vec<CompileError>) -> Option<ir::ModelProfile> {
    let mut allowed = vec!["candidates"];
    allowed.extend_from_slice(MODEL_PARAMS);
    let fields = Fields::of(node, what, &allowed, errors)?;
    let candidates = fields
        .required("candidates", what, errors)
        .and_then(|n| read_candidates(n, what, errors));
    let mut params = BTreeMap::new();
    let mut complete = true;
    for param in MODEL_PARAMS {
        let Some(value) = fields.get(param) else { continue };
        let param_what = format!("{what}.{param}");
        match read_param(param, value, &param_what, errors) {
            Some(json) => {
                params.insert(param.to_string(), json);
            }
            None => complete = false,
        }
    }
    let candidates = candidates?;
    complete.then_some(ir::ModelProfile { candidates, params })
}

fn read_candidates(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<Vec<String>> {
    let NodeValue::Seq(items) = &node.value else {
        errors.push(node.error(format!("{what}.candidates must be a list of provider/model names")));
        return None;
    };
    if items.is_empty() {
        errors.push(node.error(format!("{what}.candidates needs at least one model")));
        return None;
    }
    let mut candidates = Vec::new();
    for item in items {
        let text = fields::string(item, &format!("a model in {what}.candidates"), errors)?;
        if !text.contains('/') || text.starts_with('/') || text.ends_with('/') || text.contains(char::is_whitespace) {
            errors.push(item.error(format!("'{text}' is not a model name of the form provider/model")));
            return None;
        }
        candidates.push(text);
    }
    Some(candidates)
}

fn read_param(param: &str, node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<Value> {
    let number = |min: f64, max: f64, errors: &mut Vec<CompileError>| -> Option<Value> {
        let value = match node.value {
            NodeValue::Int(n) => n as f64,
            NodeValue::Float(f) => f,
            _ => {
                errors.push(node.error(format!("{what} must be a number, not {}", node.kind())));
                return None;
            }
        };
        if !(min..=max).contains(&value) {
            errors.push(node.error(format!("{what} must be between {min} and {max}")));
            return None;
        }
        let mut ignored = Vec::new();
        Some(node.to_json(&mut ignored))
    };
    match param {
        "temperature" => number(0.0, 2.0, errors),
        "top_p" => number(0.0, 1.0, errors),
        "presence_penalty" | "frequency_penalty" => number(-2.0, 2.0, errors),
        "max_tokens" => fields::integer(node, what, 1, u32::MAX.into(), errors).map(Value::from),
        "seed" => fields::integer(node, what, 0, (1 << 53) - 1, errors).map(Value::from),
        "stop" => match &node.value {
            NodeValue::Str(text) => Some(Value::from(text.clone())),
            NodeValue::Seq(items) if (1..=4).contains(&items.len()) => items
                .iter()
                .map(|item| fields::string(item, &format!("an item of {what}"), errors).map(Value::from))
                .collect::<Option<Vec<_>>>()
                .map(Value::Array),
            _ => {
                errors.push(node.error(format!("{what} must be a string or a list of 1 to 4 strings")));
                None
            }
        },
        _ => unreachable!("MODEL_PARAMS lists every parameter"),
    }
}

fn read_prompt(node: &Node, key: Location, what: &str, errors: &mut Vec<CompileError>) -> Option<PromptDef> {
    if let Some(source) = node.as_str() {
        return Some(PromptDef::Inline {
            source: source.to_string(),
            loc: node.loc,
        });
    }
    let fields = Fields::of(node, what, &["template", "package", "version"], errors)?;
    if let Some(template) = fields.get("template") {
        if fields.has("package") || fields.has("version") {
            errors.push(node.error(format!("{what} has either 'template' or 'package' and 'version'")));
            return None;
        }
        return Some(PromptDef::Inline {
            source: fields::string(template, &format!("{what}.template"), errors)?,
            loc: template.loc,
        });
    }
    read_package(&fields, what, errors).map(|spec| PromptDef::Package(AliasDef { spec, loc: key }))
}

/// `{package: ns/name, version: range}`.
fn read_package(fields: &Fields<'_>, what: &str, errors: &mut Vec<CompileError>) -> Option<RefSpec> {
    let package = fields.required("package", what, errors);
    let version = fields.required("version", what, errors);
    let (package, version) = (package?, version?);
    let name = fields::string(package, &format!("{what}.package"), errors)?;
    let valid_name = name
        .split_once('/')
        .is_some_and(|(ns, n)| fields::is_name(ns) && fields::is_name(n));
    if !valid_name {
        errors.push(package.error(format!("{what}.package '{name}' must be namespace/name")));
        return None;
    }
    let range = fields::string(version, &format!("{what}.version"), errors)?;
    if let Err(error) = semver::VersionReq::parse(&range) {
        errors.push(version.error(format!("{what}.version '{range}' is not a semver range: {error}")));
        return None;
    }
    Some(RefSpec::Package { name, range })
}

fn read_component(node: &Node, key: Location, what: &str, errors: &mut Vec<CompileError>) -> Option<AliasDef> {
    let fields = Fields::of(node, what, &["package", "version", "install"], errors)?;
    let spec = if let Some(install) = fields.get("install") {
        if fields.has("package") || fields.has("version") {
            errors.push(node.error(format!("{what} has either 'install' or 'package' and 'version'")));
            return None;
        }
        let name = fields::string(install, &format!("{what}.install"), errors)?;
        let valid = (1..=48).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if !valid {
            errors.push(install.error(format!("{what}.install '{name}' is not an install name")));
            return None;
        }
        RefSpec::Install { name }
    } else {
        read_package(&fields, what, errors)?
    };
    Some(AliasDef { spec, loc: key })
}

fn read_actor(node: &Node, key: Location, what: &str, errors: &mut Vec<CompileError>) -> Option<AliasDef> {
    let fields = Fields::of(node, what, &["path", "id", "package", "version"], errors)?;
    let forms = ["path", "id", "package"].iter().filter(|k| fields.has(k)).count();
    if forms != 1 {
        errors.push(node.error(format!(
            "{what} needs exactly one of 'path', 'id', or 'package' with 'version'"
        )));
        return None;
    }
    let spec = if let Some(path) = fields.get("path") {
        let text = fields::string(path, &format!("{what}.path"), errors)?;
        if text.is_empty() || text.starts_with('/') || text.contains('\\') {
            errors.push(path.error(format!("{what}.path must be a relative path such as ./child.yaml")));
            return None;
        }
        RefSpec::Path { path: text }
    } else if let Some(id) = fields.get("id") {
        let text = fields::string(id, &format!("{what}.id"), errors)?;
        match text.parse() {
            Ok(id) => RefSpec::Id { id },
            Err(message) => {
                errors.push(id.error(message));
                return None;
            }
        }
    } else {
        read_package(&fields, what, errors)?
    };
    Some(AliasDef { spec, loc: key })
}

fn read_budget(node: &Node, errors: &mut Vec<CompileError>) -> Option<ir::Budget> {
    let fields = Fields::of(
        node,
        "budget",
        &["max_cost_usd", "max_steps", "max_depth", "max_wall_seconds"],
        errors,
    )?;
    let mut budget = ir::Budget::default();
    let mut complete = true;
    if let Some(n) = fields.get("max_cost_usd") {
        budget.max_cost_nanos = fields::usd(n, "budget.max_cost_usd", errors);
        complete &= budget.max_cost_nanos.is_some();
    }
    if let Some(n) = fields.get("max_steps") {
        match fields::integer(n, "budget.max_steps", 1, 100_000, errors) {
            Some(steps) => budget.max_steps = steps as u32,
            None => complete = false,
        }
    }
    if let Some(n) = fields.get("max_depth") {
        match fields::integer(n, "budget.max_depth", 0, 64, errors) {
            Some(depth) => budget.max_depth = depth as u32,
            None => complete = false,
        }
    }
    if let Some(n) = fields.get("max_wall_seconds") {
        match fields::integer(n, "budget.max_wall_seconds", 1, 86_400, errors) {
            Some(seconds) => budget.max_wall_ms = seconds * 1000,
            None => complete = false,
        }
    }
    complete.then_some(budget)
}
