//! `tollgate actors compile FILE [--json]`: compiles an actor's YAML
//! (docs/actors.md) to its IR and id on this machine, with no gateway, when
//! every reference is a local file. An actor that references registry
//! packages (tools, skills, prompt templates, published sub-actors) is
//! compiled where the registry is: on a gateway.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;
use tollgate_actors::compile::{self, Compiled, Reference, Resolved};

#[derive(Subcommand, Debug)]
pub enum ActorsCommand {
    /// Compile an actor YAML file to its pinned IR and id, offline.
    ///
    /// Sub-actors referenced by `path` are compiled too (relative to the
    /// file). Errors are printed as FILE:LINE:COLUMN: MESSAGE. The id is the
    /// SHA-1 of the RFC 8785 canonical JSON of the IR, so anyone can
    /// recompute it from the printed `ir`. An actor that references registry
    /// packages or published actors must be compiled on a gateway.
    #[command(after_help = "Example:\n  tollgate actors compile examples/actors/greeter.yaml --json")]
    Compile(CompileArgs),
}

#[derive(Args, Debug)]
pub struct CompileArgs {
    /// The actor's YAML file.
    file: PathBuf,
    /// Print {"id", "ir"} (and "children", the path sub-actors, when there
    /// are any) as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(command: ActorsCommand) -> anyhow::Result<()> {
    match command {
        ActorsCommand::Compile(args) => compile_offline(&args),
    }
}

fn compile_offline(args: &CompileArgs) -> anyhow::Result<()> {
    let mut remote: Vec<String> = Vec::new();
    let mut offline = |reference: &Reference| {
        remote.push(format!(
            "{} '{}' ({})",
            reference.kind.as_str(),
            reference.alias,
            reference.spec
        ));
        Resolved::Failed(
            "a registry reference: an actor that references registry packages must be compiled on a gateway".into(),
        )
    };
    let tree = match compile::compile_file(&args.file, &mut offline) {
        Ok(tree) => tree,
        Err(errors) => {
            for error in errors.errors() {
                eprintln!("{error}");
            }
            if !remote.is_empty() {
                anyhow::bail!(
                    "{} references registry packages ({}), so it must be compiled on a gateway",
                    args.file.display(),
                    remote.join(", ")
                );
            }
            let count = errors.errors().len();
            let plural = if count == 1 { "" } else { "s" };
            anyhow::bail!("{} does not compile ({count} error{plural})", args.file.display());
        }
    };
    if args.json {
        let mut out = entry(&tree.root);
        if !tree.children.is_empty() {
            out["children"] = tree.children.iter().map(entry).collect();
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}  {}", tree.root.id, args.file.display());
        for child in &tree.children {
            let metadata = &child.ir.metadata;
            println!("{}  (sub-actor {}/{})", child.id, metadata.namespace, metadata.name);
        }
    }
    Ok(())
}

fn entry(compiled: &Compiled) -> serde_json::Value {
    json!({"id": compiled.id, "ir": compiled.ir})
}
