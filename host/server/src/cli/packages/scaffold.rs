//! `tollgate plugin new NAME [--kind …]`: a standalone component crate on the
//! plugin SDK. It is its own workspace (so it builds anywhere) and depends on
//! the SDK by path. Per kind:
//! - provider adapter: passes OpenAI-compatible traffic through and stamps
//!   `system_fingerprint` with its name and version, so a first request shows
//!   which adapter answered;
//! - tool server: one pure tool, `word_count`, with typed arguments, on tool
//!   WIT 0.4.0 (the SDK's `tool-v4`: richer content, progress, prompts,
//!   resources, elicitation and model calls; the host loads 0.1.0 to 0.3.0
//!   servers as well);
//! - skill: `answer`, which asks a model through the host;
//! - guardrail: refuses prompts with a configured word and masks it in answers.

mod templates;

use std::path::{Path, PathBuf};

use anyhow::Context;
use tollgate_registry::PackageKind;

/// The SDK of the source tree this binary was built from, if it is still there.
fn default_sdk() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugin-sdk");
    sdk.join("Cargo.toml")
        .is_file()
        .then(|| sdk.canonicalize().unwrap_or(sdk))
}

/// What `plugin new` scaffolds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    ProviderAdapter,
    ToolServer,
    Skill,
    Guardrail,
}

impl Kind {
    pub fn registry_kind(self) -> PackageKind {
        match self {
            Kind::ProviderAdapter => PackageKind::ProviderAdapter,
            Kind::ToolServer => PackageKind::ToolServer,
            Kind::Skill => PackageKind::Skill,
            Kind::Guardrail => PackageKind::Guardrail,
        }
    }

    /// The SDK feature the crate needs: a component carries one world.
    fn sdk_dependency(self, sdk: &str) -> String {
        match self {
            Kind::ProviderAdapter => format!("{{ path = \"{sdk}\" }}"),
            Kind::ToolServer => format!("{{ path = \"{sdk}\", default-features = false, features = [\"tool-v4\"] }}"),
            Kind::Skill => format!("{{ path = \"{sdk}\", default-features = false, features = [\"skill\"] }}"),
            Kind::Guardrail => format!("{{ path = \"{sdk}\", default-features = false, features = [\"guardrail\"] }}"),
        }
    }

    fn lib_rs(self) -> &'static str {
        match self {
            Kind::ProviderAdapter => LIB_RS,
            Kind::ToolServer => templates::TOOL_SERVER_RS,
            Kind::Skill => templates::SKILL_RS,
            Kind::Guardrail => templates::GUARDRAIL_RS,
        }
    }
}

pub fn create(kind: Kind, name: &str, namespace: &str, dir: &Path, sdk: Option<&Path>) -> anyhow::Result<()> {
    let package: tollgate_registry::PackageName = format!("{namespace}/{name}")
        .parse()
        .context("NAME and --namespace must be lowercase letters, digits and '-'")?;
    anyhow::ensure!(
        !dir.exists() || dir.read_dir()?.next().is_none(),
        "{} exists and is not empty",
        dir.display()
    );
    let sdk = match sdk {
        Some(path) => path.to_path_buf(),
        None => default_sdk().context(
            "cannot find the plugin SDK: pass --sdk PATH (or set TOLLGATE_PLUGIN_SDK) to a checkout's plugin-sdk directory",
        )?,
    };
    anyhow::ensure!(
        sdk.join("Cargo.toml").is_file(),
        "{} is not the plugin SDK (no Cargo.toml)",
        sdk.display()
    );
    let sdk = sdk.canonicalize().unwrap_or(sdk);
    std::fs::create_dir_all(dir.join("src"))?;
    let files = [
        ("Cargo.toml", cargo_toml(kind, name, &sdk)),
        ("rust-toolchain.toml", RUST_TOOLCHAIN.to_string()),
        ("src/lib.rs", kind.lib_rs().replace("{NAME}", name)),
        ("tollgate-package.json", package_json(kind, &package)),
        (".gitignore", "/target\n".to_string()),
    ];
    for (file, text) in files {
        std::fs::write(dir.join(file), text).with_context(|| format!("cannot write {file}"))?;
    }
    Ok(())
}

fn cargo_toml(kind: Kind, name: &str, sdk: &Path) -> String {
    let sdk = sdk.display().to_string().replace('\\', "/");
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
license = "Apache-2.0"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
# Point this at your checkout of the Tollgate plugin SDK (or a git dependency).
tollgate-plugin-sdk = {sdk_dependency}
serde = {{ version = "1", features = ["derive"] }}

# Small, fast components.
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = true

# A workspace of its own, so it builds inside or outside another one.
[workspace]
"#,
        sdk_dependency = kind.sdk_dependency(&sdk)
    )
}

const RUST_TOOLCHAIN: &str = r#"[toolchain]
channel = "1.95.0"
targets = ["wasm32-wasip2"]
"#;

fn package_json(kind: Kind, package: &tollgate_registry::PackageName) -> String {
    let registry_kind = kind.registry_kind();
    let capabilities: &[&str] = match kind {
        Kind::ProviderAdapter | Kind::ToolServer | Kind::Guardrail => &[],
        Kind::Skill => &["models"],
    };
    // A new tool server is on the newest tool world; other kinds on their first.
    let world = match kind {
        Kind::ToolServer => registry_kind.accepted_worlds().last().map(|(world, _)| *world),
        _ => registry_kind.wit_world(),
    };
    let manifest = serde_json::json!({
        "kind": registry_kind.as_str(),
        "name": package.to_string(),
        "version": "0.1.0",
        "description": format!("{} {}", registry_kind.as_str(), package.name()),
        "license": "Apache-2.0",
        "dependencies": {},
        "metadata": {"world": world, "capabilities": capabilities}
    });
    serde_json::to_string_pretty(&manifest).expect("static JSON") + "\n"
}

const LIB_RS: &str = r#"//! Provider adapter `{NAME}`: translates OpenAI chat-completions requests for
//! an OpenAI-compatible upstream and marks every answer with
//! `system_fingerprint = "{NAME}/<version>"`. Change `request`, `response` and
//! `on_events` to speak your provider's protocol.

use tollgate_plugin_sdk::json::RawObject;
use tollgate_plugin_sdk::stream::{EventData, event_data};
use tollgate_plugin_sdk::{
    Adapter, AdapterError, AuthSlot, CallContext, Event, OutboundRequest, ResponseHead, Usage, openai,
};

const FINGERPRINT: &str = concat!(env!("CARGO_PKG_NAME"), "/", env!("CARGO_PKG_VERSION"));

pub struct MyAdapter {
    ctx: CallContext,
    body: Vec<u8>,
    usage: Option<Usage>,
}

impl MyAdapter {
    /// Records usage and stamps the fingerprint on one answer or chunk.
    fn rewrite(&mut self, object: &mut RawObject<'_>) -> Result<Vec<u8>, AdapterError> {
        if let Some(usage) = object.get_non_null("usage").and_then(openai::usage_from_raw) {
            self.usage = Some(usage);
        }
        object.remove("provider");
        object
            .insert("system_fingerprint", FINGERPRINT)
            .map_err(|e| AdapterError::internal(e.to_string()))?;
        Ok(object.to_vec())
    }
}

impl Adapter for MyAdapter {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        MyAdapter { ctx, body: openai_body, usage: None }
    }

    fn request(&mut self) -> Result<OutboundRequest, AdapterError> {
        let mut object = RawObject::parse_slice(&self.body)
            .map_err(|e| AdapterError::invalid_request(format!("request body must be a JSON object: {e}")))?;
        // Pins the upstream model, asks for streamed usage, caps output tokens.
        openai::prepare_object(&mut object, &self.ctx.upstream_model, self.ctx.stream, self.ctx.max_output_tokens)?;
        if let Some(partial) = &self.ctx.continuation {
            openai::append_continuation(&mut object, partial)?;
        }
        let accept = if self.ctx.stream { "text/event-stream" } else { "application/json" };
        Ok(OutboundRequest {
            method: "POST".to_owned(),
            url: format!("{}/chat/completions", self.ctx.base_url.trim_end_matches('/')),
            headers: vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("accept".to_owned(), accept.to_owned()),
            ],
            body: object.to_vec(),
            // The host adds the provider's key; adapters never see secrets.
            auth: AuthSlot::Bearer,
        })
    }

    fn response(&mut self, _head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        let mut object =
            RawObject::parse_slice(&body).map_err(|_| AdapterError::internal("upstream returned invalid JSON"))?;
        self.rewrite(&mut object)
    }

    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        let mut chunks = Vec::with_capacity(events.len());
        for event in &events {
            if let EventData::Json(text) = event_data(&event.data)? {
                let mut chunk = RawObject::parse(text)
                    .map_err(|_| AdapterError::internal("upstream sent an invalid JSON stream chunk"))?;
                chunks.push(self.rewrite(&mut chunk)?);
            }
        }
        Ok(chunks)
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
    }

    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        openai::classify_error(&head, &body)
    }
}

tollgate_plugin_sdk::export_adapter!(MyAdapter);
"#;
