//! Embeds the console's static files (`console/`) in the binary: writes
//! `$OUT_DIR/console_assets.rs`, a table of paths and `include_bytes!`, so a
//! plain `cargo build` yields a working console, with no JS toolchain.

use std::path::{Path, PathBuf};

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("console");
    // A directory: cargo rescans it, so added, changed and removed files all rebuild.
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();
    let mut out = String::from(
        "/// The console's files: path below `console/` and contents.\npub static ASSETS: &[(&str, &[u8])] = &[\n",
    );
    for (relative, absolute) in files {
        out.push_str(&format!(
            "    ({relative:?}, include_bytes!({:?})),\n",
            absolute.display().to_string()
        ));
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("console_assets.rs");
    std::fs::write(target, out).expect("writing console_assets.rs");
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, files);
        } else if let Ok(relative) = path.strip_prefix(root) {
            let relative = relative.to_string_lossy().replace('\\', "/");
            if !relative.starts_with('.') && !relative.ends_with('~') {
                files.push((relative, path.clone()));
            }
        }
    }
}
