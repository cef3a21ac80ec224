//! Provider health: a circuit breaker per provider. After `failure_threshold`
//! consecutive upstream failures (429, 5xx, connect errors, timeouts) the
//! breaker opens and the provider is skipped without a call until the cooldown
//! ends; then one trial request is let through (half-open): success closes the
//! breaker, failure opens it again. A 429 with `Retry-After` opens it for at
//! least that long.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive failures that open a provider's breaker; 0 disables breakers
    /// (and `Retry-After` tracking) altogether.
    pub failure_threshold: u32,
    /// How long an open breaker skips the provider before one trial request.
    pub cooldown_ms: u64,
    /// Longest `Retry-After` honoured, so one bad header cannot park a provider for days.
    pub max_retry_after_secs: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cooldown_ms: 30_000,
            max_retry_after_secs: 300,
        }
    }
}

#[derive(Default)]
struct Breaker {
    consecutive_failures: u32,
    open_until: Option<Instant>,
    trial_in_flight: bool,
}

pub struct Health {
    config: BreakerConfig,
    breakers: Mutex<HashMap<String, Breaker>>,
}

impl Health {
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            breakers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a request may go to `provider` now. While open, no; once the
    /// cooldown has passed, exactly one trial at a time.
    pub fn admit(&self, provider: &str) -> bool {
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        let Some(breaker) = breakers.get_mut(provider) else {
            return true;
        };
        match breaker.open_until {
            None => true,
            Some(until) if Instant::now() < until => false,
            Some(_) if breaker.trial_in_flight => false,
            Some(_) => {
                breaker.trial_in_flight = true;
                true
            }
        }
    }

    pub fn success(&self, provider: &str) {
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        if let Some(breaker) = breakers.get_mut(provider) {
            *breaker = Breaker::default();
        }
    }

    pub fn failure(&self, provider: &str, retry_after: Option<Duration>) {
        if self.config.failure_threshold == 0 {
            return;
        }
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        let breaker = breakers.entry(provider.to_string()).or_default();
        breaker.consecutive_failures = breaker.consecutive_failures.saturating_add(1);
        let now = Instant::now();
        let mut open_for = None;
        let threshold_reached = breaker.consecutive_failures >= self.config.failure_threshold;
        if threshold_reached || breaker.trial_in_flight {
            open_for = Some(Duration::from_millis(self.config.cooldown_ms));
        }
        if let Some(retry_after) = retry_after {
            let capped = retry_after.min(Duration::from_secs(self.config.max_retry_after_secs));
            open_for = Some(open_for.map_or(capped, |d| d.max(capped)));
        }
        if let Some(duration) = open_for {
            breaker.open_until = Some(now + duration);
            breaker.trial_in_flight = false;
        }
    }

    /// For listings: is the provider being skipped right now?
    pub fn is_open(&self, provider: &str) -> bool {
        let breakers = self.breakers.lock().expect("health lock poisoned");
        breakers
            .get(provider)
            .and_then(|b| b.open_until)
            .is_some_and(|until| Instant::now() < until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(threshold: u32, cooldown_ms: u64) -> Health {
        Health::new(BreakerConfig {
            failure_threshold: threshold,
            cooldown_ms,
            max_retry_after_secs: 1,
        })
    }

    #[test]
    fn opens_after_consecutive_failures_and_half_opens_after_the_cooldown() {
        let h = health(2, 30);
        h.failure("p", None);
        assert!(h.admit("p"));
        h.success("p");
        h.failure("p", None);
        assert!(h.admit("p"), "a success resets the count");
        h.failure("p", None);
        assert!(!h.admit("p") && h.is_open("p"));
        std::thread::sleep(Duration::from_millis(40));
        assert!(h.admit("p"), "one trial after the cooldown");
        assert!(!h.admit("p"), "only one trial at a time");
        h.failure("p", None);
        assert!(!h.admit("p"), "a failed trial reopens");
        std::thread::sleep(Duration::from_millis(40));
        assert!(h.admit("p"));
        h.success("p");
        assert!(h.admit("p") && h.admit("p") && !h.is_open("p"));
    }

    #[test]
    fn retry_after_opens_at_once_and_is_capped() {
        let h = health(5, 10);
        h.failure("p", Some(Duration::from_secs(3600)));
        assert!(!h.admit("p"));
        assert!(h.admit("q"), "other providers are unaffected");
        let off = health(0, 10);
        off.failure("p", Some(Duration::from_secs(1)));
        assert!(off.admit("p"), "threshold 0 disables breakers");
    }
}
