//! `tollgate serve`: start the gateway, with the first-start help a newcomer
//! needs. `--demo` adds an in-process demo provider (`demo.rs`) and a demo
//! workspace with credit, and prints the console URL, a key (once), a curl
//! line and a Python snippet. Without it, a first start with no accounts says
//! how to make one, or `--bootstrap` makes an owner account and prints its key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde::{Deserialize, Serialize};

use super::{ConfigArgs, load};
use crate::config::Config;
use tollgate_core::money::Nanos;

#[cfg(feature = "demo")]
mod demo;

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Address to listen on, e.g. 127.0.0.1:8080 (overrides the config).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Start with a built-in demo provider (`demo/small`, `demo/medium`,
    /// `demo/large`, answered in-process) and a demo workspace with 10 USD of
    /// credit. The first start prints a key once; later starts reuse the
    /// workspace in the data dir.
    #[arg(long)]
    pub demo: bool,
    /// On a first start with no accounts, create an owner account and print
    /// its key once (instead of only saying how to create one).
    #[arg(long)]
    pub bootstrap: bool,
}

/// What the demo left in the data dir, so a second start finds its workspace.
/// It holds no secret: the key is printed once and stored only as a hash.
#[derive(Debug, Serialize, Deserialize)]
struct DemoState {
    workspace_id: String,
    user_id: String,
}

const DEMO_STATE_FILE: &str = "demo.json";
const DEMO_CREDIT_USD: &str = "10";

/// What to print once the gateway listens.
enum FirstStart {
    /// A new key, shown once.
    NewKey {
        api_key: String,
        workspace_id: String,
        demo: bool,
    },
    /// The demo workspace from an earlier start.
    DemoAgain {
        workspace_id: String,
    },
    /// No account exists and none was made.
    NoAccounts,
    Nothing,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = load(&args.config, args.listen.clone())?;
    #[cfg(feature = "demo")]
    let demo_provider = match args.demo {
        true => Some(demo::DemoProvider::start().await?),
        false => None,
    };
    #[cfg(not(feature = "demo"))]
    anyhow::ensure!(
        !args.demo,
        "this build has no demo provider (built without the `demo` feature)"
    );
    #[cfg(feature = "demo")]
    if let Some(provider) = &demo_provider {
        provider.add_to(&mut config)?;
    }
    let gateway = crate::app::Gateway::start(config.clone()).await?;
    let first = first_start(&gateway, &config, &args).await?;
    #[cfg(feature = "demo")]
    let reload_overlay = demo_provider.clone();
    tokio::spawn(reload_on_hangup(gateway.clone(), args, move |config: &mut Config| {
        #[cfg(feature = "demo")]
        if let Some(provider) = &reload_overlay {
            provider.add_to(config)?;
        }
        let _ = config;
        Ok(())
    }));
    crate::app::serve_then(gateway, super::shutdown_signal(), move |address| {
        print!("{}", first_start_text(&first, address));
    })
    .await
}

async fn first_start(gateway: &crate::app::Gateway, config: &Config, args: &ServeArgs) -> anyhow::Result<FirstStart> {
    let database = &gateway.database;
    if args.demo {
        let path = config.data_dir.join(DEMO_STATE_FILE);
        if let Some(state) = read_demo_state(&path)? {
            let accounts = tollgate_identity::accounts::Accounts::new(
                database.clone(),
                tollgate_identity::auth::KeyResolver::new(database.pool.clone()),
            );
            if accounts.workspace_is_live(&state.workspace_id).await? {
                return Ok(FirstStart::DemoAgain {
                    workspace_id: state.workspace_id,
                });
            }
        }
        let credit = Nanos::from_usd(DEMO_CREDIT_USD).map_err(|e| anyhow::anyhow!("{e}"))?;
        let created = tollgate_identity::accounts::signup(database, "demo", None, credit).await?;
        write_demo_state(
            &path,
            &DemoState {
                workspace_id: created.workspace_id.clone(),
                user_id: created.user_id.clone(),
            },
        )?;
        return Ok(FirstStart::NewKey {
            api_key: created.api_key,
            workspace_id: created.workspace_id,
            demo: true,
        });
    }
    if tollgate_identity::accounts::any_account(database).await? {
        return Ok(FirstStart::Nothing);
    }
    if args.bootstrap {
        let created = tollgate_identity::accounts::signup(database, "owner", None, Nanos(0)).await?;
        return Ok(FirstStart::NewKey {
            api_key: created.api_key,
            workspace_id: created.workspace_id,
            demo: false,
        });
    }
    Ok(FirstStart::NoAccounts)
}

fn read_demo_state(path: &Path) -> anyhow::Result<Option<DemoState>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    }
}

fn write_demo_state(path: &PathBuf, state: &DemoState) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(state)?)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// The base URL a person on this machine would type: an unspecified listen
/// address (`0.0.0.0`) is reached on loopback.
fn base_url(address: SocketAddr) -> String {
    let ip = address.ip();
    let host = match ip {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        std::net::IpAddr::V4(v4) => v4.to_string(),
    };
    format!("http://{host}:{}", address.port())
}

fn first_start_text(first: &FirstStart, address: SocketAddr) -> String {
    let base = base_url(address);
    let console = format!("{base}/console/");
    match first {
        FirstStart::Nothing => format!("console: {console}\n"),
        FirstStart::NoAccounts => format!(
            "\nNo accounts yet. Create one (it prints an API key once):\n\
             \x20 tollgate admin create-account --name NAME --credit-usd 10\n\
             or start with `tollgate serve --bootstrap` to make an owner account now,\n\
             or `tollgate serve --demo` for a demo provider and workspace.\n\
             console: {console}\n\n"
        ),
        FirstStart::DemoAgain { workspace_id } => format!(
            "\nTollgate demo (workspace {workspace_id}, from an earlier start).\n\
             \x20 console: {console}\n\
             \x20 models:  demo/small, demo/medium, demo/large\n\
             Its key was printed on the first start only. Lost it? Create another:\n\
             \x20 tollgate admin create-account --name demo --credit-usd 10\n\n"
        ),
        FirstStart::NewKey {
            api_key,
            workspace_id,
            demo,
        } => {
            let model = if *demo { "demo/small" } else { "<provider>/<model>" };
            let heading = if *demo {
                "Tollgate demo is ready: a demo provider and a workspace with 10 USD of credit."
            } else {
                "Created an owner account (bootstrap)."
            };
            format!(
                "\n{heading}\n\n\
                 \x20 console:   {console}   (sign in by pasting the key)\n\
                 \x20 workspace: {workspace_id}\n\
                 \x20 API key:   {api_key}\n\
                 \x20            shown only this once; it is stored as a hash\n\n\
                 Try it:\n\n\
                 curl -s {base}/v1/chat/completions \\\n\
                 \x20 -H 'Authorization: Bearer {api_key}' \\\n\
                 \x20 -H 'Content-Type: application/json' \\\n\
                 \x20 -d '{{\"model\":\"{model}\",\"messages\":[{{\"role\":\"user\",\"content\":\"hello\"}}]}}'\n\n\
                 # Python (pip install openai)\n\
                 from openai import OpenAI\n\
                 client = OpenAI(base_url=\"{base}/v1\", api_key=\"{api_key}\")\n\
                 reply = client.chat.completions.create(model=\"{model}\", messages=[{{\"role\": \"user\", \"content\": \"hello\"}}])\n\
                 print(reply.choices[0].message.content, reply.to_dict()[\"usage\"][\"cost\"])\n\n"
            )
        }
    }
}

/// SIGHUP re-reads the configuration and swaps in the new providers and prices
/// (a new pricing snapshot); requests in flight keep the prices they started
/// with. `overlay` re-applies what the command line added (the demo provider).
async fn reload_on_hangup(
    gateway: Arc<crate::app::Gateway>,
    args: ServeArgs,
    overlay: impl Fn(&mut Config) -> anyhow::Result<()> + Send + 'static,
) {
    #[cfg(unix)]
    {
        let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            return;
        };
        while hangups.recv().await.is_some() {
            let reloaded = match load(&args.config, args.listen.clone()).and_then(|mut config| {
                overlay(&mut config)?;
                Ok(config)
            }) {
                Ok(config) => gateway.reload(&config).await,
                Err(e) => Err(e),
            };
            match reloaded {
                Ok(snapshot) => tracing::info!(snapshot, "configuration reloaded"),
                Err(error) => tracing::error!("configuration reload failed, keeping the old one: {error:#}"),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (gateway, args, overlay);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_demo_start_prints_the_key_a_curl_line_and_python() {
        let text = first_start_text(
            &FirstStart::NewKey {
                api_key: "tg_live_abc".into(),
                workspace_id: "ws_1".into(),
                demo: true,
            },
            "0.0.0.0:8080".parse().unwrap(),
        );
        assert!(text.contains("http://127.0.0.1:8080/console/"), "{text}");
        assert!(
            text.contains("curl -s http://127.0.0.1:8080/v1/chat/completions"),
            "{text}"
        );
        assert!(text.contains("Bearer tg_live_abc"), "{text}");
        assert!(text.contains("OpenAI(base_url=\"http://127.0.0.1:8080/v1\""), "{text}");
        let again = first_start_text(
            &FirstStart::DemoAgain {
                workspace_id: "ws_1".into(),
            },
            "127.0.0.1:8080".parse().unwrap(),
        );
        assert!(!again.contains("tg_live_"), "{again}");
    }
}
