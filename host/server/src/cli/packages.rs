//! `tollgate package …` (keygen, publish, list, show, yank, deprecate) and
//! `tollgate plugin …` (new, install): clients of the registry's HTTP API
//! (docs/registry.md), plus the provider-adapter scaffold (`packages/scaffold.rs`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use tollgate_registry::{Digest, Manifest, PackageKind, PackageName};

mod scaffold;
mod signatures;

pub use signatures::{asks_line, signed_line};

#[derive(Args, Debug)]
pub struct Server {
    /// Gateway URL.
    #[arg(long, env = "TOLLGATE_URL", default_value = "http://127.0.0.1:8080", global = true)]
    url: String,
    /// API key (needed to publish, yank, deprecate and install; reads are public).
    #[arg(long, env = "TOLLGATE_API_KEY", hide_env_values = true, global = true)]
    api_key: Option<String>,
    /// Print raw JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
pub enum PackagesCommand {
    /// Publish (signed or not), list, inspect, yank and deprecate registry
    /// packages; make signing keys.
    Package {
        #[command(flatten)]
        server: Server,
        #[command(subcommand)]
        command: PackageCommand,
    },
    /// Write and install provider-adapter plugins.
    Plugin {
        #[command(flatten)]
        server: Server,
        #[command(subcommand)]
        command: PluginCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum PackageCommand {
    /// Make an ed25519 signing key: writes the private key to --out (owner
    /// read-only, never overwritten) and prints the public key to register
    /// with `tollgate namespaces keys add NAMESPACE PUBLIC_KEY`.
    Keygen {
        /// Where to write the private key.
        #[arg(long, value_name = "PATH", default_value = "tollgate-signing.key")]
        out: PathBuf,
    },
    /// Upload CONTENT and publish it under the manifest's name and version,
    /// signed when a signing key is given.
    Publish {
        /// The package content (a .wasm component, or a document).
        content: PathBuf,
        /// Manifest without `content` (filled in from CONTENT).
        #[arg(long, default_value = "tollgate-package.json")]
        manifest: PathBuf,
        /// Sign the manifest and content with this private key (from
        /// `tollgate package keygen`); its public key must be registered for
        /// the package's namespace. What is signed: docs/registry.md.
        #[arg(long, env = "TOLLGATE_SIGNING_KEY", value_name = "PATH")]
        signing_key: Option<PathBuf>,
    },
    /// Search packages.
    List {
        #[arg(long)]
        kind: Option<String>,
        /// Text to find in names and descriptions.
        #[arg(long)]
        query: Option<String>,
    },
    /// A package's versions, or one version's manifest (NAME@VERSION).
    Show { package: String },
    /// Hide NAME@VERSION from new installs (existing installs keep working).
    Yank {
        package: String,
        /// Undo a yank.
        #[arg(long)]
        undo: bool,
    },
    /// Mark NAME@VERSION deprecated with a message (or lift it with --clear).
    Deprecate {
        package: String,
        #[arg(long, required_unless_present = "clear")]
        message: Option<String>,
        #[arg(long)]
        clear: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Scaffold a component crate on the plugin SDK (builds for wasm32-wasip2).
    New {
        /// Crate and package name, e.g. my-adapter.
        name: String,
        /// What to scaffold.
        #[arg(long, value_enum, default_value = "provider-adapter")]
        kind: scaffold::Kind,
        /// Registry namespace to publish under.
        #[arg(long, default_value = "my-team")]
        namespace: String,
        /// Directory to create (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Path to the `plugin-sdk` crate (default: TOLLGATE_PLUGIN_SDK, else
        /// the SDK of the source tree this binary was built from).
        #[arg(long, env = "TOLLGATE_PLUGIN_SDK")]
        sdk: Option<PathBuf>,
    },
    /// Serve provider PROVIDER with adapter NAMESPACE/NAME@VERSION from now
    /// on. The version is checked (manifest, signature, content) and must
    /// pass your workspace's package policy before it is loaded; prints who
    /// signed it.
    Install {
        package: String,
        #[arg(long)]
        provider: String,
    },
}

pub async fn run(command: PackagesCommand) -> anyhow::Result<()> {
    match command {
        PackagesCommand::Package { server, command } => package(&server, command).await,
        PackagesCommand::Plugin { server, command } => match command {
            PluginCommand::New {
                name,
                kind,
                namespace,
                dir,
                sdk,
            } => {
                let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
                scaffold::create(kind, &name, &namespace, &dir, sdk.as_deref())?;
                println!("created {} '{name}' in {}", kind.registry_kind(), dir.display());
                println!(
                    "build it:   cd {} && cargo build --release --target wasm32-wasip2",
                    dir.display()
                );
                println!(
                    "publish it: tollgate package publish target/wasm32-wasip2/release/{}.wasm",
                    name.replace('-', "_")
                );
                Ok(())
            }
            PluginCommand::Install { package, provider } => {
                let (name, version) = split_reference(&package)?;
                let version = version.context("give the exact version to install: NAMESPACE/NAME@VERSION")?;
                let result = send(
                    &server,
                    reqwest::Method::PUT,
                    &format!("/v1/installs/{provider}"),
                    Some(json!({"package": name.to_string(), "version": version})),
                )
                .await?;
                print(&server, &result, || {
                    format!(
                        "provider '{provider}' now uses {} ({})\n{}\n{}",
                        result["adapter"].as_str().unwrap_or("?"),
                        result["digest"].as_str().unwrap_or("?"),
                        signed_line(&result["signature"]),
                        asks_line(&result["capabilities"])
                    )
                })
            }
        },
    }
}

async fn package(server: &Server, command: PackageCommand) -> anyhow::Result<()> {
    match command {
        PackageCommand::Keygen { out } => {
            let result = signatures::keygen(&out)?;
            print(server, &result, || signatures::keygen_text(&result))
        }
        PackageCommand::Publish {
            content,
            manifest,
            signing_key,
        } => {
            let manifest = read_manifest(&manifest, &content)?;
            // Signed before anything is sent, so a bad key file uploads nothing.
            let signature = signing_key
                .as_deref()
                .map(|path| signatures::sign(&manifest, path))
                .transpose()?;
            let bytes = std::fs::read(&content).with_context(|| format!("cannot read {}", content.display()))?;
            let digest = &manifest.content.digest;
            upload(server, digest, bytes).await?;
            let path = format!("/v1/packages/{}/{}", manifest.name, manifest.version);
            let headers: Vec<(&str, String)> = signature
                .iter()
                .map(|s| (tollgate_registry::signing::SIGNATURE_HEADER, s.to_header()))
                .collect();
            let result = send_with(
                server,
                reqwest::Method::PUT,
                &path,
                Some(serde_json::to_value(&manifest)?),
                &headers,
            )
            .await?;
            print(server, &result, || {
                let signed = match &signature {
                    Some(s) => format!(", signed by key {}", s.key_id),
                    None => ", unsigned".into(),
                };
                format!("published {}@{} ({digest}){signed}", manifest.name, manifest.version)
            })
        }
        PackageCommand::List { kind, query } => {
            let mut url = reqwest::Url::parse(&format!("{}/v1/packages", server.url.trim_end_matches('/')))?;
            if let Some(kind) = kind {
                url.query_pairs_mut().append_pair("kind", &kind);
            }
            if let Some(query) = query {
                url.query_pairs_mut().append_pair("q", &query);
            }
            let result = answer(reqwest::Client::new().get(url).send().await?).await?;
            print(server, &result, || {
                let rows: Vec<String> = result["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        format!(
                            "{:<40} {:<17} {:<28} {}",
                            p["name"].as_str().unwrap_or(""),
                            p["kind"].as_str().unwrap_or(""),
                            p["latest"].as_str().unwrap_or("(all yanked)"),
                            p["description"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                if rows.is_empty() {
                    "no packages".into()
                } else {
                    rows.join("\n")
                }
            })
        }
        PackageCommand::Show { package } => {
            let (name, version) = split_reference(&package)?;
            let path = match &version {
                Some(version) => format!("/v1/packages/{name}/{version}"),
                None => format!("/v1/packages/{name}"),
            };
            let result = send(server, reqwest::Method::GET, &path, None).await?;
            print(server, &result, || match version {
                Some(_) => serde_json::to_string_pretty(&result).unwrap_or_default(),
                None => {
                    let mut lines = vec![format!("{} ({})", name, result["kind"].as_str().unwrap_or("?"))];
                    for v in result["versions"].as_array().into_iter().flatten() {
                        let mut line = format!(
                            "  {}  {}",
                            v["version"].as_str().unwrap_or(""),
                            v["digest"].as_str().unwrap_or("")
                        );
                        if v["yanked"] == true {
                            line.push_str("  [yanked]");
                        }
                        if let Some(message) = v["deprecated"].as_str() {
                            line.push_str(&format!("  [deprecated: {message}]"));
                        }
                        match v["signature"]["key_id"].as_str() {
                            Some(key_id) => line.push_str(&format!("  [signed by key {key_id}]")),
                            None => line.push_str("  [unsigned]"),
                        }
                        lines.push(line);
                    }
                    lines.join("\n")
                }
            })
        }
        PackageCommand::Yank { package, undo } => {
            let (name, version) = split_reference(&package)?;
            let version = version.context("yank needs NAMESPACE/NAME@VERSION")?;
            let action = if undo { "unyank" } else { "yank" };
            let result = send(
                server,
                reqwest::Method::POST,
                &format!("/v1/packages/{name}/{version}/{action}"),
                None,
            )
            .await?;
            print(server, &result, || {
                format!("{name}@{version}: {}", if undo { "unyanked" } else { "yanked" })
            })
        }
        PackageCommand::Deprecate {
            package,
            message,
            clear,
        } => {
            let (name, version) = split_reference(&package)?;
            let version = version.context("deprecate needs NAMESPACE/NAME@VERSION")?;
            let message = if clear { None } else { message };
            let path = format!("/v1/packages/{name}/{version}/deprecate");
            let result = send(server, reqwest::Method::POST, &path, Some(json!({"message": message}))).await?;
            print(server, &result, || match &message {
                Some(m) => format!("{name}@{version}: deprecated ({m})"),
                None => format!("{name}@{version}: no longer deprecated"),
            })
        }
    }
}

/// `namespace/name` or `namespace/name@version`.
fn split_reference(text: &str) -> anyhow::Result<(PackageName, Option<String>)> {
    let (name, version) = match text.split_once('@') {
        Some((name, version)) => (name, Some(version.to_string())),
        None => (text, None),
    };
    if let Some(version) = &version {
        version
            .parse::<semver::Version>()
            .with_context(|| format!("'{version}' is not a semver version"))?;
    }
    Ok((name.parse()?, version))
}

/// The manifest file with `schema_version` and `content` filled in from the content file.
fn read_manifest(path: &Path, content: &Path) -> anyhow::Result<Manifest> {
    let text = std::fs::read(path).with_context(|| format!("cannot read the manifest {}", path.display()))?;
    let mut value: Value = serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let bytes = std::fs::read(content).with_context(|| format!("cannot read {}", content.display()))?;
    let object = value
        .as_object_mut()
        .with_context(|| format!("{} must hold a JSON object", path.display()))?;
    let kind: PackageKind = object
        .get("kind")
        .and_then(Value::as_str)
        .context("the manifest needs a 'kind'")?
        .parse()
        .map_err(|e: String| anyhow::anyhow!(e))?;
    let media_type = if kind.wit_world().is_some() {
        tollgate_registry::manifest::WASM_MEDIA_TYPE
    } else {
        match content.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => "application/yaml",
            Some("json") => "application/json",
            _ => "text/plain",
        }
    };
    object
        .entry("schema_version")
        .or_insert(json!(tollgate_registry::manifest::SCHEMA_VERSION));
    object.insert(
        "content".into(),
        json!({"digest": Digest::of(&bytes), "size": bytes.len(), "media_type": media_type}),
    );
    let manifest: Manifest = serde_json::from_value(value).context("invalid manifest")?;
    manifest.validate()?;
    tollgate_registry::component::check_world(manifest.kind, &bytes)?;
    Ok(manifest)
}

async fn upload(server: &Server, digest: &Digest, bytes: Vec<u8>) -> anyhow::Result<()> {
    let url = format!("{}/v1/blobs/{digest}", server.url.trim_end_matches('/'));
    let mut request = reqwest::Client::new().put(url).body(bytes);
    if let Some(key) = &server.api_key {
        request = request.bearer_auth(key);
    }
    answer(
        request
            .send()
            .await
            .with_context(|| format!("cannot reach {}", server.url))?,
    )
    .await?;
    Ok(())
}

async fn send(server: &Server, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    send_with(server, method, path, body, &[]).await
}

async fn send_with(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, String)],
) -> anyhow::Result<Value> {
    let url = format!("{}{path}", server.url.trim_end_matches('/'));
    let mut request = reqwest::Client::new().request(method, url);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    if let Some(key) = &server.api_key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    answer(
        request
            .send()
            .await
            .with_context(|| format!("cannot reach {}", server.url))?,
    )
    .await
}

/// The JSON answer, or the documented error's code and message as the error.
async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
    let status = response.status();
    let text = response.text().await?;
    let value: Value = serde_json::from_str(&text).with_context(|| format!("HTTP {status}: {text}"))?;
    if !status.is_success() {
        let error = &value["error"];
        anyhow::bail!(
            "{} (HTTP {}): {}",
            error["code"].as_str().unwrap_or("error"),
            status.as_u16(),
            error["message"].as_str().unwrap_or(&text)
        );
    }
    Ok(value)
}

fn print(server: &Server, result: &Value, human: impl FnOnce() -> String) -> anyhow::Result<()> {
    if server.json {
        println!("{}", serde_json::to_string(result)?);
    } else {
        println!("{}", human());
    }
    Ok(())
}
