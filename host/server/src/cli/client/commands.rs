//! The client's commands and their flags, as clap reads them. Only the
//! shapes live here, so adding a command is one variant here and one arm in
//! `requests`.

use clap::{Args, Subcommand};

use super::Connection;
use super::mcp_servers::McpServersCommand;

#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Create a user with a default workspace (Free plan) and its first API key.
    Signup {
        #[command(flatten)]
        connection: Connection,
        #[arg(long)]
        name: String,
        #[arg(long)]
        email: String,
        /// Save the URL and the new key in the profile file.
        #[arg(long)]
        save: bool,
    },
    /// Workspaces you belong to.
    Workspaces {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: WorkspacesCommand,
    },
    /// Namespaces of a workspace.
    Namespaces {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: NamespacesCommand,
    },
    /// API keys of a workspace.
    Keys {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Members of a workspace and their roles (owner, admin, developer, viewer).
    Members {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: MembersCommand,
    },
    /// The workspace's wallet balances; `topup` pays in through the
    /// gateway's payment processor.
    Wallet {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: Option<WalletCommand>,
    },
    /// Plans: what each allows, the workspace's plan, this month's usage against it.
    Plan {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: PlanCommand,
    },
    /// Spend controls: the workspace's and its keys' budgets (docs/billing.md).
    Budget {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: BudgetCommand,
    },
    /// The request log, newest first.
    Usage {
        #[command(flatten)]
        connection: Connection,
        /// Only requests since this time (Unix milliseconds).
        #[arg(long)]
        since_ms: Option<i64>,
        /// Only requests before this time (Unix milliseconds).
        #[arg(long)]
        until_ms: Option<i64>,
        /// Only requests made with this key id.
        #[arg(long)]
        key: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        /// The `next_cursor` printed by the previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// The workspace's audit log, newest first: every control-plane change,
    /// sign-in and payment (owners and admins; docs/audit.md).
    Audit {
        #[command(flatten)]
        connection: Connection,
        /// Only this op, e.g. keys.create or auth.signin.
        #[arg(long)]
        op: Option<String>,
        /// Only changes by this user, key or console session (its id).
        #[arg(long)]
        actor: Option<String>,
        /// Only changes since this time (Unix milliseconds).
        #[arg(long)]
        since_ms: Option<i64>,
        /// Only changes before this time (Unix milliseconds).
        #[arg(long)]
        until_ms: Option<i64>,
        #[arg(long)]
        limit: Option<u32>,
        /// The `next_cursor` printed by the previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One request's full trace, including attempts.
    Request {
        #[command(flatten)]
        connection: Connection,
        request_id: String,
    },
    /// Install a tool server, skill, guardrail or prompt template into the
    /// workspace: PACKAGE is `namespace/name`, optionally `@RANGE` (a semver
    /// requirement; default: newest). A prompt template is served as an MCP
    /// prompt and takes no origins, settings or credentials.
    Install {
        #[command(flatten)]
        connection: Connection,
        package: String,
        /// The install's name (default: the package's short name).
        #[arg(long)]
        name: Option<String>,
        /// Approve outbound HTTP to this origin, e.g. https://api.example.com
        /// (repeatable; must be among the package's allowed hosts).
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origins: Vec<String>,
        /// A setting the component reads, as KEY=VALUE (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
        settings: Vec<(String, String)>,
        /// A credential the host places for the component, for all approved
        /// origins: NAME=VALUE (bearer), NAME:header:HEADER=VALUE or
        /// NAME:query:PARAM=VALUE (repeatable). The value is sealed and never shown.
        #[arg(long = "credential", value_name = "NAME[:PLACEMENT]=VALUE", value_parser = parse_credential)]
        credentials: Vec<(String, String, String)>,
    },
    /// Upgrade an install to the newest version of its range (or of --version).
    Upgrade {
        #[command(flatten)]
        connection: Connection,
        name: String,
        /// A new semver requirement.
        #[arg(long)]
        version: Option<String>,
    },
    /// Remove an install; its tools and prompts disappear from MCP at once.
    Uninstall {
        #[command(flatten)]
        connection: Connection,
        name: String,
    },
    /// The workspace's tool-server, skill, guardrail and prompt-template installs.
    Installs {
        #[command(flatten)]
        connection: Connection,
    },
    /// Remote MCP servers the gateway fronts for the workspace: add, list, remove.
    McpServers {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: McpServersCommand,
    },
}

/// `NAME[:PLACEMENT]=VALUE` → (name, placement, value).
fn parse_credential(text: &str) -> Result<(String, String, String), String> {
    let (target, value) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not NAME[:PLACEMENT]=VALUE"))?;
    let (name, placement) = target.split_once(':').unwrap_or((target, "bearer"));
    Ok((name.to_string(), placement.to_string(), value.to_string()))
}

fn parse_setting(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .ok_or_else(|| format!("'{text}' is not KEY=VALUE"))
}

#[derive(Subcommand, Debug)]
pub enum WorkspacesCommand {
    List,
    Create {
        name: String,
    },
    /// Show a workspace (default: the key's).
    Get {
        workspace_id: Option<String>,
    },
    Rename {
        workspace_id: String,
        name: String,
    },
    Delete {
        workspace_id: String,
    },
    /// Require (true) or stop requiring (false) sign-in through an identity
    /// provider for the workspace's console sessions and for creating keys
    /// (owners; plans with sso; docs/console.md).
    Sso {
        #[arg(long, action = clap::ArgAction::Set, value_name = "true|false")]
        required: bool,
        /// Default: the key's workspace (or --workspace).
        workspace_id: Option<String>,
    },
    /// The package policy: which namespaces' packages this workspace installs
    /// only when signed by a registered, unrevoked key (docs/registry.md).
    PackagePolicy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    Show,
    /// Replace the policy (owners and admins).
    Set {
        /// A namespace whose packages must be signed, or '*' for every
        /// namespace (repeatable; none: require nothing).
        #[arg(long = "require-signed", value_name = "NAMESPACE")]
        require_signed: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum NamespacesCommand {
    List,
    Create {
        name: String,
    },
    Delete {
        name: String,
    },
    /// The ed25519 public keys whose signatures count for a namespace's packages.
    Keys {
        #[command(subcommand)]
        command: NamespaceKeysCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum NamespaceKeysCommand {
    /// Register a public key (from `tollgate package keygen`) for NAMESPACE.
    Add {
        namespace: String,
        /// base64url, which may start with '-'.
        #[arg(allow_hyphen_values = true)]
        public_key: String,
        /// A label, e.g. ci.
        #[arg(long)]
        name: Option<String>,
    },
    /// NAMESPACE's keys, revoked ones included.
    List { namespace: String },
    /// Revoke a key: packages signed by it no longer verify.
    Revoke { namespace: String, key_id: String },
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    List,
    /// Create a key for yourself; the secret is printed once.
    Create {
        #[arg(long)]
        name: Option<String>,
        /// `workspace`: the key may act only in this workspace; `user`
        /// (default): in each of your workspaces.
        #[arg(long, value_parser = ["user", "workspace"])]
        scope: Option<String>,
        /// The key's own data-plane limit; can only tighten the gateway's.
        #[arg(long)]
        requests_per_minute: Option<u32>,
        /// Installs and `<install>__<tool>` names the key may reach over
        /// MCP (comma-separated); without it, what your role may.
        #[arg(long, value_delimiter = ',')]
        tools: Option<Vec<String>>,
    },
    Revoke {
        key_id: String,
    },
    /// Replace a key's own list of installs and tools it may reach over MCP.
    SetTools {
        key_id: String,
        /// The new list (comma-separated installs and `<install>__<tool>` names).
        #[arg(
            long,
            value_delimiter = ',',
            required_unless_present = "clear",
            conflicts_with = "clear"
        )]
        tools: Option<Vec<String>>,
        /// Remove the key's list: it may then reach what its role may.
        #[arg(long)]
        clear: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum WalletCommand {
    /// Open a hosted checkout that credits the wallet once paid (owners and
    /// admins); prints its `checkout_url`.
    Topup {
        /// Amount in USD, whole cents (e.g. 25 or 12.50).
        #[arg(long, value_name = "N")]
        usd: String,
    },
    /// The workspace's top-ups and plan checkouts, newest first.
    Topups {
        #[arg(long)]
        limit: Option<u32>,
    },
}

#[derive(Subcommand, Debug)]
pub enum PlanCommand {
    /// Every plan: monthly requests, endpoints, seats, fee per request, price.
    List,
    /// The workspace's plan.
    Show,
    /// Move the workspace to a plan (owners only). A priced plan prints a
    /// subscription `checkout_url`; the plan applies once it is paid.
    Change { plan: String },
    /// This calendar month's (UTC) requests and spend against the plan.
    Usage,
}

#[derive(Subcommand, Debug)]
pub enum BudgetCommand {
    /// The workspace's budget and its keys' budgets, with this period's spend.
    Show,
    /// Create or replace a budget (owners and admins; needs a plan with spend
    /// controls). Requests whose worst case does not fit get 402 `budget_exceeded`.
    Set {
        #[command(flatten)]
        target: BudgetTarget,
        /// The UTC calendar day or month.
        #[arg(long, value_parser = ["daily", "monthly"])]
        period: String,
        /// The limit per period in USD, e.g. 25 or 0.5.
        #[arg(long)]
        limit_usd: String,
        /// Refuse any request whose worst case costs more than this (USD).
        #[arg(long)]
        max_request_usd: Option<String>,
        /// Percent of the limit at which an alert event is sent, once per period
        /// (default 50,80,100; "" for none).
        #[arg(long, value_name = "PERCENTS")]
        alerts: Option<String>,
    },
    /// Remove a budget.
    Remove {
        #[command(flatten)]
        target: BudgetTarget,
    },
}

#[derive(Args, Debug)]
pub struct BudgetTarget {
    /// `workspace` (the workspace's own budget) or `key` (with --key).
    #[arg(long, value_parser = ["workspace", "key"])]
    pub(super) scope: String,
    /// The key id, for --scope key.
    #[arg(long = "key", value_name = "KEY_ID")]
    pub(super) key_id: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum MembersCommand {
    List,
    /// Add a signed-up user by e-mail.
    Add {
        email: String,
        #[arg(long)]
        role: String,
    },
    SetRole {
        user_id: String,
        #[arg(long)]
        role: String,
    },
    Remove {
        user_id: String,
    },
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(subcommand)]
        command: ClientCommand,
    }

    /// A base64url public key starts with '-' once in 64 keys.
    #[test]
    fn a_public_key_may_start_with_a_hyphen() {
        let key = "-tSHozTwTohAbN27KwRYm-A1nifbXd4M9fg1k6hHTZk";
        let parsed = Probe::try_parse_from(["tollgate", "namespaces", "keys", "add", "acme", key, "--name", "ci"]);
        let Ok(Probe {
            command:
                ClientCommand::Namespaces {
                    command:
                        NamespacesCommand::Keys {
                            command: NamespaceKeysCommand::Add { public_key, name, .. },
                        },
                    ..
                },
        }) = parsed
        else {
            panic!("{:?}", parsed.err());
        };
        assert_eq!((public_key.as_str(), name.as_deref()), (key, Some("ci")));
    }
}
