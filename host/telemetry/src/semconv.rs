//! Attribute and metric names. The GenAI ones follow the OpenTelemetry GenAI
//! semantic conventions; they are defined here because the upstream constants
//! are deprecated while the conventions are in development.

pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
/// Seconds from the attempt's start to its first streamed chunk.
pub const GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
pub const ERROR_TYPE: &str = "error.type";
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";

/// The operation every chat-completions attempt reports.
pub const OPERATION_CHAT: &str = "chat";

pub const TOLLGATE_REQUEST_ID: &str = "tollgate.request.id";
pub const TOLLGATE_OUTCOME: &str = "tollgate.outcome";
pub const TOLLGATE_ATTEMPT: &str = "tollgate.attempt";
pub const TOLLGATE_COST_NANO_USD: &str = "tollgate.cost.nano_usd";
pub const TOLLGATE_ADAPTER: &str = "tollgate.adapter";
/// Routing: the strategy or sort, the group, why the first candidate was
/// first, how many were considered, and what named the conversation.
pub const TOLLGATE_ROUTE_STRATEGY: &str = "tollgate.route.strategy";
pub const TOLLGATE_ROUTE_GROUP: &str = "tollgate.route.group";
pub const TOLLGATE_ROUTE_REASON: &str = "tollgate.route.reason";
pub const TOLLGATE_ROUTE_CONSIDERED: &str = "tollgate.route.considered";
pub const TOLLGATE_ROUTE_AFFINITY: &str = "tollgate.route.affinity";

pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
pub const METRIC_TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";
pub const METRIC_REQUESTS: &str = "tollgate.requests";
pub const METRIC_COST: &str = "tollgate.cost";
pub const METRIC_RESERVE_DURATION: &str = "tollgate.ledger.reserve.duration";
pub const METRIC_OUTBOX_BACKLOG: &str = "tollgate.metering.outbox.backlog";
pub const METRIC_JOURNAL_LAG: &str = "tollgate.ledger.journal.lag";
pub const METRIC_DATABASE_REACHABLE: &str = "tollgate.database.reachable";

/// Why a request or connection was refused (`overloaded`, `shutting_down`,
/// `max_connections`, `max_connections_per_ip`).
pub const TOLLGATE_REASON: &str = "tollgate.reason";
/// Which wait timed out (`header`, `body_idle`, `body`, `keep_alive`).
pub const TOLLGATE_TIMEOUT: &str = "tollgate.timeout";

pub const METRIC_OPEN_CONNECTIONS: &str = "tollgate.server.connections.open";
pub const METRIC_REFUSED_CONNECTIONS: &str = "tollgate.server.connections.refused";
pub const METRIC_IN_FLIGHT: &str = "tollgate.server.requests.in_flight";
pub const METRIC_SHED: &str = "tollgate.server.requests.shed";
pub const METRIC_TIMEOUTS: &str = "tollgate.server.timeouts";
