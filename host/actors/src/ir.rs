//! The compiled form of an actor: plain JSON with every reference resolved
//! and pinned, and nothing that varies between compilations (no timestamps,
//! no source positions, maps ordered by key). Its canonical bytes decide the
//! actor id, so anything here that changes behaviour changes the id, and
//! nothing else may be here.
//!
//! The YAML author writes templates as strings; the compiler classifies each
//! one, so the runtime never guesses: a string that is exactly one
//! `{{ expression }}` keeps the expression's type ([`Template::Expr`]), any
//! other string with template syntax renders to text ([`Template::Text`]), and
//! a plain string is a literal.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ActorId;

/// The IR format this crate writes and runs.
pub const IR_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ir {
    pub ir_version: u32,
    pub metadata: Metadata,
    /// JSON Schema of the run's input (an object).
    pub inputs: Value,
    /// JSON Schema of the run's output, checked when the run returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    /// Model profiles by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, ModelProfile>,
    /// Named prompts, their template text resolved (and pinned when they come
    /// from a `prompt-template` package).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, Prompt>,
    /// Tool servers by alias.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ComponentPin>,
    /// Skills by alias.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skills: BTreeMap<String, ComponentPin>,
    /// Sub-actors by alias, pinned by actor id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub actors: BTreeMap<String, ActorId>,
    pub budget: Budget,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// An ordered candidate list (the first that answers serves; the rest are
/// fallbacks) and the sampling parameters sent with every call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelProfile {
    pub candidates: Vec<String>,
    /// Chat-completions parameters (`temperature`, `top_p`, `max_tokens`,
    /// `seed`, `stop`, `presence_penalty`, `frequency_penalty`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// minijinja template text.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackagePin>,
}

/// A registry package version, pinned by its content digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackagePin {
    /// `namespace/name`.
    pub name: String,
    pub version: String,
    /// `sha256:<hex>` of the content.
    pub digest: String,
}

/// A tool server or skill. From the registry it runs with no grants (no
/// outbound HTTP, no credentials); through a workspace install it runs with
/// that install's grants, at the digest pinned here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentPin {
    pub package: PackagePin,
    /// The workspace install it was resolved through, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
}

/// The limits of one run. Sub-actors run inside their parent's budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The most the run may cost, in nanodollars (USD × 10⁹). Absent: the
    /// wallet is the only limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_nanos: Option<i64>,
    /// Steps executed in all, counting every sub-actor's and map item's.
    pub max_steps: u32,
    /// Nesting of sub-actors (the top-level run is depth 0).
    pub max_depth: u32,
    /// Wall time of the whole run, in milliseconds.
    pub max_wall_ms: u64,
}

impl Budget {
    pub const DEFAULT_MAX_STEPS: u32 = 64;
    pub const DEFAULT_MAX_DEPTH: u32 = 4;
    pub const DEFAULT_MAX_WALL_MS: u64 = 300_000;
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_cost_nanos: None,
            max_steps: Self::DEFAULT_MAX_STEPS,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_wall_ms: Self::DEFAULT_MAX_WALL_MS,
        }
    }
}

/// A template, classified at compile time. Templates see `input`, `steps`
/// (`steps.<id>.output`) and, inside a map, `item` and `index`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Template {
    /// Rendered to a string.
    Text(String),
    /// One minijinja expression (without the braces), keeping its type.
    Expr(String),
    /// A named prompt from [`Ir::prompts`], rendered to a string.
    Prompt(String),
}

/// A JSON value whose string leaves may be templates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    Literal(Value),
    Template(Template),
    Object(BTreeMap<String, Shape>),
    Array(Vec<Shape>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Unique within the actor. The YAML `id`, or assigned by the compiler
    /// from the step's position (`step-3`, `step-3.then-1`) when absent.
    pub id: String,
    pub action: Action,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    Llm(LlmStep),
    Agent(AgentStep),
    Tool(ToolStep),
    Subtask(SubtaskStep),
    Map(MapStep),
    If(IfStep),
    /// Ends the run (or the sub-actor) with this value.
    Return(Shape),
}

/// One model call. Its output is the answer's text, or the parsed JSON value
/// when `response` is JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmStep {
    /// A key of [`Ir::models`].
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Template>,
    pub prompt: Template,
    #[serde(default)]
    pub response: ResponseFormat,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ResponseFormat {
    #[default]
    Text,
    /// The answer must be JSON (matching the schema, when given).
    Json {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
    },
}

/// A model with tools in a loop: each round the model may call tools; their
/// results go back to it, until it answers without a tool call or
/// `max_iterations` rounds have run. The output is the final answer's text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentStep {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Template>,
    pub prompt: Template,
    /// Aliases of [`Ir::tools`] (every tool of each server is offered) and of
    /// [`Ir::skills`].
    pub tools: Vec<String>,
    pub max_iterations: u32,
}

/// A direct call of one tool of a tool server; its output is the tool's
/// structured result, or its text content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStep {
    /// A key of [`Ir::tools`].
    pub server: String,
    pub tool: String,
    pub arguments: Shape,
}

/// A sub-actor run in an isolated context: only `input` goes in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubtaskStep {
    /// A key of [`Ir::actors`].
    pub actor: String,
    pub input: Shape,
    /// Its slice of the run's cost budget (never more than what remains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_nanos: Option<i64>,
}

/// A sub-actor run once per item of a bounded list, with bounded
/// concurrency; each item is an isolated subtask (`item` and `index` are in
/// scope for `input`). Its output is the list of the items' outputs, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapStep {
    /// Must evaluate to a list of at most `max_items`.
    pub items: Template,
    pub max_items: u32,
    pub concurrency: u32,
    pub actor: String,
    pub input: Shape,
    /// Each item's slice of the run's cost budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_nanos: Option<i64>,
}

/// Runs `then` when `condition` is truthy, otherwise `else`. Steps in either
/// branch are addressable by id afterwards when they ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IfStep {
    pub condition: Template,
    pub then: Vec<Step>,
    #[serde(default, rename = "else", skip_serializing_if = "Vec::is_empty")]
    pub otherwise: Vec<Step>,
}

impl Ir {
    /// The actor's canonical bytes and id.
    pub fn identify(&self) -> Result<(Vec<u8>, ActorId), crate::CanonicalError> {
        let bytes = crate::canonical_bytes(self)?;
        let id = crate::canonical::id_of_canonical(&bytes);
        Ok((bytes, id))
    }
}
