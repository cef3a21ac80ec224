//! The rows of a run: each gateway configuration, an external gateway, the
//! self-test's stand-ins, and LiteLLM; each measured beside the direct mock.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use reqwest::Client;

use crate::measure::{self, Plan};
use crate::report::{ConfigResult, LitellmInfo};
use crate::stack::{Gateway, Mock};
use crate::target::Target;
use crate::{Args, litellm, procs};

/// Each configuration in turn: a fresh gateway, its row, its peak RSS, stop.
pub async fn gateways(
    args: &Args,
    plan: &Plan,
    client: &Client,
    direct: &Arc<Target>,
    mock: &Mock,
) -> Result<Vec<ConfigResult>> {
    let timeout = Duration::from_secs(args.startup_timeout_secs);
    let mut rows = Vec::with_capacity(args.configs.len());
    for &config in &args.configs {
        eprintln!("bench: configuration {} {:?}", config.name(), config.settings());
        let mut gateway = Gateway::start(&args.tollgate_bin, &mock.addr, config.env(), client, timeout).await?;
        let target = Arc::new(
            Target::new(
                "gateway",
                &gateway.url,
                Some(&gateway.api_key),
                &args.gateway_model,
                args.stream_words,
            )?
            .with_provider(&args.provider)?,
        );
        let measured = measure::row(client, plan, direct, &target).await;
        let peak_rss_kib = gateway.peak_rss_kib();
        let exited = gateway.exited();
        gateway.stop().await;
        let (load, stream) = measured?;
        rows.push(ConfigResult {
            name: config.name().into(),
            kind: "gateway",
            settings: config.settings(),
            load,
            stream,
            peak_rss_kib,
            exited,
        });
    }
    Ok(rows)
}

pub async fn external(
    args: &Args,
    plan: &Plan,
    client: &Client,
    direct: &Arc<Target>,
    gateway_url: &str,
) -> Result<ConfigResult> {
    let target = Arc::new(Target::new(
        "gateway",
        gateway_url,
        args.api_key.as_deref(),
        &args.gateway_model,
        args.stream_words,
    )?);
    let (load, stream) = measure::row(client, plan, direct, &target).await?;
    Ok(ConfigResult {
        name: "external".into(),
        kind: "external",
        settings: Vec::new(),
        load,
        stream,
        peak_rss_kib: args.gateway_pid.and_then(procs::peak_rss_kib),
        exited: None,
    })
}

/// The harness alone: every configuration's "gateway" is the in-process mock.
pub async fn self_test(
    args: &Args,
    plan: &Plan,
    client: &Client,
    direct: &Arc<Target>,
    mock_url: &str,
) -> Result<Vec<ConfigResult>> {
    let mut rows = Vec::new();
    for &config in &args.configs {
        eprintln!("bench: self-test row {}", config.name());
        let target = Arc::new(Target::new(
            "gateway",
            mock_url,
            Some("sk-self-test"),
            &args.gateway_model,
            args.stream_words,
        )?);
        let (load, stream) = measure::row(client, plan, direct, &target).await?;
        rows.push(ConfigResult {
            name: config.name().into(),
            kind: "self-test",
            settings: config.settings(),
            load,
            stream,
            peak_rss_kib: None,
            exited: None,
        });
    }
    Ok(rows)
}

/// Installs (or reuses) LiteLLM, measures it in front of the same mock and
/// appends its row. Any failure is reported and leaves the row out.
pub async fn litellm(
    args: &Args,
    plan: &Plan,
    client: &Client,
    direct: &Arc<Target>,
    mock_url: &str,
    rows: &mut Vec<ConfigResult>,
) -> LitellmInfo {
    let workers = args.litellm_workers;
    let info = |status: String| LitellmInfo {
        version: litellm::version(),
        workers,
        status,
    };
    let bin = match litellm::install(&args.litellm_venv, &args.litellm_python).await {
        Ok(bin) => bin,
        Err(e) => {
            eprintln!("bench: LiteLLM could not be installed; going on without its row: {e:#}");
            return info(format!("not measured: install failed: {e:#}"));
        }
    };
    eprintln!("bench: LiteLLM {} with {workers} workers", litellm::version());
    let timeout = Duration::from_secs(args.startup_timeout_secs).max(litellm::MIN_STARTUP);
    let measured = async {
        let mut proxy = litellm::Proxy::start(&bin, mock_url, workers, client, timeout).await?;
        let target = Arc::new(Target::new(
            "litellm",
            &proxy.url,
            Some(litellm::MASTER_KEY),
            litellm::MODEL,
            args.stream_words,
        )?);
        let measured = measure::row(client, plan, direct, &target).await;
        let peak_rss_kib = proxy.peak_rss_kib();
        let exited = proxy.exited();
        proxy.stop().await;
        measured.map(|m| (m, peak_rss_kib, exited))
    };
    match measured.await {
        Ok(((load, stream), peak_rss_kib, exited)) => {
            rows.push(ConfigResult {
                name: "litellm".into(),
                kind: "litellm",
                settings: vec![
                    format!("litellm[proxy]=={}", litellm::version()),
                    format!("{workers} workers"),
                ],
                load,
                stream,
                peak_rss_kib,
                exited,
            });
            info("measured".into())
        }
        Err(e) => {
            eprintln!("bench: LiteLLM failed; going on without its row: {e:#}");
            info(format!("not measured: {e:#}"))
        }
    }
}
