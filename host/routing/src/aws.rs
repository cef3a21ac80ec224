//! The AWS rules a SigV4 provider is resolved with, when the routes are
//! built: its credential string from the standard variables, and its signing
//! region. Fixed here, so an adapter can choose neither.
//!
//! Credentials: the provider's credential string is
//! `ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]`. When a SigV4 provider has no
//! configured key, [`credential_from_env`] builds that string from the standard
//! `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` variables.
//! Region: `aws_region` when configured, else the second label of an
//! `<service>.<region>.amazonaws.com` host, else `AWS_REGION`, else
//! `AWS_DEFAULT_REGION`, else `us-east-1`.

/// Builds `ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]` from the standard AWS
/// variables, or `None` when either of the two required ones is unset or empty.
pub fn credential_from_env(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let non_empty = |name: &str| env(name).filter(|v| !v.is_empty());
    let id = non_empty("AWS_ACCESS_KEY_ID")?;
    let secret = non_empty("AWS_SECRET_ACCESS_KEY")?;
    Some(match non_empty("AWS_SESSION_TOKEN") {
        Some(token) => format!("{id}:{secret}:{token}"),
        None => format!("{id}:{secret}"),
    })
}

/// The region of an `<service>.<region>.amazonaws.com[.cn]` host.
pub fn region_from_host(host: &str) -> Option<&str> {
    let labels: Vec<&str> = host.split('.').collect();
    let aws = labels.iter().position(|l| *l == "amazonaws")?;
    // `bedrock-runtime.us-east-1.amazonaws.com`: the label just before `amazonaws`,
    // as long as something (the service) precedes it.
    (aws >= 2).then(|| labels[aws - 1])
}

/// The signing region of a provider at `base_url` that names none: the region
/// in its host, else `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`.
/// Fixed when the routes are built, so an adapter cannot choose it.
pub fn default_region(base_url: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let host = url::Url::parse(base_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_string));
    if let Some(region) = host.as_deref().and_then(region_from_host) {
        return region.to_string();
    }
    ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|name| env(name).filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "us-east-1".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_and_env_credentials() {
        assert_eq!(
            region_from_host("bedrock-runtime.us-west-2.amazonaws.com"),
            Some("us-west-2")
        );
        assert_eq!(
            region_from_host("bedrock-runtime.cn-north-1.amazonaws.com.cn"),
            Some("cn-north-1")
        );
        assert_eq!(region_from_host("127.0.0.1"), None);
        assert_eq!(default_region("http://127.0.0.1:9", &|_| None), "us-east-1");
        let regional = |name: &str| (name == "AWS_DEFAULT_REGION").then(|| "ap-south-1".to_string());
        assert_eq!(default_region("http://127.0.0.1:9", &regional), "ap-south-1");
        let env = |name: &str| match name {
            "AWS_ACCESS_KEY_ID" => Some("AK".to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some("SK".to_string()),
            _ => None,
        };
        assert_eq!(credential_from_env(&env).as_deref(), Some("AK:SK"));
        assert_eq!(credential_from_env(&|_| None), None);
    }
}
