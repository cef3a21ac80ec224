//! Other gateways measured in front of the same mock, in the same run
//! (`--peer NAME=URL`, optionally started by the bench with `--peer-start
//! NAME=COMMAND`): rows beside Tollgate's from binaries the user built from
//! their public sources. None of their code is in this repository; the
//! bench's README says how to build agentgateway and TensorZero for it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use reqwest::Client;

use crate::measure::{self, Plan};
use crate::procs::{Managed, TempDir, free_port};
use crate::report::ConfigResult;
use crate::target::Target;

/// One peer: where it answers, and how to start it if the bench should.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    /// Its OpenAI-compatible origin; `{port}` is the port the bench picked.
    pub url: String,
    /// A shell command; `{port}`, `{mock_url}` and `{mock_addr}` (host:port)
    /// are replaced before it runs.
    pub start: Option<String>,
    /// The model name it routes to the mock's model.
    pub model: String,
    pub api_key: Option<String>,
}

/// `NAME=VALUE` of a repeatable option.
fn named<'a>(option: &str, value: &'a str) -> Result<(&'a str, &'a str)> {
    let (name, rest) = value
        .split_once('=')
        .with_context(|| format!("{option} takes NAME=VALUE, got '{value}'"))?;
    ensure!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "{option}: '{name}' is not a peer name (letters, digits, - and _)"
    );
    Ok((name, rest))
}

/// The peers of `--peer`, with their `--peer-start`, `--peer-model` and
/// `--peer-key` (each NAME=VALUE, for a NAME given to `--peer`).
pub fn parse(
    urls: &[String],
    starts: &[String],
    models: &[String],
    keys: &[String],
    default_model: &str,
) -> Result<Vec<Peer>> {
    let mut peers: Vec<Peer> = Vec::new();
    for value in urls {
        let (name, url) = named("--peer", value)?;
        ensure!(peers.iter().all(|p| p.name != name), "--peer {name} is given twice");
        peers.push(Peer {
            name: name.into(),
            url: url.into(),
            start: None,
            model: default_model.into(),
            api_key: None,
        });
    }
    let mut set = |option: &str, values: &[String], apply: fn(&mut Peer, &str)| -> Result<()> {
        for value in values {
            let (name, rest) = named(option, value)?;
            let peer = peers
                .iter_mut()
                .find(|p| p.name == name)
                .with_context(|| format!("{option} {name}: no --peer {name}=URL"))?;
            apply(peer, rest);
        }
        Ok(())
    };
    set("--peer-start", starts, |p, v| p.start = Some(v.into()))?;
    set("--peer-model", models, |p, v| p.model = v.into())?;
    set("--peer-key", keys, |p, v| p.api_key = Some(v.into()))?;
    Ok(peers)
}

fn fill(template: &str, port: u16, mock_url: &str) -> String {
    let mock_addr = mock_url.trim_start_matches("http://").trim_end_matches('/');
    template
        .replace("{port}", &port.to_string())
        .replace("{mock_url}", mock_url.trim_end_matches('/'))
        .replace("{mock_addr}", mock_addr)
}

/// Measures one peer beside the direct mock; starts it first when it has a
/// start command, and stops it after.
pub async fn row(
    peer: &Peer,
    plan: &Plan,
    client: &Client,
    direct: &Arc<Target>,
    mock_url: &str,
    stream_words: usize,
    timeout: Duration,
) -> Result<ConfigResult> {
    let port = free_port()?;
    let url = fill(&peer.url, port, mock_url);
    let dir = TempDir::new(&format!("peer-{}", peer.name))?;
    let mut process = match &peer.start {
        Some(command) => {
            let command = fill(command, port, mock_url);
            eprintln!("bench: starting peer {}: {command}", peer.name);
            let log = dir.0.join("peer.log");
            let process = Managed::spawn(&peer.name, Path::new("sh"), &["-c", &command], &[], &log)?;
            wait_listening(&url, timeout).await?;
            Some(process)
        }
        None => None,
    };
    let target = Arc::new(Target::new(
        "peer",
        &url,
        peer.api_key.as_deref(),
        &peer.model,
        stream_words,
    )?);
    let measured = measure::row(client, plan, direct, &target).await;
    let (peak_rss_kib, exited) = match &mut process {
        Some(process) => (process.peak_rss_kib(), process.exited()),
        None => (None, None),
    };
    if let Some(mut process) = process {
        process.stop().await;
    }
    let (load, stream) = measured?;
    Ok(ConfigResult {
        name: peer.name.clone(),
        kind: "peer",
        settings: vec![
            peer.start.clone().unwrap_or_else(|| url.clone()),
            format!("model {}", peer.model),
        ],
        load,
        stream,
        peak_rss_kib,
        exited,
    })
}

/// Waits until something accepts connections at `url`'s host and port: a
/// peer's health route differs from gateway to gateway, a listening socket
/// does not.
async fn wait_listening(url: &str, timeout: Duration) -> Result<()> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("peer URL '{url}'"))?;
    let host = parsed.host_str().context("the peer URL has no host")?.to_string();
    let port = parsed.port_or_known_default().context("the peer URL has no port")?;
    let start = Instant::now();
    loop {
        if tokio::net::TcpStream::connect((host.as_str(), port)).await.is_ok() {
            return Ok(());
        }
        if start.elapsed() > timeout {
            bail!("peer not listening at {host}:{port} after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_name_their_peer() {
        let s = |v: &str| v.to_string();
        let peers = parse(
            &[s("agentgateway=http://127.0.0.1:{port}"), s("t0=http://127.0.0.1:3000")],
            &[s("agentgateway=agentgateway -f cfg.yaml --port {port}")],
            &[s("t0=openai::small")],
            &[],
            "small",
        )
        .unwrap();
        assert_eq!(
            peers[0].start.as_deref(),
            Some("agentgateway -f cfg.yaml --port {port}")
        );
        assert_eq!(
            (peers[0].model.as_str(), peers[1].model.as_str()),
            ("small", "openai::small")
        );
        assert!(
            parse(&[s("a=u")], &[s("b=cmd")], &[], &[], "m").is_err(),
            "no such peer"
        );
        assert!(parse(&[s("no-url")], &[], &[], &[], "m").is_err());
        assert!(parse(&[s("a=u"), s("a=v")], &[], &[], &[], "m").is_err());
        assert_eq!(
            fill(
                "x --upstream {mock_addr} --url {mock_url}/v1 -p {port}",
                9,
                "http://127.0.0.1:8/"
            ),
            "x --upstream 127.0.0.1:8 --url http://127.0.0.1:8/v1 -p 9"
        );
    }
}
