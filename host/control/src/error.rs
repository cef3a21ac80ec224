//! Errors: an operation's application error ([`OpError`]) and a JSON-RPC error
//! object ([`RpcError`]) whose `data` is an array holding one
//! `google.rpc.ErrorInfo`, as A2A v1.0 requires. Each concern has its own
//! error type; the `From` impls here map each to an `OpError` by variant.

use serde_json::{Value, json};
use tollgate_registry::RegistryError;

use tollgate_packages::PackageError;
use tollgate_packages::namespaces::NamespaceError;

pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
pub const A2A_DOMAIN: &str = "a2a-protocol.org";
pub const TOLLGATE_DOMAIN: &str = "tollgate.dev";
/// JSON-RPC code of every operation (application) error on an extension
/// method; `reason` tells them apart.
pub const OPERATION_FAILED: i64 = -32050;

/// Why an operation failed. Cross-workspace access is `NotFound`, never
/// `PermissionDenied`, so a caller learns nothing about other tenants.
#[derive(Debug)]
pub enum OpError {
    InvalidParams(String),
    Unauthenticated,
    PermissionDenied(String),
    NotFound(String),
    AlreadyExists(String),
    FailedPrecondition(String),
    /// A rate limit or quota is used up; the message says which and what to do.
    ResourceExhausted(String),
    Internal(anyhow::Error),
}

impl OpError {
    pub fn reason(&self) -> &'static str {
        match self {
            OpError::InvalidParams(_) => "INVALID_PARAMS",
            OpError::Unauthenticated => "UNAUTHENTICATED",
            OpError::PermissionDenied(_) => "PERMISSION_DENIED",
            OpError::NotFound(_) => "NOT_FOUND",
            OpError::AlreadyExists(_) => "ALREADY_EXISTS",
            OpError::FailedPrecondition(_) => "FAILED_PRECONDITION",
            OpError::ResourceExhausted(_) => "RESOURCE_EXHAUSTED",
            OpError::Internal(_) => "INTERNAL",
        }
    }

    pub fn message(&self) -> String {
        match self {
            OpError::InvalidParams(m)
            | OpError::PermissionDenied(m)
            | OpError::AlreadyExists(m)
            | OpError::FailedPrecondition(m)
            | OpError::ResourceExhausted(m) => m.clone(),
            OpError::NotFound(what) => format!("{what} not found"),
            OpError::Unauthenticated => {
                "This operation needs an API key: send 'Authorization: Bearer tg_live_…'.".into()
            }
            OpError::Internal(e) => {
                tracing::error!("control-plane operation failed: {e:#}");
                "Internal error.".into()
            }
        }
    }

    /// The structured error carried by a FAILED task's status message.
    pub fn to_json(&self) -> Value {
        json!({ "reason": self.reason(), "domain": TOLLGATE_DOMAIN, "message": self.message() })
    }

    pub fn into_rpc(self) -> RpcError {
        match self {
            OpError::InvalidParams(m) => RpcError::invalid_params(m),
            other => RpcError::new(OPERATION_FAILED, other.message(), other.reason(), TOLLGATE_DOMAIN),
        }
    }
}

impl From<tollgate_identity::accounts::AccountError> for OpError {
    fn from(error: tollgate_identity::accounts::AccountError) -> Self {
        use tollgate_identity::accounts::AccountError;
        match error {
            AccountError::EmailTaken(_) | AccountError::AlreadyMember(_) => OpError::AlreadyExists(error.to_string()),
            AccountError::SeatLimit { .. } => OpError::ResourceExhausted(format!("plan_limit_reached: {error}")),
            AccountError::Database(e) => e.into(),
            AccountError::Other(e) => OpError::Internal(e),
        }
    }
}

impl From<tollgate_billing::BillingError> for OpError {
    fn from(error: tollgate_billing::BillingError) -> Self {
        use tollgate_billing::BillingError;
        match error {
            BillingError::LimitReached { .. } => OpError::ResourceExhausted(error.to_string()),
            BillingError::UnknownPlan { .. } => OpError::FailedPrecondition(error.to_string()),
            BillingError::Database(e) => e.into(),
            BillingError::Other(e) => OpError::Internal(e),
        }
    }
}

impl From<tollgate_billing::payments::PaymentError> for OpError {
    fn from(error: tollgate_billing::payments::PaymentError) -> Self {
        use tollgate_billing::payments::PaymentError;
        match error {
            PaymentError::Invalid(message) => OpError::InvalidParams(message),
            PaymentError::Refused(message) => OpError::FailedPrecondition(message),
            PaymentError::Processor(error) => OpError::FailedPrecondition(format!("{error}; nothing was charged")),
            PaymentError::Database(error) => OpError::Internal(error.into()),
        }
    }
}

impl From<tollgate_hosted_actors::ActorError> for OpError {
    fn from(error: tollgate_hosted_actors::ActorError) -> Self {
        use tollgate_hosted_actors::ActorError;
        match error {
            ActorError::NotFound(message) => OpError::NotFound(message),
            ActorError::Invalid(message) => OpError::InvalidParams(message),
            ActorError::Forbidden(message) => OpError::PermissionDenied(message),
            ActorError::PlanLimit(message) | ActorError::Busy(message) => OpError::ResourceExhausted(message),
            ActorError::Internal(error) => OpError::Internal(error),
        }
    }
}

impl From<tollgate_tools::InstallError> for OpError {
    fn from(error: tollgate_tools::InstallError) -> Self {
        use tollgate_tools::InstallError;
        match error {
            InstallError::Invalid(message) | InstallError::Load(message) => OpError::InvalidParams(message),
            InstallError::NotFound(name) => OpError::NotFound(format!("install '{name}'")),
            InstallError::Conflict(message) => OpError::AlreadyExists(message),
            InstallError::QuotaExceeded(message) => OpError::ResourceExhausted(message),
            InstallError::Registry(error) => error.into(),
            InstallError::Internal(error) => OpError::Internal(error),
        }
    }
}

impl From<RegistryError> for OpError {
    fn from(error: RegistryError) -> Self {
        let message = error.to_string();
        match error {
            RegistryError::Invalid(_) | RegistryError::WrongWorld(_) | RegistryError::Integrity(_) => {
                OpError::InvalidParams(message)
            }
            RegistryError::Conflict(_) => OpError::AlreadyExists(message),
            RegistryError::Yanked(_) => OpError::FailedPrecondition(message),
            // The documented codes lead the message, as A2A carries only the reason.
            RegistryError::SignatureInvalid(_) => OpError::InvalidParams(format!("signature_invalid: {message}")),
            RegistryError::SignatureRequired { refusal, .. } => {
                OpError::PermissionDenied(format!("signature_required ({}): {message}", refusal.as_str()))
            }
            // NotFound names the missing thing; the registry's message already says "not found".
            RegistryError::NotFound(_) => OpError::NotFound(message.trim_end_matches(" not found").to_string()),
            RegistryError::Storage(_) => OpError::Internal(anyhow::anyhow!(message)),
        }
    }
}

impl From<PackageError> for OpError {
    fn from(error: PackageError) -> Self {
        match error {
            PackageError::Registry(error) => error.into(),
            PackageError::Forbidden(message) => OpError::PermissionDenied(message),
            PackageError::ProviderNotFound(message) => OpError::NotFound(message),
            PackageError::WrongKind(message) | PackageError::LoadFailed(message) => OpError::InvalidParams(message),
            PackageError::QuotaExceeded(message) => OpError::ResourceExhausted(message),
            PackageError::Internal(message) => OpError::Internal(anyhow::anyhow!(message)),
        }
    }
}

impl From<NamespaceError> for OpError {
    fn from(error: NamespaceError) -> Self {
        let message = error.to_string();
        match error {
            NamespaceError::InvalidName(_) => OpError::InvalidParams(message),
            NamespaceError::Exists(_) | NamespaceError::Taken(_) => OpError::AlreadyExists(message),
            NamespaceError::LimitReached { .. } => OpError::ResourceExhausted(message),
            NamespaceError::NotFound(name) => OpError::NotFound(format!("namespace '{name}'")),
            NamespaceError::Database(e) => e.into(),
        }
    }
}

impl From<sqlx::Error> for OpError {
    fn from(e: sqlx::Error) -> Self {
        OpError::Internal(e.into())
    }
}

impl From<anyhow::Error> for OpError {
    fn from(e: anyhow::Error) -> Self {
        OpError::Internal(e)
    }
}

#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub reason: &'static str,
    pub domain: &'static str,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>, reason: &'static str, domain: &'static str) -> Self {
        Self {
            code,
            message: message.into(),
            reason,
            domain,
        }
    }

    fn a2a(code: i64, message: impl Into<String>, reason: &'static str) -> Self {
        Self::new(code, message, reason, A2A_DOMAIN)
    }

    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::a2a(-32700, format!("Invalid JSON payload: {detail}"), "PARSE_ERROR")
    }
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::a2a(-32600, message, "INVALID_REQUEST")
    }
    pub fn method_not_found(method: &str) -> Self {
        Self::a2a(-32601, format!("Method '{method}' not found"), "METHOD_NOT_FOUND")
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::a2a(-32602, message, "INVALID_PARAMS")
    }
    pub fn internal() -> Self {
        Self::a2a(-32603, "Internal error", "INTERNAL_ERROR")
    }
    pub fn task_not_found(id: &str) -> Self {
        Self::a2a(-32001, format!("Task '{id}' not found"), "TASK_NOT_FOUND")
    }
    pub fn task_not_cancelable(id: &str) -> Self {
        Self::a2a(
            -32002,
            format!("Task '{id}' is already in a terminal state"),
            "TASK_NOT_CANCELABLE",
        )
    }
    pub fn push_not_supported() -> Self {
        Self::a2a(
            -32003,
            "Push notifications are not supported",
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
        )
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::a2a(-32004, message, "UNSUPPORTED_OPERATION")
    }
    pub fn content_type_not_supported(content_type: &str) -> Self {
        Self::a2a(
            -32005,
            format!("Content-Type '{content_type}' is not supported; send 'Content-Type: application/json'"),
            "CONTENT_TYPE_NOT_SUPPORTED",
        )
    }
    pub fn version_not_supported(version: &str) -> Self {
        Self::a2a(
            -32009,
            format!("A2A version '{version}' is not supported; send 'A2A-Version: 1.0'"),
            "VERSION_NOT_SUPPORTED",
        )
    }

    pub fn to_json(&self) -> Value {
        json!({
            "code": self.code,
            "message": self.message,
            "data": [{ "@type": ERROR_INFO_TYPE, "reason": self.reason, "domain": self.domain }],
        })
    }
}
