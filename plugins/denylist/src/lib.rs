//! Built-in guardrail `denylist`: an operator's list of words and regex
//! patterns that must not reach a model, or come back from one (project code
//! names, competitor names, internal hostnames), refused or redacted.
//!
//! Settings: `words` (comma-separated, case-insensitive, whole words),
//! `patterns` (regexes, one per line; a pattern that does not compile is
//! skipped and logged), `action` (`deny`, the default, or `redact`: each match
//! becomes `[REDACTED]`), `apply_to` (comma-separated `requests,responses`;
//! both by default). With no words and no patterns it allows everything.

mod terms;

use tollgate_plugin_sdk::guardrail::log::{self, Level};
use tollgate_plugin_sdk::guardrail::{
    CallContext, Description, Guardrail, RequestVerdict, ResponseVerdict, Rewrite, Subject, Text, config,
};

use crate::terms::Term;

pub struct Denylist;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Deny,
    Redact,
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Clean,
    Deny(String),
    Redact(Vec<String>),
}

fn parse_action(setting: Option<&str>) -> Action {
    match setting.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("redact") => Action::Redact,
        _ => Action::Deny,
    }
}

/// Whether `apply_to` (default: both) names `hook` (`requests` or `responses`).
fn applies_to(setting: Option<&str>, hook: &str) -> bool {
    match setting.filter(|s| !s.trim().is_empty()) {
        None => true,
        Some(list) => list.split(',').any(|item| item.trim().eq_ignore_ascii_case(hook)),
    }
}

/// Checks `texts` against `terms`: a deny names the first term found (in the
/// first text holding one).
fn check<'a>(texts: impl IntoIterator<Item = &'a str>, terms: &[Term], action: Action) -> Outcome {
    let texts: Vec<&str> = texts.into_iter().collect();
    let hits: Vec<Vec<terms::Hit>> = texts.iter().map(|t| terms::hits(t, terms)).collect();
    let Some(first) = hits.iter().find_map(|h| h.first()) else {
        return Outcome::Clean;
    };
    match action {
        Action::Deny => Outcome::Deny(format!("denied term: \"{}\"", first.name)),
        Action::Redact => Outcome::Redact(
            texts
                .iter()
                .zip(&hits)
                .map(|(text, hits)| terms::redact(text, hits))
                .collect(),
        ),
    }
}

/// The install's terms and action when there are terms and `hook` applies.
/// Terms are read first: an install with none (a check that allows
/// everything) costs the request two settings reads, not three, and each is
/// a call into the host.
fn settings(hook: &str) -> Option<(Vec<Term>, Action)> {
    let (words, patterns) = (config::get("words"), config::get("patterns"));
    if words.is_none() && patterns.is_none() {
        return None;
    }
    if !applies_to(config::get("apply_to").as_deref(), hook) {
        return None;
    }
    let (terms, errors) = terms::parse(words.as_deref(), patterns.as_deref());
    for error in errors {
        log::log(Level::Warn, &format!("denylist: {error}"));
    }
    (!terms.is_empty()).then(|| (terms, parse_action(config::get("action").as_deref())))
}

impl Guardrail for Denylist {
    fn describe() -> Description {
        Description::new(
            "denylist",
            "Refuses (or redacts) configured words and regex patterns in prompts and answers.",
        )
        .requests()
        .responses()
    }

    fn check_request(_ctx: CallContext, _subject: Subject, _request: &str, texts: Vec<Text>) -> RequestVerdict {
        let Some((terms, action)) = settings("requests") else {
            return RequestVerdict::Allow;
        };
        match check(texts.iter().map(|t| t.content.as_str()), &terms, action) {
            Outcome::Clean => RequestVerdict::Allow,
            Outcome::Deny(reason) => RequestVerdict::Deny(reason),
            Outcome::Redact(texts) => RequestVerdict::Rewrite(Rewrite { texts, memo: None }),
        }
    }

    fn check_response(
        _ctx: CallContext,
        _subject: Subject,
        _request: &str,
        _memo: Option<String>,
        texts: Vec<String>,
        _done: bool,
    ) -> ResponseVerdict {
        // On a stream each window is checked on its own; the host cuts
        // windows at whitespace, so a word is never split, but a pattern
        // spanning whitespace may be.
        let Some((terms, action)) = settings("responses") else {
            return ResponseVerdict::Allow;
        };
        match check(texts.iter().map(String::as_str), &terms, action) {
            Outcome::Clean => ResponseVerdict::Allow,
            Outcome::Deny(reason) => ResponseVerdict::Deny(reason),
            Outcome::Redact(texts) => ResponseVerdict::Rewrite(texts),
        }
    }
}

tollgate_plugin_sdk::export_guardrail!(Denylist);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse() {
        assert_eq!(parse_action(None), Action::Deny);
        assert_eq!(parse_action(Some("REDACT")), Action::Redact);
        assert!(applies_to(None, "requests") && applies_to(Some(" "), "responses"));
        assert!(applies_to(Some("Requests"), "requests"));
        assert!(!applies_to(Some("requests"), "responses"));
        assert!(applies_to(Some("requests, responses"), "responses"));
    }

    #[test]
    fn deny_names_the_first_term_found() {
        let (terms, _) = terms::parse(Some("foo,bar"), Some("ACME-[0-9]+"));
        assert_eq!(
            check(["clean", "a BAR then foo", "ACME-7"], &terms, Action::Deny),
            Outcome::Deny("denied term: \"bar\"".into())
        );
        assert_eq!(
            check(["order ACME-42 now"], &terms, Action::Deny),
            Outcome::Deny("denied term: \"ACME-42\"".into())
        );
        assert_eq!(check(["food and barn"], &terms, Action::Deny), Outcome::Clean);
    }

    #[test]
    fn redact_rewrites_each_text() {
        let (terms, _) = terms::parse(Some("foo"), None);
        assert_eq!(
            check(["Foo!", "nothing"], &terms, Action::Redact),
            Outcome::Redact(vec!["[REDACTED]!".into(), "nothing".into()])
        );
    }

    #[test]
    fn no_terms_allow_everything() {
        let (terms, errors) = terms::parse(None, None);
        assert!(terms.is_empty() && errors.is_empty());
        assert_eq!(check(["anything"], &terms, Action::Deny), Outcome::Clean);
    }
}
