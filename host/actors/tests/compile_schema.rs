//! docs/schemas/actor.v1.json describes the YAML format: every example
//! actor (examples/actors and the full actors in docs/actors.md) validates
//! against it and parses; documents the compiler refuses for their shape
//! fail it too; and docs/actors.md opens with the greeter, verbatim.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tollgate_actors::compile;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("docs/schemas/actor.v1.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::meta::validate(&schema).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// The ```yaml blocks of docs/actors.md.
fn doc_blocks() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("docs/actors.md")).unwrap();
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```yaml" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            blocks.push(block.join("\n") + "\n");
        }
    }
    blocks
}

fn errors(validator: &jsonschema::Validator, source: &str) -> Vec<String> {
    let value: Value = serde_saphyr::from_str(source).unwrap();
    validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn every_example_actor_validates_and_parses() {
    let validator = validator();
    let mut files = Vec::new();
    yaml_files(&root().join("examples/actors"), &mut files);
    assert!(files.len() >= 4, "found the examples: {files:?}");
    let mut sources: Vec<(String, String)> = files
        .iter()
        .map(|f| (f.display().to_string(), std::fs::read_to_string(f).unwrap()))
        .collect();
    let blocks: Vec<String> = doc_blocks()
        .into_iter()
        .filter(|b| b.starts_with("apiVersion:"))
        .collect();
    assert!(blocks.len() >= 2, "docs/actors.md has full actors");
    sources.extend(
        blocks
            .into_iter()
            .enumerate()
            .map(|(i, b)| (format!("docs/actors.md block {i}"), b)),
    );
    for (name, source) in sources {
        let problems = errors(&validator, &source);
        assert!(problems.is_empty(), "{name} does not match the schema: {problems:#?}");
        if let Err(errors) = compile::parse(&source) {
            panic!("{name} does not parse:\n{errors}");
        }
    }
}

#[test]
fn the_schema_refuses_what_the_compiler_refuses_for_its_shape() {
    let validator = validator();
    let greeter = std::fs::read_to_string(root().join("examples/actors/greeter.yaml")).unwrap();
    let broken = [
        greeter.replace("kind: Actor", "kind: Robot"),
        greeter.replace("metadata:", "colour: blue\nmetadata:"),
        greeter.replace("      prompt: \"Say", "      temprature: 1\n      prompt: \"Say"),
        greeter.replace("name: greeter", "name: Greeter"),
        greeter.replace("temperature: 0", "temperature: 3"),
        greeter.replace("  - id: greet\n", "  - id: my-step\n"),
        greeter.replace("  - return:", "  - if: \"yes\"\n    then: [{return: x}]\n  - return:"),
        format!("{greeter}budget: {{max_cost_usd: 0.05}}\n"),
        format!("{greeter}actors: {{sub: {{path: ./sub.yaml}}}}\n").replace(
            "  - return:",
            "  - map: {items: \"{{ input.xs }}\", actor: sub}\n  - return:",
        ),
    ];
    for source in broken {
        assert!(compile::parse(&source).is_err(), "the compiler accepts:\n{source}");
        assert!(!errors(&validator, &source).is_empty(), "the schema accepts:\n{source}");
    }
}

#[test]
fn the_docs_open_with_the_greeter_verbatim() {
    let greeter = std::fs::read_to_string(root().join("examples/actors/greeter.yaml")).unwrap();
    assert_eq!(doc_blocks()[0], greeter);
}
