//! Sends an adapter's outbound request upstream: one pooled HTTP client for all
//! providers, credentials injected here (adapters never see them), and every wait
//! bounded by a timeout so nothing hangs.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::catalog::Provider;
use crate::config::Timeouts;
use crate::error::ApiError;
use crate::plugins::{AuthSlot, OutboundRequest, ResponseHead};

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
            Ok(Err(e)) => Err(ApiError::upstream_unreachable(&provider.id, error_chain(&e))),
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
                Ok(Some(Err(e))) => return Err(ApiError::upstream_unreachable(&provider.id, error_chain(&e))),
                Ok(Some(Ok(chunk))) => {
                    if body.len() + chunk.len() > limit {
                        return Err(ApiError::from_upstream(
                            &provider.id,
                            &crate::plugins::AdapterError {
                                class: crate::plugins::ErrorClass::Internal,
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
        let bad = |what: String| {
            ApiError::from_upstream(
                &provider.id,
                &crate::plugins::AdapterError {
                    class: crate::plugins::ErrorClass::Internal,
                    message: what,
                },
            )
        };
        let method = reqwest::Method::from_bytes(outbound.method.as_bytes())
            .map_err(|_| bad(format!("bad method '{}'", outbound.method)))?;
        let mut url =
            reqwest::Url::parse(&outbound.url).map_err(|e| bad(format!("bad url '{}': {e}", outbound.url)))?;
        let mut headers = HeaderMap::with_capacity(outbound.headers.len() + 1);
        for (name, value) in &outbound.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("bad header name '{name}'")))?;
            if is_reserved_header(&name) {
                continue;
            }
            let value = HeaderValue::from_str(value).map_err(|_| bad(format!("bad value for header '{name}'")))?;
            headers.append(name, value);
        }
        let secret = provider.credential.as_deref();
        match (&outbound.auth, secret) {
            (AuthSlot::None, _) => {}
            (_, None) => {}
            (AuthSlot::Bearer, Some(key)) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
                    .map_err(|_| bad("credential is not a valid header value".into()))?;
                value.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
            (AuthSlot::Header(name), Some(key)) => {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| bad(format!("bad auth header name '{name}'")))?;
                let mut value =
                    HeaderValue::from_str(key).map_err(|_| bad("credential is not a valid header value".into()))?;
                value.set_sensitive(true);
                headers.insert(name, value);
            }
            (AuthSlot::Query(param), Some(key)) => {
                url.query_pairs_mut().append_pair(param, key);
            }
            // Signed below, once the request is final.
            (AuthSlot::AwsSigv4(_), Some(_)) => {}
        }
        let mut request = reqwest::Request::new(method, url);
        *request.headers_mut() = headers;
        *request.body_mut() = Some(outbound.body.into());
        if let (AuthSlot::AwsSigv4(service), Some(key)) = (&outbound.auth, secret) {
            super::sigv4::sign_request(&mut request, service, key, std::time::SystemTime::now()).map_err(bad)?;
        }
        Ok(request)
    }
}

/// Headers the host controls; an adapter cannot set or smuggle them.
fn is_reserved_header(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization" | "host" | "content-length" | "transfer-encoding" | "connection" | "proxy-authorization"
    )
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
