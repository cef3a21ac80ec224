//! Embeds the built-in provider catalog (`catalog/*.toml` in this crate) into
//! the binary.

use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    embed_catalog(&manifest_dir, &out_dir);
}

/// Every `host/routing/catalog/*.toml` file, embedded in name order, so providers can be
/// added in files of their own (one per native adapter, say) without editing a
/// shared one.
fn embed_catalog(manifest_dir: &Path, out_dir: &Path) {
    let dir = manifest_dir.join("catalog");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    let mut code = String::from(
        "/// The built-in provider catalog: (file name, TOML text), in name order.\npub const BUILTIN_CATALOG: &[(&str, &str)] = &[\n",
    );
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path.file_name().unwrap().to_string_lossy();
        code.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("];\n");
    std::fs::write(out_dir.join("builtin_catalog.rs"), code).unwrap();
}
