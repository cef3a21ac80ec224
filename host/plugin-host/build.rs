//! Builds the built-in components (provider adapters, tool servers, skills, and
//! the test-only misbehaving adapter) for `wasm32-wasip2` and embeds them, so
//! that one `cargo build` of the gateway yields a working server.
//!
//! Every folder `plugins/<name>/` is a built-in component: its package must be
//! named `tollgate-plugin-<name>`, and the host serves it as `<name>`. Its kind
//! is `[package.metadata.tollgate] kind` (`provider-adapter` when absent).
//! Adding a component therefore needs no edit here (the workspace lists
//! `plugins/*` too).
//!
//! Each kind is built by its own cargo run: cargo unifies the SDK's features
//! across the packages of one run, and a component must carry the bindings of
//! its own world only. For the same reason, provider adapters on a newer WIT
//! version (`[package.metadata.tollgate] wit = "0.2.0"`, which enable the
//! SDK's `native` feature) get a run of their own.
//!
//! Each built-in is signed for the registry as it is embedded (`build/signing.rs`).
//!
//! The inner cargo gets its own `--target-dir`: the outer build holds the lock on the
//! main one, so sharing it would deadlock. Variables cargo sets for build scripts are
//! cleared so the inner build targets wasm with its own profile and flags.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/signing.rs"]
mod signing;

/// Guest packages built for tests only, not embedded: (package, wasm artifact
/// stem, kind, WIT version). Each is built in its version's cargo run.
const TEST_ONLY: &[(&str, &str, &str, &str)] = &[
    (
        "tollgate-test-misbehaving",
        "tollgate_test_misbehaving",
        "provider-adapter",
        // It serves the operations besides chat, so hostile tests reach
        // that lane too.
        "0.3.0",
    ),
    (
        "tollgate-test-hostile-tool",
        "tollgate_test_hostile_tool",
        "tool-server",
        "0.1.0",
    ),
    (
        "tollgate-test-hostile-guardrail",
        "tollgate_test_hostile_guardrail",
        "guardrail",
        "0.1.0",
    ),
    (
        "tollgate-test-mcp-tool",
        "tollgate_test_mcp_tool",
        "tool-server",
        "0.3.0",
    ),
    (
        "tollgate-test-mcp-tool-v2",
        "tollgate_test_mcp_tool_v2",
        "tool-server",
        "0.2.0",
    ),
    (
        "tollgate-test-sampling-tool",
        "tollgate_test_sampling_tool",
        "tool-server",
        "0.4.0",
    ),
    (
        "tollgate-test-tool-caller",
        "tollgate_test_tool_caller",
        "skill",
        "0.1.0",
    ),
];

/// Component kinds, as `[package.metadata.tollgate] kind` names them, with the
/// constant the generated file lists them under.
const KINDS: &[(&str, &str)] = &[
    ("provider-adapter", "BUILTIN_ADAPTERS"),
    ("tool-server", "BUILTIN_TOOL_SERVERS"),
    ("skill", "BUILTIN_SKILLS"),
    ("guardrail", "BUILTIN_GUARDRAILS"),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    // host/plugin-host → the repository root.
    let root = manifest_dir.parent().and_then(Path::parent).unwrap().to_path_buf();
    for watched in [
        "wit",
        "plugin-sdk",
        "plugins",
        "tests/plugins",
        "tests/python/fixtures",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let components = builtin_components(&root);
    let target_dir = root.join("target").join("plugins");
    let artifacts = target_dir.join("wasm32-wasip2").join("plugin");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut generated = String::from(
        "/// A built-in component: its name, bytes, what its manifest declares, and\n/// its registry manifest (JSON) and signature (`KEY_ID:SIGNATURE`), made at build time.\npub struct Builtin {\n    pub name: &'static str,\n    pub bytes: &'static [u8],\n    pub capabilities: &'static [&'static str],\n    pub allowed_hosts: &'static [&'static str],\n    pub manifest: &'static str,\n    pub signature: &'static str,\n}\n",
    );
    let key = signing::BuildKey::load_or_generate();
    generated.push_str(&format!(
        "/// The public half of the key the built-ins were signed with (ed25519, base64url).\npub const BUILTIN_SIGNING_KEY: &str = {:?};\n",
        key.public_key()
    ));
    for (kind, constant) in KINDS {
        let of_kind: Vec<&Builtin> = components.iter().filter(|c| c.kind == *kind).collect();
        // One run per WIT version of the kind: an adapter on
        // `tollgate:provider@0.2.0` enables the SDK's `native` feature, which
        // would otherwise move every adapter of the run to 0.2.0.
        let mut versions: Vec<&str> = of_kind
            .iter()
            .map(|c| c.wit.as_str())
            .chain(
                TEST_ONLY
                    .iter()
                    .filter(|(_, _, test_kind, _)| test_kind == kind)
                    .map(|(_, _, _, version)| *version),
            )
            .collect();
        versions.sort_unstable();
        versions.dedup();
        if versions.is_empty() {
            versions.push("");
        }
        for version in &versions {
            let mut packages: Vec<String> = of_kind
                .iter()
                .filter(|c| c.wit == *version)
                .map(|c| format!("tollgate-plugin-{}", c.name))
                .collect();
            packages.extend(
                TEST_ONLY
                    .iter()
                    .filter(|(_, _, test_kind, test_version)| test_kind == kind && test_version == version)
                    .map(|(package, _, _, _)| package.to_string()),
            );
            if !packages.is_empty() {
                build_guests(&root, &target_dir, &packages);
            }
        }
        generated.push_str(&format!(
            "/// Built-in {kind} components compiled into this binary.\npub const {constant}: &[Builtin] = &[\n"
        ));
        for component in of_kind {
            let stem = format!("tollgate_plugin_{}", component.name.replace('-', "_"));
            let src = artifacts.join(format!("{stem}.wasm"));
            let dst = out_dir.join(format!("{stem}.wasm"));
            std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
            let bytes = std::fs::read(&dst).unwrap_or_else(|e| panic!("read {}: {e}", dst.display()));
            let signed = key.sign(
                &signing::Declared {
                    name: &component.name,
                    kind: &component.kind,
                    wit: &component.wit,
                    capabilities: &component.capabilities,
                    allowed_hosts: &component.allowed_hosts,
                },
                &bytes,
            );
            generated.push_str(&format!(
                "    Builtin {{ name: {:?}, bytes: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{stem}.wasm\")), capabilities: &{:?}, allowed_hosts: &{:?}, manifest: {:?}, signature: {:?} }},\n",
                component.name, component.capabilities, component.allowed_hosts, signed.manifest, signed.signature
            ));
        }
        generated.push_str("];\n");
    }
    std::fs::write(out_dir.join("builtin_components.rs"), generated).unwrap();
    for (_, stem, _, _) in TEST_ONLY {
        let env_name = stem.to_uppercase().replace("TOLLGATE_", "TG_");
        println!(
            "cargo:rustc-env={env_name}_WASM={}",
            artifacts.join(format!("{stem}.wasm")).display()
        );
    }
}

/// A folder under `plugins/` and what its `[package.metadata.tollgate]` declares.
struct Builtin {
    name: String,
    kind: String,
    /// `[package.metadata.tollgate] wit`: the WIT version the component
    /// exports, when it is not the oldest (`0.1.0` when absent).
    wit: String,
    capabilities: Vec<String>,
    allowed_hosts: Vec<String>,
}

/// Every folder under `plugins/`, sorted for a stable build. Each folder's
/// package must be `tollgate-plugin-<folder>`.
fn builtin_components(root: &Path) -> Vec<Builtin> {
    let mut components = Vec::new();
    let plugins = root.join("plugins");
    for entry in std::fs::read_dir(&plugins).unwrap_or_else(|e| panic!("read {}: {e}", plugins.display())) {
        let path = entry.unwrap().path();
        let manifest = path.join("Cargo.toml");
        if !manifest.exists() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&manifest).unwrap();
        let expected = format!("name = \"tollgate-plugin-{name}\"");
        assert!(
            text.lines().any(|line| line.trim() == expected),
            "{} must declare `{expected}`: the folder name is the component name",
            manifest.display()
        );
        let kind = declared(&text, "kind")
            .unwrap_or("\"provider-adapter\"")
            .trim_matches('"')
            .to_string();
        assert!(
            KINDS.iter().any(|(k, _)| *k == kind),
            "{}: unknown component kind '{kind}'",
            manifest.display()
        );
        let wit = declared(&text, "wit")
            .unwrap_or("\"0.1.0\"")
            .trim_matches('"')
            .to_string();
        components.push(Builtin {
            name,
            kind,
            wit,
            capabilities: string_list(declared(&text, "capabilities")),
            allowed_hosts: string_list(declared(&text, "allowed_hosts")),
        });
    }
    components.sort_by(|a, b| a.name.cmp(&b.name));
    components
}

/// The raw value of `key = …` under `[package.metadata.tollgate]`, read line
/// by line (a build script of the host should not need a TOML parser for
/// three one-line keys).
fn declared<'a>(manifest: &'a str, key: &str) -> Option<&'a str> {
    let mut in_section = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_section = line == "[package.metadata.tollgate]";
        } else if in_section
            && let Some((name, value)) = line.split_once('=')
            && name.trim() == key
        {
            return Some(value.trim());
        }
    }
    None
}

/// `["a", "b"]` → `a`, `b`.
fn string_list(value: Option<&str>) -> Vec<String> {
    let Some(inner) = value
        .and_then(|v| v.strip_prefix('['))
        .and_then(|v| v.strip_suffix(']'))
    else {
        return Vec::new();
    };
    inner
        .split(',')
        .map(|item| item.trim().trim_matches('"').to_string())
        .filter(|item| !item.is_empty())
        .collect()
}

/// The standard library for `wasm32-wasip2` is a rustup target of its own.
/// Where rustup will not fetch it on demand (`RUSTUP_AUTO_INSTALL=0`, usual on
/// CI and managed machines), the guests' build would fail on a fresh machine,
/// so it is added here, for the toolchain this build runs on, as the README's
/// start command needs. Without rustup (a distribution's Rust) nothing is
/// tried and the build's own error says what is missing.
fn ensure_wasm_target() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    let Some(sysroot) = sysroot else { return };
    let target_lib = sysroot.join("lib/rustlib/wasm32-wasip2/lib");
    // Runs again when the target is removed, so a later build adds it back.
    println!("cargo:rerun-if-changed={}", target_lib.display());
    if target_lib.is_dir() {
        return;
    }
    let mut rustup = Command::new("rustup");
    rustup.args(["target", "add", "wasm32-wasip2"]);
    if let Ok(toolchain) = std::env::var("RUSTUP_TOOLCHAIN") {
        rustup.args(["--toolchain", &toolchain]);
    }
    println!("cargo:warning=the wasm32-wasip2 target is missing; adding it: rustup target add wasm32-wasip2");
    match rustup.status() {
        Ok(status) if status.success() => {}
        Ok(status) => println!("cargo:warning=rustup target add wasm32-wasip2 failed ({status})"),
        Err(error) => println!("cargo:warning=rustup could not be run ({error}); add the wasm32-wasip2 target by hand"),
    }
}

fn build_guests(root: &Path, target_dir: &Path, packages: &[String]) {
    ensure_wasm_target();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args([
            "build",
            "--profile",
            "plugin",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(target_dir)
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"));
    for package in packages {
        cmd.args(["-p", package]);
    }
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let inherited_from_cargo = key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE";
        if inherited_from_cargo
            || matches!(
                &*key,
                "RUSTFLAGS"
                    | "RUSTC"
                    | "RUSTC_WRAPPER"
                    | "RUSTDOC"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "TARGET"
                    | "HOST"
                    | "OUT_DIR"
                    | "PROFILE"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "NUM_JOBS"
            )
        {
            cmd.env_remove(&*key);
        }
    }
    let status = cmd.status().expect("failed to start cargo for the wasm plugins");
    if !status.success() {
        panic!(
            "building the wasm32-wasip2 plugins failed (see above). If the target is missing, run: rustup target add wasm32-wasip2"
        );
    }
}
