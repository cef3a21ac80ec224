//! Model health: a circuit breaker per (provider, model), keyed by the route id
//! `provider/model`, because providers fail per model: one model's outage or
//! rate limit says nothing about its siblings.
//!
//! - After `failure_threshold` consecutive failures (5xx, overload, connect
//!   errors, timeouts, adapter faults) the breaker opens and the model is
//!   skipped without a call until the cooldown ends; then one trial request is
//!   let through (half-open): success closes the breaker, failure reopens it.
//! - A 429 is not ill health: the model is held back for its `Retry-After`
//!   (capped), and nothing is counted against it.
//! - Every admission is a [`Permit`]. A trial permit that is dropped without an
//!   outcome (a caller error, a cancelled request) gives the trial back, so a
//!   breaker can never wedge half-open.
//! - When every candidate of a request is open, the caller asks for
//!   [`Health::longest_open`] and forces that one: a request is never failed
//!   without a single call just because everything looked unhealthy.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive failures that open a model's breaker; 0 disables breakers
    /// (and `Retry-After` tracking) altogether.
    pub failure_threshold: u32,
    /// How long an open breaker skips the model before one trial request.
    pub cooldown_ms: u64,
    /// Longest `Retry-After` honoured, so one bad header cannot park a model for days.
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
    /// When the breaker last opened (kept while it stays open).
    opened_at: Option<Instant>,
    open_until: Option<Instant>,
    trial_in_flight: bool,
    rate_limited_until: Option<Instant>,
}

/// Why a model is not admitted now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// The breaker is open (or its one trial is under way) since this instant.
    Open { since: Instant },
    /// The upstream asked us to wait this much longer.
    RateLimited { remaining: Duration },
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

    /// Whether a request may go to `model` now. While open, no; once the
    /// cooldown has passed, exactly one trial at a time.
    pub fn admit<'h>(&'h self, model: &str) -> Result<Permit<'h>, Held> {
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        let Some(breaker) = breakers.get_mut(model) else {
            return Ok(self.permit(model, false));
        };
        let now = Instant::now();
        if let Some(until) = breaker.rate_limited_until {
            if now < until {
                return Err(Held::RateLimited { remaining: until - now });
            }
            breaker.rate_limited_until = None;
        }
        let Some(until) = breaker.open_until else {
            return Ok(self.permit(model, false));
        };
        let since = breaker.opened_at.unwrap_or(now);
        if now < until || breaker.trial_in_flight {
            return Err(Held::Open { since });
        }
        breaker.trial_in_flight = true;
        Ok(self.permit(model, true))
    }

    /// A permit for `model` whatever its breaker says: the request's last
    /// resort when every candidate is open. Its outcome counts like a trial's.
    pub fn force<'h>(&'h self, model: &str) -> Permit<'h> {
        self.permit(model, false)
    }

    /// Of `models`, the one whose breaker has been open longest, if every one
    /// of them is open (rate-limited models are not forced: they asked us to wait).
    pub fn longest_open<'m>(&self, models: impl IntoIterator<Item = &'m str>) -> Option<&'m str> {
        let breakers = self.breakers.lock().expect("health lock poisoned");
        let now = Instant::now();
        let mut oldest: Option<(&str, Instant)> = None;
        for model in models {
            let breaker = breakers.get(model)?;
            if breaker.rate_limited_until.is_some_and(|until| now < until) {
                return None;
            }
            let open = breaker.open_until.is_some_and(|until| now < until) || breaker.trial_in_flight;
            let since = breaker.opened_at.filter(|_| open)?;
            if oldest.is_none_or(|(_, s)| since < s) {
                oldest = Some((model, since));
            }
        }
        oldest.map(|(model, _)| model)
    }

    /// For listings: `closed`, `open`, `half_open` (the cooldown is over and
    /// the next request is a trial) or `rate_limited`.
    pub fn state(&self, model: &str) -> &'static str {
        let breakers = self.breakers.lock().expect("health lock poisoned");
        let now = Instant::now();
        match breakers.get(model) {
            Some(b) if b.rate_limited_until.is_some_and(|until| now < until) => "rate_limited",
            Some(b) if b.open_until.is_some_and(|until| now < until) => "open",
            Some(b) if b.open_until.is_some() => "half_open",
            _ => "closed",
        }
    }

    /// For listings: is the model being skipped right now?
    pub fn is_open(&self, model: &str) -> bool {
        let breakers = self.breakers.lock().expect("health lock poisoned");
        let now = Instant::now();
        breakers.get(model).is_some_and(|b| {
            b.open_until.is_some_and(|until| now < until) || b.rate_limited_until.is_some_and(|until| now < until)
        })
    }

    /// A failure after the model had answered (a stream or body that broke),
    /// when its permit is already spent.
    pub fn failed_after_answer(&self, model: &str) {
        self.failed(model);
    }

    fn permit<'h>(&'h self, model: &str, trial: bool) -> Permit<'h> {
        Permit {
            health: self,
            model: model.to_string(),
            trial,
        }
    }

    fn succeeded(&self, model: &str) {
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        if let Some(breaker) = breakers.get_mut(model) {
            let rate_limited_until = breaker.rate_limited_until;
            *breaker = Breaker {
                rate_limited_until,
                ..Breaker::default()
            };
        }
    }

    fn failed(&self, model: &str) {
        if self.config.failure_threshold == 0 {
            return;
        }
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        let breaker = breakers.entry(model.to_string()).or_default();
        breaker.consecutive_failures = breaker.consecutive_failures.saturating_add(1);
        let was_open = breaker.open_until.is_some();
        if breaker.consecutive_failures >= self.config.failure_threshold || was_open {
            let now = Instant::now();
            breaker.open_until = Some(now + Duration::from_millis(self.config.cooldown_ms));
            if !was_open {
                breaker.opened_at = Some(now);
            }
        }
        breaker.trial_in_flight = false;
    }

    fn rate_limited(&self, model: &str, retry_after: Option<Duration>) {
        let Some(retry_after) = retry_after else { return };
        if self.config.failure_threshold == 0 {
            return;
        }
        let capped = retry_after.min(Duration::from_secs(self.config.max_retry_after_secs));
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        let breaker = breakers.entry(model.to_string()).or_default();
        breaker.rate_limited_until = Some(Instant::now() + capped);
    }

    fn give_back_trial(&self, model: &str) {
        let mut breakers = self.breakers.lock().expect("health lock poisoned");
        if let Some(breaker) = breakers.get_mut(model) {
            breaker.trial_in_flight = false;
        }
    }
}

/// Leave to call one model. Report the outcome with [`Permit::succeeded`],
/// [`Permit::failed`] or [`Permit::rate_limited`]; dropping it instead (the
/// request failed for its own reasons, or was cancelled) counts nothing and
/// gives a half-open trial back.
pub struct Permit<'h> {
    health: &'h Health,
    model: String,
    trial: bool,
}

impl Permit<'_> {
    pub fn succeeded(mut self) {
        self.trial = false;
        self.health.succeeded(&self.model);
    }

    pub fn failed(mut self) {
        self.trial = false;
        self.health.failed(&self.model);
    }

    pub fn rate_limited(self, retry_after: Option<Duration>) {
        self.health.rate_limited(&self.model, retry_after);
        // Dropped here: a trial that was rate-limited is given back.
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.trial {
            self.health.give_back_trial(&self.model);
        }
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

    fn fail(h: &Health, model: &str) {
        h.admit(model).map(Permit::failed).ok();
    }

    #[test]
    fn opens_after_consecutive_failures_and_half_opens_after_the_cooldown() {
        let h = health(2, 30);
        fail(&h, "p/m");
        h.admit("p/m").unwrap().succeeded();
        fail(&h, "p/m");
        let permit = h.admit("p/m").expect("a success resets the count");
        permit.failed();
        assert!(matches!(h.admit("p/m"), Err(Held::Open { .. })) && h.is_open("p/m"));
        assert_eq!(h.state("p/m"), "open");
        assert_eq!(h.state("p/other"), "closed");
        assert!(
            h.admit("p/other").is_ok(),
            "other models of the provider are unaffected"
        );
        std::thread::sleep(Duration::from_millis(40));
        let trial = h.admit("p/m").expect("one trial after the cooldown");
        assert!(h.admit("p/m").is_err(), "only one trial at a time");
        trial.failed();
        assert!(h.admit("p/m").is_err(), "a failed trial reopens");
        std::thread::sleep(Duration::from_millis(40));
        h.admit("p/m").unwrap().succeeded();
        assert!(h.admit("p/m").is_ok() && h.admit("p/m").is_ok() && !h.is_open("p/m"));
    }

    #[test]
    fn a_trial_dropped_without_an_outcome_is_given_back() {
        let h = health(1, 10);
        fail(&h, "p/m");
        std::thread::sleep(Duration::from_millis(20));
        let trial = h.admit("p/m").unwrap();
        assert!(h.admit("p/m").is_err());
        drop(trial); // a caller error, or the request was cancelled
        let again = h.admit("p/m").expect("the trial is free again");
        again.succeeded();
        assert!(!h.is_open("p/m"));
    }

    #[test]
    fn rate_limits_hold_one_model_back_without_counting_as_failures() {
        let h = health(1, 10_000);
        h.admit("p/m").unwrap().rate_limited(Some(Duration::from_secs(3600)));
        match h.admit("p/m") {
            Err(Held::RateLimited { remaining }) => assert!(remaining <= Duration::from_secs(1), "capped"),
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert!(h.admit("p/other").is_ok(), "only that model is held");
        let h = health(1, 10_000);
        h.admit("p/m").unwrap().rate_limited(Some(Duration::from_millis(20)));
        std::thread::sleep(Duration::from_millis(30));
        h.admit("p/m").expect("the hold ends").succeeded();
        assert!(!h.is_open("p/m"), "a 429 never opened the breaker");
        let off = health(0, 10);
        off.admit("p/m").unwrap().rate_limited(Some(Duration::from_secs(1)));
        fail(&off, "p/m");
        assert!(off.admit("p/m").is_ok(), "threshold 0 disables breakers");
    }

    #[test]
    fn the_longest_open_candidate_is_forced_when_all_are_open() {
        let h = health(1, 10_000);
        assert_eq!(h.longest_open(["a/x", "b/y"]), None, "nothing is open");
        fail(&h, "a/x");
        assert_eq!(h.longest_open(["a/x", "b/y"]), None, "b/y is healthy");
        std::thread::sleep(Duration::from_millis(2));
        fail(&h, "b/y");
        assert_eq!(h.longest_open(["b/y", "a/x"]), Some("a/x"));
        h.force("a/x").succeeded();
        assert!(h.admit("a/x").is_ok(), "a forced success closes the breaker");
        h.admit("c/z").unwrap().rate_limited(Some(Duration::from_secs(1)));
        assert_eq!(
            h.longest_open(["b/y", "c/z"]),
            None,
            "rate-limited models are not forced"
        );
    }
}
