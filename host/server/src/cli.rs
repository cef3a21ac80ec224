//! The `tollgate` command line: serve the gateway, operate accounts, drive the
//! control plane over HTTP (`client.rs`), and publish and install packages.

mod actors;
mod audit;
mod catalog;
mod client;
mod output;
mod packages;
mod serve;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{CliOverrides, Config};
use tollgate_core::money::Nanos;

#[derive(Parser, Debug)]
#[command(
    name = "tollgate",
    version,
    about = "Tollgate: a metered AI gateway with sandboxed WebAssembly provider adapters"
)]
pub struct Cli {
    /// Log lines on stderr: `text` (compact, coloured on a terminal), `json`,
    /// or `auto`: text on a terminal, JSON otherwise.
    #[arg(long, global = true, value_enum, default_value_t = tollgate_telemetry::LogFormat::Auto)]
    log_format: tollgate_telemetry::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the gateway (OpenAI-compatible API on /v1, the console on /console/).
    /// `--demo` starts it with a demo provider and workspace.
    Serve(serve::ServeArgs),
    /// Operate the gateway's data: accounts, keys, wallets.
    #[command(subcommand)]
    Admin(AdminCommand),
    #[command(flatten)]
    Client(client::ClientCommand),
    #[command(flatten)]
    Packages(packages::PackagesCommand),
    /// Hosted actors: compile, publish and deploy (docs/actors.md).
    #[command(subcommand)]
    Actors(actors::ActorsCommand),
    /// Actor runs: show one, verify its signed provenance trail.
    #[command(subcommand)]
    Runs(actors::RunsCommand),
    /// The model catalog's price table (docs/pricing.md).
    #[command(subcommand)]
    Catalog(catalog::CatalogCommand),
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ConfigArgs {
    /// Configuration file (default: ./tollgate.toml if present).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory for the embedded database and caches (overrides the config).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum AdminCommand {
    /// Create an account with a workspace, a wallet credit and its first API key.
    /// The key is printed once and cannot be shown again.
    CreateAccount(CreateAccountArgs),
    /// Show a workspace's wallet: available, pending and posted balances (exact USD).
    Wallet(WalletArgs),
    /// Add credit to a workspace's wallet (journaled).
    Credit(CreditArgs),
    /// Recompute every wallet from the journal; exits non-zero on any drift.
    LedgerVerify(LedgerVerifyArgs),
    /// Show one request's log entry: the auditable trace of that request,
    /// from the database or, once retention moved it, from the archive.
    Request(RequestArgs),
    /// Move request-log rows past `[retention] request_log_days` and audit-log
    /// rows past `audit_log_days` (both delivered to every metering sink) to
    /// the archive now, as the server does every `interval_secs`.
    Archive(ArchiveArgs),
    /// Plans (docs/billing.md).
    #[command(subcommand)]
    Plan(AdminPlanCommand),
    /// Payments (docs/billing.md, "Payments").
    #[command(subcommand)]
    Payments(AdminPaymentsCommand),
    /// Check the audit log's hash chain from its anchor to its head; exits
    /// non-zero at the first row that was changed, removed or inserted
    /// (docs/audit.md).
    AuditVerify(audit::VerifyArgs),
}

#[derive(Subcommand, Debug)]
enum AdminPaymentsCommand {
    /// Lift the hold a disputed payment put on a workspace's top-ups.
    Release(WorkspaceArgs),
}

#[derive(Args, Debug)]
struct WorkspaceArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Workspace id.
    #[arg(long)]
    workspace: String,
}

#[derive(Subcommand, Debug)]
enum AdminPlanCommand {
    /// Put a workspace on any defined plan, paid ones included (no payment is
    /// taken): the operator's way onto a plan with a monthly price.
    Set(PlanSetArgs),
}

#[derive(Args, Debug)]
struct PlanSetArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Workspace id.
    #[arg(long)]
    workspace: String,
    /// Plan id (`free`, `pro`, `team`, `business`, `enterprise`, or one in
    /// `[billing.plans]`).
    #[arg(long)]
    plan: String,
}

#[derive(Args, Debug)]
struct ArchiveArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Count the retention period back from this time (RFC 3339) instead of
    /// now, e.g. to see what a date will archive.
    #[arg(long, value_name = "TIME")]
    as_of: Option<String>,
}

#[derive(Args, Debug)]
struct WalletArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Workspace id (as printed by create-account).
    #[arg(long)]
    workspace: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct CreditArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Workspace id.
    #[arg(long)]
    workspace: String,
    /// Amount in USD, e.g. 25 or 0.50 (up to 9 decimals).
    #[arg(long, value_name = "AMOUNT")]
    usd: String,
}

#[derive(Args, Debug)]
struct LedgerVerifyArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Release expired holds before verifying (as the server's sweeper would).
    #[arg(long)]
    sweep: bool,
}

#[derive(Args, Debug)]
struct RequestArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// The request id (`service.request_id`, or the X-Request-Id header).
    request_id: String,
    /// Print JSON (the default; kept for symmetry with other commands).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct CreateAccountArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Account name.
    #[arg(long)]
    name: String,
    /// The account user's e-mail (lets owners add them with `members add`).
    #[arg(long)]
    email: Option<String>,
    /// Opening wallet credit in USD, e.g. 10 or 0.50 (up to 9 decimals).
    #[arg(long, value_name = "AMOUNT", default_value = "0")]
    credit_usd: String,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tollgate_telemetry::init(cli.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(run(cli.command));
    drop(runtime);
    tollgate_telemetry::shutdown();
    result
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve::run(args).await,
        Command::Admin(AdminCommand::CreateAccount(args)) => {
            let credit = Nanos::from_usd(&args.credit_usd).map_err(|e| anyhow::anyhow!("--credit-usd: {e}"))?;
            let database = open_database(&args.config).await?;
            let created =
                tollgate_identity::accounts::signup(&database, &args.name, args.email.as_deref(), credit).await?;
            audit::operator_change(
                &database,
                "admin.create-account",
                &created.workspace_id,
                serde_json::to_value(&created)?,
            )
            .await;
            if args.json {
                println!("{}", serde_json::to_string(&created)?);
            } else {
                println!("account:   {}", created.account_id);
                println!("workspace: {}", created.workspace_id);
                println!("credit:    {} USD", created.credit_usd);
                println!("api key:   {}", created.api_key);
                println!("(the key is shown only this once)");
            }
            Ok(())
        }
        Command::Admin(AdminCommand::Wallet(args)) => {
            let database = open_database(&args.config).await?;
            let wallet = tollgate_ledger::wallet(&database, &args.workspace).await?;
            if args.json {
                println!("{}", serde_json::to_string(&wallet)?);
            } else {
                println!("available: {} USD", wallet.available_usd);
                println!("pending:   {} USD", wallet.pending_usd);
                println!("posted:    {} USD", wallet.posted_usd);
            }
            Ok(())
        }
        Command::Admin(AdminCommand::Credit(args)) => {
            let amount = Nanos::from_usd(&args.usd).map_err(|e| anyhow::anyhow!("--usd: {e}"))?;
            let database = open_database(&args.config).await?;
            tollgate_ledger::credit(&database, &args.workspace, amount).await?;
            let wallet = tollgate_ledger::wallet(&database, &args.workspace).await?;
            let after = serde_json::json!({"credited_usd": amount.usd_string(), "wallet": &wallet});
            audit::operator_change(&database, "admin.credit", &args.workspace, after).await;
            println!(
                "credited {} USD; available {} USD",
                amount.usd_string(),
                wallet.available_usd
            );
            Ok(())
        }
        Command::Admin(AdminCommand::LedgerVerify(args)) => {
            let database = open_database(&args.config).await?;
            if args.sweep {
                let expired = tollgate_ledger::sweep(&database).await?;
                println!("released {expired} expired holds");
            }
            let drift = tollgate_ledger::verify(&database).await?;
            if drift.is_empty() {
                println!("ledger verified: every wallet matches its journal");
                Ok(())
            } else {
                for line in &drift {
                    println!("DRIFT {line}");
                }
                anyhow::bail!("{} discrepancies", drift.len())
            }
        }
        Command::Admin(AdminCommand::Request(args)) => {
            let config = load(&args.config, None)?;
            let database = open_database(&args.config).await?;
            let _ = args.json;
            if let Some(row) = tollgate_ledger::request_log(&database, &args.request_id).await? {
                println!("{}", serde_json::to_string_pretty(&row)?);
                return Ok(());
            }
            let archive = config.retention.open_archive(&config.data_dir)?;
            match archive.find(&args.request_id).await? {
                Some(found) => {
                    let mut row = found.record;
                    row["archived_in"] = serde_json::json!(format!("{} ({})", found.location, archive.describe()));
                    println!("{}", serde_json::to_string_pretty(&row)?);
                    Ok(())
                }
                None => anyhow::bail!(
                    "no request '{}' in the request log or its archive ({})",
                    args.request_id,
                    archive.describe()
                ),
            }
        }
        Command::Admin(AdminCommand::Archive(args)) => {
            let config = load(&args.config, None)?;
            let database = open_database(&args.config).await?;
            let now = match &args.as_of {
                Some(time) => chrono::DateTime::parse_from_rfc3339(time)
                    .map_err(|e| anyhow::anyhow!("--as-of '{time}': {e}"))?
                    .timestamp_millis(),
                None => tollgate_core::db::now_ms(),
            };
            let archive = config.retention.open_archive(&config.data_dir)?;
            let retention = &config.retention;
            let mut report = crate::retention::run_once(
                &database,
                &archive,
                retention.request_log_days,
                retention.rows_per_file,
                now,
            )
            .await?;
            crate::retention::archive_audit(
                &database,
                &archive,
                retention.audit_log_days,
                retention.rows_per_file,
                now,
                &mut report,
            )
            .await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        Command::Admin(AdminCommand::Plan(AdminPlanCommand::Set(args))) => {
            let config = load(&args.config, None)?;
            let database = open_database(&args.config).await?;
            let accounts = tollgate_identity::accounts::Accounts::new(
                database.clone(),
                tollgate_identity::auth::KeyResolver::new(database.pool.clone()),
            );
            let billing = tollgate_billing::Billing::new(&config.billing, accounts, database.clone())?;
            let plan = billing.set_plan(&args.workspace, &args.plan).await?;
            let after = serde_json::json!({"plan": plan.id});
            audit::operator_change(&database, "admin.plan.set", &args.workspace, after).await;
            println!("workspace {} is on plan '{}'", args.workspace, plan.id);
            Ok(())
        }
        Command::Admin(AdminCommand::Payments(AdminPaymentsCommand::Release(args))) => {
            let database = open_database(&args.config).await?;
            let released = tollgate_billing::payments::release_hold(&database, &args.workspace).await?;
            let after = serde_json::json!({"released": released});
            audit::operator_change(&database, "admin.payments.release", &args.workspace, after).await;
            if released {
                println!("top-ups of workspace {} are no longer held", args.workspace);
            } else {
                println!("workspace {} had no hold on its top-ups", args.workspace);
            }
            Ok(())
        }
        Command::Admin(AdminCommand::AuditVerify(args)) => audit::verify(args).await,
        Command::Client(command) => client::run(command).await,
        Command::Packages(command) => packages::run(command).await,
        Command::Actors(command) => actors::run(command).await,
        Command::Runs(command) => actors::runs(command).await,
        Command::Catalog(command) => catalog::run(command),
    }
}

async fn open_database(args: &ConfigArgs) -> anyhow::Result<tollgate_core::db::Database> {
    let config = load(args, None)?;
    std::fs::create_dir_all(&config.data_dir)?;
    tollgate_core::db::Database::open(&config.database_url(), config.ledger.sqlite_sync).await
}

pub(crate) fn load(args: &ConfigArgs, listen: Option<String>) -> anyhow::Result<Config> {
    Config::load(
        args.config.as_deref(),
        CliOverrides {
            listen,
            data_dir: args.data_dir.clone(),
        },
    )
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        if let Ok(mut signal) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            signal.recv().await;
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
