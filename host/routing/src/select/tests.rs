//! Selection over a group of three providers of one model at different
//! prices: filters, sorts, strategies, held deployments and affinity.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::affinity::KeySource;
use crate::catalog::{ModelConfig, ProviderConfig};
use crate::groups::DeploymentConfig;
use crate::health::BreakerConfig;

/// Three providers of one model at different prices, and a group over them.
fn world(strategy: Strategy) -> (Catalog, RoutingConfig) {
    let mut providers = BTreeMap::new();
    for (id, input, output) in [("a", "3", "9"), ("b", "1", "2"), ("c", "2", "4")] {
        providers.insert(
            id.to_string(),
            ProviderConfig {
                base_url: Some(format!("http://127.0.0.1:9/{id}/v1")),
                api_key: Some(tollgate_core::secret::Secret::new("k")),
                models: vec![ModelConfig {
                    input_price_per_mtok: Some(input.into()),
                    output_price_per_mtok: Some(output.into()),
                    ..ModelConfig::named("m")
                }],
                ..Default::default()
            },
        );
    }
    let catalog = Catalog::build(&providers, &|_| None).unwrap();
    let mut config = RoutingConfig::default();
    config.groups.insert(
        "m".into(),
        GroupConfig {
            strategy,
            affinity: true,
            deployments: ["a/m", "b/m", "c/m"]
                .into_iter()
                .map(|model| DeploymentConfig {
                    model: model.into(),
                    weight: 1,
                    rpm: None,
                    tpm: None,
                })
                .collect(),
        },
    );
    config.validate(&catalog).unwrap();
    (catalog, config)
}

struct Fixture {
    catalog: Catalog,
    config: RoutingConfig,
    health: Health,
    traffic: Traffic,
    affinity: Affinity,
}

impl Fixture {
    fn new(strategy: Strategy) -> Self {
        let (catalog, config) = world(strategy);
        Fixture {
            catalog,
            config,
            health: Health::new(BreakerConfig::default()),
            traffic: Traffic::default(),
            affinity: Affinity::new(Duration::from_secs(60)),
        }
    }

    fn selector(&self) -> Selector<'_> {
        Selector {
            catalog: &self.catalog,
            config: &self.config,
            health: &self.health,
            traffic: &self.traffic,
            affinity: &self.affinity,
        }
    }

    fn select(&self, names: &[&str], prefs: Option<&str>, session: Option<&str>) -> Result<Selection, Refusal> {
        let prefs = prefs.map(|json| Preferences::parse(json).unwrap());
        let conversation = |group: &str| session.map(|s| Conversation::new(group, KeySource::Session, s.as_bytes()));
        self.selector().select(&Wants {
            names: names.to_vec(),
            preferences: prefs.as_ref(),
            needs: &[],
            billing: true,
            conversation: &conversation,
        })
    }

    fn order(&self, names: &[&str], prefs: Option<&str>) -> Vec<String> {
        let selection = self.select(names, prefs, None).unwrap();
        selection.candidates.iter().map(|r| r.id.clone()).collect()
    }
}

#[test]
fn plain_models_decide_nothing() {
    let fixture = Fixture::new(Strategy::Ordered);
    let selection = fixture.select(&["a/m", "b/m", "a/m"], None, None).unwrap();
    assert!(selection.decision.is_none());
    assert_eq!(selection.candidates.len(), 2, "duplicates are tried once");
    assert!(matches!(
        fixture.select(&["a/m", "zz/m"], None, None),
        Err(Refusal::Unknown { index: 1 })
    ));
}

#[test]
fn sort_only_ignore_and_order() {
    let fixture = Fixture::new(Strategy::Ordered);
    assert_eq!(fixture.order(&["m"], None), ["a/m", "b/m", "c/m"]);
    assert_eq!(
        fixture.order(&["m"], Some(r#"{"sort":"price"}"#)),
        ["b/m", "c/m", "a/m"]
    );
    assert_eq!(fixture.order(&["m"], Some(r#"{"only":["a","c"]}"#)), ["a/m", "c/m"]);
    assert_eq!(
        fixture.order(&["m"], Some(r#"{"ignore":["a"],"sort":"price"}"#)),
        ["b/m", "c/m"]
    );
    assert_eq!(
        fixture.order(&["m"], Some(r#"{"order":["c"],"sort":"price"}"#)),
        ["c/m", "b/m", "a/m"]
    );
    assert_eq!(
        fixture.order(&["m"], Some(r#"{"order":["c"],"allow_fallbacks":false}"#)),
        ["c/m"]
    );
    assert_eq!(
        fixture.order(&["m"], Some(r#"{"sort":"price","allow_fallbacks":false}"#)),
        ["b/m"]
    );
    // Preferences apply to plain models too, and to every tier.
    assert_eq!(
        fixture.order(&["a/m", "m"], Some(r#"{"sort":"price"}"#)),
        ["a/m", "b/m", "c/m"]
    );
    let decision = fixture
        .select(&["m"], Some(r#"{"sort":"price","ignore":["a"]}"#), None)
        .unwrap()
        .decision
        .unwrap();
    assert_eq!(decision.strategy, "sort:price");
    assert_eq!(decision.group.as_deref(), Some("m"));
    assert_eq!(
        decision.excluded,
        [("a/m".to_string(), "in provider.ignore".to_string())]
    );
    assert_eq!(
        decision.reason,
        "lowest price (input 1.000000 + output 2.000000 USD/Mtok)"
    );
    // The answer's route and the request log's are the same JSON.
    assert_eq!(decision.to_json(), serde_json::to_value(decision.view()).unwrap());
    let mut with_conversation = decision.clone();
    with_conversation.conversation = Some(Conversation::new("m", KeySource::Session, b"s"));
    with_conversation.excluded.clear();
    assert_eq!(
        with_conversation.to_json(),
        serde_json::to_value(with_conversation.view()).unwrap()
    );
}

#[test]
fn max_price_below_every_candidate_refuses() {
    let fixture = Fixture::new(Strategy::Weighted);
    match fixture.select(&["m"], Some(r#"{"max_price":{"prompt":0.5}}"#), None) {
        Err(Refusal::NoneEligible { excluded }) => assert_eq!(excluded.len(), 3, "{excluded:?}"),
        other => panic!("{:?}", other.map(|s| s.candidates)),
    }
    assert_eq!(
        fixture.order(&["m"], Some(r#"{"max_price":{"prompt":"1","completion":2}}"#)),
        ["b/m"]
    );
}

#[test]
fn held_deployments_go_last_and_latency_is_measured_first() {
    let fixture = Fixture::new(Strategy::LeastLatency);
    // Nothing measured: idle unknowns come first, in the listed order.
    assert_eq!(fixture.order(&["m"], None)[0], "a/m");
    for (id, ms) in [("a/m", 50), ("b/m", 5), ("c/m", 20)] {
        let mut flight = fixture.traffic.route(id).start();
        flight.answered(Duration::from_millis(ms), false);
        flight.finished(10, 5);
    }
    assert_eq!(fixture.order(&["m"], None), ["b/m", "c/m", "a/m"]);
    for _ in 0..5 {
        fixture.health.admit("b/m").unwrap().failed();
    }
    assert_eq!(
        fixture.order(&["m"], None),
        ["c/m", "a/m", "b/m"],
        "an open breaker goes last"
    );
}

#[test]
fn weighted_draws_follow_the_weights() {
    let mut fixture = Fixture::new(Strategy::Weighted);
    fixture.config.groups.get_mut("m").unwrap().deployments[0].weight = 8;
    let firsts = (0..1000).filter(|_| fixture.order(&["m"], None)[0] == "a/m").count();
    assert!((700..900).contains(&firsts), "weight 8 of 10: {firsts}");
}

#[test]
fn affinity_keeps_a_conversation_and_moves_it_when_its_deployment_fails() {
    let fixture = Fixture::new(Strategy::Weighted);
    let first = |session: &str| {
        let selection = fixture.select(&["m"], None, Some(session)).unwrap();
        selection.candidates[0].id.clone()
    };
    let mut spread = BTreeMap::new();
    for n in 0..60 {
        let session = format!("s{n}");
        let chosen = first(&session);
        assert!((0..5).all(|_| first(&session) == chosen), "sticky");
        *spread.entry(chosen).or_insert(0) += 1;
    }
    assert_eq!(
        spread.len(),
        3,
        "conversations spread over every deployment: {spread:?}"
    );
    // s0's deployment fails; the turn is served elsewhere and stays there.
    let home = first("s0");
    let conversation = Conversation::new("m", KeySource::Session, b"s0");
    let moved_to = if home == "a/m" { "c/m" } else { "a/m" };
    fixture.affinity.record(&conversation, moved_to);
    assert_eq!(first("s0"), moved_to);
    let decision = fixture.select(&["m"], None, Some("s0")).unwrap().decision.unwrap();
    assert!(decision.reason.contains("last turn"), "{}", decision.reason);
    assert_eq!(decision.conversation, Some(conversation));
}

/// What selection itself costs per request, in a release build:
/// `cargo test -p tollgate-routing --release -- --ignored --nocapture selection_cost`.
#[test]
#[ignore = "a measurement, not a check: run it in release"]
fn selection_cost() {
    let fixture = Fixture::new(Strategy::Weighted);
    let prefs = Preferences::parse(r#"{"sort":"price","ignore":["none"]}"#).unwrap();
    let conversation = |group: &str| Some(Conversation::new(group, KeySource::Session, b"s1"));
    let rounds = 200_000;
    for (label, names, preferences) in [
        ("plain model", vec!["a/m"], None),
        ("plain model + preferences", vec!["a/m"], Some(&prefs)),
        ("group of 3 (weighted, affinity)", vec!["m"], None),
        ("group of 3 + sort price", vec!["m"], Some(&prefs)),
    ] {
        let wants = Wants {
            names: names.clone(),
            preferences,
            needs: &[],
            billing: true,
            conversation: &conversation,
        };
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            let selection = fixture.selector().select(&wants).unwrap();
            if let Some(decision) = &selection.decision {
                std::hint::black_box(decision.to_json().to_string());
            }
        }
        let each = started.elapsed() / rounds;
        eprintln!("{label}: {each:?} per request (selection and its JSON)");
    }
}
