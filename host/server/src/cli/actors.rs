//! `tollgate actors …` and `tollgate runs …`:
//! - `actors compile FILE [--json]` compiles an actor's YAML (docs/actors.md)
//!   to its IR and id on this machine, with no gateway, when every reference
//!   is a local file; an actor that references registry packages is compiled
//!   where the registry is, on a gateway;
//! - `actors publish FILE` sends the YAML (and its `path` sub-actor files) to
//!   the gateway's `actors.publish`; `actors deploy NS/NAME ID` binds a URL;
//! - `runs get RUN_ID` shows a run's trail; `runs verify RUN_ID` checks the
//!   trail's signature against the key the gateway publishes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;

use super::client::Connection;
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
    /// Compile and publish an actor on the gateway (its `path` sub-actors
    /// first); prints its id. Publishing the same content again changes
    /// nothing; published actors never change.
    #[command(after_help = "Example:\n  tollgate actors publish examples/actors/greeter.yaml")]
    Publish {
        #[command(flatten)]
        connection: Connection,
        /// The actor's YAML file.
        file: PathBuf,
        /// Package version (default: one patch above the newest).
        #[arg(long)]
        version: Option<String>,
        /// SPDX license of the package (default UNLICENSED).
        #[arg(long)]
        license: Option<String>,
    },
    /// Bind POST /v1/actors/NAMESPACE/NAME (and the chat model
    /// actor/NAMESPACE/NAME) to a published actor id; again to move it.
    #[command(after_help = "Example:\n  tollgate actors deploy demo/greeter 3274845227336273f81b0f68e25716169b138c3e")]
    Deploy {
        #[command(flatten)]
        connection: Connection,
        /// `namespace/name`.
        deployment: String,
        actor_id: String,
    },
    /// List the workspace's deployments.
    Deployments {
        #[command(flatten)]
        connection: Connection,
    },
}

/// `tollgate runs …`: actor runs and their provenance.
#[derive(Subcommand, Debug)]
pub enum RunsCommand {
    /// Show a run: status, cost and its provenance trail.
    Get {
        #[command(flatten)]
        connection: Connection,
        /// The run id (`run_…`) or the run's request id.
        run_id: String,
    },
    /// Check a run's trail signature against the gateway's published key
    /// (GET /v1/provenance/key); exits non-zero when it does not verify.
    Verify {
        #[command(flatten)]
        connection: Connection,
        run_id: String,
    },
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

pub async fn run(command: ActorsCommand) -> anyhow::Result<()> {
    match command {
        ActorsCommand::Compile(args) => compile_offline(&args),
        ActorsCommand::Publish {
            connection,
            file,
            version,
            license,
        } => {
            let source = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let files = sub_actor_files(&file)?;
            let mut params = json!({"source": source, "files": files});
            if let Some(version) = version {
                params["version"] = json!(version);
            }
            if let Some(license) = license {
                params["license"] = json!(license);
            }
            let result = op(&connection, "actors.publish", params).await?;
            if connection.json() {
                println!("{}", serde_json::to_string(&result)?);
            } else {
                let note = if result["created"] == true {
                    "published"
                } else {
                    "already published"
                };
                println!(
                    "{}  {}@{} ({note})",
                    result["id"].as_str().unwrap_or_default(),
                    result["package"].as_str().unwrap_or_default(),
                    result["version"].as_str().unwrap_or_default()
                );
            }
            Ok(())
        }
        ActorsCommand::Deploy {
            connection,
            deployment,
            actor_id,
        } => {
            let (namespace, name) = deployment
                .split_once('/')
                .context("the deployment is NAMESPACE/NAME, e.g. demo/greeter")?;
            let params = json!({"namespace": namespace, "name": name, "actor_id": actor_id});
            print(&connection, op(&connection, "deployments.create", params).await?)
        }
        ActorsCommand::Deployments { connection } => {
            print(&connection, op(&connection, "deployments.list", json!({})).await?)
        }
    }
}

pub async fn runs(command: RunsCommand) -> anyhow::Result<()> {
    match command {
        RunsCommand::Get { connection, run_id } => print(
            &connection,
            op(&connection, "runs.get", json!({"run_id": run_id})).await?,
        ),
        RunsCommand::Verify { connection, run_id } => {
            let run = op(&connection, "runs.get", json!({"run_id": run_id})).await?;
            let (url, _) = connection.resolve()?;
            let published: serde_json::Value = reqwest::get(format!("{url}/v1/provenance/key"))
                .await
                .with_context(|| format!("cannot fetch {url}/v1/provenance/key"))?
                .json()
                .await?;
            let key = published["public_key"]
                .as_str()
                .context("the gateway published no key")?;
            let signature = run["signature"].as_str().unwrap_or_default();
            match tollgate_actors::provenance::verify(&run["trail"], signature, key) {
                Ok(()) => {
                    println!(
                        "verified: the trail of {} is signed by the gateway's key {key}",
                        run["run_id"].as_str().unwrap_or_default()
                    );
                    Ok(())
                }
                Err(error) => anyhow::bail!("NOT verified: {error}"),
            }
        }
    }
}

async fn op(connection: &Connection, name: &str, mut params: serde_json::Value) -> anyhow::Result<serde_json::Value> {
    let (url, key) = connection.resolve()?;
    if let Some(workspace) = connection.workspace() {
        params["workspace_id"] = json!(workspace);
    }
    super::client::call(&url, key.as_deref(), name, params).await
}

fn print(connection: &Connection, result: serde_json::Value) -> anyhow::Result<()> {
    if connection.json() {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        super::output::print_human(&result);
    }
    Ok(())
}

/// The files the actor's `path` references reach, transitively, keyed by
/// their path relative to the actor's directory (as the gateway lays them out).
fn sub_actor_files(root: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let base = root.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(file) = pending.pop() {
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let Ok(document) = compile::parse(&text) else {
            continue; // the gateway reports the errors, with positions
        };
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        for reference in document.references() {
            if let compile::RefSpec::Path { path } = reference.spec {
                let target = normalize(&dir.join(&path));
                let relative = target
                    .strip_prefix(normalize(&base))
                    .with_context(|| format!("{path} (in {}) is outside the actor's directory", file.display()))?
                    .to_string_lossy()
                    .into_owned();
                if let std::collections::btree_map::Entry::Vacant(slot) = files.entry(relative) {
                    let text =
                        std::fs::read_to_string(&target).with_context(|| format!("reading {}", target.display()))?;
                    slot.insert(text);
                    pending.push(target);
                }
            }
        }
    }
    Ok(files)
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
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
