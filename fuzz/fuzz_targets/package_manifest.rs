//! `Manifest::from_json` on any bytes: it never panics, what it accepts passes
//! `validate`, and an accepted manifest written back as JSON parses to the same
//! manifest (what the registry stores is what it accepted).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_registry::Manifest;

fuzz_target!(|json: &[u8]| {
    let manifest = match Manifest::from_json(json) {
        Ok(manifest) => manifest,
        Err(error) => {
            assert!(!error.0.is_empty());
            return;
        }
    };
    manifest.validate().expect("an accepted manifest is valid");
    assert_eq!(
        manifest.kind.wit_world().is_some(),
        manifest.content.media_type == "application/wasm"
    );
    let written = serde_json::to_vec(&manifest).expect("manifests serialise");
    let again = Manifest::from_json(&written)
        .unwrap_or_else(|e| panic!("written manifest refused ({e}): {}", String::from_utf8_lossy(&written)));
    assert_eq!(again, manifest, "{}", String::from_utf8_lossy(&written));
});
