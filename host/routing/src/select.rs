//! Candidate selection: the models a request names (`model`, then its
//! `models` fallbacks), each expanded to its group's deployments, filtered by
//! the request's provider preferences, and ranked by `sort`, the group's
//! strategy, live health and cache affinity. The attempt loop then tries them
//! in this order.
//!
//! Each named model is a tier: tiers keep the caller's order, and ranking
//! happens within one. A request naming plain models without preferences
//! takes a path that allocates one vector and decides nothing.

use std::sync::{Arc, OnceLock};

use rand::Rng;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::affinity::{Affinity, Conversation};
use crate::catalog::{Catalog, ModelRoute};
use crate::groups::{GroupConfig, RoutingConfig, Strategy};
use crate::health::Health;
use crate::preferences::{Preferences, Sort};
use crate::traffic::{Live, Traffic};

/// What selection reads besides the request.
pub struct Selector<'a> {
    pub catalog: &'a Catalog,
    pub config: &'a RoutingConfig,
    pub health: &'a Health,
    pub traffic: &'a Traffic,
    pub affinity: &'a Affinity,
}

/// The request as selection sees it.
pub struct Wants<'a> {
    /// `model`, then the fallbacks.
    pub names: Vec<&'a str>,
    pub preferences: Option<&'a Preferences>,
    /// Capabilities a candidate needs (with `require_parameters`).
    pub needs: &'a [&'static str],
    /// The wallet is on: a model without a price cannot serve.
    pub billing: bool,
    /// The conversation's identity, asked for only when a group with
    /// affinity has a choice to make. Gets the group id.
    pub conversation: &'a dyn Fn(&str) -> Option<Conversation>,
}

/// The candidates, in the order to try them, and why.
pub struct Selection {
    pub candidates: Vec<Arc<ModelRoute>>,
    /// `None` when nothing was chosen: plain models, no preferences.
    pub decision: Option<Decision>,
}

/// Why selection refused a request before any upstream call.
#[derive(Debug)]
pub enum Refusal {
    /// The name at `index` (0 for `model`) is neither a model nor a group.
    Unknown { index: usize },
    /// The model named at `index` has no price and the wallet is on.
    Unpriced { index: usize, reason: String },
    /// Preferences (or prices) excluded every candidate; each with why.
    NoneEligible { excluded: Vec<(String, String)> },
}

/// The routing decision, shown as `service.route` and kept in the request log.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    pub strategy: &'static str,
    pub group: Option<String>,
    pub considered: usize,
    pub order: Vec<String>,
    pub excluded: Vec<(String, String)>,
    pub reason: String,
    /// The conversation affinity applied to, so the serving deployment can be
    /// remembered for its next turn.
    pub conversation: Option<Conversation>,
    /// [`view`](Self::view) as JSON text, written the first time it is asked
    /// for: the request log and the answer both show it.
    json: OnceLock<Box<RawValue>>,
}

impl Decision {
    /// What the answer's `service.route` and the request log's `detail.route`
    /// show.
    pub fn view(&self) -> DecisionView<'_> {
        DecisionView {
            considered: self.considered,
            conversation: self.conversation.as_ref().map(|c| c.source.name()),
            excluded: self
                .excluded
                .iter()
                .map(|(model, reason)| Excluded { model, reason })
                .collect(),
            group: self.group.as_deref(),
            order: &self.order,
            reason: &self.reason,
            strategy: self.strategy,
        }
    }

    /// [`view`](Self::view) as JSON text, written once per decision: the
    /// request log keeps it and the answer's `service.route` shows it. A
    /// decision is final once selection returns it (it is shared behind an
    /// `Arc` from then on), so the text cannot go stale.
    pub fn json(&self) -> &RawValue {
        self.json
            .get_or_init(|| serde_json::value::to_raw_value(&self.view()).expect("a decision serializes"))
    }

    /// [`view`](Self::view) as a JSON value, built directly: through serde's
    /// value serializer it cost a routed request thousands of instructions.
    pub fn to_json(&self) -> Value {
        let mut route = Map::new();
        route.insert("considered".into(), self.considered.into());
        if let Some(conversation) = &self.conversation {
            route.insert("conversation".into(), conversation.source.name().into());
        }
        if !self.excluded.is_empty() {
            let excluded = self.excluded.iter().map(|(model, reason)| {
                let mut entry = Map::new();
                entry.insert("model".into(), model.as_str().into());
                entry.insert("reason".into(), reason.as_str().into());
                Value::Object(entry)
            });
            route.insert("excluded".into(), excluded.collect());
        }
        if let Some(group) = &self.group {
            route.insert("group".into(), group.as_str().into());
        }
        route.insert(
            "order".into(),
            self.order.iter().map(|id| Value::from(id.as_str())).collect(),
        );
        route.insert("reason".into(), self.reason.as_str().into());
        route.insert("strategy".into(), self.strategy.into());
        Value::Object(route)
    }
}

/// A [`Decision`] as JSON, serialized straight from the decision (the
/// request log writes it with every routed request). Fields in alphabetical
/// order, as a JSON object value lists them.
#[derive(serde::Serialize)]
pub struct DecisionView<'a> {
    considered: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    excluded: Vec<Excluded<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    order: &'a [String],
    reason: &'a str,
    strategy: &'static str,
}

#[derive(serde::Serialize)]
struct Excluded<'a> {
    model: &'a str,
    reason: &'a str,
}

/// A candidate within a tier.
#[derive(Clone, Copy)]
struct Member<'c> {
    route: &'c Arc<ModelRoute>,
    weight: u32,
    live: Live,
    /// Held back now: breaker open, rate-limited, or its minute's rpm/tpm used.
    held: bool,
}

impl Selector<'_> {
    pub fn select(&self, wants: &Wants<'_>) -> Result<Selection, Refusal> {
        let plain = wants.preferences.is_none()
            && (self.config.groups.is_empty() || wants.names.iter().all(|n| !self.config.groups.contains_key(*n)));
        if plain {
            return self.plain(wants).map(|candidates| Selection {
                candidates,
                decision: None,
            });
        }
        let default = Preferences {
            allow_fallbacks: true,
            ..Preferences::default()
        };
        let prefs = wants.preferences.unwrap_or(&default);
        let mut decision = Decision::default();
        let mut candidates: Vec<Arc<ModelRoute>> = Vec::new();
        for (index, name) in wants.names.iter().enumerate() {
            let group = self.config.groups.get(*name);
            let members = self.members(*name, index, group, wants, prefs, &mut decision.excluded)?;
            decision.considered += members.len();
            let ranked = self.rank(name, group, members, wants, prefs, index == 0, &mut decision);
            for route in ranked {
                if !candidates.iter().any(|c| Arc::ptr_eq(c, route)) {
                    candidates.push(route.clone());
                }
            }
        }
        if !prefs.allow_fallbacks && !candidates.is_empty() {
            let named = |route: &Arc<ModelRoute>| prefs.rank(&route.provider.id, &route.id) < prefs.order.len();
            let keep = if prefs.order.is_empty() {
                1
            } else {
                candidates.iter().filter(|r| named(r)).count().max(1)
            };
            for dropped in candidates.drain(keep..) {
                decision
                    .excluded
                    .push((dropped.id.clone(), "provider.allow_fallbacks is false".into()));
            }
        }
        if candidates.is_empty() {
            return Err(Refusal::NoneEligible {
                excluded: decision.excluded,
            });
        }
        decision.order = candidates.iter().map(|r| r.id.clone()).collect();
        Ok(Selection {
            candidates,
            decision: Some(decision),
        })
    }

    /// Plain models, no preferences: each resolved, in the caller's order.
    fn plain(&self, wants: &Wants<'_>) -> Result<Vec<Arc<ModelRoute>>, Refusal> {
        let mut candidates: Vec<Arc<ModelRoute>> = Vec::with_capacity(wants.names.len());
        for (index, name) in wants.names.iter().enumerate() {
            let route = self.named(name, index, wants.billing)?;
            if !candidates.iter().any(|c| Arc::ptr_eq(c, route)) {
                candidates.push(route.clone());
            }
        }
        Ok(candidates)
    }

    fn named(&self, name: &str, index: usize, billing: bool) -> Result<&Arc<ModelRoute>, Refusal> {
        let route = self.catalog.resolve(name).ok_or(Refusal::Unknown { index })?;
        if billing && let Some(reason) = route.unpriced_reason() {
            return Err(Refusal::Unpriced { index, reason });
        }
        Ok(route)
    }

    /// A tier's candidates that the preferences and prices admit; the rest
    /// go to `excluded` with the reason.
    fn members(
        &self,
        name: &str,
        index: usize,
        group: Option<&GroupConfig>,
        wants: &Wants<'_>,
        prefs: &Preferences,
        excluded: &mut Vec<(String, String)>,
    ) -> Result<Vec<Member<'_>>, Refusal> {
        let deployments: Vec<(&Arc<ModelRoute>, u32, Option<u32>, Option<u64>)> = match group {
            None => vec![(self.named(name, index, wants.billing)?, 1, None, None)],
            Some(group) => group
                .deployments
                .iter()
                .filter_map(|d| match self.catalog.resolve(&d.model) {
                    Some(route) => Some((route, d.weight, d.rpm, d.tpm)),
                    None => {
                        excluded.push((d.model.clone(), "no longer in the catalog".into()));
                        None
                    }
                })
                .collect(),
        };
        let mut members = Vec::with_capacity(deployments.len());
        for (route, weight, rpm, tpm) in deployments {
            if let Some(reason) = self.exclusion(route, wants, prefs) {
                excluded.push((route.id.clone(), reason));
                continue;
            }
            let traffic = self.traffic.route(&route.id);
            let live = traffic.live();
            let held = self.health.is_open(&route.id) || live.recently_rate_limited || !traffic.within(rpm, tpm);
            members.push(Member {
                route,
                weight,
                live,
                held,
            });
        }
        Ok(members)
    }

    /// Why the preferences, the request's needs or the wallet rule a route out.
    fn exclusion(&self, route: &ModelRoute, wants: &Wants<'_>, prefs: &Preferences) -> Option<String> {
        let provider = &route.provider.id;
        if !prefs.admits(provider, &route.id) {
            return Some(match &prefs.only {
                Some(_) if !prefs.ignore.iter().any(|n| n == provider || *n == route.id) => {
                    "not in provider.only".into()
                }
                _ => "in provider.ignore".into(),
            });
        }
        if wants.billing && route.unpriced_reason().is_some() {
            return Some("no price".into());
        }
        let max = &prefs.max_price;
        let price = &route.price;
        let over = [
            ("prompt", max.prompt.is_some_and(|m| price.input > m)),
            ("completion", max.completion.is_some_and(|m| price.output > m)),
            ("request", max.request.is_some_and(|m| price.per_request > m)),
        ];
        if let Some((what, _)) = over.iter().find(|(_, over)| *over) {
            return Some(format!("its {what} price is above provider.max_price.{what}"));
        }
        // A provider whose capabilities nobody listed (one added only in
        // config) is not ruled out on a guess.
        let known = !route.capabilities.is_empty();
        if let Some(missing) = wants.needs.iter().find(|flag| known && !route.has_capability(flag)) {
            return Some(format!("provider.require_parameters: it does not support {missing}"));
        }
        None
    }

    /// One tier in the order to try it: ready members before held ones;
    /// among the ready, `provider.order` first, then `sort` (else the group's
    /// strategy), with affinity choosing among equals.
    #[allow(clippy::too_many_arguments)]
    fn rank<'c>(
        &self,
        name: &str,
        group: Option<&GroupConfig>,
        members: Vec<Member<'c>>,
        wants: &Wants<'_>,
        prefs: &Preferences,
        first_tier: bool,
        decision: &mut Decision,
    ) -> Vec<&'c Arc<ModelRoute>> {
        let strategy = group.map_or(Strategy::Ordered, |g| g.strategy);
        let (mut ready, held): (Vec<Member<'c>>, Vec<Member<'c>>) = members.into_iter().partition(|m| !m.held);
        let mut reason = match (prefs.sort, strategy) {
            (Some(sort), _) => by_sort(&mut ready, sort),
            (None, Strategy::Ordered) => "first listed".to_string(),
            (None, Strategy::Weighted) => weighted(&mut ready),
            (None, Strategy::LeastLatency) => by_sort(&mut ready, Sort::Latency),
            (None, Strategy::LowestCost) => by_sort(&mut ready, Sort::Price),
            (None, Strategy::PowerOfTwoChoices) => two_choices(&mut ready),
        };
        if !prefs.order.is_empty() {
            // Stable: the sort or strategy still orders within each position.
            ready.sort_by_key(|m| prefs.rank(&m.route.provider.id, &m.route.id));
            if ready
                .first()
                .is_some_and(|m| prefs.rank(&m.route.provider.id, &m.route.id) < prefs.order.len())
            {
                reason = format!("named first in provider.order; {reason}");
            }
        }
        let sticky = matches!(prefs.sort, None | Some(Sort::Price))
            && !matches!(strategy, Strategy::Ordered | Strategy::LeastLatency);
        if group.is_some_and(|g| g.affinity && sticky && ready.len() > 1)
            && let Some(conversation) = (wants.conversation)(name)
        {
            if let Some(why) = self.stick(&mut ready, &conversation, prefs, strategy) {
                reason = why;
                if first_tier {
                    decision.conversation = Some(conversation);
                }
            }
        }
        if ready.is_empty() && !held.is_empty() {
            reason =
                "every candidate is held back (breaker open, rate-limited or at its rpm/tpm); tried in order".into();
        }
        if first_tier {
            decision.strategy = prefs.sort.map_or(strategy.name(), Sort::strategy);
            decision.group = group.map(|_| name.to_string());
            decision.reason = reason;
        }
        ready.into_iter().chain(held).map(|m| m.route).collect()
    }

    /// Moves the conversation's deployment to the front, chosen among the
    /// members equal to the best one (same `order` position, and same price
    /// when ranking by price): the one that served its last turn, else the
    /// rendezvous winner. `None` when the best one has no equal.
    fn stick(
        &self,
        ready: &mut [Member<'_>],
        conversation: &Conversation,
        prefs: &Preferences,
        strategy: Strategy,
    ) -> Option<String> {
        let by_price = prefs.sort == Some(Sort::Price) || strategy == Strategy::LowestCost;
        let band_of = |m: &Member<'_>| {
            (
                prefs.rank(&m.route.provider.id, &m.route.id),
                by_price.then(|| blended_price(m.route)),
            )
        };
        let best = band_of(&ready[0]);
        let band = ready.iter().take_while(|m| band_of(m) == best).count();
        if band < 2 {
            // One best candidate: nothing for affinity to choose.
            return None;
        }
        let remembered = self.affinity.last_served(conversation);
        let (index, reason) = match ready[..band]
            .iter()
            .position(|m| remembered.as_deref() == Some(m.route.id.as_str()))
        {
            Some(index) => (index, "affinity: served this conversation's last turn"),
            None => {
                let index = (0..band)
                    .max_by(|a, b| {
                        let score = |i: usize| conversation.score(&ready[i].route.id, ready[i].weight);
                        score(*a).total_cmp(&score(*b))
                    })
                    .unwrap_or(0);
                (index, "affinity: rendezvous hash of the conversation")
            }
        };
        ready[..=index].rotate_right(1);
        Some(format!("{reason} ({})", conversation.source.name()))
    }
}

/// Input and output price per token together: the measure `price` sorts by.
fn blended_price(route: &ModelRoute) -> u64 {
    route.price.input.0.saturating_add(route.price.output.0)
}

/// Orders by the measure `sort` names. A route not measured yet and idle goes
/// first, so every deployment gets measured; one not measured yet but busy
/// (its first request is under way) goes last, so a burst does not pile onto
/// an unknown.
fn by_sort(ready: &mut [Member<'_>], sort: Sort) -> String {
    let unknown = |m: &Member<'_>| {
        if m.live.in_flight == 0 {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    };
    match sort {
        Sort::Price => {
            ready.sort_by_key(|m| blended_price(m.route));
            ready
                .first()
                .map_or_else(String::new, |m| ["lowest price (", &m.route.price_label, ")"].concat())
        }
        Sort::Latency => {
            let key = |m: &Member<'_>| m.live.latency_ms.unwrap_or_else(|| unknown(m));
            ready.sort_by(|a, b| key(a).total_cmp(&key(b)));
            ready.first().map_or_else(String::new, |m| match m.live.latency_ms {
                Some(ms) => format!("lowest latency ({ms:.1} ms to the head)"),
                None => "latency not measured yet".into(),
            })
        }
        Sort::Throughput => {
            let key = |m: &Member<'_>| m.live.tokens_per_second.map_or_else(|| unknown(m), |tps| -tps);
            ready.sort_by(|a, b| key(a).total_cmp(&key(b)));
            ready
                .first()
                .map_or_else(String::new, |m| match m.live.tokens_per_second {
                    Some(tps) => format!("highest throughput ({tps:.0} tokens/s)"),
                    None => "throughput not measured yet".into(),
                })
        }
    }
}

/// A weighted random order: each draw picks among the rest in proportion to
/// weight (Efraimidis–Spirakis keys, sorted).
fn weighted(ready: &mut [Member<'_>]) -> String {
    if ready.len() < 2 {
        return "the only candidate".into();
    }
    let mut rng = rand::rng();
    let mut keyed: Vec<(f64, usize)> = ready
        .iter()
        .enumerate()
        .map(|(i, m)| (rng.random::<f64>().powf(1.0 / f64::from(m.weight)), i))
        .collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
    reorder(ready, keyed.iter().map(|(_, i)| *i));
    let total: u32 = ready.iter().map(|m| m.weight).sum();
    format!("weighted draw (weight {} of {total})", ready[0].weight)
}

/// Two drawn by weight; the one with fewer requests in flight first, then
/// the rest by load.
fn two_choices(ready: &mut [Member<'_>]) -> String {
    if ready.len() < 2 {
        return "the only candidate".into();
    }
    weighted(ready);
    let (a, b) = (ready[0].live.in_flight, ready[1].live.in_flight);
    if b < a {
        ready.swap(0, 1);
    }
    ready[1..].sort_by_key(|m| m.live.in_flight);
    format!("fewer in flight of two drawn ({} vs {})", a.min(b), a.max(b))
}

fn reorder(ready: &mut [Member<'_>], order: impl Iterator<Item = usize>) {
    let reordered: Vec<Member<'_>> = order.map(|i| ready[i]).collect();
    ready.copy_from_slice(&reordered);
}

#[cfg(test)]
mod tests;
