//! The operator's limits against hostile actors: a spinning template ends
//! within its fuel without stalling the runtime's thread, nested maps stop
//! at the run's cap on sub-runs, and the trail and the bytes rendered stay
//! under theirs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tollgate_actors::ActorId;
use tollgate_actors::ir::{ComponentPin, Ir};
use tollgate_actors::runtime::{
    ComponentKind, Engine, Failure, Host, ModelAnswer, ModelCall, RunLimits, RunOutcome, RunSpec, ToolAnswer, ToolCall,
    ToolSpec, run,
};

/// A host for template-only actors: it only loads sub-actors.
#[derive(Default)]
struct Actors(Mutex<Vec<(ActorId, Arc<Ir>)>>);

impl Actors {
    fn add(&self, ir: Ir) -> ActorId {
        let (_, id) = ir.identify().unwrap();
        self.0.lock().unwrap().push((id.clone(), Arc::new(ir)));
        id
    }
}

impl Host for Actors {
    fn chat(&self, _: ModelCall) -> BoxFuture<'static, Result<ModelAnswer, Failure>> {
        async { Err(Failure::new("model_error", "no models here")) }.boxed()
    }

    fn tools(&self, _: &ComponentPin, _: ComponentKind) -> BoxFuture<'static, Result<Vec<ToolSpec>, Failure>> {
        async { Ok(Vec::new()) }.boxed()
    }

    fn call_tool(&self, _: ToolCall) -> BoxFuture<'static, Result<ToolAnswer, Failure>> {
        async { Err(Failure::new("tool_error", "no tools here")) }.boxed()
    }

    fn load_actor(&self, id: &ActorId) -> BoxFuture<'static, Result<Arc<Ir>, Failure>> {
        let found = self
            .0
            .lock()
            .unwrap()
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, ir)| ir.clone());
        async move { found.ok_or_else(|| Failure::new("actor_unavailable", "no such actor")) }.boxed()
    }
}

fn ir(name: &str, steps: Value, extra: Value) -> Ir {
    let mut base = json!({
        "ir_version": 1,
        "metadata": {"namespace": "demo", "name": name},
        "inputs": {"type": "object"},
        "budget": {"max_steps": 100000, "max_depth": 4, "max_wall_ms": 3000},
        "steps": steps,
    });
    base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    serde_json::from_value(base).unwrap()
}

fn returns(template: Value) -> Value {
    json!([{"id": "return", "action": {"return": {"template": template}}}])
}

async fn start(host: Arc<Actors>, ir: Ir, engine: Arc<Engine>) -> RunOutcome {
    let (_, id) = ir.identify().unwrap();
    run(
        host,
        RunSpec {
            ir: Arc::new(ir),
            actor_id: id,
            input: json!({}),
            run_id: "run_top".into(),
            request_id: "req_run".into(),
            max_cost_nanos: None,
            events: None,
            engine,
        },
    )
    .await
}

const SPIN: &str = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";

/// On a single-threaded runtime, two spinning runs end with a documented
/// error inside their 3 s budget, and a task beside them is never held up
/// for more than 100 ms: the templates run off the runtime's thread.
#[tokio::test(flavor = "current_thread")]
async fn spinning_templates_end_in_time_and_leave_the_runtime_free() {
    let host = Arc::new(Actors::default());
    let engine = Arc::new(Engine::new(RunLimits::default(), 1));
    let spinner = ir("spin", returns(json!({"text": SPIN})), json!({}));
    let worst_gap = Arc::new(Mutex::new(Duration::ZERO));
    let ticker = tokio::spawn({
        let worst_gap = worst_gap.clone();
        async move {
            let mut last = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let gap = last.elapsed();
                let mut worst = worst_gap.lock().unwrap();
                *worst = (*worst).max(gap);
                last = Instant::now();
            }
        }
    });
    let started = Instant::now();
    let (one, two) = tokio::join!(
        start(host.clone(), spinner.clone(), engine.clone()),
        start(host, spinner, engine)
    );
    let took = started.elapsed();
    ticker.abort();
    assert!(took < Duration::from_secs(5), "the runs took {took:?}");
    for outcome in [one, two] {
        let error = outcome.result.unwrap_err();
        assert!(
            ["template_limit", "timeout"].contains(&error.code.as_str()),
            "{error:?}"
        );
        assert_eq!(outcome.trail.status, "failed");
    }
    let worst = *worst_gap.lock().unwrap();
    assert!(
        worst < Duration::from_millis(100),
        "the runtime's thread was held for {worst:?}"
    );
}

#[tokio::test]
async fn a_huge_value_is_a_template_limit_not_an_allocation() {
    let host = Arc::new(Actors::default());
    let engine = Arc::new(Engine::default());
    for template in [json!({"expr": "'A' * 100000000"}), json!({"expr": "[0] * 100000000"})] {
        let outcome = start(host.clone(), ir("big", returns(template), json!({})), engine.clone()).await;
        let error = outcome.result.unwrap_err();
        assert_eq!(error.code, "template_limit", "{error:?}");
        assert_eq!(error.step.as_deref(), Some("return"));
    }
}

/// 256 items, each mapping 256 template-only items: 65,792 sub-runs asked,
/// stopped at the cap (1,024 by default) with a small trail.
#[tokio::test]
async fn nested_maps_stop_at_the_cap_on_sub_runs() {
    let host = Arc::new(Actors::default());
    let leaf = host.add(ir("leaf", returns(json!({"expr": "input.i"})), json!({})));
    let map = |actor: &str| {
        json!([{"id": "each", "action": {"map": {
            "items": {"expr": "range(256) | list"}, "max_items": 256, "concurrency": 16,
            "actor": actor, "input": {"object": {"i": {"template": {"expr": "item"}}}}}}}])
    };
    let middle = host.add(ir("middle", map("leaf"), json!({"actors": {"leaf": leaf}})));
    let top = ir("top", map("middle"), json!({"actors": {"middle": middle}}));
    let engine = Arc::new(Engine::default());
    let started = Instant::now();
    let outcome = start(host, top, engine.clone()).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.code, "run_limit", "{error:?}");
    assert!(error.message.contains("sub-actor runs"), "{}", error.message);
    let trail = serde_json::to_vec(&outcome.trail).unwrap().len() as u64;
    assert!(
        trail <= engine.limits().max_trail_bytes + 64 * 1024,
        "the trail is {trail} bytes"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[tokio::test]
async fn the_trail_the_bytes_rendered_and_the_steps_are_capped() {
    let host = Arc::new(Actors::default());
    let steps = |n: usize, text: &str| {
        Value::Array(
            (0..n)
                .map(|i| json!({"id": format!("s{i}"), "action": {"if": {"condition": {"expr": text}, "then": []}}}))
                .collect(),
        )
    };
    let limited = |change: fn(&mut RunLimits)| {
        let mut limits = RunLimits::default();
        change(&mut limits);
        Arc::new(Engine::new(limits, 1))
    };

    let engine = limited(|l| l.max_trail_bytes = 4_000);
    let outcome = start(host.clone(), ir("long", steps(200, "true"), json!({})), engine).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.code, "run_limit");
    assert!(error.message.contains("provenance trail"), "{}", error.message);
    assert!(outcome.trail.steps.len() < 200);

    let engine = limited(|l| l.max_rendered_bytes = 10_000);
    let outcome = start(host.clone(), ir("wordy", steps(20, "'x' * 1000"), json!({})), engine).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.code, "run_limit");
    assert!(error.message.contains("bytes"), "{}", error.message);

    // The operator's ceiling wins over the actor's own max_steps.
    let engine = limited(|l| l.max_steps = 5);
    let error = start(host, ir("many", steps(6, "true"), json!({})), engine)
        .await
        .result
        .unwrap_err();
    assert_eq!(error.code, "step_limit");
}

/// A render that outlasts the run's wall time is abandoned: the run ends
/// with `timeout` at its deadline while the render finishes on its own.
#[tokio::test]
async fn a_run_stops_at_its_wall_time_even_inside_a_template() {
    let host = Arc::new(Actors::default());
    let limits = RunLimits {
        template_fuel: 20_000_000,
        ..RunLimits::default()
    };
    let engine = Arc::new(Engine::new(limits, 1));
    let mut spinner = ir("spin", returns(json!({"text": SPIN})), json!({}));
    spinner.budget.max_wall_ms = 100;
    let started = Instant::now();
    let outcome = start(host, spinner, engine).await;
    let took = started.elapsed();
    let error = outcome.result.unwrap_err();
    assert_eq!(error.code, "timeout", "{error:?}");
    assert!(took < Duration::from_millis(400), "the run took {took:?}");
}

/// Lists nested as deep as a template's fuel allows are built and dropped
/// on a render thread with a stack for it: the run fails with a documented
/// error (or prints them) instead of overflowing a 2 MiB stack and aborting
/// the process.
#[tokio::test]
async fn deeply_nested_values_do_not_overflow_the_stack() {
    let host = Arc::new(Actors::default());
    let engine = Arc::new(Engine::default());
    let nest = "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}ok";
    let outcome = start(
        host.clone(),
        ir("deep", returns(json!({"text": nest})), json!({})),
        engine.clone(),
    )
    .await;
    assert_eq!(outcome.result.unwrap_err().code, "template_limit");
    let nest = "{% set ns = namespace(x=[]) %}{% for i in range(3000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}";
    let outcome = start(host, ir("deep", returns(json!({"text": nest})), json!({})), engine).await;
    assert_eq!(outcome.result.unwrap().as_str().map(str::len), Some(6002));
}
