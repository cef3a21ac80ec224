//! Built-in guardrail `secrets-scan`: stops API keys, tokens and private keys
//! from reaching a model (a pasted `.env`, a stack trace with a bearer token),
//! by refusing the request or by redacting them to `[SECRET_REDACTED]`.
//! Answers are scanned too when `scan_responses` is set.
//!
//! Settings: `action` (`deny`, the default, or `redact`) and `scan_responses`
//! (`false` by default). A deny reason names the kinds found, never a value.

mod scan;

use tollgate_plugin_sdk::guardrail::{
    CallContext, Description, Guardrail, RequestVerdict, ResponseVerdict, Rewrite, Subject, Text, config,
};

pub struct SecretsScan;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Deny,
    Redact,
}

/// What to do with texts holding secrets.
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

/// `where_` is what the deny reason calls the texts: `the prompt`, `the answer`.
fn check<'a>(texts: impl IntoIterator<Item = &'a str>, action: Action, where_: &str) -> Outcome {
    let texts: Vec<&str> = texts.into_iter().collect();
    let found: Vec<_> = texts.iter().map(|t| scan::find(t)).collect();
    if found.iter().all(Vec::is_empty) {
        return Outcome::Clean;
    }
    match action {
        Action::Deny => {
            let all: Vec<_> = found.into_iter().flatten().collect();
            let kinds: Vec<&str> = scan::kinds(&all).into_iter().map(scan::Kind::describe).collect();
            Outcome::Deny(format!("a secret was found in {where_}: {}", kinds.join(", ")))
        }
        Action::Redact => Outcome::Redact(
            texts
                .iter()
                .zip(&found)
                .map(|(text, found)| scan::redact(text, found))
                .collect(),
        ),
    }
}

impl Guardrail for SecretsScan {
    fn describe() -> Description {
        Description::new(
            "secrets-scan",
            "Refuses (or redacts) API keys, access tokens, JWTs and private keys in prompts, and in answers \
             when scan_responses is set.",
        )
        .requests()
        .responses()
    }

    fn check_request(_ctx: CallContext, _subject: Subject, _request: &str, texts: Vec<Text>) -> RequestVerdict {
        let action = parse_action(config::get("action").as_deref());
        match check(texts.iter().map(|t| t.content.as_str()), action, "the prompt") {
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
        let enabled = config::get("scan_responses")
            .is_some_and(|s| matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "yes" | "on" | "1"));
        if !enabled {
            return ResponseVerdict::Allow;
        }
        let action = parse_action(config::get("action").as_deref());
        match check(texts.iter().map(String::as_str), action, "the answer") {
            Outcome::Clean => ResponseVerdict::Allow,
            Outcome::Deny(reason) => ResponseVerdict::Deny(reason),
            Outcome::Redact(texts) => ResponseVerdict::Rewrite(texts),
        }
    }
}

tollgate_plugin_sdk::export_guardrail!(SecretsScan);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions() {
        assert_eq!(parse_action(None), Action::Deny);
        assert_eq!(parse_action(Some(" Redact ")), Action::Redact);
        assert_eq!(parse_action(Some("shout")), Action::Deny);
    }

    #[test]
    fn deny_names_kinds_not_values() {
        let texts = [
            "my key is AKIAIOSFODNN7EXAMPLE",
            "and ghp_0123456789abcdefghijABCDEFGHIJ012345",
        ];
        let Outcome::Deny(reason) = check(texts, Action::Deny, "the prompt") else {
            panic!()
        };
        assert_eq!(
            reason,
            "a secret was found in the prompt: an AWS access key id, a GitHub token"
        );
        assert!(!reason.contains("AKIAIOSFODNN7EXAMPLE"));
    }

    #[test]
    fn redact_keeps_one_text_per_text() {
        let texts = ["clean", "token sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-x please"];
        assert_eq!(
            check(texts, Action::Redact, "the prompt"),
            Outcome::Redact(vec!["clean".into(), "token [SECRET_REDACTED] please".into()])
        );
    }

    #[test]
    fn clean_texts_pass() {
        assert_eq!(
            check(["What is an AWS access key id?"], Action::Deny, "the prompt"),
            Outcome::Clean
        );
    }
}
