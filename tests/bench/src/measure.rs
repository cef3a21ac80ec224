//! One row's measurement: the direct mock and the path under test, level by
//! level (interleaved, so the machine's drift hits both), then streaming.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use reqwest::Client;

use crate::report::{Level, Stream};
use crate::target::Target;
use crate::{load, stream};

pub struct Plan {
    pub concurrency: Vec<usize>,
    pub duration: Duration,
    pub warmup: Duration,
    pub max_requests: usize,
    pub stream_requests: usize,
    pub stream_words: usize,
    pub stream_budget: Duration,
}

impl Plan {
    fn max_concurrency(&self) -> usize {
        self.concurrency.iter().copied().max().unwrap_or(1)
    }
}

/// Checks both paths, warms them up, then measures. Only the summaries are
/// kept: each level's latency vectors are dropped once summarized.
pub async fn row(
    client: &Client,
    plan: &Plan,
    direct: &Arc<Target>,
    subject: &Arc<Target>,
) -> Result<(Vec<Level>, Stream)> {
    direct.check(client).await?;
    subject.check(client).await?;
    for t in [direct, subject] {
        load::closed_loop(client, t, plan.max_concurrency(), plan.warmup, plan.max_requests).await;
    }

    let mut levels = Vec::with_capacity(plan.concurrency.len());
    for &c in &plan.concurrency {
        eprintln!("bench:   concurrency {c}");
        let d = load::closed_loop(client, direct, c, plan.duration, plan.max_requests).await;
        let s = load::closed_loop(client, subject, c, plan.duration, plan.max_requests).await;
        levels.push(Level::new(c, &d, &s));
    }

    eprintln!("bench:   streaming");
    let d = stream::measure(client, direct, plan.stream_requests, plan.stream_budget).await;
    let s = stream::measure(client, subject, plan.stream_requests, plan.stream_budget).await;
    Ok((levels, Stream::new(plan.stream_words, &d, &s)))
}
