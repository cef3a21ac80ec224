//! Finding credentials in text by their published shapes: a fixed prefix and
//! a run of key characters of a known length, a PEM private-key block, or a
//! JSON Web Token. Hand-written scanners rather than a regex engine: the
//! sandbox traps on the random seed `std`'s `HashMap` (and so the `regex`
//! crate) asks for, and prefix scans are all these shapes need.

use std::ops::Range;

/// What a secret is, as a deny reason names it (never its value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    OpenAi,
    Anthropic,
    AwsAccessKeyId,
    GitHub,
    Slack,
    Google,
    Stripe,
    Tollgate,
    PrivateKey,
    Jwt,
}

impl Kind {
    pub fn describe(self) -> &'static str {
        match self {
            Kind::OpenAi => "an OpenAI API key",
            Kind::Anthropic => "an Anthropic API key",
            Kind::AwsAccessKeyId => "an AWS access key id",
            Kind::GitHub => "a GitHub token",
            Kind::Slack => "a Slack token",
            Kind::Google => "a Google API key",
            Kind::Stripe => "a Stripe secret key",
            Kind::Tollgate => "a Tollgate API key",
            Kind::PrivateKey => "a private key",
            Kind::Jwt => "a JSON Web Token",
        }
    }
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn upper_alnum(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

/// Base64url, as most providers' keys use after their prefix.
fn url_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn alnum_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// A prefixed token: one of `prefixes`, then a run of `body` characters of
/// at least `min` (exactly `min` when `exact`).
struct Token {
    kind: Kind,
    prefixes: &'static [&'static str],
    body: fn(u8) -> bool,
    min: usize,
    exact: bool,
}

const TOKENS: &[Token] = &[
    Token {
        kind: Kind::Anthropic,
        prefixes: &["sk-ant-"],
        body: url_safe,
        min: 20,
        exact: false,
    },
    Token {
        kind: Kind::OpenAi,
        prefixes: &["sk-proj-", "sk-svcacct-", "sk-admin-"],
        body: url_safe,
        min: 20,
        exact: false,
    },
    // Legacy keys have no dash after `sk-`, which keeps `sk-learn-…` out.
    Token {
        kind: Kind::OpenAi,
        prefixes: &["sk-"],
        body: alnum,
        min: 20,
        exact: false,
    },
    Token {
        kind: Kind::AwsAccessKeyId,
        prefixes: &["AKIA", "ASIA"],
        body: upper_alnum,
        min: 16,
        exact: true,
    },
    Token {
        kind: Kind::GitHub,
        prefixes: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        body: alnum,
        min: 36,
        exact: false,
    },
    Token {
        kind: Kind::GitHub,
        prefixes: &["github_pat_"],
        body: alnum_underscore,
        min: 22,
        exact: false,
    },
    Token {
        kind: Kind::Slack,
        prefixes: &["xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"],
        body: alnum_dash,
        min: 10,
        exact: false,
    },
    Token {
        kind: Kind::Google,
        prefixes: &["AIza"],
        body: url_safe,
        min: 35,
        exact: false,
    },
    Token {
        kind: Kind::Stripe,
        prefixes: &["sk_live_", "rk_live_"],
        body: alnum,
        min: 16,
        exact: false,
    },
    // `tg_live_` and 40 base62 characters (host/identity).
    Token {
        kind: Kind::Tollgate,
        prefixes: &["tg_live_"],
        body: alnum,
        min: 32,
        exact: false,
    },
];

/// Every secret in `text`: its byte range and kind, in text order; ranges
/// may overlap (a JWT's text holds no other key, but a careless paste might).
pub fn find(text: &str) -> Vec<(Range<usize>, Kind)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for token in TOKENS {
        for prefix in token.prefixes {
            for (at, _) in text.match_indices(prefix) {
                // Not the tail of a longer word (`task-…`, `my_sk_live_…`).
                if at > 0 && url_safe(bytes[at - 1]) {
                    continue;
                }
                let body_start = at + prefix.len();
                let run = bytes[body_start..].iter().take_while(|b| (token.body)(**b)).count();
                let fits = if token.exact {
                    run == token.min
                } else {
                    run >= token.min
                };
                if fits {
                    found.push((at..body_start + run, token.kind));
                }
            }
        }
    }
    found.extend(private_keys(text).into_iter().map(|r| (r, Kind::PrivateKey)));
    found.extend(jwts(text).into_iter().map(|r| (r, Kind::Jwt)));
    found.sort_by_key(|(range, _)| range.start);
    found
}

/// `-----BEGIN … PRIVATE KEY-----` through its `-----END …-----` line, or,
/// when the end is missing (a truncated paste), through the base64 after it.
fn private_keys(text: &str) -> Vec<Range<usize>> {
    const BEGIN: &str = "-----BEGIN ";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(BEGIN).map(|i| from + i) {
        let label_start = at + BEGIN.len();
        let Some(label_len) = text[label_start..].find("-----") else {
            break;
        };
        let label = &text[label_start..label_start + label_len];
        let header_end = label_start + label_len + 5;
        if !label.ends_with("PRIVATE KEY") || label.contains('\n') {
            from = label_start;
            continue;
        }
        let footer = format!("-----END {label}-----");
        let end = match text[header_end..].find(&footer) {
            Some(i) => header_end + i + footer.len(),
            None => base64_lines_end(text, header_end),
        };
        found.push(at..end);
        from = end;
    }
    found
}

/// The end of the base64 lines that follow `from` (the rest of the header's
/// line), stopping at the first blank line or line of anything else.
fn base64_lines_end(text: &str, from: usize) -> usize {
    let base64 = |b: u8| b.is_ascii_alphanumeric() || b"+/=".contains(&b);
    let mut end = from;
    let mut line_start = from;
    for (i, line) in text[from..].split_inclusive('\n').enumerate() {
        let content = line.trim();
        if i > 0 && (content.is_empty() || !content.bytes().all(base64)) {
            break;
        }
        if i > 0 {
            end = line_start + line.trim_end().len();
        }
        line_start += line.len();
    }
    end
}

/// JSON Web Tokens: three base64url segments joined by dots, the first (a
/// JSON header) starting `eyJ`.
fn jwts(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let segment = |from: usize| bytes[from..].iter().take_while(|b| url_safe(**b)).count();
    let mut found = Vec::new();
    for (at, _) in text.match_indices("eyJ") {
        if at > 0 && (url_safe(bytes[at - 1]) || bytes[at - 1] == b'.') {
            continue;
        }
        let header = segment(at);
        let payload_start = at + header + 1;
        if header < 10 || bytes.get(at + header) != Some(&b'.') {
            continue;
        }
        let payload = segment(payload_start);
        let signature_start = payload_start + payload + 1;
        if payload < 10 || bytes.get(payload_start + payload) != Some(&b'.') {
            continue;
        }
        let signature = segment(signature_start);
        if signature >= 16 {
            found.push(at..signature_start + signature);
        }
    }
    found
}

/// The kinds found, each once, in order of first appearance.
pub fn kinds(found: &[(Range<usize>, Kind)]) -> Vec<Kind> {
    let mut kinds = Vec::new();
    for (_, kind) in found {
        if !kinds.contains(kind) {
            kinds.push(*kind);
        }
    }
    kinds
}

pub const REDACTED: &str = "[SECRET_REDACTED]";

/// `text` with each secret (overlaps merged) replaced by [`REDACTED`].
pub fn redact(text: &str, found: &[(Range<usize>, Kind)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (range, _) in found {
        if range.end <= copied {
            continue;
        }
        if range.start >= copied {
            out.push_str(&text[copied..range.start]);
            out.push_str(REDACTED);
        }
        copied = range.end;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds_in(text: &str) -> Vec<Kind> {
        kinds(&find(text))
    }

    const JWT: &str =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

    #[test]
    fn each_provider_shape() {
        let cases = [
            ("key sk-abcdefghijklmnopqrstuvwxyz012345", Kind::OpenAi),
            ("sk-proj-AbCd_Ef-GhIjKlMnOpQrStUvWx", Kind::OpenAi),
            ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv-x", Kind::Anthropic),
            ("AKIAIOSFODNN7EXAMPLE", Kind::AwsAccessKeyId),
            ("id=ASIAY34FZKBOKMUTVV7A;", Kind::AwsAccessKeyId),
            ("ghp_0123456789abcdefghijABCDEFGHIJ012345", Kind::GitHub),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", Kind::GitHub),
            ("xoxb-123456789012-abcdefGHIJ", Kind::Slack),
            ("AIzaSyA-1234567890abcdefghijklmnopqrstu", Kind::Google),
            ("sk_live_51Habcdefghijklmnop", Kind::Stripe),
            ("rk_live_51Habcdefghijklmnop", Kind::Stripe),
            ("tg_live_0123456789abcdefghijklmnopqrstuvwxyzABCD", Kind::Tollgate),
            (JWT, Kind::Jwt),
        ];
        for (text, kind) in cases {
            assert_eq!(kinds_in(text), [kind], "{text}");
        }
    }

    #[test]
    fn look_alikes_are_not_secrets() {
        for text in [
            "use sk-learn-compatible-estimators-for-this",
            "the task-abcdefghijklmnopqrstuvwxyz0123 id",
            "AKIA is a prefix; AKIAIOSFODNN7EXAMPLEX is too long",
            "ghp_short",
            "sk_test_51Habcdefghijklmnop",
            "tg_live_short",
            "eyJhbGciOiJIUzI1NiJ9 alone",
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----",
        ] {
            assert!(kinds_in(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn private_key_blocks_whole_or_truncated() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAKC==\n-----END RSA PRIVATE KEY-----";
        let text = format!("here:\n{pem}\nthanks");
        let found = find(&text);
        assert_eq!(found.len(), 1);
        assert_eq!(&text[found[0].0.clone()], pem);
        assert_eq!(redact(&text, &found), "here:\n[SECRET_REDACTED]\nthanks");
        let truncated = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r\nZXktdjEA\n\nWhat is this?";
        let found = find(truncated);
        assert_eq!(redact(truncated, &found), "[SECRET_REDACTED]\n\nWhat is this?");
    }

    #[test]
    fn kinds_once_in_order_and_redaction() {
        let text = format!("a AKIAIOSFODNN7EXAMPLE b {JWT} c AKIAIOSFODNN7EXAMPL2");
        let found = find(&text);
        assert_eq!(kinds(&found), [Kind::AwsAccessKeyId, Kind::Jwt]);
        assert_eq!(
            redact(&text, &found),
            "a [SECRET_REDACTED] b [SECRET_REDACTED] c [SECRET_REDACTED]"
        );
    }
}
