//! The control-plane client: `tollgate signup`, `workspaces …`, `keys …`,
//! `members …`, `namespaces …`, `wallet`, `plan …`, `budget …`, `usage`, `request ID`, and the
//! tool-server and skill installs (`install`, `upgrade`, `uninstall`, `installs`). Each command is
//! one JSON-RPC call of an extension method on `POST /a2a`, so the CLI has
//! exactly the permissions of its key. The server URL and key come from flags,
//! then `TOLLGATE_URL` / `TOLLGATE_API_KEY`, then a profile file.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

const DEFAULT_URL: &str = "http://127.0.0.1:8080";

#[derive(Args, Debug)]
pub struct Connection {
    /// Gateway URL (default: the profile's, else http://127.0.0.1:8080).
    #[arg(long, env = "TOLLGATE_URL", global = true)]
    url: Option<String>,
    /// API key (default: the profile's).
    #[arg(long, env = "TOLLGATE_API_KEY", global = true, hide_env_values = true)]
    api_key: Option<String>,
    /// Profile in the profile file (`~/.config/tollgate/profiles.toml`, or
    /// `TOLLGATE_PROFILE_FILE`).
    #[arg(long, env = "TOLLGATE_PROFILE", global = true, default_value = "default")]
    profile: String,
    /// Act on this workspace instead of the key's own.
    #[arg(long, global = true)]
    workspace: Option<String>,
    /// Print the raw JSON result (for scripts).
    #[arg(long, global = true)]
    json: bool,
}

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
    /// One request's full trace, including attempts.
    Request {
        #[command(flatten)]
        connection: Connection,
        request_id: String,
    },
    /// Install a tool server or skill into the workspace: PACKAGE is
    /// `namespace/name`, optionally `@RANGE` (a semver requirement; default: newest).
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
    /// Remove an install; its tools disappear from MCP at once.
    Uninstall {
        #[command(flatten)]
        connection: Connection,
        name: String,
    },
    /// The workspace's tool-server and skill installs.
    Installs {
        #[command(flatten)]
        connection: Connection,
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
}

#[derive(Subcommand, Debug)]
pub enum NamespacesCommand {
    List,
    Create { name: String },
    Delete { name: String },
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
    },
    Revoke {
        key_id: String,
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
    scope: String,
    /// The key id, for --scope key.
    #[arg(long = "key", value_name = "KEY_ID")]
    key_id: Option<String>,
}

/// `50,80,100` as percents; an empty text is none.
fn alert_list(text: &str) -> Value {
    let percents: Vec<Value> = text
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().map_or_else(|_| json!(p), |n| json!(n)))
        .collect();
    Value::Array(percents)
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

impl ClientCommand {
    fn connection(&self) -> &Connection {
        use ClientCommand as C;
        match self {
            C::Signup { connection, .. }
            | C::Workspaces { connection, .. }
            | C::Namespaces { connection, .. }
            | C::Keys { connection, .. }
            | C::Members { connection, .. }
            | C::Wallet { connection, .. }
            | C::Plan { connection, .. }
            | C::Budget { connection, .. }
            | C::Usage { connection, .. }
            | C::Request { connection, .. }
            | C::Install { connection, .. }
            | C::Upgrade { connection, .. }
            | C::Uninstall { connection, .. }
            | C::Installs { connection } => connection,
        }
    }

    /// The op and its params.
    fn op(&self, workspace: Option<&str>) -> (&'static str, Value) {
        use ClientCommand as C;
        let (op, mut params) = match self {
            C::Signup { name, email, .. } => ("accounts.signup", json!({"name": name, "email": email})),
            C::Workspaces {
                command: WorkspacesCommand::List,
                ..
            } => ("workspaces.list", json!({})),
            C::Workspaces {
                command: WorkspacesCommand::Create { name },
                ..
            } => ("workspaces.create", json!({"name": name})),
            C::Workspaces {
                command: WorkspacesCommand::Get { workspace_id },
                ..
            } => (
                "workspaces.get",
                json!({"workspace_id": workspace_id.as_deref().or(workspace)}),
            ),
            C::Workspaces {
                command: WorkspacesCommand::Rename { workspace_id, name },
                ..
            } => ("workspaces.rename", json!({"workspace_id": workspace_id, "name": name})),
            C::Workspaces {
                command: WorkspacesCommand::Delete { workspace_id },
                ..
            } => ("workspaces.delete", json!({"workspace_id": workspace_id})),
            C::Namespaces {
                command: NamespacesCommand::List,
                ..
            } => ("namespaces.list", json!({})),
            C::Namespaces {
                command: NamespacesCommand::Create { name },
                ..
            } => ("namespaces.create", json!({"name": name})),
            C::Namespaces {
                command: NamespacesCommand::Delete { name },
                ..
            } => ("namespaces.delete", json!({"name": name})),
            C::Keys {
                command: KeysCommand::List,
                ..
            } => ("keys.list", json!({})),
            C::Keys {
                command:
                    KeysCommand::Create {
                        name,
                        scope,
                        requests_per_minute,
                    },
                ..
            } => (
                "keys.create",
                json!({"name": name, "scope": scope, "requests_per_minute": requests_per_minute}),
            ),
            C::Keys {
                command: KeysCommand::Revoke { key_id },
                ..
            } => ("keys.revoke", json!({"key_id": key_id})),
            C::Members {
                command: MembersCommand::List,
                ..
            } => ("members.list", json!({})),
            C::Members {
                command: MembersCommand::Add { email, role },
                ..
            } => ("members.add", json!({"email": email, "role": role})),
            C::Members {
                command: MembersCommand::SetRole { user_id, role },
                ..
            } => ("members.set-role", json!({"user_id": user_id, "role": role})),
            C::Members {
                command: MembersCommand::Remove { user_id },
                ..
            } => ("members.remove", json!({"user_id": user_id})),
            C::Wallet { command: None, .. } => ("wallet.get", json!({})),
            C::Wallet {
                command: Some(WalletCommand::Topup { usd }),
                ..
            } => ("billing.topups.create", json!({"amount_usd": usd})),
            C::Wallet {
                command: Some(WalletCommand::Topups { limit }),
                ..
            } => ("billing.topups.list", json!({"limit": limit})),
            C::Plan { command, .. } => match command {
                PlanCommand::List => ("billing.plans.list", json!({})),
                PlanCommand::Show => ("billing.plan.get", json!({})),
                PlanCommand::Change { plan } => ("billing.plan.change", json!({"plan": plan})),
                PlanCommand::Usage => ("billing.usage.month", json!({})),
            },
            C::Budget { command, .. } => match command {
                BudgetCommand::Show => ("billing.limits.get", json!({})),
                BudgetCommand::Set {
                    target,
                    period,
                    limit_usd,
                    max_request_usd,
                    alerts,
                } => (
                    "billing.limits.set",
                    json!({"scope": target.scope, "key_id": target.key_id, "period": period,
                           "limit_usd": limit_usd, "max_request_usd": max_request_usd,
                           "alert_thresholds": alerts.as_deref().map(alert_list)}),
                ),
                BudgetCommand::Remove { target } => (
                    "billing.limits.set",
                    json!({"scope": target.scope, "key_id": target.key_id, "remove": true}),
                ),
            },
            C::Usage {
                since_ms,
                until_ms,
                key,
                limit,
                cursor,
                ..
            } => (
                "usage.list",
                json!({"since_ms": since_ms, "until_ms": until_ms, "key_id": key, "limit": limit, "cursor": cursor}),
            ),
            C::Request { request_id, .. } => ("requests.get", json!({"request_id": request_id})),
            C::Install {
                package,
                name,
                allow_origins,
                settings,
                credentials,
                ..
            } => {
                let (package, version) = match package.split_once('@') {
                    Some((package, version)) => (package, Some(version)),
                    None => (package.as_str(), None),
                };
                let config: serde_json::Map<String, Value> =
                    settings.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                let credentials: serde_json::Map<String, Value> = credentials
                    .iter()
                    .map(|(name, placement, value)| (name.clone(), json!({"value": value, "placement": placement})))
                    .collect();
                (
                    "installs.create",
                    json!({"package": package, "version": version, "name": name, "origins": allow_origins, "config": config, "credentials": credentials}),
                )
            }
            C::Upgrade { name, version, .. } => ("installs.update", json!({"name": name, "version": version})),
            C::Uninstall { name, .. } => ("installs.delete", json!({"name": name})),
            C::Installs { .. } => ("installs.list", json!({})),
        };
        let object = params.as_object_mut().expect("params are an object");
        object.retain(|_, v| !v.is_null());
        let workspace_scoped = !matches!(
            op,
            "accounts.signup" | "workspaces.list" | "workspaces.create" | "billing.plans.list"
        );
        if workspace_scoped
            && !object.contains_key("workspace_id")
            && let Some(workspace) = workspace
        {
            object.insert("workspace_id".into(), json!(workspace));
        }
        (op, params)
    }
}

impl Connection {
    /// The gateway URL and key: flags, then the environment, then the profile.
    pub fn resolve(&self) -> anyhow::Result<(String, Option<String>)> {
        let profile = read_profile(&self.profile)?;
        let url = self
            .url
            .clone()
            .or_else(|| profile.get("url").and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or_else(|| DEFAULT_URL.to_string());
        let api_key = self
            .api_key
            .clone()
            .or_else(|| profile.get("api_key").and_then(|v| v.as_str()).map(str::to_string));
        Ok((url.trim_end_matches('/').to_string(), api_key))
    }

    pub fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    pub fn json(&self) -> bool {
        self.json
    }
}

pub async fn run(command: ClientCommand) -> anyhow::Result<()> {
    let connection = command.connection();
    let (url, api_key) = connection.resolve()?;
    let (op, params) = command.op(connection.workspace.as_deref());
    let result = call(&url, api_key.as_deref(), op, params).await?;
    if let ClientCommand::Signup { save: true, .. } = &command {
        save_profile(
            &connection.profile,
            &url,
            result["api_key"].as_str().unwrap_or_default(),
        )?;
    }
    if connection.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        super::output::print_human(&result);
        if result.get("api_key").is_some() {
            println!("(the key is shown only this once)");
        }
    }
    Ok(())
}

/// One control-plane op as a JSON-RPC extension method on `POST /a2a`.
pub async fn call(url: &str, api_key: Option<&str>, op: &str, params: Value) -> anyhow::Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": op.replacen('.', "/", 1), "params": params});
    let mut request = reqwest::Client::new()
        .post(format!("{url}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&body);
    if let Some(key) = api_key {
        request = request.bearer_auth(key);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach the gateway at {url}"))?;
    let status = response.status();
    let text = response.text().await?;
    let answer: Value = serde_json::from_str(&text)
        .with_context(|| format!("{url}/a2a answered HTTP {status} with something other than JSON-RPC"))?;
    if let Some(error) = answer.get("error") {
        let reason = error["data"][0]["reason"].as_str().unwrap_or("ERROR");
        anyhow::bail!("{reason}: {}", error["message"].as_str().unwrap_or("unknown error"));
    }
    Ok(answer["result"].clone())
}

fn profile_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOLLGATE_PROFILE_FILE") {
        return Some(PathBuf::from(path));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("tollgate").join("profiles.toml"))
}

fn read_profiles() -> anyhow::Result<toml::Table> {
    let Some(path) = profile_path().filter(|p| p.is_file()) else {
        return Ok(toml::Table::new());
    };
    let text = std::fs::read_to_string(&path)?;
    text.parse()
        .with_context(|| format!("invalid profile file {}", path.display()))
}

fn read_profile(name: &str) -> anyhow::Result<toml::Table> {
    Ok(match read_profiles()?.remove(name) {
        Some(toml::Value::Table(table)) => table,
        _ => toml::Table::new(),
    })
}

fn save_profile(name: &str, url: &str, api_key: &str) -> anyhow::Result<()> {
    let path = profile_path().context("no profile file location: set TOLLGATE_PROFILE_FILE or HOME")?;
    let mut profiles = read_profiles()?;
    let mut profile = toml::Table::new();
    profile.insert("url".into(), url.into());
    profile.insert("api_key".into(), api_key.into());
    profiles.insert(name.to_string(), toml::Value::Table(profile));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, toml::to_string(&profiles)?)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    eprintln!("saved profile '{name}' in {}", path.display());
    Ok(())
}
