//! The registry's HTTP API (docs/registry.md). Reads of public packages need
//! no key and are cacheable: a manifest and a blob never change, so they are
//! served as immutable; a package's index changes with every publish, yank and
//! deprecation, so it is cached briefly. A private package (and its blobs)
//! answers 404 to everyone but its workspace, and is never publicly cached. Writes need a key whose role may write namespaces
//! (`namespace.write`) in the workspace that owns the package's namespace.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRef, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tollgate_registry::manifest::MAX_CONTENT_BYTES;
use tollgate_registry::signing::SIGNATURE_HEADER;
use tollgate_registry::{
    Digest, Manifest, PackageKind, PackageName, PackageSignature, QuotaError, RegistryError, Visibility,
};

use super::Packages;
use tollgate_identity::auth::permissions::Permission;
use tollgate_identity::auth::{AuthState, Principal};
use tollgate_web::error::ApiError;
use tollgate_web::server::RequestId;

const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const SHORT: &str = "public, max-age=30";
/// A private package's answers: never kept by a shared cache.
const PRIVATE: &str = "private, no-store";

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Packages>: FromRef<S>,
    Arc<AuthState>: FromRef<S>,
{
    Router::new()
        .route("/v1/packages", get(search))
        .route("/v1/packages/{namespace}/{name}", get(package_index))
        .route("/v1/packages/{namespace}/{name}/{version}", get(manifest).put(publish))
        .route("/v1/packages/{namespace}/{name}/{version}/yank", post(yank))
        .route("/v1/packages/{namespace}/{name}/{version}/unyank", post(unyank))
        .route("/v1/packages/{namespace}/{name}/{version}/deprecate", post(deprecate))
        .route(
            "/v1/blobs/{digest}",
            get(blob)
                .put(upload_blob)
                .layer(DefaultBodyLimit::max(MAX_CONTENT_BYTES as usize)),
        )
        .route("/v1/installs", get(list_installs))
        .route("/v1/installs/{provider}", put(install))
}

type Answer = Result<Response, ApiError>;

async fn answer(request_id: RequestId, result: impl Future<Output = Answer>) -> Response {
    match result.await {
        Ok(response) => response,
        Err(error) => error.with_request_id(&request_id.0).into_response(),
    }
}

fn registry_error(error: impl Into<RegistryError>) -> ApiError {
    crate::error::registry_api_error(error.into())
}

fn quota_error(error: QuotaError, workspace: &str) -> ApiError {
    match error {
        QuotaError::Exceeded { used, quota, size } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "upload_quota_exceeded",
            format!(
                "Workspace '{workspace}' has uploaded {used} bytes of package content; this {size}-byte blob would pass its quota of {quota} bytes (registry.workspace_quota_bytes)."
            ),
        ),
        QuotaError::Database(e) => registry_error(RegistryError::Storage(e.to_string())),
    }
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::invalid_request(message)
}

fn package_name(namespace: &str, name: &str) -> Result<PackageName, ApiError> {
    format!("{namespace}/{name}").parse().map_err(|e| bad(format!("{e}")))
}

fn version(text: &str) -> Result<semver::Version, ApiError> {
    text.parse()
        .map_err(|e| bad(format!("'{text}' is not a semver version: {e}")))
}

fn cached(cache: &'static str, body: Value) -> Response {
    ([(header::CACHE_CONTROL, cache)], Json(body)).into_response()
}

fn forbidden(message: String) -> ApiError {
    super::PackageError::Forbidden(message).into()
}

/// The caller behind `Authorization: Bearer …`, whatever it may do.
async fn caller(auth: &AuthState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::unauthorized("This operation needs an API key: send 'Authorization: Bearer tg_live_…'.")
    })?;
    let secret = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or_else(|| ApiError::invalid_token("The Authorization header must be 'Bearer <API key>'."))?;
    match auth.resolve(secret).await {
        Ok(Some(principal)) => Ok(principal),
        Ok(None) => Err(ApiError::invalid_token("Invalid API key.")),
        Err(e) => Err(e.to_api_error()),
    }
}

/// Who reads: `None` for an anonymous caller (public packages only); a sent
/// key must be valid. Reading needs no role: a viewer reads its workspace's
/// private packages too.
async fn viewer(auth: &AuthState, headers: &HeaderMap) -> Result<Option<Arc<Principal>>, ApiError> {
    match headers.contains_key(header::AUTHORIZATION) {
        true => caller(auth, headers).await.map(Some),
        false => Ok(None),
    }
}

fn workspace_of(viewer: &Option<Arc<Principal>>) -> Option<&str> {
    viewer.as_deref().map(|p| p.workspace_id.as_str())
}

/// A private package reads exactly like a missing one to anyone but its
/// workspace; `Ok(cache)` is the Cache-Control its answers may carry.
async fn readable(
    packages: &Packages,
    name: &PackageName,
    viewer: &Option<Arc<Principal>>,
    public_cache: &'static str,
) -> Result<&'static str, ApiError> {
    let access = packages
        .registry
        .index
        .read_access(name, workspace_of(viewer))
        .await
        .map_err(registry_error)?;
    match access {
        None => Err(registry_error(RegistryError::NotFound(format!(
            "package {name} not found"
        )))),
        Some(Visibility::Public) => Ok(public_cache),
        Some(Visibility::Private) => Ok(PRIVATE),
    }
}

fn require_role(principal: &Principal, permission: Permission, what: &str) -> Result<(), ApiError> {
    if principal.role.allows(permission) {
        return Ok(());
    }
    Err(forbidden(format!(
        "This key's role '{}' may not {what} (it needs '{}').",
        principal.role.as_str(),
        permission.as_str()
    )))
}

/// A caller that may publish in `namespace`: its role may write namespaces and
/// its workspace may publish there (see [`Packages::check_namespace`]).
async fn publisher(
    packages: &Packages,
    auth: &AuthState,
    headers: &HeaderMap,
    namespace: &str,
) -> Result<Arc<Principal>, ApiError> {
    let principal = caller(auth, headers).await?;
    require_role(&principal, Permission::NamespaceWrite, "publish packages")?;
    packages.check_namespace(&principal.workspace_id, namespace).await?;
    Ok(principal)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchQuery {
    kind: Option<String>,
    q: Option<String>,
    limit: Option<u32>,
}

async fn search(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    query: Result<Query<SearchQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    answer(request_id, async move {
        let viewer = viewer(&auth, &headers).await?;
        let Query(query) = query.map_err(|e| bad(e.body_text()))?;
        let kind = query
            .kind
            .as_deref()
            .map(str::parse::<PackageKind>)
            .transpose()
            .map_err(|e| bad(e).with_param("kind"))?;
        let found = packages
            .registry
            .search(
                kind,
                query.q.as_deref(),
                query.limit.unwrap_or(50),
                workspace_of(&viewer),
            )
            .await
            .map_err(registry_error)?;
        let cache = if viewer.is_some() { PRIVATE } else { SHORT };
        Ok(cached(cache, json!({"object": "list", "data": found})))
    })
    .await
}

async fn package_index(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    answer(request_id, async move {
        let viewer = viewer(&auth, &headers).await?;
        let name = package_name(&namespace, &name)?;
        let cache = readable(&packages, &name, &viewer, SHORT).await?;
        let versions = packages.registry.index.versions(&name).await.map_err(registry_error)?;
        let kind = versions.first().map(|v| v.manifest.kind);
        let visibility = if cache == PRIVATE { Visibility::Private } else { Visibility::Public };
        Ok(cached(
            cache,
            json!({"name": name, "kind": kind, "visibility": visibility, "description": versions.first().map(|v| &v.manifest.description), "versions": versions}),
        ))
    })
    .await
}

async fn manifest(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path((namespace, name, text)): Path<(String, String, String)>,
) -> Response {
    answer(request_id, async move {
        let viewer = viewer(&auth, &headers).await?;
        let name = package_name(&namespace, &name)?;
        let cache = readable(&packages, &name, &viewer, IMMUTABLE).await?;
        let record = packages
            .registry
            .index
            .version(&name, &version(&text)?)
            .await
            .map_err(registry_error)?;
        // The manifest is immutable; yank and deprecation state live in the index.
        Ok(cached(
            cache,
            serde_json::to_value(&record.manifest).expect("manifests serialise"),
        ))
    })
    .await
}

async fn blob(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path(digest): Path<String>,
) -> Response {
    answer(request_id, async move {
        let viewer = viewer(&auth, &headers).await?;
        let digest: Digest = digest.parse().map_err(|e| bad(format!("{e}")))?;
        // Only a published version's content is served, and a private one's
        // only to its workspace: otherwise as if the blob did not exist.
        let access = packages
            .registry
            .index
            .blob_access(&digest, workspace_of(&viewer))
            .await
            .map_err(registry_error)?;
        let cache = match access {
            Some(Visibility::Public) => IMMUTABLE,
            Some(Visibility::Private) => PRIVATE,
            None => {
                return Err(registry_error(tollgate_registry::blobs::BlobError::NotFound(
                    digest.clone(),
                )));
            }
        };
        let content = packages.registry.blobs.get(&digest).await.map_err(registry_error)?;
        let mut response = (
            [
                (header::CACHE_CONTROL, cache),
                (header::CONTENT_TYPE, "application/octet-stream"),
            ],
            content,
        )
            .into_response();
        if let Ok(etag) = HeaderValue::from_str(&format!("\"{digest}\"")) {
            response.headers_mut().insert(header::ETAG, etag);
        }
        Ok(response)
    })
    .await
}

async fn upload_blob(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path(digest): Path<String>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    answer(request_id, async move {
        let principal = caller(&auth, &headers).await?;
        require_role(&principal, Permission::NamespaceWrite, "upload package content")?;
        let digest: Digest = digest.parse().map_err(|e| bad(format!("{e}")))?;
        let body = body.map_err(|e| bad(format!("Could not read the blob: {e}")))?;
        if body.is_empty() {
            return Err(bad("The blob is empty."));
        }
        // Counted before it is stored, so storage never holds more than the quota.
        let workspace = &principal.workspace_id;
        let body_len = body.len();
        let quota = packages.quota_bytes;
        let counted = packages
            .registry
            .index
            .reserve_upload(workspace, &digest, body.len() as u64, quota)
            .await
            .map_err(|e| quota_error(e, workspace))?;
        if let Err(e) = packages.registry.blobs.put(&digest, body).await {
            if counted && let Err(undo) = packages.registry.index.release_upload(workspace, &digest).await {
                tracing::error!(error = %undo, %digest, "could not return a failed upload's bytes to the quota");
            }
            return Err(registry_error(e));
        }
        let target = json!({"digest": digest, "bytes": body_len});
        audited(&packages, &principal, "packages.upload", target.clone(), target).await;
        Ok((StatusCode::CREATED, Json(json!({"digest": digest}))).into_response())
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishQuery {
    /// `public` or `private`; absent: the package's current visibility, or for
    /// a new package its kind's default (actors private, the rest public).
    visibility: Option<String>,
}

async fn publish(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path((namespace, name, text)): Path<(String, String, String)>,
    query: Result<Query<PublishQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    answer(request_id, async move {
        let Query(query) = query.map_err(|e| bad(e.body_text()))?;
        let visibility = query
            .visibility
            .as_deref()
            .map(str::parse::<Visibility>)
            .transpose()
            .map_err(|e| bad(e).with_param("visibility"))?;
        let name = package_name(&namespace, &name)?;
        let principal = publisher(&packages, &auth, &headers, name.namespace()).await?;
        let signature = signature_header(&headers)?;
        let body = body.map_err(|e| bad(format!("Could not read the manifest: {e}")))?;
        let manifest = Manifest::from_json(&body).map_err(|e| registry_error(RegistryError::Invalid(e.to_string())))?;
        if manifest.name != name || manifest.version.to_string() != text {
            return Err(bad(format!(
                "the manifest is for {}@{}, but was sent to {name}@{text}",
                manifest.name, manifest.version
            )));
        }
        let content = packages
            .registry
            .blobs
            .get(&manifest.content.digest)
            .await
            .map_err(|e| match e {
                tollgate_registry::blobs::BlobError::NotFound(digest) => bad(format!(
                    "no content with digest {digest}: upload it first with PUT /v1/blobs/{digest}"
                )),
                other => registry_error(other),
            })?;
        let publisher_id = format!("{}:{}", principal.workspace_id, principal.key_id);
        let published = packages
            .registry
            .publish_signed(&manifest, content, signature.as_ref(), &publisher_id)
            .await
            .map_err(registry_error)?;
        if let Some(visibility) = visibility {
            packages
                .registry
                .index
                .set_visibility(&manifest.name, visibility)
                .await
                .map_err(registry_error)?;
        }
        let after = json!(published);
        let target = json!({"package": manifest.name, "version": manifest.version.to_string()});
        audited(&packages, &principal, "packages.publish", target, after.clone()).await;
        Ok((StatusCode::CREATED, Json(after)).into_response())
    })
    .await
}

/// The publish's `Tollgate-Signature: KEY_ID:SIGNATURE`, if sent.
fn signature_header(headers: &HeaderMap) -> Result<Option<PackageSignature>, ApiError> {
    let Some(value) = headers.get(SIGNATURE_HEADER) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| bad("The Tollgate-Signature header is not text."))?;
    PackageSignature::from_header(text)
        .map(Some)
        .map_err(|e| registry_error(RegistryError::SignatureInvalid(e.to_string())))
}

async fn set_yanked(
    packages: Arc<Packages>,
    auth: Arc<AuthState>,
    headers: HeaderMap,
    namespace: String,
    name: String,
    text: String,
    yanked: bool,
) -> Answer {
    let name = package_name(&namespace, &name)?;
    let principal = publisher(&packages, &auth, &headers, name.namespace()).await?;
    let version = version(&text)?;
    packages
        .registry
        .yank(&name, &version, yanked)
        .await
        .map_err(registry_error)?;
    let after = json!({"name": name, "version": version, "yanked": yanked});
    let op = if yanked { "packages.yank" } else { "packages.unyank" };
    audited(
        &packages,
        &principal,
        op,
        json!({"package": name, "version": version}),
        after.clone(),
    )
    .await;
    Ok(Json(after).into_response())
}

async fn yank(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path((namespace, name, text)): Path<(String, String, String)>,
) -> Response {
    answer(
        request_id,
        set_yanked(packages, auth, headers, namespace, name, text, true),
    )
    .await
}

async fn unyank(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path((namespace, name, text)): Path<(String, String, String)>,
) -> Response {
    answer(
        request_id,
        set_yanked(packages, auth, headers, namespace, name, text, false),
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Deprecation {
    /// `null` lifts the deprecation.
    message: Option<String>,
}

async fn deprecate(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path((namespace, name, text)): Path<(String, String, String)>,
    body: Result<Json<Deprecation>, axum::extract::rejection::JsonRejection>,
) -> Response {
    answer(request_id, async move {
        let name = package_name(&namespace, &name)?;
        let principal = publisher(&packages, &auth, &headers, name.namespace()).await?;
        let version = version(&text)?;
        let Json(body) = body.map_err(|e| bad(format!("Expected {{\"message\": \"…\"}}: {}", e.body_text())))?;
        packages
            .registry
            .deprecate(&name, &version, body.message.as_deref())
            .await
            .map_err(registry_error)?;
        let after = json!({"name": name, "version": version, "deprecated": body.message});
        let target = json!({"package": name, "version": version});
        audited(&packages, &principal, "packages.deprecate", target, after.clone()).await;
        Ok(Json(after).into_response())
    })
    .await
}

/// Records a change made through this API in the audit log (docs/audit.md),
/// under the op name the control plane gives the same change.
async fn audited(packages: &Packages, principal: &Principal, op: &str, target: Value, after: Value) {
    let change = tollgate_audit::Change::new(op, tollgate_identity::auth::audit_actor(principal))
        .workspace(principal.workspace_id.clone())
        .target(target)
        .after(after);
    tollgate_audit::AuditLog::new(packages.database.clone())
        .record(change)
        .await;
}

/// A caller that may change which adapter serves a provider (see
/// [`Packages::check_operator`]).
async fn operator(packages: &Packages, auth: &AuthState, headers: &HeaderMap) -> Result<Arc<Principal>, ApiError> {
    let principal = caller(auth, headers).await?;
    packages.check_operator(&principal)?;
    Ok(principal)
}

async fn list_installs(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
) -> Response {
    answer(request_id, async move {
        operator(&packages, &auth, &headers).await?;
        Ok(Json(json!({"object": "list", "data": packages.installs.list()})).into_response())
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallRequest {
    package: String,
    version: String,
}

async fn install(
    State(packages): State<Arc<Packages>>,
    State(auth): State<Arc<AuthState>>,
    request_id: RequestId,
    headers: HeaderMap,
    Path(provider): Path<String>,
    body: Result<Json<InstallRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    answer(request_id, async move {
        let principal = operator(&packages, &auth, &headers).await?;
        let Json(body) = body.map_err(|e| {
            bad(format!(
                "Expected {{\"package\": \"namespace/name\", \"version\": \"x.y.z\"}}: {}",
                e.body_text()
            ))
        })?;
        let package: PackageName = body
            .package
            .parse()
            .map_err(|e| bad(format!("{e}")).with_param("package"))?;
        let version = version(&body.version).map_err(|e| e.with_param("version"))?;
        let installed = packages
            .install(&principal.workspace_id, &provider, &package, &version)
            .await?;
        let after = json!(installed);
        let target = json!({"provider": provider, "package": package, "version": version});
        audited(&packages, &principal, "adapters.install", target, after.clone()).await;
        Ok(Json(after).into_response())
    })
    .await
}
