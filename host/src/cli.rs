//! The `tollgate` command line: serve the gateway, operate accounts, and run the
//! built-in mock upstream.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{CliOverrides, Config};
use crate::money::Nanos;

#[derive(Parser, Debug)]
#[command(
    name = "tollgate",
    version,
    about = "Tollgate: a metered AI gateway with sandboxed WebAssembly provider adapters"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the gateway (OpenAI-compatible API on /v1).
    Serve(ServeArgs),
    /// Operate the gateway's data: accounts, keys, wallets.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Run a fake OpenAI-compatible provider for tests, benchmarks and offline demos.
    MockUpstream(MockArgs),
}

#[derive(Args, Debug)]
struct ConfigArgs {
    /// Configuration file (default: ./tollgate.toml if present).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory for the embedded database and caches (overrides the config).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Address to listen on, e.g. 127.0.0.1:8080 (overrides the config).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
}

#[derive(Subcommand, Debug)]
enum AdminCommand {
    /// Create an account with a workspace, a wallet credit and its first API key.
    /// The key is printed once and cannot be shown again.
    CreateAccount(CreateAccountArgs),
}

#[derive(Args, Debug)]
struct CreateAccountArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Account name.
    #[arg(long)]
    name: String,
    /// Opening wallet credit in USD, e.g. 10 or 0.50 (up to 9 decimals).
    #[arg(long, value_name = "AMOUNT", default_value = "0")]
    credit_usd: String,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct MockArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// Delay every response by this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    latency_ms: u64,
    /// Answer 401 unless requests carry 'Authorization: Bearer KEY'.
    #[arg(long, value_name = "KEY")]
    require_api_key: Option<String>,
}

pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    crate::telemetry::init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(cli.command))
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => {
            let config = load(&args.config, args.listen)?;
            let gateway = crate::server::Gateway::start(config).await?;
            crate::server::serve(gateway, shutdown_signal()).await
        }
        Command::Admin(AdminCommand::CreateAccount(args)) => {
            let config = load(&args.config, None)?;
            let credit = Nanos::from_usd(&args.credit_usd).map_err(|e| anyhow::anyhow!("--credit-usd: {e}"))?;
            std::fs::create_dir_all(&config.data_dir)?;
            let db = crate::db::open(&config.database_url()).await?;
            let created = crate::accounts::create_account(&db, &args.name, credit).await?;
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
        Command::MockUpstream(args) => {
            let listener = tokio::net::TcpListener::bind(args.listen).await?;
            eprintln!("mock upstream listening on http://{}", listener.local_addr()?);
            let options = tollgate_mock_upstream::MockOptions {
                latency_ms: args.latency_ms,
                require_api_key: args.require_api_key,
            };
            tokio::select! {
                served = tollgate_mock_upstream::serve(listener, options) => served.map_err(Into::into),
                () = shutdown_signal() => Ok(()),
            }
        }
    }
}

fn load(args: &ConfigArgs, listen: Option<String>) -> anyhow::Result<Config> {
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
