//! Which installs and tools a key may reach on the MCP endpoint and through
//! a skill's `tools` capability. A list names installs (`github`: all it
//! offers) or single tools and prompts (`github__create_issue`); a key may
//! carry one (`keys.create`'s `tools`), and the workspace may set one per
//! role (`workspaces.tool-policy.set`). A principal holds both and may use
//! an item only when each list that exists allows it, so a key can narrow
//! its role's list but never widen it. No list: everything installed.
//!
//! The names are checked for form only, not against what is installed: a
//! list may name an install before it exists, and names nothing when an
//! install of that name is gone.

/// Between an install's name and its tool's, as the MCP endpoint names them.
const SEPARATOR: &str = "__";
/// Most entries one list may hold.
pub const MAX_ENTRIES: usize = 256;

/// A principal's tool lists: its key's and its role's in the workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    /// The key's own list; `None`: whatever the role's allows.
    pub key: Option<Vec<String>>,
    /// The workspace's list for the key's role; `None`: everything.
    pub role: Option<Vec<String>>,
}

impl ToolPolicy {
    /// Whether no list limits the principal.
    pub fn is_open(&self) -> bool {
        self.key.is_none() && self.role.is_none()
    }

    fn lists(&self) -> impl Iterator<Item = &Vec<String>> {
        self.key.iter().chain(self.role.iter())
    }

    /// May use tool or prompt `item` of install `install`.
    pub fn allows(&self, install: &str, item: &str) -> bool {
        self.lists().all(|list| {
            list.iter().any(|entry| match entry.split_once(SEPARATOR) {
                None => entry == install,
                Some((owner, name)) => owner == install && name == item,
            })
        })
    }

    /// May use all of `install`: also its resources and URI templates,
    /// which are read by URI and so cannot be listed one by one.
    pub fn allows_whole(&self, install: &str) -> bool {
        self.lists().all(|list| list.iter().any(|entry| entry == install))
    }

    /// May use anything of `install`, so may know that it exists.
    pub fn sees(&self, install: &str) -> bool {
        self.lists().all(|list| {
            list.iter()
                .any(|entry| entry.split_once(SEPARATOR).map_or(entry.as_str(), |(owner, _)| owner) == install)
        })
    }

    /// Whether every entry of `entries` is something this policy allows
    /// (a key with a list may only make keys within it).
    pub fn covers(&self, entries: &[String]) -> bool {
        entries.iter().all(|entry| match entry.split_once(SEPARATOR) {
            None => self.allows_whole(entry),
            Some((install, item)) => self.allows(install, item),
        })
    }
}

/// Checks a list's entries for form and gives them sorted, without repeats.
pub fn normalize(entries: Vec<String>) -> Result<Vec<String>, String> {
    if entries.len() > MAX_ENTRIES {
        return Err(format!("tools may list at most {MAX_ENTRIES} entries"));
    }
    for entry in &entries {
        let (install, item) = match entry.split_once(SEPARATOR) {
            Some((install, item)) => (install, Some(item)),
            None => (entry.as_str(), None),
        };
        let install_ok = (1..=48).contains(&install.len())
            && install
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !install.starts_with('-')
            && !install.ends_with('-')
            && !install.contains("--");
        let item_ok = item.is_none_or(|item| {
            (1..=128).contains(&item.len()) && item.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        });
        if !install_ok || !item_ok {
            return Err(format!(
                "tools entry '{entry}' is neither an install name nor <install>__<tool>"
            ));
        }
    }
    let mut entries = entries;
    entries.sort();
    entries.dedup();
    Ok(entries)
}

/// A list as a database column holds it: a JSON array; `None` stays NULL.
pub fn to_column(list: Option<&[String]>) -> Option<String> {
    list.map(|list| serde_json::to_string(list).expect("strings serialize"))
}

/// A stored list. One that cannot be read (written by a newer gateway, or
/// damaged) allows nothing rather than everything.
pub fn from_column(column: Option<String>) -> Option<Vec<String>> {
    column.map(|text| serde_json::from_str(&text).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Option<Vec<String>> {
        Some(entries.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn both_lists_must_allow() {
        let open = ToolPolicy::default();
        assert!(open.is_open() && open.allows("calc", "add") && open.allows_whole("calc"));
        let policy = ToolPolicy {
            key: list(&["calc__add", "docs"]),
            role: list(&["calc", "docs"]),
        };
        assert!(policy.allows("calc", "add"));
        assert!(!policy.allows("calc", "sub"), "the key narrows its role's install");
        assert!(!policy.allows_whole("calc"), "one tool is not the whole install");
        assert!(policy.allows("docs", "anything") && policy.allows_whole("docs"));
        assert!(policy.sees("calc") && !policy.sees("other") && !policy.sees("cal"));
        let narrower = ToolPolicy {
            key: list(&["calc"]),
            role: list(&["docs"]),
        };
        assert!(
            !narrower.sees("calc") && !narrower.sees("docs"),
            "no install is in both"
        );
        assert!(policy.covers(&["calc__add".into(), "docs__x".into()]));
        assert!(!policy.covers(&["calc".into()]));
        assert!(!policy.covers(&["calc__sub".into()]));
    }

    #[test]
    fn entries_are_checked_for_form() {
        assert_eq!(
            normalize(vec!["b".into(), "a__x.y-z".into(), "b".into()]).unwrap(),
            vec!["a__x.y-z".to_string(), "b".to_string()]
        );
        for bad in ["", "A", "a b", "a__", "__x", "a__x y", "-a", "a--b"] {
            assert!(normalize(vec![bad.into()]).is_err(), "{bad:?}");
        }
        assert_eq!(from_column(Some("garbage".into())), Some(Vec::new()));
        assert_eq!(from_column(to_column(Some(&["a".to_string()]))), list(&["a"]));
    }
}
