//! The compiler end to end: id stability (the same actor however it is
//! written has one id; a changed word gives another; the id is SHA-1 of the
//! canonical bytes of the printed IR), compile errors with their line and
//! column, and the examples in examples/actors.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha1::{Digest, Sha1};
use tollgate_actors::compile::{self, Reference, Resolutions, Resolved};
use tollgate_actors::ir::{ComponentPin, PackagePin};
use tollgate_actors::{ActorId, canonical_bytes};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/actors")
}

fn greeter() -> String {
    std::fs::read_to_string(examples().join("greeter.yaml")).unwrap()
}

fn id_of(source: &str) -> ActorId {
    let document = compile::parse(source).unwrap_or_else(|e| panic!("{e}"));
    document
        .compile(&Resolutions::new())
        .unwrap_or_else(|e| panic!("{e}"))
        .id
}

/// The first error of `source`, as `line:column: message`.
fn first_error(source: &str) -> String {
    let errors = match compile::parse(source) {
        Ok(document) => document.compile(&Resolutions::new()).unwrap_err(),
        Err(errors) => errors,
    };
    errors.errors()[0].to_string()
}

/// The greeter with its keys reordered, flow style, other quoting, folded
/// text, comments, an anchor with its alias, and a merge key.
const GREETER_REWRITTEN: &str = r#"# Same actor, written another way.
kind: 'Actor'
apiVersion: "tollgate.dev/v1"
steps:
  - llm: {prompt: 'Say hello to {{ input.name }}.', model: *profile}   # the alias
    id: greet
  - {return: '{{steps.greet.output}}'}
metadata:
  namespace: demo
  description: >-
    Greets someone
    by name.
  name: "greeter"
inputs: {required: [name], type: object, properties: {name: {"type": string}}}
"#;

fn greeter_rewritten() -> String {
    // YAML needs an anchor before its alias, so the models go first here.
    format!(
        "models:\n  &profile default:\n    <<: {{temperature: 0}}\n    candidates:\n      - acme/echo\n{GREETER_REWRITTEN}"
    )
}

#[test]
fn the_greeter_compiles_to_one_id_however_it_is_written() {
    let id = id_of(&greeter());
    assert_eq!(id, id_of(&greeter_rewritten()));
    // Any change of behaviour is a new id: one word of the prompt.
    let changed = greeter().replace("Say hello to", "Say hi to");
    assert_ne!(id, id_of(&changed));
    // … a sampling parameter, or the order of the candidates.
    assert_ne!(id, id_of(&greeter().replace("temperature: 0", "temperature: 0.5")));
    assert_ne!(id, id_of(&greeter().replace("[acme/echo]", "[acme/echo, acme/small]")));
}

#[test]
fn the_id_is_sha1_of_the_canonical_bytes_of_the_printed_ir() {
    let compiled = compile::parse(&greeter())
        .unwrap()
        .compile(&Resolutions::new())
        .unwrap();
    let printed = serde_json::to_string_pretty(&compiled.ir).unwrap();
    let reread: Value = serde_json::from_str(&printed).unwrap();
    let canonical = canonical_bytes(&reread).unwrap();
    assert_eq!(canonical, compiled.canonical);
    assert_eq!(hex::encode(Sha1::digest(&canonical)), compiled.id.as_str());
    // The printed IR reads back as the same IR.
    let ir: tollgate_actors::Ir = serde_json::from_str(&printed).unwrap();
    assert_eq!(ir, compiled.ir);
}

#[test]
fn the_greeter_ir_is_what_the_yaml_says() {
    let ir = compile::parse(&greeter())
        .unwrap()
        .compile(&Resolutions::new())
        .unwrap()
        .ir;
    let json = serde_json::to_value(&ir).unwrap();
    assert_eq!(json["metadata"]["name"], "greeter");
    assert_eq!(json["models"]["default"]["candidates"][0], "acme/echo");
    assert_eq!(json["models"]["default"]["params"]["temperature"], 0);
    assert_eq!(json["steps"][0]["id"], "greet");
    assert_eq!(
        json["steps"][0]["action"]["llm"]["prompt"]["text"],
        "Say hello to {{ input.name }}."
    );
    assert_eq!(json["steps"][1]["id"], "return");
    assert_eq!(
        json["steps"][1]["action"]["return"]["template"]["expr"],
        "steps.greet.output"
    );
    assert_eq!(json["budget"]["max_steps"], 64);
}

#[test]
fn bad_yaml_names_its_line_and_column() {
    // A plain scalar may not hold ": ": line 6, where the second ':' is at column 22.
    let source = greeter().replace("description: Greets someone", "description: Greets: someone");
    let error = first_error(&source);
    assert_eq!(
        error,
        "6:22: invalid YAML: mapping values are not allowed in this context"
    );
    // An unclosed flow list (line 11) shows where the parser found out: the
    // `models:` key inside it, line 12.
    let source = greeter().replace("required: [name]", "required: [name");
    let error = first_error(&source);
    assert!(error.starts_with("12:7: invalid YAML"), "{error}");
}

#[test]
fn an_unknown_reference_names_its_line_and_column() {
    let source = greeter().replace("model: default", "model: fast");
    assert_eq!(
        first_error(&source),
        "19:14: unknown model profile 'fast' (defined: default)"
    );
}

#[test]
fn a_sub_actor_cycle_names_the_closing_reference_and_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let actor = |name: &str, other: &str| {
        format!(
            "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {{name: {name}, namespace: demo}}\n\
             actors:\n  {other}:\n    path: ./{other}.yaml\nsteps:\n  - subtask: {{actor: {other}}}\n"
        )
    };
    std::fs::write(dir.path().join("a.yaml"), actor("a", "b")).unwrap();
    std::fs::write(dir.path().join("b.yaml"), actor("b", "a")).unwrap();
    let errors = compile::compile_file(&dir.path().join("a.yaml"), &mut |r| {
        panic!("nothing is remote here: {r:?}")
    })
    .unwrap_err();
    assert_eq!(errors.errors().len(), 1, "{errors}");
    let error = &errors.errors()[0];
    assert_eq!((error.line, error.column), (5, 3), "{error}");
    assert_eq!(error.file.as_deref(), Some(dir.path().join("b.yaml").to_str().unwrap()));
    assert!(error.message.contains("a.yaml → b.yaml → a.yaml"), "{error}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("{}:5:3: ", dir.path().join("b.yaml").display()))
    );
}

#[test]
fn a_file_that_references_itself_is_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let source = "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {name: a, namespace: demo}\n\
                  actors: {me: {path: ./sub/../a.yaml}}\nsteps:\n  - subtask: {actor: me}\n";
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("a.yaml"), source).unwrap();
    let errors = compile::compile_file(&dir.path().join("a.yaml"), &mut |_| unreachable!()).unwrap_err();
    let error = &errors.errors()[0];
    assert_eq!((error.line, error.column), (4, 10), "{error}");
    assert!(error.message.contains("a.yaml → a.yaml"), "{error}");
}

#[test]
fn errors_in_a_sub_actor_file_name_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let parent = "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {name: p, namespace: demo}\n\
                  actors: {child: {path: child.yaml}}\nsteps:\n  - subtask: {actor: child}\n";
    std::fs::write(dir.path().join("p.yaml"), parent).unwrap();
    std::fs::write(
        dir.path().join("child.yaml"),
        "apiVersion: tollgate.dev/v1\nkind: Robot\n",
    )
    .unwrap();
    let errors = compile::compile_file(&dir.path().join("p.yaml"), &mut |_| unreachable!()).unwrap_err();
    let text = errors.to_string();
    assert!(
        text.contains(&format!(
            "{}:2:7: kind must be 'Actor'",
            dir.path().join("child.yaml").display()
        )),
        "{text}"
    );
}

fn calculator_pin() -> ComponentPin {
    ComponentPin {
        package: PackagePin {
            name: "tollgate/calculator".into(),
            version: "0.1.0".into(),
            digest: format!("sha256:{}", "ab".repeat(32)),
        },
        install: None,
    }
}

#[test]
fn the_calculator_agent_compiles_with_its_tool_pinned() {
    let mut asked = Vec::new();
    let tree = compile::compile_file(&examples().join("calculator-agent.yaml"), &mut |r: &Reference| {
        asked.push((r.kind, r.alias.clone(), r.spec.clone()));
        Resolved::Component(calculator_pin())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        asked,
        [(
            compile::RefKind::Tool,
            "calculator".to_string(),
            compile::RefSpec::Package {
                name: "tollgate/calculator".into(),
                range: "^0.1".into()
            }
        )]
    );
    assert_eq!(tree.root.ir.tools["calculator"], calculator_pin());
    assert!(tree.children.is_empty());
    let json = serde_json::to_value(&tree.root.ir).unwrap();
    assert_eq!(json["steps"][0]["action"]["agent"]["tools"][0], "calculator");
    assert_eq!(json["budget"]["max_cost_nanos"], 50_000_000);
    // Pinning another digest is another actor.
    let mut other = calculator_pin();
    other.package.digest = format!("sha256:{}", "cd".repeat(32));
    let again = compile::compile_file(&examples().join("calculator-agent.yaml"), &mut |_| {
        Resolved::Component(other.clone())
    })
    .unwrap();
    assert_ne!(again.root.id, tree.root.id);
}

#[test]
fn the_research_agent_compiles_its_researcher_first() {
    let tree = compile::compile_file(&examples().join("research/research.yaml"), &mut |r| {
        panic!("the research example references nothing remote: {r:?}")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tree.children.len(), 1);
    let researcher = &tree.children[0];
    assert_eq!(researcher.ir.metadata.name, "researcher");
    assert_eq!(tree.root.ir.actors["researcher"], researcher.id);
    // The child alone compiles to the same id.
    let alone = std::fs::read_to_string(examples().join("research/researcher.yaml")).unwrap();
    assert_eq!(id_of(&alone), researcher.id);
    let json = serde_json::to_value(&tree.root.ir).unwrap();
    let map = &json["steps"][1]["action"]["map"];
    assert_eq!(map["items"]["expr"], "steps.plan.output.questions");
    assert_eq!(map["max_items"], 4);
    assert_eq!(map["concurrency"], 2);
    assert_eq!(map["input"]["object"]["question"]["template"]["expr"], "item");
}

#[test]
fn a_sub_actor_used_twice_is_compiled_once() {
    let dir = tempfile::tempdir().unwrap();
    let child = "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {name: c, namespace: demo}\n\
                 steps:\n  - return: done\n";
    let parent = "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {name: p, namespace: demo}\n\
                  actors: {one: {path: c.yaml}, two: {path: ./c.yaml}}\n\
                  steps:\n  - subtask: {actor: one}\n  - subtask: {actor: two}\n";
    std::fs::write(dir.path().join("c.yaml"), child).unwrap();
    std::fs::write(dir.path().join("p.yaml"), parent).unwrap();
    let tree = compile::compile_file(&dir.path().join("p.yaml"), &mut |_| unreachable!()).unwrap();
    assert_eq!(tree.children.len(), 1);
    assert_eq!(tree.root.ir.actors["one"], tree.root.ir.actors["two"]);
}

#[test]
fn a_registry_reference_that_fails_is_an_error_at_the_reference() {
    let errors = compile::compile_file(&examples().join("calculator-agent.yaml"), &mut |_| {
        Resolved::Failed("no version of tollgate/calculator matches ^0.1".into())
    })
    .unwrap_err();
    let error = &errors.errors()[0];
    assert_eq!((error.line, error.column), (22, 3), "{error}");
    assert!(
        error
            .message
            .ends_with("no version of tollgate/calculator matches ^0.1"),
        "{error}"
    );
}
