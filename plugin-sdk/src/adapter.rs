//! The provider-adapter side of the SDK (feature `provider`, on by default):
//! the [`Adapter`] trait, the error constructors, and the glue that
//! [`export_adapter!`](crate::export_adapter) uses to export an implementation
//! as `tollgate:provider/adapter@0.1.0`.

use std::cell::RefCell;

use crate::bindings;
use crate::openai;
use crate::{AdapterError, CallContext, ErrorClass, Event, OutboundRequest, ResponseHead, Usage};
#[cfg(feature = "operations")]
use crate::{Measured, Operation, OperationAnswer, OperationBody};

/// One upstream exchange, implemented by a provider adapter.
///
/// The host creates a fresh value per upstream attempt (see
/// [`CallContext::attempt`]), so it may keep state such as the stream position
/// or the usage seen so far. Methods are called in this order:
/// [`new`](Adapter::new), [`request`](Adapter::request), then either
/// [`response`](Adapter::response) (non-streamed 2xx),
/// [`on_events`](Adapter::on_events)… + [`finish`](Adapter::finish) (streamed 2xx),
/// or [`classify_error`](Adapter::classify_error) (non-2xx).
/// [`usage`](Adapter::usage) may be called at any point after that.
pub trait Adapter: 'static {
    /// `openai_body` is the caller's chat-completions request, unchanged.
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self
    where
        Self: Sized;

    /// The request to send upstream. The host adds the credential per
    /// [`OutboundRequest::auth`].
    fn request(&mut self) -> Result<OutboundRequest, AdapterError>;

    /// A whole (non-streamed) 2xx response, translated to an OpenAI
    /// `chat.completion` object.
    fn response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError>;

    /// A batch of stream events (already framed by the host), translated to zero
    /// or more serialized OpenAI `chat.completion.chunk` objects.
    fn on_events(&mut self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError>;

    /// The upstream stream ended; return any chunks still held back. The host
    /// adds usage, cost and service metadata to the last one returned.
    fn finish(&mut self) -> Result<Vec<Vec<u8>>, AdapterError> {
        Ok(Vec::new())
    }

    /// Token usage seen so far, if the upstream reported any.
    fn usage(&self) -> Option<Usage>;

    /// Classify a non-2xx upstream response. Defaults to
    /// [`openai::classify_error`], which understands OpenAI-shaped error bodies.
    fn classify_error(&mut self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        openai::classify_error(&head, &body)
    }

    /// The request dialects this adapter takes natively (WIT 0.2.0, feature
    /// `native`), e.g. `["anthropic-messages"]`. None by default.
    fn native_dialects() -> Vec<String>
    where
        Self: Sized,
    {
        Vec::new()
    }

    /// Native mode: `body` is the caller's request in `dialect`, with the
    /// gateway's own fields removed. The adapter sets the model, stream flag
    /// and default output limit from `ctx`. An error here is reported by
    /// [`request`](Adapter::request). Refused by default.
    fn new_native(ctx: CallContext, dialect: String, body: Vec<u8>) -> Result<Self, AdapterError>
    where
        Self: Sized,
    {
        let _ = (ctx, body);
        Err(AdapterError::invalid_request(format!(
            "this adapter does not take the '{dialect}' dialect natively"
        )))
    }

    /// Native mode: stream events to relay to the caller (normally as they
    /// came), keeping the usage they report.
    fn native_events(&mut self, events: Vec<Event>) -> Result<Vec<Event>, AdapterError> {
        let _ = events;
        Err(AdapterError::internal("this exchange is not in native mode"))
    }

    /// Native mode: the upstream stream ended; events still held back, or an
    /// error if the stream was cut short.
    fn native_finish(&mut self) -> Result<Vec<Event>, AdapterError> {
        Ok(Vec::new())
    }

    /// The operations besides chat this adapter serves (WIT 0.3.0, feature
    /// `operations`). None by default.
    #[cfg(feature = "operations")]
    fn operations() -> Vec<Operation>
    where
        Self: Sized,
    {
        Vec::new()
    }

    /// Operation mode: `body` is the caller's request for `operation`, with
    /// the gateway's own fields removed. An error here is reported by
    /// [`request`](Adapter::request). Refused by default.
    #[cfg(feature = "operations")]
    fn new_operation(ctx: CallContext, operation: Operation, body: OperationBody) -> Result<Self, AdapterError>
    where
        Self: Sized,
    {
        let _ = (ctx, body);
        Err(AdapterError::invalid_request(format!(
            "this adapter does not serve the {operation:?} operation"
        )))
    }

    /// Operation mode: a whole 2xx answer, in the operation's OpenAI shape.
    #[cfg(feature = "operations")]
    fn operation_response(&mut self, head: ResponseHead, body: Vec<u8>) -> Result<OperationAnswer, AdapterError> {
        let _ = (head, body);
        Err(AdapterError::internal("this exchange is not in operation mode"))
    }

    /// Operation mode: what the exchange consumed, as far as reported.
    #[cfg(feature = "operations")]
    fn measured(&self) -> Option<Measured> {
        None
    }
}

impl AdapterError {
    /// An error of `class` with `message`, capped at
    /// [`openai::MAX_ERROR_MESSAGE`] bytes.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        AdapterError {
            class,
            message: openai::cap_message(message.into()),
        }
    }

    /// The caller's request cannot be translated (`invalid-request`).
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::InvalidRequest, message)
    }

    /// The adapter could not do its job: bad upstream answer or a bug (`internal`).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Internal, message)
    }

    /// What `finish` / `native-finish` return when the upstream body ended
    /// before the protocol's terminal event (`upstream(502)`): the host
    /// records the attempt as `upstream_truncated` and fails over or ends
    /// the stream with an error, as for any broken stream.
    pub fn cut_short(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Upstream(502), message)
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorClass::InvalidRequest => f.write_str("invalid-request"),
            ErrorClass::Auth => f.write_str("auth"),
            ErrorClass::RateLimited(None) => f.write_str("rate-limited"),
            ErrorClass::RateLimited(Some(s)) => write!(f, "rate-limited(retry after {s}s)"),
            ErrorClass::Overloaded => f.write_str("overloaded"),
            ErrorClass::ContextLength => f.write_str("context-length"),
            ErrorClass::Upstream(status) => write!(f, "upstream({status})"),
            ErrorClass::Internal => f.write_str("internal"),
        }
    }
}

/// Adapts an [`Adapter`] (`&mut self` methods) to the wit-bindgen resource
/// trait (`&self` methods). Used by [`export_adapter!`]; not meant to be named
/// by adapters.
#[doc(hidden)]
pub struct AdapterExchange<A: Adapter> {
    /// The adapter, or why a native exchange could not be opened.
    inner: RefCell<Result<A, AdapterError>>,
}

impl<A: Adapter> AdapterExchange<A> {
    fn with<R>(&self, refused: impl FnOnce(&AdapterError) -> R, f: impl FnOnce(&mut A) -> R) -> R {
        match &mut *self.inner.borrow_mut() {
            Ok(adapter) => f(adapter),
            Err(error) => refused(error),
        }
    }
}

impl<A: Adapter> bindings::exports::tollgate::provider::adapter::GuestExchange for AdapterExchange<A> {
    fn new(ctx: CallContext, openai_body: Vec<u8>) -> Self {
        AdapterExchange {
            inner: RefCell::new(Ok(A::new(ctx, openai_body))),
        }
    }

    #[cfg(feature = "native")]
    fn open_native(
        ctx: CallContext,
        dialect: String,
        body: Vec<u8>,
    ) -> bindings::exports::tollgate::provider::adapter::Exchange {
        bindings::exports::tollgate::provider::adapter::Exchange::new(AdapterExchange {
            inner: RefCell::new(A::new_native(ctx, dialect, body)),
        })
    }

    fn request(&self) -> Result<OutboundRequest, AdapterError> {
        self.with(|e| Err(e.clone()), |a| a.request())
    }

    fn response(&self, head: ResponseHead, body: Vec<u8>) -> Result<Vec<u8>, AdapterError> {
        self.with(|e| Err(e.clone()), |a| a.response(head, body))
    }

    fn on_events(&self, events: Vec<Event>) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.with(|e| Err(e.clone()), |a| a.on_events(events))
    }

    fn finish(&self) -> Result<Vec<Vec<u8>>, AdapterError> {
        self.with(|e| Err(e.clone()), |a| a.finish())
    }

    #[cfg(feature = "operations")]
    fn open_operation(
        ctx: CallContext,
        operation: Operation,
        body: OperationBody,
    ) -> bindings::exports::tollgate::provider::adapter::Exchange {
        bindings::exports::tollgate::provider::adapter::Exchange::new(AdapterExchange {
            inner: RefCell::new(A::new_operation(ctx, operation, body)),
        })
    }

    #[cfg(feature = "operations")]
    fn operation_response(&self, head: ResponseHead, body: Vec<u8>) -> Result<OperationAnswer, AdapterError> {
        self.with(|e| Err(e.clone()), |a| a.operation_response(head, body))
    }

    #[cfg(feature = "operations")]
    fn measured(&self) -> Option<Measured> {
        match &*self.inner.borrow() {
            Ok(adapter) => adapter.measured(),
            Err(_) => None,
        }
    }

    #[cfg(feature = "native")]
    fn native_events(&self, events: Vec<Event>) -> Result<Vec<Event>, AdapterError> {
        self.with(|e| Err(e.clone()), |a| a.native_events(events))
    }

    #[cfg(feature = "native")]
    fn native_finish(&self) -> Result<Vec<Event>, AdapterError> {
        self.with(|e| Err(e.clone()), |a| a.native_finish())
    }

    fn usage(&self) -> Option<Usage> {
        match &*self.inner.borrow() {
            Ok(adapter) => adapter.usage(),
            Err(_) => None,
        }
    }

    fn classify_error(&self, head: ResponseHead, body: Vec<u8>) -> AdapterError {
        self.with(AdapterError::clone, |a| a.classify_error(head, body))
    }
}

/// Export an [`Adapter`] implementation as this component's
/// `tollgate:provider/adapter` interface.
///
/// Call it exactly once, in the adapter's `cdylib` crate:
/// `tollgate_plugin_sdk::export_adapter!(MyAdapter);`.
///
/// The exports are plain `#[export_name]` symbols, emitted only when compiling
/// for a wasm target, so native unit tests of an adapter crate still link.
/// Two calls in one component clash at link time ("symbol multiply
/// defined"), so an adapter that wraps another cannot link that adapter's
/// crate as a library if that crate calls this macro.
#[cfg(not(feature = "native"))]
#[macro_export]
macro_rules! export_adapter {
    ($adapter:ty) => {
        const _: () = {
            #[allow(dead_code)]
            struct __TollgateAdapterComponent;

            impl $crate::bindings::exports::tollgate::provider::adapter::Guest for __TollgateAdapterComponent {
                type Exchange = $crate::AdapterExchange<$adapter>;
            }

            // Only components get the exports: native builds (unit tests) of a
            // cdylib cannot link symbol names like `tollgate:provider/...`.
            #[cfg(target_family = "wasm")]
    $crate::bindings::export!(__TollgateAdapterComponent with_types_in $crate::bindings);
        };
    };
}

/// Export an [`Adapter`] implementation as this component's
/// `tollgate:provider/adapter@0.2.0` interface (feature `native`), with the
/// dialects of [`Adapter::native_dialects`].
#[cfg(all(feature = "native", not(feature = "operations")))]
#[macro_export]
macro_rules! export_adapter {
    ($adapter:ty) => {
        const _: () = {
            #[allow(dead_code)]
            struct __TollgateAdapterComponent;

            impl $crate::bindings::exports::tollgate::provider::adapter::Guest for __TollgateAdapterComponent {
                type Exchange = $crate::AdapterExchange<$adapter>;

                fn native_dialects() -> Vec<String> {
                    <$adapter as $crate::Adapter>::native_dialects()
                }
            }

            // Only components get the exports: native builds (unit tests) of a
            // cdylib cannot link symbol names like `tollgate:provider/...`.
            #[cfg(target_family = "wasm")]
    $crate::bindings::export!(__TollgateAdapterComponent with_types_in $crate::bindings);
        };
    };
}

/// Export an [`Adapter`] implementation as this component's
/// `tollgate:provider/adapter@0.3.0` interface (feature `operations`), with
/// the dialects of [`Adapter::native_dialects`] and the operations of
/// [`Adapter::operations`].
#[cfg(feature = "operations")]
#[macro_export]
macro_rules! export_adapter {
    ($adapter:ty) => {
        const _: () = {
            #[allow(dead_code)]
            struct __TollgateAdapterComponent;

            impl $crate::bindings::exports::tollgate::provider::adapter::Guest for __TollgateAdapterComponent {
                type Exchange = $crate::AdapterExchange<$adapter>;

                fn native_dialects() -> Vec<String> {
                    <$adapter as $crate::Adapter>::native_dialects()
                }

                fn operations() -> Vec<$crate::Operation> {
                    <$adapter as $crate::Adapter>::operations()
                }
            }

            // Only components get the exports: native builds (unit tests) of a
            // cdylib cannot link symbol names like `tollgate:provider/...`.
            #[cfg(target_family = "wasm")]
    $crate::bindings::export!(__TollgateAdapterComponent with_types_in $crate::bindings);
        };
    };
}
