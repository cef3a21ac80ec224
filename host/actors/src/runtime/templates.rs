//! Evaluating the IR's templates against a step's scope: `input`, `steps`
//! (`steps.<id>.output`) and, inside a map item, `item` and `index`.
//! Undefined names are errors, not empty strings, so a typo fails loudly.
//!
//! Every evaluation runs with the [`Engine`]'s fuel, and its value is
//! measured as it is converted: past `max_template_bytes` it is a
//! [`Problem::Limit`], whatever minijinja made cheaply (`[0] * 10**9` is a
//! lazy list until something walks it).

use minijinja::ErrorKind;
use minijinja::value::ValueKind;
use serde_json::{Map, Value};

use super::limits::{Engine, QUICK_BYTES, QUICK_FUEL};
use crate::ir::{Ir, Shape, Template};

/// Deepest value a template may produce (serde_json's own parsing limit).
const MAX_DEPTH: usize = 128;

/// What a template can see.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub input: Value,
    /// Step id → `{"output": …}` for every step that has run.
    pub steps: Map<String, Value>,
    pub item: Option<(Value, usize)>,
}

impl Scope {
    pub fn new(input: Value) -> Self {
        Self {
            input,
            ..Self::default()
        }
    }

    pub fn record(&mut self, step: &str, output: Value) {
        self.steps
            .insert(step.to_string(), serde_json::json!({ "output": output }));
    }

    fn context(&self) -> minijinja::Value {
        let mut context = Map::new();
        context.insert("input".into(), self.input.clone());
        context.insert("steps".into(), Value::Object(self.steps.clone()));
        if let Some((item, index)) = &self.item {
            context.insert("item".into(), item.clone());
            context.insert("index".into(), Value::from(*index));
        }
        minijinja::Value::from(minijinja::value::Serde(&context))
    }
}

/// Why a template gave no value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Problem {
    /// The template is wrong for this scope (an undefined name, a type error).
    Invalid(String),
    /// It ran out of fuel or produced more than a template may.
    Limit(String),
}

impl Problem {
    pub fn message(&self) -> &str {
        match self {
            Problem::Invalid(message) | Problem::Limit(message) => message,
        }
    }
}

/// Evaluates one step's templates against its scope, counting the bytes
/// they produce.
pub struct Renderer<'a> {
    engine: &'a Engine,
    /// The actor whose named prompts `Template::Prompt` reads; none for a
    /// prompt-template package rendered on its own.
    ir: Option<&'a Ir>,
    scope: &'a Scope,
    /// Built on first use, then shared by the step's templates.
    context: Option<minijinja::Value>,
    /// Bytes produced so far (text, or the values' JSON).
    pub bytes: u64,
    /// A first attempt in place: [`QUICK_FUEL`] and [`QUICK_BYTES`].
    quick: bool,
}

impl<'a> Renderer<'a> {
    pub fn new(engine: &'a Engine, ir: &'a Ir, scope: &'a Scope) -> Self {
        Self::of(engine, Some(ir), scope, false)
    }

    fn of(engine: &'a Engine, ir: Option<&'a Ir>, scope: &'a Scope, quick: bool) -> Self {
        Self {
            engine,
            ir,
            scope,
            context: None,
            bytes: 0,
            quick,
        }
    }

    /// A renderer for a first attempt in place, with a small slice of fuel
    /// and bytes: a [`Problem::Limit`] from it means "try again on the pool".
    pub fn quick(engine: &'a Engine, ir: &'a Ir, scope: &'a Scope) -> Self {
        Self::of(engine, Some(ir), scope, true)
    }

    /// A renderer outside any actor (a prompt-template package on its own):
    /// the same fuel and byte caps, and no named prompts to refer to.
    pub(crate) fn standalone(engine: &'a Engine, scope: &'a Scope, quick: bool) -> Self {
        Self::of(engine, None, scope, quick)
    }

    fn context(&mut self) -> minijinja::Value {
        self.context.get_or_insert_with(|| self.scope.context()).clone()
    }

    /// A template as text (an expression's value is rendered as a string,
    /// JSON for lists and objects).
    pub fn text(&mut self, template: &Template) -> Result<String, Problem> {
        match template {
            Template::Text(source) => self.render(source),
            Template::Prompt(name) => {
                let prompt = (self.ir)
                    .and_then(|ir| ir.prompts.get(name))
                    .ok_or_else(|| Problem::Invalid(format!("the actor has no prompt named '{name}'")))?;
                self.render(&prompt.source)
            }
            Template::Expr(_) => Ok(match self.value(template)? {
                Value::String(text) => text,
                other => other.to_string(),
            }),
        }
    }

    /// A template as a typed value: an expression keeps its type; text is a string.
    pub fn value(&mut self, template: &Template) -> Result<Value, Problem> {
        match template {
            Template::Expr(source) => {
                let at = |e: &dyn std::fmt::Display| format!("in '{{{{ {source} }}}}': {e}");
                self.may_run_here(source.contains('*'))?;
                let engine = self.engine;
                let expression = engine
                    .environment(self.quick)
                    .compile_expression(source)
                    .map_err(|e| Problem::Invalid(at(&e)))?;
                let result = expression.eval(self.context()).map_err(|e| self.failure(&e, &at(&e)))?;
                let mut left = self.left();
                let value = to_json(&result, &mut left, 0).map_err(|e| match e {
                    Conversion::Limit => Problem::Limit(at(&self.too_large())),
                    Conversion::Invalid(message) => Problem::Invalid(at(&message)),
                })?;
                self.bytes += self.left() - left;
                Ok(value)
            }
            other => self.text(other).map(Value::String),
        }
    }

    /// A shape with every template evaluated.
    pub fn shape(&mut self, shape: &Shape) -> Result<Value, Problem> {
        Ok(match shape {
            Shape::Literal(value) => value.clone(),
            Shape::Template(template) => self.value(template)?,
            Shape::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, field)| Ok((key.clone(), self.shape(field)?)))
                    .collect::<Result<Map<_, _>, Problem>>()?,
            ),
            Shape::Array(items) => Value::Array(items.iter().map(|item| self.shape(item)).collect::<Result<_, _>>()?),
        })
    }

    fn render(&mut self, source: &str) -> Result<String, Problem> {
        let at = |e: &dyn std::fmt::Display| format!("in template '{}': {e}", abbreviate(source));
        self.may_run_here(repeats(source))?;
        let context = self.context();
        let engine = self.engine;
        let text = engine
            .environment(self.quick)
            .render_str(source, context)
            .map_err(|e| self.failure(&e, &at(&e)))?;
        let bytes = text.len() as u64;
        if bytes > self.left() {
            return Err(Problem::Limit(at(&self.too_large())));
        }
        self.bytes += bytes;
        Ok(text)
    }

    /// What one template may still produce: the step's templates share the cap.
    /// A first attempt declines a template with `*`: repeating a list is
    /// lazy and costs no fuel, and minijinja formats such a list whole
    /// (`'' ~ [0] * 100000000`: 300 MB) before it charges for it. Only a
    /// render thread may take that risk, never a runtime worker.
    fn may_run_here(&self, repeats: bool) -> Result<(), Problem> {
        match self.quick && repeats {
            true => Err(Problem::Limit(
                "it repeats a value: rendered on a thread of its own".into(),
            )),
            false => Ok(()),
        }
    }

    fn max_bytes(&self) -> u64 {
        match self.quick {
            true => QUICK_BYTES.min(self.engine.limits().max_template_bytes),
            false => self.engine.limits().max_template_bytes,
        }
    }

    fn left(&self) -> u64 {
        self.max_bytes().saturating_sub(self.bytes)
    }

    fn too_large(&self) -> String {
        format!(
            "its value is larger than the {} bytes a step's templates may produce",
            self.max_bytes()
        )
    }

    fn failure(&self, error: &minijinja::Error, described: &str) -> Problem {
        if error.kind() == ErrorKind::OutOfFuel {
            let fuel = match self.quick {
                true => QUICK_FUEL.min(self.engine.limits().template_fuel),
                false => self.engine.limits().template_fuel,
            };
            Problem::Limit(format!(
                "{described}: the template used up its fuel of {fuel} (about {fuel} instructions, or {} bytes of data)",
                fuel.saturating_mul(64)
            ))
        } else {
            Problem::Invalid(described.to_string())
        }
    }
}

/// Whether a value counts as true in an `if`: as minijinja decides.
pub fn truthy(value: &Value) -> bool {
    minijinja::Value::from(minijinja::value::Serde(value)).is_true()
}

enum Conversion {
    Limit,
    Invalid(String),
}

/// `value` as JSON, each byte of its JSON text taken from `left`: the walk
/// stops as soon as it is used up, before the rest is materialized.
fn to_json(value: &minijinja::Value, left: &mut u64, depth: usize) -> Result<Value, Conversion> {
    if depth > MAX_DEPTH {
        return Err(Conversion::Invalid(format!(
            "the value is nested more than {MAX_DEPTH} deep"
        )));
    }
    match value.kind() {
        ValueKind::String => {
            let text = value.as_str().unwrap_or_default();
            take(left, text.len() as u64 + 2)?;
            Ok(Value::String(text.to_string()))
        }
        ValueKind::Seq | ValueKind::Iterable => {
            take(left, 2)?;
            let items = value.try_iter().map_err(|e| Conversion::Invalid(e.to_string()))?;
            let mut list = Vec::new();
            for item in items {
                take(left, 1)?;
                list.push(to_json(&item, left, depth + 1)?);
            }
            Ok(Value::Array(list))
        }
        ValueKind::Map => {
            take(left, 2)?;
            let keys = value.try_iter().map_err(|e| Conversion::Invalid(e.to_string()))?;
            let mut object = Map::new();
            for key in keys {
                let name = match key.as_str() {
                    Some(name) => name.to_string(),
                    None => key.to_string(),
                };
                take(left, name.len() as u64 + 4)?;
                let item = value.get_item(&key).map_err(|e| Conversion::Invalid(e.to_string()))?;
                let item = to_json(&item, left, depth + 1)?;
                object.insert(name, item);
            }
            Ok(Value::Object(object))
        }
        ValueKind::Bytes => {
            let bytes = value.as_bytes().unwrap_or_default();
            take(left, bytes.len() as u64 * 4 + 2)?;
            Ok(Value::Array(bytes.iter().map(|&b| Value::from(b)).collect()))
        }
        ValueKind::Undefined | ValueKind::None | ValueKind::Bool | ValueKind::Number => {
            take(left, 8)?;
            serde_json::to_value(value).map_err(|e| Conversion::Invalid(e.to_string()))
        }
        // Macros, loop objects and the like: their text.
        _ => {
            let text = value.to_string();
            take(left, text.len() as u64 + 2)?;
            Ok(Value::String(text))
        }
    }
}

/// Whether a `*` appears inside a tag of `source` (`{{ … }}` or `{% … %}`);
/// one in the text around them (Markdown's `**`) repeats nothing.
fn repeats(source: &str) -> bool {
    let mut rest = source;
    while let Some(open) = rest.find(['{']) {
        let after = &rest[open + 1..];
        let close = match after.as_bytes().first() {
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            _ => {
                rest = after;
                continue;
            }
        };
        let Some(end) = after.find(close) else {
            return after.contains('*');
        };
        if after[..end].contains('*') {
            return true;
        }
        rest = &after[end + close.len()..];
    }
    false
}

fn take(left: &mut u64, bytes: u64) -> Result<(), Conversion> {
    *left = left.checked_sub(bytes).ok_or(Conversion::Limit)?;
    Ok(())
}

fn abbreviate(source: &str) -> String {
    match source.char_indices().nth(60) {
        Some((end, _)) => format!("{}…", &source[..end]),
        None => source.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::limits::RunLimits;
    use serde_json::json;

    fn ir() -> Ir {
        serde_json::from_value(json!({
            "ir_version": 1,
            "metadata": {"namespace": "t", "name": "t"},
            "inputs": {"type": "object"},
            "prompts": {"hi": {"source": "Hi {{ input.name }}"}},
            "budget": {"max_steps": 1, "max_depth": 1, "max_wall_ms": 1},
            "steps": []
        }))
        .unwrap()
    }

    fn engine() -> Engine {
        Engine::new(RunLimits::default(), 1)
    }

    #[test]
    fn expressions_keep_their_type_and_text_renders() {
        let mut scope = Scope::new(json!({"name": "Ada", "n": 2}));
        scope.record("plan", json!({"questions": ["a", "b"]}));
        let (ir, engine) = (ir(), engine());
        let mut renderer = Renderer::new(&engine, &ir, &scope);
        assert_eq!(
            renderer
                .value(&Template::Expr("steps.plan.output.questions".into()))
                .unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(renderer.value(&Template::Expr("input.n * 3".into())).unwrap(), json!(6));
        assert_eq!(renderer.text(&Template::Prompt("hi".into())).unwrap(), "Hi Ada");
        assert_eq!(
            renderer
                .text(&Template::Text("{{ input.name }} has {{ input.n }}".into()))
                .unwrap(),
            "Ada has 2"
        );
        assert!(renderer.bytes > 0);
    }

    #[test]
    fn undefined_names_are_errors() {
        let (ir, engine, scope) = (ir(), engine(), Scope::new(json!({"name": "Ada"})));
        let error = Renderer::new(&engine, &ir, &scope)
            .text(&Template::Text("{{ input.nme }}".into()))
            .unwrap_err();
        assert!(
            matches!(&error, Problem::Invalid(m) if m.contains("undefined")),
            "{error:?}"
        );
    }

    #[test]
    fn a_spinning_template_runs_out_of_fuel_quickly() {
        let (ir, engine, scope) = (ir(), engine(), Scope::default());
        let started = std::time::Instant::now();
        let spin = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";
        let error = Renderer::new(&engine, &ir, &scope)
            .text(&Template::Text(spin.into()))
            .unwrap_err();
        assert!(matches!(&error, Problem::Limit(m) if m.contains("fuel")), "{error:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_first_attempt_declines_what_could_stall_a_runtime_worker() {
        let (ir, engine, scope) = (ir(), engine(), Scope::new(json!({"n": 2})));
        let mut quick = Renderer::quick(&engine, &ir, &scope);
        assert_eq!(quick.value(&Template::Expr("input.n + 1".into())).unwrap(), json!(3));
        for template in [
            Template::Expr("'' ~ [0] * 100000000".into()),
            Template::Text("{{ input.n * 2 }}".into()),
            Template::Text("{% for a in range(100000) %}{{ a }}{% endfor %}".into()),
        ] {
            assert!(matches!(quick.text(&template), Err(Problem::Limit(_))), "{template:?}");
        }
        // A `*` outside the tags is text.
        let bold = Template::Text("**Note:** {{ input.n }}".into());
        assert_eq!(quick.text(&bold).unwrap(), "**Note:** 2");
        // With the full limits a repetition that fits is fine.
        let mut full = Renderer::new(&engine, &ir, &scope);
        assert_eq!(full.text(&Template::Text("{{ input.n * 2 }}".into())).unwrap(), "4");
    }

    #[test]
    fn huge_values_are_refused_before_they_are_built() {
        let (ir, engine, scope) = (ir(), engine(), Scope::default());
        let mut renderer = Renderer::new(&engine, &ir, &scope);
        // A 100 MB string costs more fuel than a template has: never allocated.
        for template in [
            Template::Expr("'A' * 100000000".into()),
            Template::Text("{{ 'A' * 100000000 }}".into()),
        ] {
            let error = renderer.value(&template).unwrap_err();
            assert!(matches!(&error, Problem::Limit(_)), "{error:?}");
        }
        // A lazily repeated list costs no fuel; walking it stops at the cap.
        let started = std::time::Instant::now();
        let error = renderer.value(&Template::Expr("[0] * 100000000".into())).unwrap_err();
        assert!(matches!(&error, Problem::Limit(m) if m.contains("bytes")), "{error:?}");
        let error = renderer
            .text(&Template::Text("{{ [0] * 100000000 }}".into()))
            .unwrap_err();
        assert!(matches!(&error, Problem::Limit(_)), "{error:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
