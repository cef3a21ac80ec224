//! Tool servers, skills and guardrails for API callers: workspace installs
//! ([`installs`], which the control plane's `installs.*` operations call),
//! the MCP endpoint (`/v1/mcp`, [`mcp`]), skill runs over
//! HTTP (`/v1/skills/{install}`, [`skills`]), and what a component may do on
//! its caller's behalf ([`capabilities`]), and the guardrail installs the
//! data plane runs as stages of its pipeline ([`guardrails`]). The sandbox itself is the
//! `tollgate-components` crate; prompt-template installs, served as MCP
//! prompts, render with `tollgate-actors`' template engine.

#![forbid(unsafe_code)]

pub mod calls;
mod capabilities;
pub mod guardrails;
pub mod installs;
mod mcp;
pub mod prices;
pub mod remote;
mod skills;
mod store;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRef, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use installs::{InstallChange, InstallError, Installs, NewCredential, NewInstall};
pub use store::{InstallRecord, Store};

use tollgate_actors::runtime::Engine;
use tollgate_gateway::DataPlane;
use tollgate_identity::auth::{AuthState, Caller};
use tollgate_web::error::ApiError;
use tollgate_web::server::{Origins, RequestId};

/// The components concern's state: the installs, the data plane their
/// model calls go through, and the template engine prompt templates render
/// with.
pub struct Components {
    installs: Arc<Installs>,
    /// Model calls go through it, and its ledger logs the calls.
    data: Arc<DataPlane>,
    /// MCP clients' sessions.
    sessions: mcp::sessions::Sessions,
    /// Tools' questions to MCP clients, waiting for their answers.
    elicitations: Arc<mcp::elicit::Elicitations>,
    /// The gateway's one template engine (limits and render threads), which
    /// hosted actors share: a prompt template is bounded as an actor's is.
    templates: Arc<Engine>,
    /// The operator's price per tool call (`[tool_prices]`).
    prices: prices::ToolPrices,
}

impl Components {
    pub fn new(
        installs: Arc<Installs>,
        data: Arc<DataPlane>,
        database: tollgate_core::db::Database,
        templates: Arc<Engine>,
        prices: prices::ToolPrices,
    ) -> Self {
        Self {
            installs,
            data,
            sessions: mcp::sessions::Sessions::new(database.clone()),
            elicitations: Arc::new(mcp::elicit::Elicitations::new(database)),
            templates,
            prices,
        }
    }

    pub fn installs(&self) -> &Arc<Installs> {
        &self.installs
    }

    pub fn templates(&self) -> &Arc<Engine> {
        &self.templates
    }
}

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Components>: FromRef<S>,
    Arc<Origins>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    Router::new()
        .route("/v1/mcp", post(mcp_all).get(no_stream).delete(end_session))
        .route("/v1/mcp/{install}", post(mcp_one).get(no_stream).delete(end_session))
        .route("/v1/skills/{install}", post(run_skill))
        .route(mcp::authorization::METADATA_PATH, get(resource_metadata))
        .route(
            &format!("{}/v1/mcp", mcp::authorization::METADATA_PATH),
            get(resource_metadata),
        )
        .route(
            &format!("{}/v1/mcp/{{install}}", mcp::authorization::METADATA_PATH),
            get(install_metadata),
        )
}

/// RFC 9728 metadata of `/v1/mcp`, at the well-known path and at its
/// path-suffixed form, which MCP clients ask for first.
async fn resource_metadata(
    State(origins): State<Arc<Origins>>,
    State(auth): State<Arc<AuthState>>,
    headers: HeaderMap,
) -> Response {
    mcp::authorization::metadata(&origins, &headers, None, auth.oidc_issuers())
}

/// The metadata of `/v1/mcp/{install}`, whose 401 points here. Public like
/// the rest: it names the URL the client asked about, never whether such an
/// install exists.
async fn install_metadata(
    State(origins): State<Arc<Origins>>,
    State(auth): State<Arc<AuthState>>,
    Path(install): Path<String>,
    headers: HeaderMap,
) -> Response {
    // Only what could be an install name (docs/components.md): anything else
    // would put an arbitrary string into the resource URL.
    let shaped = (1..=48).contains(&install.len())
        && install
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !shaped {
        return (StatusCode::NOT_FOUND, "no such MCP resource").into_response();
    }
    mcp::authorization::metadata(&origins, &headers, Some(&install), auth.oidc_issuers())
}

async fn mcp_all(
    State(components): State<Arc<Components>>,
    State(origins): State<Arc<Origins>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    caller: Result<Caller, ApiError>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = McpRequest {
        only: None,
        request_id,
        headers: &headers,
        body: &body,
    };
    mcp_call(&components, &origins, &auth, caller, request).await
}

// An axum handler takes one argument per extractor.
#[allow(clippy::too_many_arguments)]
async fn mcp_one(
    State(components): State<Arc<Components>>,
    State(origins): State<Arc<Origins>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    caller: Result<Caller, ApiError>,
    Path(install): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = McpRequest {
        only: Some(install.as_str()),
        request_id,
        headers: &headers,
        body: &body,
    };
    mcp_call(&components, &origins, &auth, caller, request).await
}

/// One POST to an MCP route: its install (on `/v1/mcp/{install}`), id,
/// headers and body.
struct McpRequest<'a> {
    only: Option<&'a str>,
    request_id: RequestId,
    headers: &'a HeaderMap,
    body: &'a [u8],
}

/// The checks both MCP routes share, in the order MCP 2025-11-25 implies: a
/// foreign browser `Origin` is refused (403) before the key is looked at.
async fn mcp_call(
    components: &Arc<Components>,
    origins: &Origins,
    auth: &Arc<AuthState>,
    caller: Result<Caller, ApiError>,
    request: McpRequest<'_>,
) -> Response {
    let McpRequest {
        only,
        request_id,
        headers,
        body,
    } = request;
    if let Some(origin) = origins.foreign_origin(headers) {
        return mcp::foreign_origin(&origin);
    }
    let caller = match caller {
        Ok(caller) => caller,
        Err(error) => return mcp::authorization::challenge(error.into_response(), origins, headers, only),
    };
    let scope = mcp::Scope::new(
        components.clone(),
        caller.0.clone(),
        auth.clone(),
        only.map(str::to_string),
    )
    .within(request_id.0.to_string());
    mcp::serve(scope, headers, body).await
}

/// The transport's `GET` opens a server-to-client stream; this server sends
/// none, and says so as the transport specifies.
async fn no_stream() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "POST")],
        "this MCP server answers each POST directly and opens no event stream",
    )
        .into_response()
}

/// `DELETE` with a session's id ends it (204); a later request naming it
/// gets 404. Unknown, ended and other workspaces' sessions are 404 too.
async fn end_session(
    State(components): State<Arc<Components>>,
    State(origins): State<Arc<Origins>>,
    caller: Result<Caller, ApiError>,
    install: Option<Path<String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(origin) = origins.foreign_origin(&headers) {
        return mcp::foreign_origin(&origin);
    }
    let caller = match caller {
        Ok(caller) => caller,
        Err(error) => {
            let install = install.as_ref().map(|Path(install)| install.as_str());
            return mcp::authorization::challenge(error.into_response(), &origins, &headers, install);
        }
    };
    let Some(id) = headers.get(mcp::SESSION_HEADER).and_then(|id| id.to_str().ok()) else {
        let text = format!("DELETE ends a session: send its {} header", mcp::SESSION_HEADER);
        return (StatusCode::BAD_REQUEST, text).into_response();
    };
    match components.sessions.end(&caller.0.workspace_id, id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => (StatusCode::NOT_FOUND, "no such MCP session").into_response(),
        Err(e) => {
            tracing::error!(error = %e, "ending an MCP session");
            (StatusCode::SERVICE_UNAVAILABLE, "the session could not be ended; retry").into_response()
        }
    }
}

async fn run_skill(
    State(components): State<Arc<Components>>,
    request_id: RequestId,
    caller: Caller,
    Path(install): Path<String>,
    body: Bytes,
) -> Response {
    let outcome = async {
        let request: skills::RunRequest = serde_json::from_slice(&body).map_err(|e| {
            ApiError::invalid_request(format!("the body must be {{\"input\": {{…}}, \"stream\": false}}: {e}"))
        })?;
        // A skill the caller's tool policy does not list is answered as one
        // that is not installed (docs/mcp.md, "Tool policy").
        let allowed = caller.0.tools.allows(&install, calls::SKILL_TOOL);
        let active = (components.installs.get(&caller.0.workspace_id, &install))
            .filter(|_| allowed)
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "invalid_request_error",
                    "not_found",
                    format!("no install named '{install}' in this workspace"),
                )
            })?;
        skills::run(
            components.clone(),
            active,
            request,
            caller.0.clone(),
            request_id.0.to_string(),
        )
        .await
    }
    .await;
    match outcome {
        Ok(response) => response,
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}
