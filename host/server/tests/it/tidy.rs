//! Tidy checks on the source tree itself (as rust-analyzer's tidy test does):
//! the crate graph is the one docs/ARCHITECTURE.md documents, so no crate
//! grows a dependency its concern should not have, and so are the binary
//! crate's module edges; every crate and module opens with a `//!` header
//! saying what it owns; a crate that writes no `unsafe` forbids it; and the
//! released WIT folders never change.

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

/// What in `actual` the documented graph does not allow, or claims wrongly.
fn crate_graph_problems(
    actual: &BTreeMap<String, BTreeSet<String>>,
    documented: &[(String, BTreeSet<String>)],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, deps) in actual {
        let Some((pattern, allowed)) = documented.iter().find(|(p, _)| matches(p, name)) else {
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
            for stale in allowed.difference(deps) {
                problems.push(format!("{name}'s row allows {stale}, which it does not depend on"));
            }
        }
    }
    for (pattern, _) in documented {
        if !seen.contains(pattern) {
            problems.push(format!(
                "the crate graph lists {pattern}, which is not a workspace crate"
            ));
        }
    }
    problems
}

#[test]
fn the_crate_graph_is_the_documented_one() {
    let problems = crate_graph_problems(&actual_graph(), &documented_graph());
    assert!(problems.is_empty(), "crate graph problems:\n{}", problems.join("\n"));
}

/// The check can fail: an edge the table forbids (a concern on the control
/// plane, the web kit on identity) is named.
#[test]
fn a_planted_crate_edge_is_refused() {
    let documented = documented_graph();
    for (from, to) in [
        ("tollgate-gateway", "tollgate-control"),
        ("tollgate-web", "tollgate-identity"),
    ] {
        let mut actual = actual_graph();
        actual.get_mut(from).expect(from).insert(to.to_string());
        let problems = crate_graph_problems(&actual, &documented);
        assert_eq!(
            problems,
            vec![format!("{from} depends on {to}, which its row does not allow")]
        );
    }
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

/// The crates that hold the gateway's concerns (folders under `host/`):
/// the rules below read their sources, paths relative to `host/`.
const CONCERN_CRATES: &[&str] = &[
    "web",
    "identity",
    "billing",
    "gateway",
    "packages",
    "tools",
    "hosted-actors",
    "control",
    "server",
];

/// Each concern crate's source files: (path relative to `host/`, text).
fn concern_sources() -> Vec<(String, String)> {
    let host = root().join("host");
    let mut files = Vec::new();
    for name in CONCERN_CRATES {
        rust_files(&host.join(name).join("src"), &mut files);
    }
    files
        .iter()
        .map(|path| {
            let relative = path.strip_prefix(&host).unwrap().to_string_lossy().replace('\\', "/");
            (relative, std::fs::read_to_string(path).unwrap())
        })
        .collect()
}

/// One owner per table (docs/ARCHITECTURE.md): the concerns share one
/// database and Cargo cannot keep their SQL apart, so only a table's owner
/// names it in SQL; everyone else calls the owner's API.
#[test]
fn only_a_tables_owner_queries_it() {
    let owners: &[(&str, &[&str])] = &[
        (
            "identity/src/accounts/",
            &[
                "accounts",
                "users",
                "workspaces",
                "memberships",
                "api_keys",
                "role_tool_policies",
            ],
        ),
        ("identity/src/auth/", &["api_keys", "memberships", "role_tool_policies"]),
        ("identity/src/auth/sessions.rs", &["console_sessions"]),
        ("identity/src/auth/signin.rs", &["oidc_identities", "oidc_logins"]),
        ("identity/src/auth/cluster_rates.rs", &["key_rate_cells"]),
        ("control/src/tasks.rs", &["a2a_tasks"]),
        ("packages/src/namespaces.rs", &["namespaces"]),
        ("packages/src/installs.rs", &["registry_installs"]),
        (
            "tools/src/store.rs",
            &["component_installs", "component_install_changes"],
        ),
        ("tools/src/mcp/sessions.rs", &["mcp_sessions"]),
        ("tools/src/mcp/elicit.rs", &["mcp_elicitations"]),
        ("tools/src/remote/store.rs", &["mcp_servers"]),
        ("hosted-actors/src/store.rs", &["actors", "actor_deployments"]),
        ("billing/src/quota.rs", &["plan_usage"]),
        ("billing/src/budgets/", &["budgets", "budget_usage"]),
        (
            "billing/src/payments/store.rs",
            &["checkouts", "payment_events", "subscriptions", "payment_holds"],
        ),
    ];
    let mut problems = Vec::new();
    for (file, text) in concern_sources() {
        if !text.contains("sqlx::query") {
            continue;
        }
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

/// The concern crates' files (paths relative to `host/`) that contain
/// `needle`, but for those `exempt` allows.
fn concern_files_naming(needle: &str, exempt: impl Fn(&str) -> bool) -> Vec<String> {
    concern_sources()
        .into_iter()
        .filter(|(file, text)| !exempt(file) && text.contains(needle))
        .map(|(file, _)| file)
        .collect()
}

/// The binary's wiring: `app.rs` and its stages (`app/`).
fn is_wiring(file: &str) -> bool {
    file == "server/src/app.rs" || file.starts_with("server/src/app/")
}

/// The control plane depends on the concerns, and no concern on it
/// (docs/ARCHITECTURE.md). Cargo keeps the other crates off it (the crate
/// graph); inside the binary, only the wiring (`app.rs`, `app/`) and the
/// configuration that layers its section name it.
#[test]
fn only_the_wiring_imports_the_control_plane() {
    let problems = concern_files_naming("tollgate_control", |file| {
        file.starts_with("control/") || is_wiring(file) || file == "server/src/config.rs"
    });
    assert!(
        problems.is_empty(),
        "files outside the control plane and the wiring that import it:\n{}",
        problems.join("\n")
    );
}

/// Each concern's `routes()` is generic over the router's state and names,
/// with `FromRef` bounds, only the state its handlers extract
/// (docs/ARCHITECTURE.md): only the wiring (`app.rs`, `app/`) names
/// `AppState`.
#[test]
fn only_the_wiring_names_the_app_state() {
    let problems = concern_files_naming("AppState", is_wiring);
    assert!(
        problems.is_empty(),
        "files outside the wiring that name `AppState`:\n{}",
        problems.join("\n")
    );
}

/// The binary crate's module table (between the module-graph markers of
/// docs/ARCHITECTURE.md): module → the modules of the crate it may `use`.
fn documented_modules() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let start = text.find("<!-- module-graph -->").expect("the module-graph markers");
    let end = text
        .find("<!-- /module-graph -->")
        .expect("the module-graph end marker");
    text[start..end]
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
            assert_eq!(cells.len(), 3, "a module-graph row has three cells: {line}");
            let names = |cell: &str| -> BTreeSet<String> {
                cell.split(',')
                    .map(|n| n.trim().trim_matches('`').to_string())
                    .filter(|n| !n.is_empty() && n != "—")
                    .collect()
            };
            (names(cells[0]).into_iter().next().unwrap(), names(cells[2]))
        })
        .collect()
}

/// The crate's top-level modules that `text` names through `crate::`
/// (`crate::a::b` and `crate::{a, b::c}`).
fn crate_modules_named(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let mut named = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                // The group's top-level items: what follows `{` or a comma at depth 0.
                let mut depth = 0;
                let mut item_start = true;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if item_start && !c.is_whitespace() => {
                            named.insert(ident(&group[i..]));
                            item_start = false;
                        }
                        _ => {}
                    }
                }
            }
            None => {
                named.insert(ident(rest));
            }
        }
    }
    named.retain(|name| !name.is_empty());
    named
}

/// What in the binary's `files` (path below `src/`, text) the module table
/// does not allow.
fn module_problems(files: &[(String, String)], table: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    for (file, text) in files {
        let module = file.split(['/', '.']).next().unwrap().to_string();
        if matches!(module.as_str(), "lib" | "main") {
            continue;
        }
        let Some(allowed) = table.get(&module) else {
            problems.push(format!("{file}: module `{module}` is not in the module table"));
            continue;
        };
        for used in crate_modules_named(text) {
            if used != module && !allowed.contains(&used) {
                problems.push(format!(
                    "{file} uses crate::{used}, which `{module}`'s row does not allow"
                ));
            }
        }
    }
    problems
}

fn binary_sources() -> Vec<(String, String)> {
    concern_sources()
        .into_iter()
        .filter_map(|(file, text)| Some((file.strip_prefix("server/src/")?.to_string(), text)))
        .collect()
}

/// Inside the binary crate, where Cargo cannot keep modules apart, each
/// module uses only the modules its row of the table lists.
#[test]
fn the_binarys_modules_keep_to_the_module_table() {
    let table = documented_modules();
    let files = binary_sources();
    let problems = module_problems(&files, &table);
    assert!(problems.is_empty(), "module graph problems:\n{}", problems.join("\n"));
    let modules: BTreeSet<String> = files
        .iter()
        .map(|(file, _)| file.split(['/', '.']).next().unwrap().to_string())
        .filter(|m| !matches!(m.as_str(), "lib" | "main"))
        .collect();
    let stale: Vec<&String> = table.keys().filter(|m| !modules.contains(*m)).collect();
    assert!(
        stale.is_empty(),
        "the module table lists modules that are gone: {stale:?}"
    );
}

/// The check can fail: a planted `use` the table forbids is named.
#[test]
fn a_planted_module_use_is_refused() {
    let table = documented_modules();
    let mut files = binary_sources();
    let (file, text) = files
        .iter_mut()
        .find(|(file, _)| file.starts_with("console"))
        .expect("the console module");
    text.push_str("\nuse crate::{app::Gateway, cli};\n");
    let planted = file.clone();
    let problems = module_problems(&files, &table);
    assert_eq!(
        problems,
        vec![
            format!("{planted} uses crate::app, which `console`'s row does not allow"),
            format!("{planted} uses crate::cli, which `console`'s row does not allow"),
        ]
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
            [
                "wit_bindgen",
                "export_adapter!",
                "export_tool_server!",
                "export_skill!",
                "export_guardrail!",
            ]
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
        "guardrail/0.1.0",
        "cb93fbef36598a74e90860f3d683843f65274b74c9d98b8e9f26345d8a0773dd",
    ),
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
        "provider/0.3.0",
        "bad4b332d7534f4ff0de2ec37182d441a011857258919d4972677afa83ffdc7f",
    ),
    (
        "skill/0.1.0",
        "04034369829f7ba359758564c4bedac33b5f8098315dd47c34ae16f740e5de22",
    ),
    (
        "tool/0.1.0",
        "30acd8aff3770f3e87486defa757ffcab70d62992087a51882638f38b18ab6ae",
    ),
    (
        "tool/0.2.0",
        "fb540392aa5aeb85b76cefbb001282137b7efeb0de3692f5cbaec13b2e6fec83",
    ),
    (
        "tool/0.3.0",
        "02677e4aa947751b6cd2a80dd2809d9add5960c53c369a48f944a29316009000",
    ),
    (
        "tool/0.4.0",
        "a33f1f1a66752dedffeebdb229aa08a69b64a418308ea825bec2ddc50c2a58be",
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
