//! `tollgate-mock-upstream`: the scriptable fake provider as a program of its
//! own, for the quickstart, the Python tests and the benchmark. It is a test
//! double, so it is not part of the `tollgate` binary.
#![forbid(unsafe_code)]

use std::net::SocketAddr;

use clap::Parser;

/// A fake model provider speaking OpenAI, Azure OpenAI, Anthropic, Cohere,
/// Gemini and Bedrock, with scriptable faults (see the crate docs).
#[derive(Parser, Debug)]
#[command(name = "tollgate-mock-upstream", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// Delay every response by this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    latency_ms: u64,
    /// Answer 401 unless requests carry 'Authorization: Bearer KEY'.
    #[arg(long, value_name = "KEY")]
    require_api_key: Option<String>,
    /// Simulate a prompt cache: report a repeated message prefix as cached tokens.
    #[arg(long)]
    prompt_cache: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    eprintln!("mock upstream listening on http://{}", listener.local_addr()?);
    let options = tollgate_mock_upstream::MockOptions {
        latency_ms: args.latency_ms,
        require_api_key: args.require_api_key,
        prompt_cache: args.prompt_cache,
    };
    tokio::select! {
        served = tollgate_mock_upstream::serve(listener, options) => served.map_err(Into::into),
        _ = tokio::signal::ctrl_c() => Ok(()),
        () = terminated() => Ok(()),
    }
}

#[cfg(unix)]
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn terminated() {
    std::future::pending().await
}
