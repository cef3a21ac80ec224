//! Templates: classifying a YAML string (a literal, one `{{ expression }}`
//! that keeps its type, or text to render), checking its minijinja syntax,
//! and listing the variables it reads as dotted paths (`steps.plan.output`).

use std::collections::BTreeSet;

use minijinja::Environment;

use super::error::{CompileError, CompileErrors, Location};
use crate::ir::Template;

/// The variables a template may read besides `input` and `steps`:
/// minijinja's built-in global functions.
pub(crate) const GLOBALS: &[&str] = &["range", "dict", "debug", "namespace"];

/// A string classified: `None` is a plain literal (no template syntax).
pub(crate) fn classify(text: &str) -> Option<Template> {
    if let Some(expr) = single_expression(text) {
        return Some(Template::Expr(expr.to_string()));
    }
    has_syntax(text).then(|| Template::Text(text.to_string()))
}

pub(crate) fn has_syntax(text: &str) -> bool {
    text.contains("{{") || text.contains("{%") || text.contains("{#")
}

/// The expression of a string that is exactly one `{{ … }}` (whitespace
/// around it, and whitespace-control markers, allowed), trimmed.
fn single_expression(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    if inner.contains("{{") || inner.contains("}}") {
        return None;
    }
    let inner = inner.strip_prefix(['-', '+']).unwrap_or(inner);
    let inner = inner.strip_suffix(['-', '+']).unwrap_or(inner);
    let inner = inner.trim();
    (!inner.is_empty()).then_some(inner)
}

/// The dotted paths a template or expression reads, or its syntax error.
pub(crate) fn variables(template: &Template) -> Result<BTreeSet<String>, String> {
    let env = Environment::new();
    match template {
        Template::Expr(expr) => env
            .compile_expression(expr)
            .map(|compiled| compiled.undeclared_variables(true).into_iter().collect())
            .map_err(|e| describe(&e)),
        Template::Text(text) => text_variables(&env, text),
        Template::Prompt(_) => Ok(BTreeSet::new()),
    }
}

fn text_variables(env: &Environment<'_>, text: &str) -> Result<BTreeSet<String>, String> {
    env.template_from_str(text)
        .map(|compiled| compiled.undeclared_variables(true).into_iter().collect())
        .map_err(|e| describe(&e))
}

fn describe(error: &minijinja::Error) -> String {
    let detail = error.detail().unwrap_or("syntax error");
    match error.line() {
        Some(line) if line > 1 => format!("{detail} (template line {line})"),
        _ => detail.to_string(),
    }
}

/// Checks a `prompt-template` package's source: minijinja syntax, and that
/// it reads only what a step can give it (`input`, `steps`, `item`, `index`).
pub fn validate_prompt_template(source: &str) -> Result<(), CompileErrors> {
    let env = Environment::new();
    let compiled = env.template_from_str(source).map_err(|error| {
        let line = u32::try_from(error.line().unwrap_or(1)).unwrap_or(u32::MAX);
        CompileError::at(
            Location::new(line, 1),
            format!("template syntax error: {}", describe(&error)),
        )
    })?;
    let mut errors = Vec::new();
    let mut unknown: Vec<String> = compiled
        .undeclared_variables(false)
        .into_iter()
        .filter(|root| {
            !matches!(root.as_str(), "input" | "steps" | "item" | "index") && !GLOBALS.contains(&root.as_str())
        })
        .collect();
    unknown.sort();
    for root in unknown {
        errors.push(CompileError::at(
            Location::new(1, 1),
            format!(
                "the template reads `{root}`; a prompt sees only `input`, `steps`, and in a map `item` and `index`"
            ),
        ));
    }
    CompileErrors::check(errors)
}

/// The inputs a `prompt-template` package reads, by name (`x` for
/// `input.x`, `input.x.y` or `input.x[0]`), sorted: the arguments a caller
/// fills in when the template is served on its own (an MCP prompt).
pub fn prompt_template_inputs(source: &str) -> Result<Vec<String>, String> {
    let env = Environment::new();
    let compiled = env.template_from_str(source).map_err(|e| describe(&e))?;
    let names: BTreeSet<String> = compiled
        .undeclared_variables(true)
        .into_iter()
        .filter_map(|path| {
            let rest = path.strip_prefix("input.")?;
            let name = rest.split('.').next().unwrap_or(rest);
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect();
    Ok(names.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_classified() {
        assert_eq!(classify("hello"), None);
        assert_eq!(
            classify("{{ steps.a.output }}"),
            Some(Template::Expr("steps.a.output".into()))
        );
        assert_eq!(classify("  {{- input.x -}}\n"), Some(Template::Expr("input.x".into())));
        assert_eq!(
            classify("{{ a }} and {{ b }}"),
            Some(Template::Text("{{ a }} and {{ b }}".into()))
        );
        assert_eq!(classify("Hi {{ a }}"), Some(Template::Text("Hi {{ a }}".into())));
        assert_eq!(
            classify("{% if a %}x{% endif %}"),
            Some(Template::Text("{% if a %}x{% endif %}".into()))
        );
        assert_eq!(classify("{# note #}"), Some(Template::Text("{# note #}".into())));
    }

    #[test]
    fn variables_are_dotted_paths() {
        let vars = variables(&Template::Text(
            "{{ input.name }} {% for q in steps.plan.output.questions %}{{ q }}{% endfor %}".into(),
        ))
        .unwrap();
        assert_eq!(
            vars.into_iter().collect::<Vec<_>>(),
            ["input.name", "steps.plan.output.questions"]
        );
        assert!(
            variables(&Template::Expr("steps.a.output | length".into()))
                .unwrap()
                .contains("steps.a.output")
        );
        assert!(variables(&Template::Expr("a +".into())).is_err());
        assert!(variables(&Template::Text("{% if %}".into())).is_err());
    }

    #[test]
    fn prompt_templates_are_checked() {
        validate_prompt_template("Answer {{ input.question }} with {{ steps.a.output }}").unwrap();
        let error = validate_prompt_template("line one\n{% for x in %}").unwrap_err();
        assert_eq!(error.errors()[0].line, 2, "{error}");
        let error = validate_prompt_template("{{ secrets.key }}").unwrap_err();
        assert!(error.to_string().contains("`secrets`"), "{error}");
    }

    #[test]
    fn prompt_template_inputs_are_the_names_under_input() {
        let inputs = prompt_template_inputs(
            "{{ input.topic }} {% if input.tone %}{{ input.tone.name }}{% endif %} {{ steps.a.output }} {% for x in input.items %}{{ x }}{% endfor %}",
        )
        .unwrap();
        assert_eq!(inputs, ["items", "tone", "topic"]);
        assert!(prompt_template_inputs("{{ input }}").unwrap().is_empty());
        assert!(prompt_template_inputs("{% if %}").is_err());
    }
}
