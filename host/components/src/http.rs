//! The `http` capability: outbound requests for tool servers. The URL's origin
//! must be one the install was approved for; redirects are never followed (a
//! 3xx comes back as it is); request and response bodies are capped; each
//! request is bounded by the HTTP timeout and the call's remaining wall time.
//! A named credential is placed by the host, only for the credential's
//! origins, so a component can use a key it can never read or send elsewhere.
//! Internal addresses are refused on the address connected to (see `egress`),
//! and every failure to connect reads the same, so a component cannot map
//! which ports are open, closed or refused.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::bindings::tool_server::tollgate::host::http::{Error, Host, Request, Response};
use crate::egress::unreachable;
use crate::grants::{Origin, Placement};
use crate::state::CallState;

/// Headers the host owns: framing and routing are its job, not the component's.
const HOST_OWNED_HEADERS: [&str; 6] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "proxy-authorization",
];

impl Host for CallState {
    fn send(&mut self, request: Request) -> Result<Response, Error> {
        let prepared = self.prepare(request)?;
        let cap = self.limits.http_max_body_bytes;
        let timeout = Duration::from_millis(self.limits.http_timeout_ms);
        let install = self.invocation.install.clone();
        tracing::debug!(install = %install, origin = %prepared.origin, "component http request");
        self.block_on(timeout, perform(prepared.request, &prepared.origin, cap))
            .unwrap_or(Err(Error::Timeout))
    }
}

struct Prepared {
    origin: Origin,
    request: reqwest::RequestBuilder,
}

impl CallState {
    /// Checks `request` against the install's grants and builds it, with the
    /// credential (if any) in place.
    fn prepare(&self, request: Request) -> Result<Prepared, Error> {
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| Error::InvalidRequest(format!("'{}' is not an HTTP method", request.method)))?;
        let mut url = url::Url::parse(&request.url)
            .map_err(|e| Error::InvalidRequest(format!("'{}' is not a URL: {e}", request.url)))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Error::InvalidRequest("URLs with user info are not allowed".into()));
        }
        let origin = Origin::of(&url)
            .ok_or_else(|| Error::InvalidRequest(format!("'{}' is not an http(s) URL", request.url)))?;
        if !self.grants.origins.contains(&origin) {
            return Err(Error::OriginRefused(format!(
                "{origin} is not approved for install '{}' (approved: {})",
                self.invocation.install,
                list(&self.grants.origins)
            )));
        }
        let Some(client) = self.egress.client_for(&origin, &url) else {
            tracing::debug!(install = %self.invocation.install, %origin, "component request to an internal address refused");
            return Err(Error::Failed(unreachable(&origin)));
        };
        if request.body.len() > self.limits.http_max_body_bytes {
            return Err(Error::InvalidRequest(format!(
                "the request body is larger than {} bytes",
                self.limits.http_max_body_bytes
            )));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &request.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::InvalidRequest(format!("'{name}' is not a header name")))?;
            if HOST_OWNED_HEADERS.contains(&name.as_str()) {
                continue;
            }
            let value = HeaderValue::from_str(value)
                .map_err(|_| Error::InvalidRequest(format!("the value of header '{name}' is not valid")))?;
            headers.append(name, value);
        }
        if let Some(name) = &request.credential {
            self.place_credential(name, &origin, &mut url, &mut headers)?;
        }
        let request = client.request(method, url).headers(headers).body(request.body);
        Ok(Prepared { origin, request })
    }

    fn place_credential(
        &self,
        name: &str,
        origin: &Origin,
        url: &mut url::Url,
        headers: &mut HeaderMap,
    ) -> Result<(), Error> {
        let credential = self.grants.credentials.get(name).ok_or_else(|| {
            Error::CredentialRefused(format!(
                "no credential '{name}' is granted to install '{}'",
                self.invocation.install
            ))
        })?;
        if !credential.origins.contains(origin) {
            return Err(Error::CredentialRefused(format!(
                "credential '{name}' may be sent only to {}, not to {origin}",
                list(&credential.origins)
            )));
        }
        let secret = credential.value.expose();
        let invalid = || Error::CredentialRefused(format!("credential '{name}' is not a valid header value"));
        match &credential.placement {
            Placement::Bearer => {
                let mut value = HeaderValue::from_str(&format!("Bearer {secret}")).map_err(|_| invalid())?;
                value.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
            Placement::Header(header) => {
                let header = HeaderName::from_bytes(header.as_bytes()).map_err(|_| invalid())?;
                let mut value = HeaderValue::from_str(secret).map_err(|_| invalid())?;
                value.set_sensitive(true);
                headers.insert(header, value);
            }
            Placement::Query(parameter) => {
                // Replace any value the component put there itself.
                let kept: Vec<(String, String)> = url
                    .query_pairs()
                    .filter(|(key, _)| key != parameter.as_str())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect();
                url.query_pairs_mut()
                    .clear()
                    .extend_pairs(kept)
                    .append_pair(parameter, secret);
            }
        }
        Ok(())
    }
}

/// Sends the request and reads at most `cap` bytes of the answer.
async fn perform(request: reqwest::RequestBuilder, origin: &Origin, cap: usize) -> Result<Response, Error> {
    let response = request.send().await.map_err(|e| transport_error(e, origin))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
        .collect();
    if response.content_length().is_some_and(|length| length > cap as u64) {
        return Err(Error::TooLarge(cap as u64));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| transport_error(e, origin))?;
        if body.len() + chunk.len() > cap {
            return Err(Error::TooLarge(cap as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Response { status, headers, body })
}

/// One text for every way a request can fail to get an answer: a refused
/// address, a name that does not resolve, a closed port and a connection the
/// peer drops all read alike. The cause goes to the operator's log only,
/// without the URL (a query credential would be in it).
fn transport_error(error: reqwest::Error, origin: &Origin) -> Error {
    if error.is_timeout() {
        return Error::Timeout;
    }
    tracing::debug!(%origin, error = %tollgate_core::error_text::describe(error.without_url()), "component request failed");
    Error::Failed(unreachable(origin))
}

fn list(origins: &[Origin]) -> String {
    if origins.is_empty() {
        return "none".into();
    }
    origins.iter().map(Origin::as_str).collect::<Vec<_>>().join(", ")
}
