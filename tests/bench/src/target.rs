//! One benchmarked path (direct to the mock, or through the gateway): its URL,
//! credentials and pre-serialized request bodies.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{Client, RequestBuilder};
use serde_json::json;

pub struct Target {
    pub name: &'static str,
    url: String,
    auth: Option<HeaderValue>,
    /// Sent with every request (e.g. `Cache-Control` for `pair`).
    headers: Vec<(HeaderName, HeaderValue)>,
    /// Serialized once: the load loop only clones a refcount.
    pub body: Bytes,
    pub stream_body: Bytes,
}

impl Target {
    /// `base` is the server's origin; a trailing `/` or `/v1` is accepted.
    pub fn new(
        name: &'static str,
        base: &str,
        api_key: Option<&str>,
        model: &str,
        stream_words: usize,
    ) -> Result<Self> {
        let base = base.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        let auth = api_key
            .map(|key| HeaderValue::from_str(&format!("Bearer {key}")))
            .transpose()
            .context("API key is not a valid header value")?;
        let messages = json!([{"role": "user", "content": "hello bench"}]);
        let body = json!({"model": model, "messages": messages});
        // `mock.words` passes through the gateway as an unknown field.
        let stream_body = json!({"model": model, "messages": messages, "stream": true,
            "mock": {"words": stream_words}});
        Ok(Self {
            name,
            url: format!("{base}/v1/chat/completions"),
            auth,
            headers: Vec::new(),
            body: serde_json::to_vec(&body)?.into(),
            stream_body: serde_json::to_vec(&stream_body)?.into(),
        })
    }

    /// Adds a `provider` preferences object to both bodies (none when empty).
    pub fn with_provider(mut self, preferences: &str) -> Result<Self> {
        if preferences.trim().is_empty() {
            return Ok(self);
        }
        let preferences: serde_json::Value =
            serde_json::from_str(preferences).context("the provider preferences are not JSON")?;
        for body in [&mut self.body, &mut self.stream_body] {
            let mut object: serde_json::Value = serde_json::from_slice(body)?;
            object["provider"] = preferences.clone();
            *body = serde_json::to_vec(&object)?.into();
        }
        Ok(self)
    }

    /// Sends `name: value` with every request.
    pub fn with_header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers
            .push((HeaderName::from_static(name), HeaderValue::from_static(value)));
        self
    }

    pub fn request(&self, client: &Client, body: &Bytes) -> RequestBuilder {
        let mut req = client
            .post(&self.url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.clone());
        if let Some(auth) = &self.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        for (name, value) in &self.headers {
            req = req.header(name, value);
        }
        req
    }

    /// One request must succeed before measuring, so a misconfiguration fails
    /// loudly instead of producing a table of errors.
    pub async fn check(&self, client: &Client) -> Result<()> {
        let resp = self
            .request(client, &self.body)
            .send()
            .await
            .with_context(|| format!("{} path: request to {} failed", self.name, self.url))?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("{} path: {} answered {status}: {text}", self.name, self.url);
        }
        Ok(())
    }
}

/// One keep-alive HTTP/1.1 pool shared by all workers of both paths.
pub fn client(max_concurrency: usize) -> Result<Client> {
    Ok(Client::builder()
        .http1_only()
        .pool_max_idle_per_host(max_concurrency.max(1) * 2)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .build()?)
}
