//! Error text for logs and callers that never carries a secret: reqwest
//! errors print their URL, which may hold a query-slot key or a sink's
//! credentials, so they are shown without it, with their whole cause chain.

/// A reqwest error's chain without its URL.
pub fn describe(error: reqwest::Error) -> String {
    error_chain(&error.without_url())
}

/// reqwest's top-level message hides the cause ("error sending request"); show it.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
