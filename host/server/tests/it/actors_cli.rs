//! `tollgate actors compile`, run as the real binary: offline compilation of
//! the examples, the printed id recomputed from the printed IR, errors with
//! file, line and column, and the refusal to compile registry references
//! without a gateway.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::BIN;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/actors")
}

fn tollgate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run tollgate")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_greeter_compiles_offline_to_an_id_anyone_can_recompute() {
    let file = examples().join("greeter.yaml");
    let output = tollgate(&["actors", "compile", file.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let keys: Vec<&String> = printed.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "ir"]);
    let id = printed["id"].as_str().unwrap();
    assert_eq!(id.len(), 40);
    assert!(
        id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{id}"
    );
    // SHA-1 of the RFC 8785 bytes of the printed `ir` is the id.
    assert_eq!(tollgate_actors::actor_id(&printed["ir"]).unwrap().as_str(), id);
    assert_eq!(printed["ir"]["metadata"]["name"], "greeter");

    // Without --json: the id and the file.
    let output = tollgate(&["actors", "compile", file.to_str().unwrap()]);
    assert!(output.status.success());
    assert!(
        text(&output.stdout).starts_with(&format!("{id}  ")),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn path_sub_actors_are_compiled_and_printed_as_children() {
    let file = examples().join("research/research.yaml");
    let output = tollgate(&["actors", "compile", file.to_str().unwrap(), "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let child = &printed["children"][0];
    assert_eq!(child["ir"]["metadata"]["name"], "researcher");
    assert_eq!(printed["ir"]["actors"]["researcher"], child["id"]);
    assert_eq!(
        tollgate_actors::actor_id(&child["ir"]).unwrap().as_str(),
        child["id"].as_str().unwrap()
    );
}

#[test]
fn registry_references_need_a_gateway() {
    let file = examples().join("calculator-agent.yaml");
    let output = tollgate(&["actors", "compile", file.to_str().unwrap(), "--json"]);
    assert!(!output.status.success());
    assert!(output.stdout.is_empty(), "{}", text(&output.stdout));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:22:3: tool 'calculator' (package tollgate/calculator ^0.1)",
            file.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("references registry packages"), "{stderr}");
    assert!(stderr.contains("must be compiled on a gateway"), "{stderr}");
}

#[test]
fn compile_errors_name_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    let greeter = std::fs::read_to_string(examples().join("greeter.yaml")).unwrap();
    std::fs::write(&file, greeter.replace("model: default", "model: fast")).unwrap();
    let output = tollgate(&["actors", "compile", file.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:19:14: unknown model profile 'fast' (defined: default)",
            file.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("does not compile (1 error)"), "{stderr}");
}

#[test]
fn the_help_says_what_compile_does() {
    let output = tollgate(&["actors", "compile", "--help"]);
    assert!(output.status.success());
    let help = text(&output.stdout);
    assert!(help.contains("offline"), "{help}");
    assert!(help.contains("--json"), "{help}");
    assert!(help.contains("compiled on a gateway"), "{help}");
}
