//! Evaluating the IR's templates against a step's scope: `input`, `steps`
//! (`steps.<id>.output`) and, inside a map item, `item` and `index`.
//! Undefined names are errors, not empty strings, so a typo fails loudly.

use std::sync::LazyLock;

use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};

use crate::ir::{Ir, Shape, Template};

static ENVIRONMENT: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
});

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

/// A template as text (an expression's value is rendered as a string, JSON
/// for lists and objects).
pub fn text(ir: &Ir, template: &Template, scope: &Scope) -> Result<String, String> {
    match template {
        Template::Text(source) => render(source, scope),
        Template::Prompt(name) => {
            let prompt = ir
                .prompts
                .get(name)
                .ok_or_else(|| format!("the actor has no prompt named '{name}'"))?;
            render(&prompt.source, scope)
        }
        Template::Expr(_) => Ok(match value(ir, template, scope)? {
            Value::String(text) => text,
            other => other.to_string(),
        }),
    }
}

/// A template as a typed value: an expression keeps its type; text is a string.
pub fn value(ir: &Ir, template: &Template, scope: &Scope) -> Result<Value, String> {
    match template {
        Template::Expr(source) => {
            let expression = ENVIRONMENT
                .compile_expression(source)
                .map_err(|e| format!("in '{{{{ {source} }}}}': {e}"))?;
            let result = expression
                .eval(scope.context())
                .map_err(|e| format!("in '{{{{ {source} }}}}': {e}"))?;
            serde_json::to_value(&result).map_err(|e| format!("in '{{{{ {source} }}}}': {e}"))
        }
        other => text(ir, other, scope).map(Value::String),
    }
}

/// A shape with every template evaluated.
pub fn shape(ir: &Ir, shape: &Shape, scope: &Scope) -> Result<Value, String> {
    Ok(match shape {
        Shape::Literal(value) => value.clone(),
        Shape::Template(template) => value(ir, template, scope)?,
        Shape::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, field)| Ok((key.clone(), self::shape(ir, field, scope)?)))
                .collect::<Result<Map<_, _>, String>>()?,
        ),
        Shape::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| self::shape(ir, item, scope))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// Whether a value counts as true in an `if`: as minijinja decides.
pub fn truthy(value: &Value) -> bool {
    minijinja::Value::from(minijinja::value::Serde(value)).is_true()
}

fn render(source: &str, scope: &Scope) -> Result<String, String> {
    ENVIRONMENT
        .render_str(source, scope.context())
        .map_err(|e| format!("in template '{}': {e}", abbreviate(source)))
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

    #[test]
    fn expressions_keep_their_type_and_text_renders() {
        let mut scope = Scope::new(json!({"name": "Ada", "n": 2}));
        scope.record("plan", json!({"questions": ["a", "b"]}));
        let ir = ir();
        assert_eq!(
            value(&ir, &Template::Expr("steps.plan.output.questions".into()), &scope).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            value(&ir, &Template::Expr("input.n * 3".into()), &scope).unwrap(),
            json!(6)
        );
        assert_eq!(text(&ir, &Template::Prompt("hi".into()), &scope).unwrap(), "Hi Ada");
        assert_eq!(
            text(
                &ir,
                &Template::Text("{{ input.name }} has {{ input.n }}".into()),
                &scope
            )
            .unwrap(),
            "Ada has 2"
        );
    }

    #[test]
    fn undefined_names_are_errors() {
        let scope = Scope::new(json!({"name": "Ada"}));
        let error = text(&ir(), &Template::Text("{{ input.nme }}".into()), &scope).unwrap_err();
        assert!(error.contains("undefined"), "{error}");
    }
}
