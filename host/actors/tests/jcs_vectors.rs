//! The RFC 8785 vectors from `../shared/conformance/jcs`: each input must
//! canonicalize to the byte-identical output. Skips (with a message) when the
//! shared conformance data is not beside the checkout.

use std::path::PathBuf;

#[test]
fn rfc8785_vectors_canonicalize_byte_for_byte() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/jcs");
    if !root.exists() {
        eprintln!("SKIP: {} is absent; the RFC 8785 vectors were not run", root.display());
        return;
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("input")).unwrap() {
        let path = entry.unwrap().path();
        let input: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let expected = std::fs::read(root.join("output").join(path.file_name().unwrap())).unwrap();
        let actual = tollgate_actors::canonical_bytes(&input).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&actual),
            String::from_utf8_lossy(&expected),
            "{} does not canonicalize to its output",
            path.display()
        );
        assert_eq!(
            tollgate_actors::actor_id(&input).unwrap(),
            tollgate_actors::canonical::id_of_canonical(&expected)
        );
        checked += 1;
    }
    assert!(checked >= 6, "expected the six RFC 8785 vector files, found {checked}");
}
