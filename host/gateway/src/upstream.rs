//! Sends an adapter's outbound request upstream: one pooled HTTP client for all
//! providers, credentials injected here (adapters never see them), and every wait
//! bounded by a timeout so nothing hangs.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use axum::http::StatusCode;

use serde::{Deserialize, Serialize};

pub use tollgate_core::error_text::{describe, error_chain};
use tollgate_plugin_host::{AuthSlot, OutboundRequest, ResponseHead};
use tollgate_routing::catalog::Provider;
use tollgate_routing::egress::{AskedSlot, CredentialSlot};
use tollgate_web::error::{ApiError, Failure};

/// `[timeouts]`: every wait on an upstream provider.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timeouts {
    /// TCP/TLS connect to the upstream.
    pub connect_ms: u64,
    /// From sending the request to the upstream's response head.
    pub first_byte_ms: u64,
    /// Longest silence between two chunks of a response body.
    pub idle_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect_ms: 5_000,
            first_byte_ms: 60_000,
            idle_ms: 60_000,
        }
    }
}

/// `[upstream]`: what the gateway reads from a provider.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Largest whole (not streamed) upstream answer read; formerly
    /// `[limits] max_upstream_body_bytes`.
    pub max_body_bytes: usize,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 32 << 20,
        }
    }
}

pub struct Upstream {
    client: reqwest::Client,
    first_byte: Duration,
    idle: Duration,
}

impl Upstream {
    pub fn new(timeouts: &Timeouts) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(timeouts.connect_ms))
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1024)
            .pool_idle_timeout(Duration::from_secs(90))
            // A redirect could carry a credential header to another origin, and
            // the egress check saw only the first URL.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            client,
            first_byte: Duration::from_millis(timeouts.first_byte_ms),
            idle: Duration::from_millis(timeouts.idle_ms),
        })
    }

    pub fn idle_timeout(&self) -> Duration {
        self.idle
    }

    /// Sends the request and waits for the response head.
    pub async fn send(&self, provider: &Provider, outbound: OutboundRequest) -> Result<reqwest::Response, ApiError> {
        let request = self.build(provider, outbound)?;
        match tokio::time::timeout(self.first_byte, self.client.execute(request)).await {
            Err(_) => Err(ApiError::upstream_timeout(&provider.id, "before answering")),
            Ok(Err(e)) if e.is_timeout() => Err(ApiError::upstream_timeout(&provider.id, "while connecting")),
            Ok(Err(e)) => Err(ApiError::upstream_unreachable(&provider.id, describe(e))),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// Reads a whole response body, bounded in size and in idle time.
    pub async fn read_body(
        &self,
        provider: &Provider,
        response: reqwest::Response,
        limit: usize,
    ) -> Result<Bytes, ApiError> {
        let mut body = BytesMut::new();
        let mut stream = response.bytes_stream();
        loop {
            match tokio::time::timeout(self.idle, stream.next()).await {
                Err(_) => return Err(ApiError::upstream_timeout(&provider.id, "while sending its answer")),
                Ok(None) => return Ok(body.freeze()),
                Ok(Some(Err(e))) => return Err(ApiError::upstream_unreachable(&provider.id, describe(e))),
                Ok(Some(Ok(chunk))) => {
                    if body.len() + chunk.len() > limit {
                        return Err(crate::adapter_errors::from_upstream(
                            &provider.id,
                            &tollgate_plugin_host::AdapterError {
                                class: tollgate_plugin_host::ErrorClass::Internal,
                                message: format!("response body exceeds {limit} bytes"),
                            },
                        ));
                    }
                    body.extend_from_slice(&chunk);
                }
            }
        }
    }

    fn build(&self, provider: &Provider, outbound: OutboundRequest) -> Result<reqwest::Request, ApiError> {
        let bad = |what: String| ApiError::adapter_refused(&provider.adapter, what);
        let method = reqwest::Method::from_bytes(outbound.method.as_bytes())
            .map_err(|_| bad(format!("bad method '{}'", outbound.method)))?;
        // Parse errors may quote the URL; the adapter wrote it, so it holds no secret.
        let mut url =
            reqwest::Url::parse(&outbound.url).map_err(|e| bad(format!("bad url '{}': {e}", outbound.url)))?;
        let asked = match &outbound.auth {
            AuthSlot::None => AskedSlot::None,
            AuthSlot::Bearer => AskedSlot::Bearer,
            AuthSlot::Header(name) => AskedSlot::Header(name),
            AuthSlot::Query(name) => AskedSlot::Query(name),
            AuthSlot::AwsSigv4(service) => AskedSlot::AwsSigv4(service),
        };
        let slot = provider
            .egress
            .admit(&url, asked)
            .map_err(|refusal| bad(refusal.to_string()))?;
        let mut headers = HeaderMap::with_capacity(outbound.headers.len() + 1);
        for (name, value) in &outbound.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("bad header name '{name}'")))?;
            if is_reserved_header(&name) {
                continue;
            }
            let value = HeaderValue::from_str(value).map_err(|_| bad(format!("bad value for header '{name}'")))?;
            headers.append(name, value);
        }
        // The slot comes from the provider's declaration, never from the adapter.
        let secret = provider.credential.as_ref().map(tollgate_core::secret::Secret::expose);
        let mut sign_with = None;
        match (slot, secret) {
            (None | Some(CredentialSlot::None), _) | (_, None) => {}
            (Some(CredentialSlot::Bearer), Some(key)) => {
                headers.insert(
                    reqwest::header::AUTHORIZATION,
                    sensitive(&format!("Bearer {key}"), &bad)?,
                );
            }
            (Some(CredentialSlot::Header(name)), Some(key)) => {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| bad(format!("bad auth header name '{name}'")))?;
                headers.insert(name, sensitive(key, &bad)?);
            }
            (Some(CredentialSlot::Query(param)), Some(key)) => {
                url.query_pairs_mut().append_pair(param, key);
            }
            // Signed below, once the request is final.
            (Some(CredentialSlot::AwsSigv4 { service, region }), Some(key)) => sign_with = Some((service, region, key)),
        }
        let mut request = reqwest::Request::new(method, url);
        *request.headers_mut() = headers;
        *request.body_mut() = Some(outbound.body.into());
        if let Some((service, region, key)) = sign_with {
            super::sigv4::sign_request(&mut request, service, region, key, std::time::SystemTime::now())
                .map_err(bad)?;
        }
        Ok(request)
    }
}

fn sensitive(text: &str, bad: &impl Fn(String) -> ApiError) -> Result<HeaderValue, ApiError> {
    let mut value = HeaderValue::from_str(text).map_err(|_| bad("credential is not a valid header value".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// Headers the host controls; an adapter cannot set or smuggle them.
fn is_reserved_header(name: &HeaderName) -> bool {
    tollgate_routing::egress::is_reserved_header_name(name.as_str())
}

/// A stream whose body ended before the provider's terminal event (the
/// adapter's `finish` said so): an upstream failure like a broken
/// connection, so it fails over and counts against the model's health. The
/// code keeps it apart from a reset (`upstream_unreachable`) and an idle
/// timeout (`upstream_timeout`): a clean end of body is what a proxy closing a
/// long connection gracefully produces.
pub fn truncated(provider: &str, detail: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "upstream_error",
        "upstream_truncated",
        format!("provider '{provider}' ended the stream before the answer was finished: {detail}"),
    )
    .failing(Failure::Upstream)
}

pub fn response_head(response: &reqwest::Response) -> ResponseHead {
    ResponseHead {
        status: response.status().as_u16(),
        headers: response
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_string(), value.to_str().ok()?.to_string())))
            .collect(),
    }
}
