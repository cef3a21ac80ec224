//! Tidy checks on the source tree itself (as rust-analyzer's tidy test does):
//! the crate graph is the one docs/ARCHITECTURE.md documents, so no crate
//! grows a dependency its concern should not have, every crate and module
//! opens with a `//!` header saying what it owns, and a crate that writes no
//! `unsafe` forbids it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `crate name (a trailing * matches any suffix)` → the workspace crates it may
/// depend on, from the table between the crate-graph markers.
fn documented_graph() -> Vec<(String, BTreeSet<String>)> {
    let text = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let start = text.find("<!-- crate-graph -->").expect("the crate-graph markers");
    let end = text.find("<!-- /crate-graph -->").expect("the crate-graph end marker");
    let names = |cell: &str| -> Vec<String> {
        cell.split(',')
            .map(|n| n.trim().trim_matches('`').to_string())
            .filter(|n| !n.is_empty())
            .collect()
    };
    text[start..end]
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
            assert_eq!(cells.len(), 3, "a crate-graph row has three cells: {line}");
            (names(cells[0]).remove(0), names(cells[2]).into_iter().collect())
        })
        .collect()
}

/// Each workspace member → its normal dependencies on other members.
fn actual_graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let members: BTreeSet<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let deps = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|name| members.contains(name))
                .collect();
            (package["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

#[test]
fn the_crate_graph_is_the_documented_one() {
    let documented = documented_graph();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, deps) in actual_graph() {
        let Some((pattern, allowed)) = documented.iter().find(|(p, _)| matches(p, &name)) else {
            problems.push(format!("{name} is not in docs/ARCHITECTURE.md's crate graph"));
            continue;
        };
        seen.insert(pattern.clone());
        for dep in deps.difference(allowed) {
            problems.push(format!("{name} depends on {dep}, which its row does not allow"));
        }
        // Exact rows (not globs) must list exactly what the crate uses, so the
        // document never claims an edge that is gone.
        if !pattern.ends_with('*') {
            for stale in allowed.difference(&deps) {
                problems.push(format!("{name}'s row allows {stale}, which it does not depend on"));
            }
        }
    }
    for (pattern, _) in &documented {
        if !seen.contains(pattern) {
            problems.push(format!(
                "the crate graph lists {pattern}, which is not a workspace crate"
            ));
        }
    }
    assert!(problems.is_empty(), "crate graph problems:\n{}", problems.join("\n"));
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_crate_and_module_has_a_doc_header() {
    let root = root();
    let mut sources = Vec::new();
    let crate_dirs = ["host", "plugins"]
        .iter()
        .flat_map(|parent| std::fs::read_dir(root.join(parent)).unwrap())
        .map(|entry| entry.unwrap().path())
        .chain(["registry", "mock-upstream", "plugin-sdk"].iter().map(|d| root.join(d)));
    for dir in crate_dirs {
        if dir.join("src").is_dir() {
            rust_files(&dir.join("src"), &mut sources);
        }
    }
    assert!(sources.len() > 50, "found the sources ({})", sources.len());
    let missing: Vec<String> = sources
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            !text.trim_start().starts_with("//!")
        })
        .map(|path| path.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` header:\n{}",
        missing.join("\n")
    );
}

/// One owner per table (docs/ARCHITECTURE.md): in the server crate, where the
/// concerns share a crate and Cargo cannot keep them apart, only a table's
/// owner names it in SQL; everyone else calls the owner's API.
#[test]
fn only_a_tables_owner_queries_it() {
    let owners: &[(&str, &[&str])] = &[
        (
            "accounts/",
            &["accounts", "users", "workspaces", "memberships", "api_keys"],
        ),
        ("auth/", &["api_keys", "memberships"]),
        ("auth/sessions.rs", &["console_sessions"]),
        ("auth/signin.rs", &["oidc_identities", "oidc_logins"]),
        ("control/tasks.rs", &["a2a_tasks"]),
        ("packages/namespaces.rs", &["namespaces"]),
        ("packages/installs.rs", &["registry_installs"]),
        (
            "components/store.rs",
            &["component_installs", "component_install_changes"],
        ),
        ("actors/store.rs", &["actors", "actor_deployments"]),
        ("billing/quota.rs", &["plan_usage"]),
        ("billing/budgets/", &["budgets", "budget_usage"]),
        (
            "billing/payments/store.rs",
            &["checkouts", "payment_events", "subscriptions", "payment_holds"],
        ),
    ];
    let src = root().join("host/server/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.contains("sqlx::query") {
            continue;
        }
        let file = path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let allowed: BTreeSet<&str> = owners
            .iter()
            .filter(|(prefix, _)| file.starts_with(prefix))
            .flat_map(|(_, tables)| tables.iter().copied())
            .collect();
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            let table = pair[1];
            let named = matches!(pair[0], "FROM" | "JOIN" | "INTO" | "UPDATE")
                && table
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if named && !allowed.contains(table) {
                problems.push(format!("{file} queries `{table}`, which it does not own"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "SQL outside a table's owner:\n{}",
        problems.join("\n")
    );
}

/// The server's source files (paths relative to `host/server/src`) that
/// contain `needle`, but for those `exempt` allows.
fn server_files_naming(needle: &str, exempt: impl Fn(&str) -> bool) -> Vec<String> {
    let src = root().join("host/server/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|path| path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/"))
        .filter(|file| !exempt(file))
        .filter(|file| std::fs::read_to_string(src.join(file)).unwrap().contains(needle))
        .collect()
}

/// The control plane depends on the concerns, and no concern on it
/// (docs/ARCHITECTURE.md): in the server crate, only the control plane's own
/// modules and the wiring (`app.rs`) name `crate::control`.
#[test]
fn only_the_wiring_imports_the_control_plane() {
    let problems = server_files_naming("crate::control", |file| {
        file.starts_with("control/") || file == "app.rs"
    });
    assert!(
        problems.is_empty(),
        "modules outside the control plane that import it:\n{}",
        problems.join("\n")
    );
}

/// Each concern's `routes()` is generic over the router's state and names,
/// with `FromRef` bounds, only the state its handlers extract
/// (docs/ARCHITECTURE.md): in the server crate, only the wiring (`app.rs`)
/// names `AppState`.
#[test]
fn only_the_wiring_names_the_app_state() {
    let problems = server_files_naming("AppState", |file| file == "app.rs");
    assert!(
        problems.is_empty(),
        "modules outside the wiring that name `AppState`:\n{}",
        problems.join("\n")
    );
}

/// Whether `text` uses the `unsafe` keyword (not as part of a longer name).
fn uses_unsafe(text: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices("unsafe")
        .any(|(at, _)| !word(text[..at].chars().next_back()) && !word(text[at + "unsafe".len()..].chars().next()))
}

/// A crate whose own sources write no `unsafe` says so with
/// `#![forbid(unsafe_code)]` in every target root, so a first `unsafe` block
/// is a decision someone makes on purpose. Components are exempt: the WIT
/// bindings their export macros generate are `unsafe` by nature.
#[test]
fn crates_without_unsafe_code_forbid_it() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut problems = Vec::new();
    let mut forbidding = 0;
    for package in metadata["packages"].as_array().unwrap() {
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
        let mut sources = Vec::new();
        rust_files(&manifest.parent().unwrap().join("src"), &mut sources);
        let texts: Vec<String> = sources.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
        let component = texts.iter().any(|t| {
            ["wit_bindgen", "export_adapter!", "export_tool_server!", "export_skill!"]
                .iter()
                .any(|m| t.contains(m))
        });
        if component || texts.iter().any(|t| uses_unsafe(t)) {
            continue;
        }
        for target in package["targets"].as_array().unwrap() {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if !kinds.iter().any(|k| matches!(*k, "lib" | "bin" | "rlib" | "cdylib")) {
                continue;
            }
            let path = PathBuf::from(target["src_path"].as_str().unwrap());
            let text = std::fs::read_to_string(&path).unwrap();
            match text.contains("#![forbid(unsafe_code)]") {
                true => forbidding += 1,
                false => problems.push(path.strip_prefix(root()).unwrap_or(&path).display().to_string()),
            }
        }
    }
    assert!(forbidding >= 10, "found the crate roots ({forbidding})");
    assert!(
        problems.is_empty(),
        "crate roots that write no `unsafe` but do not `#![forbid(unsafe_code)]`:\n{}",
        problems.join("\n")
    );
}

/// The released WIT folders and the SHA-256 of their files (each file's path
/// within the folder, a NUL, its bytes, a NUL, in path order). A released
/// version never changes, not even a comment: components out there were
/// built against these bytes. A new version is a new folder and a new row.
const RELEASED_WIT: &[(&str, &str)] = &[
    (
        "host/0.1.0",
        "78b9210f0389791080c392d6c631bf7a21deefae6c42c0659702fa0158df5cf0",
    ),
    (
        "provider/0.1.0",
        "f1f757526d6fc4a8c3aacc80c6e4a0b547c5a53b444050b1100f5afc338c2bb0",
    ),
    (
        "provider/0.2.0",
        "7820031ec3b9ce86a85b5b928053446e5c0f0bbc9d05d0086aef3961ba4536f0",
    ),
    (
        "skill/0.1.0",
        "04034369829f7ba359758564c4bedac33b5f8098315dd47c34ae16f740e5de22",
    ),
    (
        "tool/0.1.0",
        "30acd8aff3770f3e87486defa757ffcab70d62992087a51882638f38b18ab6ae",
    ),
];

fn folder_digest(dir: &Path) -> String {
    use sha2::Digest as _;
    fn files(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => files(&path, base, out),
                false => out.push(path.strip_prefix(base).unwrap().to_path_buf()),
            }
        }
    }
    let mut paths = Vec::new();
    files(dir, dir, &mut paths);
    paths.sort();
    let mut hash = sha2::Sha256::new();
    for path in paths {
        hash.update(path.to_str().unwrap().as_bytes());
        hash.update([0]);
        hash.update(std::fs::read(dir.join(&path)).unwrap());
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

#[test]
fn released_wit_folders_never_change() {
    let wit = root().join("wit");
    let mut found = Vec::new();
    for interface in std::fs::read_dir(&wit).unwrap() {
        let interface = interface.unwrap().path();
        for version in std::fs::read_dir(&interface).unwrap() {
            let version = version.unwrap().path();
            found.push(version.strip_prefix(&wit).unwrap().display().to_string());
        }
    }
    found.sort();
    let listed: Vec<String> = RELEASED_WIT.iter().map(|(folder, _)| folder.to_string()).collect();
    assert_eq!(
        found, listed,
        "every folder under wit/ is a released version with a row here"
    );
    for (folder, expected) in RELEASED_WIT {
        assert_eq!(
            folder_digest(&wit.join(folder)),
            *expected,
            "wit/{folder} changed; a released version is frozen: put changes in a new version folder"
        );
    }
}
