//! One test (at least) per compile check of docs/actors.md, each asserting
//! the line and column the error points at.

use serde_json::json;
use tollgate_actors::compile::{self, RefKind, Resolutions, Resolved};
use tollgate_actors::ir::{ComponentPin, PackagePin};

/// Lines 1–5 of every test actor; what a test adds starts on line 6.
const HEAD: &str = "apiVersion: tollgate.dev/v1
kind: Actor
metadata: {name: t, namespace: demo}
models:
  default: {candidates: [acme/echo]}
";

/// The errors of `HEAD` + `rest`, each `line:column: message`, parsed and
/// (when it parses) compiled with `resolutions`.
fn errors_with(rest: &str, resolutions: &Resolutions) -> Vec<String> {
    let source = format!("{HEAD}{rest}");
    let errors = match compile::parse(&source) {
        Ok(document) => match document.compile(resolutions) {
            Ok(_) => return Vec::new(),
            Err(errors) => errors,
        },
        Err(errors) => errors,
    };
    errors.errors().iter().map(|e| e.to_string()).collect()
}

fn errors(rest: &str) -> Vec<String> {
    errors_with(rest, &Resolutions::new())
}

/// Exactly one error, starting with `expected` (position and message).
#[track_caller]
fn assert_error(rest: &str, expected: &str) {
    assert_one(errors(rest), expected);
}

#[track_caller]
fn assert_one(errors: Vec<String>, expected: &str) {
    assert_eq!(errors.len(), 1, "expected one error, got {errors:#?}");
    assert!(
        errors[0].starts_with(expected),
        "got {:?}, expected {expected:?}",
        errors[0]
    );
}

#[test]
fn a_valid_actor_has_no_errors() {
    assert_eq!(
        errors("steps:\n  - llm: {model: default, prompt: hi}\n"),
        Vec::<String>::new()
    );
}

#[test]
fn unknown_model_profile() {
    assert_error(
        "steps:\n  - llm: {model: other, prompt: hi}\n",
        "7:18: unknown model profile 'other' (defined: default)",
    );
}

#[test]
fn unknown_prompt() {
    assert_error(
        "prompts: {greeting: 'Hello {{ input.name }}'}\nsteps:\n  - llm: {model: default, prompt: {use: welcome}}\n",
        "8:35: unknown prompt 'welcome' (defined: greeting)",
    );
}

#[test]
fn a_named_prompt_is_checked_where_it_is_used() {
    assert_error(
        "prompts: {p: 'About {{ steps.later.output }}'}\nsteps:\n  - llm: {model: default, prompt: {use: p}}\n  - {id: later, llm: {model: default, prompt: x}}\n",
        "8:35: `steps.later`: step 'later' does not run before this point",
    );
}

#[test]
fn unknown_tool_alias() {
    assert_error(
        "tools: {calc: {install: calc}}\nsteps:\n  - agent: {model: default, prompt: hi, tools: [calc, search]}\n",
        "8:55: unknown tool or skill alias 'search' (defined: calc)",
    );
    assert_error(
        "steps:\n  - tool: {server: calc, name: evaluate}\n",
        "7:20: unknown tool alias 'calc' (none are defined)",
    );
}

#[test]
fn unknown_skill_alias_and_a_skill_called_as_a_tool() {
    assert_error(
        "skills: {sum: {install: summarize}}\nsteps:\n  - agent: {model: default, prompt: hi, tools: [summary]}\n",
        "8:49: unknown tool or skill alias 'summary' (defined: sum)",
    );
    assert_error(
        "skills: {sum: {install: summarize}}\nsteps:\n  - tool: {server: sum, name: run}\n",
        "8:20: 'sum' is a skill; a tool step calls a tool server",
    );
}

#[test]
fn unknown_actor_alias() {
    assert_error(
        "steps:\n  - subtask: {actor: helper}\n",
        "7:22: unknown actor alias 'helper' (none are defined)",
    );
}

#[test]
fn duplicate_step_ids() {
    assert_error(
        "steps:\n  - {id: a, llm: {model: default, prompt: x}}\n  - if: '{{ input.go }}'\n    then:\n      - {id: a, llm: {model: default, prompt: y}}\n",
        "10:9: duplicate step id 'a' (first used at line 7)",
    );
}

#[test]
fn a_template_may_read_only_earlier_steps() {
    assert_error(
        "steps:\n  - {id: a, llm: {model: default, prompt: '{{ steps.b.output }}'}}\n  - {id: b, llm: {model: default, prompt: x}}\n",
        "7:43: `steps.b`: step 'b' does not run before this point",
    );
    assert_error(
        "steps:\n  - {id: a, llm: {model: default, prompt: '{{ steps.a.output }}'}}\n",
        "7:43: `steps.a`: step 'a' does not run before this point",
    );
    assert_error(
        "steps:\n  - {id: a, llm: {model: default, prompt: '{{ steps.nope.output }}'}}\n",
        "7:43: `steps.nope`: there is no step 'nope'",
    );
    assert_error(
        "steps:\n  - {id: a, llm: {model: default, prompt: x}}\n  - return: '{{ steps.a.result }}'\n",
        "8:13: `steps.a.result`: a step has only `output`",
    );
}

#[test]
fn a_branch_cannot_read_the_other_branch() {
    assert_error(
        "steps:\n  - id: c\n    if: '{{ input.x }}'\n    then:\n      - {id: t, llm: {model: default, prompt: x}}\n    else:\n      - return: '{{ steps.t.output }}'\n",
        "12:17: `steps.t`: step 't' does not run before this point",
    );
    // After the `if`, either branch's steps may be read.
    assert_eq!(
        errors(
            "steps:\n  - id: c\n    if: '{{ input.x }}'\n    then:\n      - {id: t, llm: {model: default, prompt: x}}\n  - return: '{{ steps.t.output }}'\n"
        ),
        Vec::<String>::new()
    );
}

#[test]
fn only_input_steps_item_and_index_are_in_scope() {
    assert_error(
        "steps:\n  - llm: {model: default, prompt: 'Hi {{ user.name }}'}\n",
        "7:35: unknown variable `user`",
    );
    assert_error(
        "steps:\n  - return: '{{ item }}'\n",
        "7:13: unknown variable `item`: templates read `input` and `steps` (and, in a map's input, `item` and `index`) (`item` and `index` exist only in a map's input)",
    );
    // Variables a template declares itself, and minijinja's globals, are fine.
    assert_eq!(
        errors(
            "steps:\n  - llm: {model: default, prompt: '{% set n = 3 %}{% for i in range(n) %}{{ i }}{% endfor %}'}\n"
        ),
        Vec::<String>::new()
    );
}

#[test]
fn an_if_step_has_no_output() {
    assert_error(
        "steps:\n  - id: c\n    if: '{{ input.x }}'\n    then:\n      - llm: {model: default, prompt: x}\n  - return: '{{ steps.c.output }}'\n",
        "11:13: `steps.c`: step 'c' is an `if`; it has no output",
    );
}

#[test]
fn a_map_over_a_string_is_a_type_error() {
    assert_error(
        "actors: {sub: {id: '0123456789012345678901234567890123456789'}}\nsteps:\n  - {id: a, llm: {model: default, prompt: x}}\n  - map: {items: '{{ steps.a.output }}', max_items: 4, actor: sub}\n",
        "9:18: a map's items must be a list, but `steps.a.output` is a string",
    );
}

#[test]
fn a_field_of_a_string_is_a_type_error() {
    assert_error(
        "steps:\n  - {id: a, llm: {model: default, prompt: x}}\n  - return: '{{ steps.a.output.title }}'\n",
        "8:13: `steps.a.output` is a string, which has no attribute 'title'",
    );
    // A JSON step's schema types its fields, and forbids unknown ones when it says so.
    let json_step = "steps:\n  - id: a\n    llm:\n      model: default\n      prompt: x\n      response: json\n      schema: {type: object, properties: {title: {type: string}}, additionalProperties: false}\n";
    assert_error(
        &format!("{json_step}  - return: '{{{{ steps.a.output.title.text }}}}'\n"),
        "13:13: `steps.a.output.title` is a string, which has no attribute 'text'",
    );
    assert_error(
        &format!("{json_step}  - return: '{{{{ steps.a.output.body }}}}'\n"),
        "13:13: `steps.a.output` has no property 'body' (its schema allows only: title)",
    );
    assert_eq!(
        errors(&format!("{json_step}  - return: '{{{{ steps.a.output.title }}}}'\n")),
        Vec::<String>::new()
    );
    // The actor's own input schema types `input`.
    assert_error(
        "inputs: {type: object, properties: {name: {type: string}}}\nsteps:\n  - return: '{{ input.name.first }}'\n",
        "8:13: `input.name` is a string, which has no attribute 'first'",
    );
}

fn sub_actor(inputs: serde_json::Value, outputs: Option<serde_json::Value>) -> Resolutions {
    let source =
        "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {name: sub, namespace: demo}\nsteps:\n  - return: x\n";
    let mut ir = compile::parse(source).unwrap().compile(&Resolutions::new()).unwrap().ir;
    ir.inputs = inputs;
    ir.outputs = outputs;
    let (_, id) = ir.identify().unwrap();
    let mut resolutions = Resolutions::new();
    resolutions.insert(RefKind::Actor, "sub", Resolved::Actor { id, ir: Box::new(ir) });
    resolutions
}

const SUB: &str = "actors: {sub: {package: demo/sub, version: ^1}}\n";

#[test]
fn a_sub_actor_input_must_give_its_required_properties() {
    let resolutions = sub_actor(
        json!({"type": "object", "properties": {"question": {"type": "string"}, "n": {"type": "integer"}}, "required": ["question", "n"]}),
        None,
    );
    assert_one(
        errors_with(
            &format!("{SUB}steps:\n  - subtask: {{actor: sub, input: {{n: 3}}}}\n"),
            &resolutions,
        ),
        "8:34: the input of sub-actor 'sub' is missing 'question', which its inputs require",
    );
    assert_one(
        errors_with(
            &format!(
                "{SUB}steps:\n  - map:\n      items: '{{{{ input.xs }}}}'\n      max_items: 3\n      actor: sub\n      input: {{question: '{{{{ item }}}}'}}\n"
            ),
            &resolutions,
        ),
        "12:14: the input of sub-actor 'sub' is missing 'n'",
    );
    // The types of what is given are checked against the sub-actor's.
    assert_one(
        errors_with(
            &format!(
                "{SUB}steps:\n  - {{id: a, llm: {{model: default, prompt: x}}}}\n  - subtask: {{actor: sub, input: {{question: x, n: '{{{{ steps.a.output }}}}'}}}}\n"
            ),
            &resolutions,
        ),
        "9:48: 'n' of sub-actor 'sub' must be an integer, but this gives a string",
    );
    assert_eq!(
        errors_with(
            &format!("{SUB}steps:\n  - subtask: {{actor: sub, input: {{question: q, n: 2}}}}\n"),
            &resolutions
        ),
        Vec::<String>::new()
    );
}

#[test]
fn a_sub_actor_output_type_flows_on() {
    let resolutions = sub_actor(json!({"type": "object"}), Some(json!({"type": "string"})));
    assert_one(
        errors_with(
            &format!(
                "{SUB}steps:\n  - {{id: s, subtask: {{actor: sub}}}}\n  - return: '{{{{ steps.s.output.name }}}}'\n"
            ),
            &resolutions,
        ),
        "9:13: `steps.s.output` is a string, which has no attribute 'name'",
    );
    // A map's output is a list of the sub-actor's outputs.
    assert_one(
        errors_with(
            &format!(
                "{SUB}steps:\n  - {{id: m, map: {{items: '{{{{ input.xs }}}}', max_items: 2, actor: sub}}}}\n  - map: {{items: '{{{{ steps.m.output }}}}', max_items: 2, actor: sub, input: {{x: '{{{{ item.name }}}}'}}}}\n"
            ),
            &resolutions,
        ),
        "9:79: `item` is a string, which has no attribute 'name'",
    );
}

#[test]
fn the_return_must_match_the_outputs_schema() {
    assert_error(
        "outputs: {type: object}\nsteps:\n  - {id: a, llm: {model: default, prompt: x}}\n  - return: '{{ steps.a.output }}'\n",
        "9:13: the actor's outputs must be an object, but this returns a string",
    );
}

#[test]
fn a_map_without_max_items_is_unbounded() {
    assert_error(
        "actors: {sub: {path: ./sub.yaml}}\nsteps:\n  - map:\n      items: '{{ input.xs }}'\n      actor: sub\n",
        "9:7: unbounded map: a map needs max_items",
    );
    assert_error(
        "actors: {sub: {path: ./sub.yaml}}\nsteps:\n  - map: {items: '{{ input.xs }}', max_items: 1000, actor: sub}\n",
        "8:47: max_items must be between 1 and 256, not 1000",
    );
}

#[test]
fn inputs_and_outputs_must_be_valid_json_schemas() {
    assert_error(
        "inputs:\n  type: object\n  properties:\n    name: {type: text}\nsteps:\n  - return: x\n",
        "9:18: inputs is not a valid JSON Schema",
    );
    assert_error(
        "outputs: {type: string, minLength: -1}\nsteps:\n  - return: x\n",
        "6:36: outputs is not a valid JSON Schema: -1 is less than the minimum of 0",
    );
    assert_error(
        "inputs: {type: array}\nsteps:\n  - return: x\n",
        "6:9: inputs must be an object schema (type: object)",
    );
}

#[test]
fn template_syntax_errors() {
    assert_error(
        "steps:\n  - llm: {model: default, prompt: 'Hi {{ input.name '}\n",
        "7:35: template syntax error",
    );
    assert_error(
        "steps:\n  - if: '{{ input.x == }}'\n    then: [{return: x}]\n",
        "7:9: template syntax error",
    );
    assert_error(
        "prompts:\n  p: 'Hi {% if input.x %}'\nsteps:\n  - return: x\n",
        "7:6: prompt 'p': template syntax error",
    );
}

#[test]
fn if_and_items_must_be_single_expressions() {
    assert_error(
        "steps:\n  - if: 'yes {{ input.x }}'\n    then: [{return: x}]\n",
        "7:9: if must be a single {{ expression }}",
    );
}

#[test]
fn return_must_be_last_in_its_block() {
    assert_error(
        "steps:\n  - if: '{{ input.x }}'\n    then:\n      - return: early\n      - llm: {model: default, prompt: x}\n",
        "9:9: `return` must be the last step of its block",
    );
}

#[test]
fn steps_after_a_top_level_return_never_run() {
    assert_error(
        "steps:\n  - return: done\n  - llm: {model: default, prompt: x}\n",
        "8:5: this step never runs: it comes after the top-level `return`",
    );
}

#[test]
fn a_failed_resolution_is_an_error_at_the_reference() {
    let mut resolutions = Resolutions::new();
    resolutions.insert(RefKind::Tool, "calc", Resolved::Failed("no such package".into()));
    assert_one(
        errors_with(
            "tools:\n  calc: {package: tollgate/calculator, version: ^9}\nsteps:\n  - tool: {server: calc, name: evaluate}\n",
            &resolutions,
        ),
        "7:3: tool 'calc' (package tollgate/calculator ^9): no such package",
    );
    // A reference the caller did not resolve at all is an error too.
    assert_one(
        errors("tools:\n  calc: {install: calculator}\nsteps:\n  - tool: {server: calc, name: evaluate}\n"),
        "7:3: tool 'calc' (install calculator): was not resolved",
    );
    // And one resolved to the wrong kind of thing.
    let mut wrong = Resolutions::new();
    wrong.insert(
        RefKind::Tool,
        "calc",
        Resolved::Prompt(tollgate_actors::ir::Prompt {
            source: "x".into(),
            package: None,
        }),
    );
    assert_one(
        errors_with(
            "tools:\n  calc: {install: calculator}\nsteps:\n  - tool: {server: calc, name: evaluate}\n",
            &wrong,
        ),
        "7:3: tool 'calc' (install calculator): resolved to a prompt where a tool was expected",
    );
}

#[test]
fn integers_beyond_2_pow_53_are_errors() {
    assert_error(
        "steps:\n  - return: {n: 9007199254740993}\n",
        "7:17: the integer 9007199254740993 is outside ±(2^53−1)",
    );
    assert_error(
        "steps:\n  - return: {n: 123456789012345678901234567890}\n",
        "7:17: the number 123456789012345680000000000000 is outside ±(2^53−1)",
    );
}

#[test]
fn shape_violations_name_the_key() {
    assert_error(
        "steps:\n  - llm: {model: default, prompt: x, temprature: 0.2}\n",
        "7:38: unknown key 'temprature' in step 'step-1' (llm)",
    );
    assert_error(
        "colour: blue\nsteps:\n  - return: x\n",
        "6:1: unknown key 'colour' in the actor",
    );
    assert_error(
        "steps:\n  - llm: {model: default, prompt: x}\n    return: y\n",
        "8:5: a step has exactly one action, but this one also has 'return'",
    );
    assert_error(
        "budget: {max_cost_usd: 0.05}\nsteps:\n  - return: x\n",
        "6:24: budget.max_cost_usd must be a decimal string",
    );
    assert_error(
        "steps:\n  - {id: my-step, return: x}\n",
        "7:10: step id 'my-step' must be letters, digits and '_'",
    );
}

#[test]
fn package_prompts_are_pinned_and_validated() {
    let rest =
        "prompts:\n  p: {package: demo/prompts, version: ~1.2}\nsteps:\n  - llm: {model: default, prompt: {use: p}}\n";
    let pinned = |source: &str| {
        let mut resolutions = Resolutions::new();
        resolutions.insert(
            RefKind::Prompt,
            "p",
            Resolved::Prompt(tollgate_actors::ir::Prompt {
                source: source.into(),
                package: Some(PackagePin {
                    name: "demo/prompts".into(),
                    version: "1.2.3".into(),
                    digest: format!("sha256:{}", "0".repeat(64)),
                }),
            }),
        );
        resolutions
    };
    assert_eq!(
        errors_with(rest, &pinned("Tell me about {{ input.topic }}")),
        Vec::<String>::new()
    );
    assert_one(
        errors_with(rest, &pinned("{% if %}")),
        "7:3: prompt 'p' (package demo/prompts ~1.2): template syntax error",
    );
    assert_one(
        errors_with(rest, &pinned("{{ steps.missing.output }}")),
        "9:35: `steps.missing`: there is no step 'missing'",
    );
}

#[test]
fn a_tool_and_a_skill_may_not_share_an_alias() {
    let pin = ComponentPin {
        package: PackagePin {
            name: "tollgate/calculator".into(),
            version: "0.1.0".into(),
            digest: format!("sha256:{}", "1".repeat(64)),
        },
        install: None,
    };
    let mut resolutions = Resolutions::new();
    resolutions.insert(RefKind::Tool, "x", Resolved::Component(pin.clone()));
    resolutions.insert(RefKind::Skill, "x", Resolved::Component(pin));
    assert_one(
        errors_with(
            "tools: {x: {install: calc}}\nskills:\n  x: {install: summarize}\nsteps:\n  - agent: {model: default, prompt: p, tools: [x]}\n",
            &resolutions,
        ),
        "8:3: 'x' is both a tool and a skill alias",
    );
}

#[test]
fn a_sub_actor_ir_must_be_the_actor_its_id_names() {
    let mut resolutions = sub_actor(json!({"type": "object"}), None);
    let Some(Resolved::Actor { ir, .. }) = resolutions.get(RefKind::Actor, "sub").cloned() else {
        unreachable!()
    };
    let other: tollgate_actors::ActorId = "f".repeat(40).parse().unwrap();
    resolutions.insert(RefKind::Actor, "sub", Resolved::Actor { id: other, ir });
    assert_one(
        errors_with(&format!("{SUB}steps:\n  - subtask: {{actor: sub}}\n"), &resolutions),
        "6:10: actor 'sub' (package demo/sub ^1): the IR given for ffffffffffffffffffffffffffffffffffffffff is not that actor",
    );
}
