//! Compiled-component cache. Compiling a component with Cranelift takes far longer
//! than starting the server should, so compiled code is stored as `.cwasm` files
//! keyed by the component's SHA-256 and the engine's compatibility hash.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

pub fn load_component(engine: &Engine, bytes: &[u8], cache_dir: &Path) -> anyhow::Result<Component> {
    let digest = hex::encode(Sha256::digest(bytes));
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let path = cache_dir.join(format!("{}-{:016x}.cwasm", &digest[..32], hasher.finish()));

    if path.is_file() {
        // SAFETY: the file was written by `Component::serialize` from a component
        // with this digest for an engine with this compatibility hash, inside the
        // gateway's own data directory.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => return Ok(component),
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "discarding unusable compiled component"),
        }
    }

    let component = Component::new(engine, bytes)?;
    let compiled = component.serialize()?;
    // Write-then-rename so concurrent starts never read a half-written file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, compiled)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .is_err()
    {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!(path = %path.display(), "could not cache compiled component");
    }
    Ok(component)
}
