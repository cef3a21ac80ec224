//! The health probe (`[routing.probe]`, off by default): a one-token request
//! to each listed model (a group: each deployment) every `interval_secs`, so
//! `/v1/models` health, the breakers and latency ranking know a model before
//! the first caller's request, and notice when a quiet one recovers.
//!
//! A probe is the gateway's own request: it goes through the model's adapter
//! and its breaker like an attempt, but no wallet is held or billed and no
//! request-log row is written. The provider charges the operator for it
//! (one output token and a few prompt tokens each time).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate_plugin_host::CallContext;
use tollgate_routing::catalog::ModelRoute;
use tollgate_routing::groups::ProbeConfig;

use super::DataPlane;
use super::attempts::{Opening, send};

const PROBE_BODY: &[u8] = br#"{"model":"probe","messages":[{"role":"user","content":"ping"}],"max_tokens":1}"#;

/// Starts the probe loop when the configuration lists models to probe.
pub fn start(data: &Arc<DataPlane>) {
    let ProbeConfig { interval_secs, models } = data.groups.probe.clone();
    if interval_secs == 0 || models.is_empty() {
        return;
    }
    let data = Arc::downgrade(data);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_secs(interval_secs));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            // The loop ends with the gateway.
            let Some(data) = data.upgrade() else { return };
            for route in targets(&data, &models) {
                probe(&data, &route).await;
            }
        }
    });
}

/// The routes `models` names now: models as they are, groups as their deployments.
fn targets(data: &DataPlane, models: &[String]) -> Vec<Arc<ModelRoute>> {
    let routes = data.routes();
    let mut targets: Vec<Arc<ModelRoute>> = Vec::new();
    for name in models {
        let names: Vec<&str> = match data.groups.groups.get(name) {
            Some(group) => group.deployments.iter().map(|d| d.model.as_str()).collect(),
            None => vec![name.as_str()],
        };
        for name in names {
            if let Some(route) = routes.catalog.resolve(name)
                && !targets.iter().any(|t| Arc::ptr_eq(t, route))
            {
                targets.push(route.clone());
            }
        }
    }
    targets
}

async fn probe(data: &DataPlane, route: &Arc<ModelRoute>) {
    // A model its breaker holds back is left alone: its half-open trial
    // belongs to the next real request, or to the next probe after the cooldown.
    let Ok(permit) = data.health.admit(&route.id) else {
        return;
    };
    let ctx = CallContext {
        request_id: format!("probe-{}", route.id),
        upstream_model: route.upstream_model.clone(),
        base_url: route.provider.base_url.clone(),
        stream: false,
        attempt: 0,
        max_output_tokens: Some(1),
        continuation: None,
    };
    let started = Instant::now();
    let mut flight = data.traffic.route(&route.id).start();
    match send(data, route, &ctx, Opening::Chat(PROBE_BODY, None)).await {
        Ok((_session, response)) => {
            permit.succeeded();
            flight.answered(started.elapsed(), false);
            // The answer's body is not needed: reading it only frees the connection.
            let _ = response.bytes().await;
            flight.finished(0, 0);
        }
        Err((error, _)) => {
            tracing::info!(model = %route.id, code = error.code, "health probe failed");
            if error.is_health_failure() {
                flight.failed();
                permit.failed();
            }
        }
    }
}
