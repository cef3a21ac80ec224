//! Builds the built-in provider adapters (and the test-only misbehaving adapter) for
//! `wasm32-wasip2`, so that one `cargo build` of the host yields a working server.
//!
//! The inner cargo gets its own `--target-dir`: the outer build holds the lock on the
//! main one, so sharing it would deadlock. Variables cargo sets for build scripts are
//! cleared so the inner build targets wasm with its own profile and flags.

use std::path::{Path, PathBuf};
use std::process::Command;

const GUEST_PACKAGES: &[&str] = &["tollgate-plugin-openai-compatible", "tollgate-test-misbehaving"];
/// Built-in adapters embedded in the binary: (adapter name, wasm artifact stem).
const EMBEDDED: &[(&str, &str)] = &[("openai-compatible", "tollgate_plugin_openai_compatible")];
const TEST_ONLY: &[&str] = &["tollgate_test_misbehaving"];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    for watched in [
        "wit",
        "plugin-sdk",
        "plugins",
        "tests/plugins",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let target_dir = root.join("target").join("plugins");
    build_guests(&root, &target_dir);

    let artifacts = target_dir.join("wasm32-wasip2").join("plugin");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut registry = String::from(
        "/// Built-in adapters compiled into this binary: (name, component bytes).\npub const BUILTIN_ADAPTERS: &[(&str, &[u8])] = &[\n",
    );
    for (name, stem) in EMBEDDED {
        let src = artifacts.join(format!("{stem}.wasm"));
        let dst = out_dir.join(format!("{stem}.wasm"));
        std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
        registry.push_str(&format!(
            "    ({name:?}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{stem}.wasm\"))),\n"
        ));
    }
    registry.push_str("];\n");
    std::fs::write(out_dir.join("builtin_adapters.rs"), registry).unwrap();
    for stem in TEST_ONLY {
        let env_name = stem.to_uppercase().replace("TOLLGATE_", "TG_");
        println!(
            "cargo:rustc-env={env_name}_WASM={}",
            artifacts.join(format!("{stem}.wasm")).display()
        );
    }
}

fn build_guests(root: &Path, target_dir: &Path) {
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
    for package in GUEST_PACKAGES {
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
