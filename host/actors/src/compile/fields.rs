//! Reading typed values out of YAML nodes, each failure an error at the
//! node that caused it. Every reader records its error and returns `None`,
//! so one pass reports every problem in a document, not just the first.

use std::collections::BTreeMap;

use super::error::CompileError;
use super::yaml::{Key, Node, NodeValue};

/// The entries of one mapping, checked against the keys it may have.
pub(crate) struct Fields<'a> {
    pub node: &'a Node,
    entries: BTreeMap<&'a str, (&'a Key, &'a Node)>,
}

impl<'a> Fields<'a> {
    /// `node` as a mapping whose keys are all in `allowed`; `what` names it
    /// in messages (`metadata`, `step 'plan'`, …).
    pub fn of(node: &'a Node, what: &str, allowed: &[&str], errors: &mut Vec<CompileError>) -> Option<Self> {
        let Some(entries) = node.as_map() else {
            errors.push(node.error(format!("{what} must be a mapping, not {}", node.kind())));
            return None;
        };
        let mut fields = BTreeMap::new();
        for (key, value) in entries {
            if allowed.contains(&key.name.as_str()) {
                fields.insert(key.name.as_str(), (key, value));
            } else {
                errors.push(CompileError::at(
                    key.loc,
                    format!(
                        "unknown key '{}' in {what} (expected one of: {})",
                        key.name,
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Some(Self { node, entries: fields })
    }

    pub fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries.get(key).map(|(_, node)| *node)
    }

    pub fn key(&self, key: &str) -> Option<&'a Key> {
        self.entries.get(key).map(|(key, _)| *key)
    }

    pub fn has(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// The value of a key that must be present (an error at the mapping
    /// otherwise).
    pub fn required(&self, key: &str, what: &str, errors: &mut Vec<CompileError>) -> Option<&'a Node> {
        let value = self.get(key);
        if value.is_none() {
            errors.push(self.node.error(format!("{what} needs '{key}'")));
        }
        value
    }
}

pub(crate) fn string(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<String> {
    match node.as_str() {
        Some(text) => Some(text.to_string()),
        None => {
            errors.push(node.error(format!("{what} must be a string, not {}", node.kind())));
            None
        }
    }
}

/// An integer in `min..=max`.
pub(crate) fn integer(node: &Node, what: &str, min: u64, max: u64, errors: &mut Vec<CompileError>) -> Option<u64> {
    match node.value {
        NodeValue::Int(n) if n >= i128::from(min) && n <= i128::from(max) => Some(n as u64),
        NodeValue::Int(n) => {
            errors.push(node.error(format!("{what} must be between {min} and {max}, not {n}")));
            None
        }
        _ => {
            errors.push(node.error(format!("{what} must be an integer, not {}", node.kind())));
            None
        }
    }
}

/// A registry name segment (an actor's name and namespace, a package's
/// namespace and name): 1 to 64 lowercase letters, digits and `-`, starting
/// with a letter and not ending with `-`, as the registry requires.
pub(crate) fn is_name(text: &str) -> bool {
    (1..=64).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.ends_with('-')
}

/// An alias in `models`, `prompts`, `tools`, `skills`, `actors`: like a
/// name, and `_` is allowed too.
pub(crate) fn is_alias(text: &str) -> bool {
    (1..=64).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

pub(crate) fn name(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<String> {
    let text = string(node, what, errors)?;
    if is_name(&text) {
        Some(text)
    } else {
        errors.push(node.error(format!(
            "{what} '{text}' must be 1 to 64 lowercase letters, digits and '-', starting with a letter and not ending with '-'"
        )));
        None
    }
}

/// A step id is read in templates as `steps.<id>`, so it must be a
/// minijinja identifier.
pub(crate) fn is_step_id(text: &str) -> bool {
    (1..=64).contains(&text.len())
        && text.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// An exact USD amount, e.g. `"0.05"`, in nanodollars. Written as a string
/// because a YAML number is a float and would not be exact.
pub(crate) fn usd(node: &Node, what: &str, errors: &mut Vec<CompileError>) -> Option<i64> {
    let Some(text) = node.as_str() else {
        errors.push(node.error(format!(
            "{what} must be a decimal string such as \"0.05\" (a YAML number is not exact), not {}",
            node.kind()
        )));
        return None;
    };
    match parse_usd(text) {
        Ok(nanos) => Some(nanos),
        Err(reason) => {
            errors.push(node.error(format!("{what} '{text}': {reason}")));
            None
        }
    }
}

/// `"12.345"` → 12_345_000_000 nanodollars; at most 9 decimals, positive.
pub(crate) fn parse_usd(text: &str) -> Result<i64, String> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || (text.contains('.') && fraction.is_empty()) {
        return Err("must be a decimal amount in USD such as \"0.05\"".into());
    }
    if fraction.len() > 9 {
        return Err("has more than 9 decimals (the smallest unit is 1 nanodollar)".into());
    }
    let too_large = || "is too large".to_string();
    let whole: i64 = whole.parse().map_err(|_| too_large())?;
    let fraction: i64 = format!("{fraction:0<9}").parse().unwrap_or(0);
    let nanos = whole
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(fraction))
        .ok_or_else(too_large)?;
    if nanos == 0 {
        return Err("must be more than zero".into());
    }
    Ok(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usd_amounts_are_exact() {
        assert_eq!(parse_usd("0.05"), Ok(50_000_000));
        assert_eq!(parse_usd("12"), Ok(12_000_000_000));
        assert_eq!(parse_usd("0.000000001"), Ok(1));
        assert!(parse_usd("0.0000000001").is_err());
        assert!(parse_usd("-1").is_err());
        assert!(parse_usd("1e3").is_err());
        assert!(parse_usd("1.").is_err());
        assert!(parse_usd(".5").is_err());
        assert!(parse_usd("0").is_err());
        assert!(parse_usd("99999999999999999999").is_err());
    }
}
