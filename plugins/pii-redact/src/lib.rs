//! Built-in guardrail `pii-redact`: replaces e-mail addresses, phone numbers,
//! payment card numbers, IBANs and US Social Security numbers in a request's
//! texts with placeholders such as `[EMAIL_1]` before anything leaves the
//! gateway, and puts the originals back into the answer, so a model can work
//! with personal data it never sees.
//!
//! Settings: `kinds` (comma-separated subset of `email,phone,card,iban,national_id`;
//! all when unset or blank) and `restore` (`true` by default: put the originals
//! back into answers).

mod detect;
mod phone;
mod redact;

use tollgate_plugin_sdk::guardrail::log::{self, Level};
use tollgate_plugin_sdk::guardrail::{
    CallContext, Description, Guardrail, RequestVerdict, ResponseVerdict, Rewrite, Subject, Text, config,
};

use crate::detect::Kind;
use crate::redact::Memo;

pub struct PiiRedact;

/// The `kinds` setting: the kinds it names (all when unset or blank), and the
/// names it does not know.
fn parse_kinds(setting: Option<&str>) -> (Vec<Kind>, Vec<String>) {
    let Some(setting) = setting.filter(|s| !s.trim().is_empty()) else {
        return (Kind::ALL.to_vec(), Vec::new());
    };
    let mut kinds = Vec::new();
    let mut unknown = Vec::new();
    for name in setting
        .split(',')
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
    {
        match Kind::ALL.into_iter().find(|k| k.setting() == name) {
            Some(kind) => kinds.push(kind),
            None => unknown.push(name),
        }
    }
    (kinds, unknown)
}

/// A yes/no setting; anything unrecognised keeps the default.
fn parse_flag(setting: Option<&str>, default: bool) -> bool {
    match setting.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("true" | "yes" | "on" | "1") => true,
        Some("false" | "no" | "off" | "0") => false,
        _ => default,
    }
}

/// The request check, without the host: the rewrite, or `None` to allow.
fn check_request(texts: &[Text], kinds: &[Kind]) -> Option<Rewrite> {
    let redaction = redact::redact(texts.iter().map(|t| t.content.as_str()), kinds)?;
    Some(Rewrite {
        texts: redaction.texts,
        // A map of strings always serialises.
        memo: serde_json::to_string(&redaction.memo).ok(),
    })
}

/// The response check, without the host: the answer's texts with the
/// originals back, or `None` when there is nothing to restore.
fn check_response(memo: Option<&str>, texts: &[String]) -> Option<Vec<String>> {
    let memo: Memo = serde_json::from_str(memo?).ok()?;
    let restored: Vec<Option<String>> = texts.iter().map(|t| redact::restore(t, &memo)).collect();
    restored.iter().any(Option::is_some).then(|| {
        restored
            .into_iter()
            .zip(texts)
            .map(|(restored, original)| restored.unwrap_or_else(|| original.clone()))
            .collect()
    })
}

impl Guardrail for PiiRedact {
    fn describe() -> Description {
        Description::new(
            "pii-redact",
            "Replaces e-mail addresses, phone numbers, card numbers, IBANs and US SSNs in prompts with \
             placeholders such as [EMAIL_1], and restores them in the answer.",
        )
        .requests()
        .responses()
    }

    fn check_request(_ctx: CallContext, _subject: Subject, _request: &str, texts: Vec<Text>) -> RequestVerdict {
        let (kinds, unknown) = parse_kinds(config::get("kinds").as_deref());
        if !unknown.is_empty() {
            log::log(
                Level::Warn,
                &format!("pii-redact: unknown kinds ignored: {}", unknown.join(", ")),
            );
        }
        match check_request(&texts, &kinds) {
            Some(rewrite) => RequestVerdict::Rewrite(rewrite),
            None => RequestVerdict::Allow,
        }
    }

    fn check_response(
        _ctx: CallContext,
        _subject: Subject,
        _request: &str,
        memo: Option<String>,
        texts: Vec<String>,
        _done: bool,
    ) -> ResponseVerdict {
        // Placeholders are whole words, and the host never splits a stream's
        // window inside one, so each window is restored on its own.
        if !parse_flag(config::get("restore").as_deref(), true) {
            return ResponseVerdict::Allow;
        }
        match check_response(memo.as_deref(), &texts) {
            Some(texts) => ResponseVerdict::Rewrite(texts),
            None => ResponseVerdict::Allow,
        }
    }
}

tollgate_plugin_sdk::export_guardrail!(PiiRedact);

#[cfg(test)]
mod tests {
    use super::*;

    fn text(role: &str, content: &str) -> Text {
        Text {
            role: role.into(),
            content: content.into(),
        }
    }

    #[test]
    fn kinds_setting() {
        assert_eq!(parse_kinds(None).0, Kind::ALL);
        assert_eq!(parse_kinds(Some("  ")).0, Kind::ALL);
        assert_eq!(
            parse_kinds(Some("Email, national_id,,fax")),
            (vec![Kind::Email, Kind::NationalId], vec!["fax".to_string()])
        );
    }

    #[test]
    fn flags() {
        assert!(parse_flag(None, true));
        assert!(!parse_flag(Some("False"), true));
        assert!(parse_flag(Some("maybe"), true));
    }

    #[test]
    fn a_round_trip_through_the_memo() {
        let texts = [
            text("system", "You help alice@example.com."),
            text("user", "Write to alice@example.com and call 415-555-2671."),
        ];
        let rewrite = check_request(&texts, &Kind::ALL).unwrap();
        assert_eq!(
            rewrite.texts,
            ["You help [EMAIL_1].", "Write to [EMAIL_1] and call [PHONE_1]."]
        );
        let memo = rewrite.memo.unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&memo).unwrap(),
            serde_json::json!({"[EMAIL_1]": "alice@example.com", "[PHONE_1]": "415-555-2671"})
        );
        let answers = ["Sent to [EMAIL_1].".to_string(), "No placeholder.".to_string()];
        assert_eq!(
            check_response(Some(&memo), &answers).unwrap(),
            ["Sent to alice@example.com.", "No placeholder."]
        );
        assert_eq!(check_response(Some(&memo), &answers[1..]), None);
        assert_eq!(check_response(None, &answers), None);
        assert_eq!(check_response(Some("not json"), &answers), None);
    }

    #[test]
    fn nothing_found_allows() {
        assert_eq!(check_request(&[text("user", "What is 2 + 2?")], &Kind::ALL), None);
    }
}
