//! Why a packages operation failed, as a typed enum: the HTTP API turns it into
//! an `ApiError` here, and the control plane maps it to its own errors, each
//! by variant, so neither decides on a status or a string code.

use axum::http::StatusCode;
use tollgate_registry::RegistryError;

use super::namespaces::NamespaceError;
use tollgate_web::error::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The caller may not do this; the message says what would allow it.
    #[error("{0}")]
    Forbidden(String),
    /// An install names a provider the catalog does not have.
    #[error("{0}")]
    ProviderNotFound(String),
    /// An install names a package that is not a provider adapter.
    #[error("{0}")]
    WrongKind(String),
    /// The adapter did not compile or link.
    #[error("{0}")]
    LoadFailed(String),
    /// The workspace's upload quota would be passed.
    #[error("{0}")]
    QuotaExceeded(String),
    /// The cause was logged; the message is safe to show.
    #[error("{0}")]
    Internal(String),
}

impl From<NamespaceError> for PackageError {
    fn from(error: NamespaceError) -> Self {
        tracing::error!(error = %error, "namespace lookup failed");
        PackageError::Internal("Could not check the namespace.".into())
    }
}

/// A registry failure as the HTTP API answers it.
pub fn registry_api_error(error: RegistryError) -> ApiError {
    let (status, code) = match &error {
        RegistryError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_package"),
        RegistryError::WrongWorld(_) => (StatusCode::BAD_REQUEST, "wrong_world"),
        RegistryError::Integrity(_) => (StatusCode::BAD_REQUEST, "digest_mismatch"),
        RegistryError::Conflict(_) => (StatusCode::CONFLICT, "version_exists"),
        RegistryError::Yanked(_) => (StatusCode::CONFLICT, "version_yanked"),
        RegistryError::NotFound(_) => (StatusCode::NOT_FOUND, "package_not_found"),
        RegistryError::SignatureInvalid(_) => (StatusCode::BAD_REQUEST, "signature_invalid"),
        RegistryError::SignatureRequired { .. } => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                "signature_required",
                error.to_string(),
            );
        }
        RegistryError::Storage(message) => {
            tracing::error!(error = %message, "registry storage failed");
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "api_error",
                "registry_unavailable",
                "The package registry's storage could not be reached.",
            );
        }
    };
    ApiError::new(status, "invalid_request_error", code, error.to_string())
}

impl From<PackageError> for ApiError {
    fn from(error: PackageError) -> Self {
        let invalid = |status: StatusCode, code: &'static str, message: String| {
            ApiError::new(status, "invalid_request_error", code, message)
        };
        match error {
            PackageError::Registry(error) => registry_api_error(error),
            PackageError::Forbidden(message) => {
                ApiError::new(StatusCode::FORBIDDEN, "permission_error", "permission_denied", message)
            }
            PackageError::ProviderNotFound(message) => invalid(StatusCode::NOT_FOUND, "provider_not_found", message),
            PackageError::WrongKind(message) => invalid(StatusCode::BAD_REQUEST, "wrong_package_kind", message),
            PackageError::LoadFailed(message) => invalid(StatusCode::BAD_REQUEST, "adapter_load_failed", message),
            PackageError::QuotaExceeded(message) => {
                invalid(StatusCode::PAYLOAD_TOO_LARGE, "upload_quota_exceeded", message)
            }
            PackageError::Internal(message) => ApiError::internal(message),
        }
    }
}
