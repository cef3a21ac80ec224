//! Reads a component's top-level exports without compiling it, so a package
//! whose binary does not implement its declared kind is refused with a clear
//! message at publish time (and again by the host before it runs one).

use wasmparser::{Encoding, Parser, Payload};

use crate::PackageKind;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    #[error("the content is not a WebAssembly component: {0}")]
    NotAComponent(String),
    #[error(
        "the component does not implement the declared kind {kind}: a {kind} must export '{expected}' (world '{world}'), but this component exports {found}"
    )]
    WrongWorld {
        kind: PackageKind,
        expected: &'static str,
        world: &'static str,
        found: String,
    },
}

/// The names a component exports at its top level (for a WIT world, the
/// interfaces it exports, e.g. `tollgate:provider/adapter@0.1.0`).
pub fn exports(bytes: &[u8]) -> Result<Vec<String>, WorldError> {
    let mut exports = Vec::new();
    // Nested modules and components appear inline; only depth 1 is the outer one.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| WorldError::NotAComponent(e.to_string()))? {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    return Err(WorldError::NotAComponent("it is a core module".into()));
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    let export = export.map_err(|e| WorldError::NotAComponent(e.to_string()))?;
                    exports.push(export.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(exports)
}

/// The newest of `kind`'s worlds (see [`PackageKind::accepted_worlds`])
/// whose interface `bytes` exports, if any.
pub fn world_of(kind: PackageKind, bytes: &[u8]) -> Option<&'static str> {
    let found = exports(bytes).ok()?;
    kind.accepted_worlds()
        .iter()
        .rev()
        .find(|(_, export)| found.iter().any(|name| name == export))
        .map(|(world, _)| *world)
}

/// Checks that `bytes` is a component implementing one of `kind`'s worlds. Kinds that
/// are not components pass.
pub fn check_world(kind: PackageKind, bytes: &[u8]) -> Result<(), WorldError> {
    let (Some(expected), Some(world)) = (kind.required_export(), kind.wit_world()) else {
        return Ok(());
    };
    let found = exports(bytes)?;
    if kind
        .accepted_worlds()
        .iter()
        .any(|(_, export)| found.iter().any(|name| name == export))
    {
        return Ok(());
    }
    Err(WorldError::WrongWorld {
        kind,
        expected,
        world,
        found: if found.is_empty() {
            "nothing".into()
        } else {
            found.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
        },
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal component exporting one function inside the interface `name`.
    pub fn component_exporting(name: &str) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(component
                (core module $m (func (export "f")))
                (core instance $i (instantiate $m))
                (func $f (canon lift (core func $i "f")))
                (instance $exported (export "f" (func $f)))
                (export "{name}" (instance $exported)))"#
        ))
        .unwrap()
    }

    #[test]
    fn reads_top_level_exports() {
        let bytes = component_exporting("tollgate:tool/tools@0.1.0");
        assert_eq!(exports(&bytes).unwrap(), vec!["tollgate:tool/tools@0.1.0".to_string()]);
        check_world(PackageKind::ToolServer, &bytes).unwrap();
    }

    #[test]
    fn a_tool_server_is_not_a_provider_adapter() {
        let bytes = component_exporting("tollgate:tool/tools@0.1.0");
        let error = check_world(PackageKind::ProviderAdapter, &bytes)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("must export 'tollgate:provider/adapter@0.1.0'"),
            "{error}"
        );
        assert!(error.contains("exports 'tollgate:tool/tools@0.1.0'"), "{error}");
    }

    #[test]
    fn core_modules_and_garbage_are_not_components() {
        let module = wat::parse_str("(module)").unwrap();
        assert!(matches!(exports(&module), Err(WorldError::NotAComponent(_))));
        assert!(matches!(exports(b"not wasm"), Err(WorldError::NotAComponent(_))));
        check_world(PackageKind::Graph, b"{}").unwrap();
    }
}
