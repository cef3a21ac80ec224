//! The runtime against a fake host that records every call: outputs, the
//! budget, subtask isolation, bounded map concurrency and the limits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tollgate_actors::ir::Ir;
use tollgate_actors::runtime::{
    ComponentKind, Failure, Host, ModelAnswer, ModelCall, RunEvent, RunSpec, ToolAnswer, ToolCall, ToolSpec, run,
};
use tollgate_actors::{ActorId, ir::ComponentPin};

/// Each model call holds `WORST` and costs `COST` nanodollars.
const WORST: i64 = 100;
const COST: i64 = 40;

#[derive(Default)]
struct FakeHost {
    calls: Mutex<Vec<Vec<Value>>>,
    actors: Mutex<Vec<(ActorId, Arc<Ir>)>>,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: AtomicUsize,
    delay: Option<Duration>,
}

impl FakeHost {
    fn with_actor(self, ir: Ir) -> (Self, ActorId) {
        let (_, id) = ir.identify().unwrap();
        self.actors.lock().unwrap().push((id.clone(), Arc::new(ir)));
        (self, id)
    }
}

impl Host for FakeHost {
    fn chat(&self, call: ModelCall) -> BoxFuture<'static, Result<ModelAnswer, Failure>> {
        self.calls.lock().unwrap().push(call.messages.clone());
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = self.delay;
        let hold = call.budget.try_hold(WORST);
        let done = self.in_flight.clone();
        async move {
            let result = async {
                let hold = hold.map_err(|e| Failure::new("budget_exceeded", e.to_string()))?;
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                }
                hold.settle(COST);
                let last = call.messages.last().unwrap();
                let reply = if let Some(format) = &call.response_format {
                    assert_eq!(format["type"], "json_schema");
                    json!({"questions": ["q1", "q2", "q3"]}).to_string()
                } else if !call.tools.is_empty() && last["role"] == "user" {
                    return Ok(answer(json!({
                        "content": null,
                        "tool_calls": [{"id": "c1", "type": "function", "function": {
                            "name": call.tools[0]["function"]["name"], "arguments": "{\"expression\":\"2+2\"}"}}],
                    })));
                } else {
                    format!("You said: {}", last["content"].as_str().unwrap_or_default())
                };
                if let Some(deltas) = &call.deltas {
                    deltas(&reply);
                }
                Ok(answer(json!({"content": reply})))
            }
            .await;
            done.fetch_sub(1, Ordering::SeqCst);
            result
        }
        .boxed()
    }

    fn tools(&self, _: &ComponentPin, _: ComponentKind) -> BoxFuture<'static, Result<Vec<ToolSpec>, Failure>> {
        async {
            Ok(vec![ToolSpec {
                name: "evaluate".into(),
                description: "calculates".into(),
                input_schema: json!({"type": "object"}),
            }])
        }
        .boxed()
    }

    fn call_tool(&self, call: ToolCall) -> BoxFuture<'static, Result<ToolAnswer, Failure>> {
        async move {
            assert_eq!(call.tool, "evaluate");
            Ok(ToolAnswer {
                request_id: "req_tool".into(),
                output: json!({"value": "4", "expression": call.arguments["expression"]}),
                is_error: false,
            })
        }
        .boxed()
    }

    fn load_actor(&self, id: &ActorId) -> BoxFuture<'static, Result<Arc<Ir>, Failure>> {
        let found = self
            .actors
            .lock()
            .unwrap()
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, ir)| ir.clone());
        async move { found.ok_or_else(|| Failure::new("actor_unavailable", "no such actor")) }.boxed()
    }
}

fn answer(message: Value) -> ModelAnswer {
    ModelAnswer {
        message,
        request_id: "req_model".into(),
        provider: "acme".into(),
        model: "acme/echo".into(),
        attempts: json!([]),
        input_tokens: Some(3),
        output_tokens: Some(2),
        cost_nanos: COST,
    }
}

fn ir(value: Value) -> Ir {
    let mut base = json!({
        "ir_version": 1,
        "metadata": {"namespace": "demo", "name": "t"},
        "inputs": {"type": "object"},
        "models": {"default": {"candidates": ["acme/echo"]}},
        "budget": {"max_steps": 64, "max_depth": 4, "max_wall_ms": 10000},
    });
    base.as_object_mut().unwrap().extend(value.as_object().unwrap().clone());
    serde_json::from_value(base).unwrap()
}

fn greeter() -> Ir {
    ir(json!({
        "inputs": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        "steps": [
            {"id": "greet", "action": {"llm": {"model": "default", "prompt": {"text": "Say hello to {{ input.name }}."}}}},
            {"id": "return", "action": {"return": {"template": {"expr": "steps.greet.output"}}}},
        ],
    }))
}

async fn start(
    host: Arc<FakeHost>,
    ir: Ir,
    input: Value,
    events: Option<tollgate_actors::runtime::Events>,
) -> tollgate_actors::runtime::RunOutcome {
    let (_, id) = ir.identify().unwrap();
    run(
        host,
        RunSpec {
            ir: Arc::new(ir),
            actor_id: id,
            input,
            run_id: "run_top".into(),
            request_id: "req_run".into(),
            max_cost_nanos: None,
            events,
            engine: Default::default(),
        },
    )
    .await
}

#[tokio::test]
async fn the_greeter_answers_and_streams_its_steps() {
    let host = Arc::new(FakeHost::default());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let outcome = start(host.clone(), greeter(), json!({"name": "Ada"}), Some(tx)).await;
    assert_eq!(outcome.result.unwrap(), json!("You said: Say hello to Ada."));
    assert_eq!(outcome.cost_nanos, COST);
    assert_eq!(outcome.trail.status, "succeeded");
    assert_eq!(outcome.trail.steps.len(), 2);
    assert_eq!(outcome.trail.steps[0].model_calls[0].provider, "acme");
    assert_eq!(outcome.trail.steps[0].cost_usd, "0.000000040");
    let mut kinds = Vec::new();
    while let Ok(event) = rx.try_recv() {
        kinds.push(match event {
            RunEvent::StepStarted { .. } => "started",
            RunEvent::StepFinished { .. } => "finished",
            RunEvent::Delta { .. } => "delta",
            _ => "other",
        });
    }
    assert_eq!(kinds, ["started", "delta", "finished", "started", "finished"]);
}

#[tokio::test]
async fn an_input_that_breaks_the_schema_is_refused_before_any_call() {
    let host = Arc::new(FakeHost::default());
    let outcome = start(host.clone(), greeter(), json!({"nom": "Ada"}), None).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.code, "invalid_input");
    assert!(error.message.contains("name"), "{}", error.message);
    assert!(host.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_run_stops_at_its_budget_and_says_what_it_spent() {
    // Three calls fit (each holds 100 and spends 40); the fourth's worst
    // case (120 spent + 100) would pass the 200 cap.
    let mut actor = greeter();
    actor.budget.max_cost_nanos = Some(200);
    let step = actor.steps[0].clone();
    actor.steps = (0..4)
        .map(|n| {
            let mut s = step.clone();
            s.id = format!("greet{n}");
            s
        })
        .collect();
    let host = Arc::new(FakeHost::default());
    let outcome = start(host.clone(), actor, json!({"name": "Ada"}), None).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.code, "budget_exceeded");
    assert_eq!(error.step.as_deref(), Some("greet3"));
    assert!(
        error
            .message
            .contains("spent 0.000000120 USD of its 0.000000200 USD budget"),
        "{}",
        error.message
    );
    assert_eq!(outcome.cost_nanos, 3 * COST);
    assert_eq!(
        host.calls.lock().unwrap().len(),
        4,
        "the fourth call was refused by its hold"
    );
    assert_eq!(outcome.trail.steps.last().unwrap().status, "failed");
}

#[tokio::test]
async fn subtasks_see_only_their_input_and_maps_are_bounded() {
    let researcher = ir(json!({
        "metadata": {"namespace": "demo", "name": "researcher"},
        "steps": [{"id": "answer", "action": {"llm": {"model": "default",
            "prompt": {"text": "Answer briefly: {{ input.question }}"}}}}],
    }));
    let host = FakeHost {
        delay: Some(Duration::from_millis(30)),
        ..FakeHost::default()
    };
    let (host, researcher_id) = host.with_actor(researcher);
    let host = Arc::new(host);
    let parent = ir(json!({
        "actors": {"researcher": researcher_id},
        "steps": [
            {"id": "plan", "action": {"llm": {"model": "default",
                "prompt": {"text": "SECRET PARENT CONTEXT: split {{ input.topic }}"},
                "response": {"json": {"schema": {"type": "object"}}}}}},
            {"id": "research", "action": {"map": {"items": {"expr": "steps.plan.output.questions"},
                "max_items": 8, "concurrency": 2, "actor": "researcher",
                "input": {"object": {"question": {"template": {"expr": "item"}}}}}}},
            {"id": "synthesize", "action": {"llm": {"model": "default",
                "prompt": {"text": "Combine: {{ steps.research.output | join(' | ') }}"}}}},
        ],
    }));
    let outcome = start(host.clone(), parent, json!({"topic": "tides"}), None).await;
    let output = outcome.result.unwrap();
    assert!(output.as_str().unwrap().contains("Answer briefly: q3"), "{output}");
    let calls = host.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 5);
    for sub in &calls[1..4] {
        let text = serde_json::to_string(sub).unwrap();
        assert!(
            !text.contains("SECRET PARENT CONTEXT"),
            "a subtask saw the parent's messages: {text}"
        );
        assert_eq!(sub.len(), 1, "a subtask starts from its own input only");
    }
    assert_eq!(
        host.most_in_flight.load(Ordering::SeqCst),
        2,
        "the map ran past its concurrency"
    );
    let map = &outcome.trail.steps[1];
    assert_eq!(map.child_runs.len(), 3);
    assert!(
        map.child_runs
            .iter()
            .all(|run| run.parent_run_id.as_deref() == Some("run_top") && run.depth == 1)
    );
    assert_eq!(outcome.cost_nanos, 5 * COST);
    assert_eq!(map.cost_usd, "0.000000120");
}

#[tokio::test]
async fn agents_call_tools_and_the_limits_stop_runs() {
    let agent = ir(json!({
        "tools": {"calc": {"package": {"name": "tollgate/calculator", "version": "0.1.0", "digest": "sha256:00"}}},
        "steps": [{"id": "solve", "action": {"agent": {"model": "default", "prompt": {"text": "2+2?"},
            "tools": ["calc"], "max_iterations": 3}}}],
    }));
    let host = Arc::new(FakeHost::default());
    let outcome = start(host.clone(), agent.clone(), json!({}), None).await;
    let output = outcome.result.unwrap();
    assert!(output.as_str().unwrap().contains("\"value\":\"4\""), "{output}");
    assert_eq!(outcome.trail.steps[0].tool_calls[0].tool, "calc__evaluate");
    assert_eq!(outcome.trail.steps[0].model_calls.len(), 2);

    let mut limited = agent;
    limited.budget.max_steps = 0;
    let error = start(host, limited, json!({}), None).await.result.unwrap_err();
    assert_eq!(error.code, "step_limit");
}

#[tokio::test]
async fn a_run_past_its_wall_time_stops_with_a_timeout() {
    let mut actor = greeter();
    actor.budget.max_wall_ms = 50;
    let host = Arc::new(FakeHost {
        delay: Some(Duration::from_millis(500)),
        ..FakeHost::default()
    });
    let outcome = start(host, actor, json!({"name": "Ada"}), None).await;
    let error = outcome.result.unwrap_err();
    assert_eq!(error.code, "timeout");
    assert_eq!(outcome.trail.steps[0].status, "failed");
}

#[tokio::test]
async fn if_takes_one_branch_and_tool_steps_call_their_server() {
    let actor = ir(json!({
        "tools": {"calc": {"package": {"name": "tollgate/calculator", "version": "0.1.0", "digest": "sha256:00"}}},
        "steps": [
            {"id": "sum", "action": {"tool": {"server": "calc", "tool": "evaluate",
                "arguments": {"object": {"expression": {"template": {"text": "{{ input.a }}+{{ input.b }}"}}}}}}},
            {"id": "big", "action": {"if": {
                "condition": {"expr": "input.a > 10"},
                "then": [{"id": "big.then.return", "action": {"return": {"literal": "big"}}}],
                "else": [{"id": "small", "action": {"llm": {"model": "default", "prompt": {"text": "small {{ steps.sum.output.expression }}"}}}}],
            }}},
        ],
    }));
    let host = Arc::new(FakeHost::default());
    let small = start(host.clone(), actor.clone(), json!({"a": 2, "b": 3}), None).await;
    assert_eq!(small.result.unwrap(), json!("You said: small 2+3"));
    let kinds: Vec<&str> = small.trail.steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["tool", "if", "llm"]);
    assert_eq!(small.trail.steps[0].tool_calls[0].tool, "calc__evaluate");
    let big = start(host.clone(), actor, json!({"a": 20, "b": 3}), None).await;
    assert_eq!(big.result.unwrap(), json!("big"));
    assert_eq!(big.cost_nanos, 0, "the branch not taken made no model call");
}
