//! Hosted actors against hostile templates on the real gateway (issue 33):
//! spinning templates end inside their wall budget while `/healthz` stays
//! fast and SIGTERM still stops the process; a 100 MB template is refused
//! without the gateway's memory growing; a 256 × 256 nested map stops at the
//! run's cap on sub-runs, its trail goes to the blob store with a small row,
//! and the run counts in the month's usage.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Gateway, standard_config, start_mock};
use crate::control_plane::helpers::method;

async fn op(gateway: &Gateway, name: &str, params: Value) -> Value {
    method(gateway, Some(&gateway.api_key), name, params)
        .await
        .unwrap_or_else(|e| panic!("{name} failed: {e:?}"))
}

/// Publishes `source` (with `files` for its `path` sub-actors) in namespace
/// `acts` and answers its id.
async fn publish(gateway: &Gateway, source: &str, files: Value) -> String {
    let published = op(gateway, "actors.publish", json!({"source": source, "files": files})).await;
    published["id"].as_str().unwrap().to_string()
}

async fn start() -> Gateway {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    op(&gateway, "namespaces.create", json!({"name": "acts"})).await;
    gateway
}

async fn invoke(gateway: &Gateway, id: &str) -> (u16, Value) {
    let response = gateway
        .post(&format!("/v1/actors/by-id/{id}"))
        .json(&json!({"input": {}}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn actor(name: &str, rest: &str) -> String {
    format!("apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: {{name: {name}, namespace: acts}}\n{rest}")
}

const SPIN: &str = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";

/// The gateway's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(gateway: &Gateway) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", gateway.pid())).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_templates_end_in_their_budget_and_the_gateway_stays_up() {
    let mut gateway = start().await;
    let source = actor(
        "spin",
        &format!("budget: {{max_wall_seconds: 3}}\nsteps:\n  - return: \"{SPIN}\"\n"),
    );
    let id = publish(&gateway, &source, json!({})).await;

    let started = Instant::now();
    let runs = async {
        let finished = futures_util::future::join(invoke(&gateway, &id), invoke(&gateway, &id)).await;
        (finished, started.elapsed())
    };
    let health = async {
        let mut slowest = Duration::ZERO;
        while started.elapsed() < Duration::from_secs(4) {
            let asked = Instant::now();
            let response = gateway.get("/healthz").send().await.unwrap();
            assert_eq!(response.status(), 200);
            slowest = slowest.max(asked.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest
    };
    let ((((one, first), (two, second)), took), slowest) = tokio::join!(runs, health);
    for (status, body) in [(one, first), (two, second)] {
        let code = body["error"]["code"].as_str().unwrap_or_default().to_string();
        assert!(
            ["template_limit", "timeout"].contains(&code.as_str()),
            "{status} {body}"
        );
        assert!([422, 504].contains(&status), "{status} {body}");
    }
    assert!(took < Duration::from_secs(5), "the runs took {took:?}");
    eprintln!("runs ended after {took:?}; slowest /healthz {slowest:?}");
    assert!(slowest < Duration::from_millis(100), "/healthz took {slowest:?}");

    // Two more runs in flight, then SIGTERM: the gateway drains and exits.
    let pending = [
        tokio::spawn(
            gateway
                .post(&format!("/v1/actors/by-id/{id}"))
                .json(&json!({"input": {}}))
                .send(),
        ),
        tokio::spawn(
            gateway
                .post(&format!("/v1/actors/by-id/{id}"))
                .json(&json!({"input": {}}))
                .send(),
        ),
    ];
    tokio::time::sleep(Duration::from_millis(50)).await;
    gateway.signal_term();
    let terminated = Instant::now();
    let exit = gateway.wait_exit(Duration::from_secs(8)).await;
    eprintln!("exited {:?} after SIGTERM", terminated.elapsed());
    assert!(exit.success(), "{exit}");
    for run in pending {
        let _ = run.await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_megabyte_template_is_refused_without_the_memory() {
    let gateway = start().await;
    let id = publish(
        &gateway,
        &actor("big", "steps:\n  - return: \"{{ 'A' * 100000000 }}\"\n"),
        json!({}),
    )
    .await;
    for _ in 0..3 {
        let (status, body) = invoke(&gateway, &id).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["code"], "template_limit", "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("fuel"), "{body}");
    }
    let peak = peak_rss_kib(&gateway);
    eprintln!("gateway peak RSS (VmHWM): {peak} KiB");
    assert!(peak < 128 * 1024, "the gateway's peak RSS is {peak} KiB");
}

/// minijinja formats a lazily repeated list whole before it charges fuel for
/// it: this one asks for about 100 GB in one `~`. The render runs in a child
/// process capped in memory, so only the child dies; before, the gateway
/// aborted (or the machine ran out of memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_that_formats_a_huge_repeated_list_fails_alone() {
    let gateway = start().await;
    let templates = [
        "{{ '' ~ (['A' * 1000000] * 100000) }}",
        "{{ ([0] * 100000000) | string }}",
        "{{ ([0] * 100000000) | tojson }}",
    ];
    for (index, template) in templates.iter().enumerate() {
        let id = publish(
            &gateway,
            &actor(
                &format!("greedy{index}"),
                &format!("steps:\n  - return: \"{template}\"\n"),
            ),
            json!({}),
        )
        .await;
        let (status, body) = invoke(&gateway, &id).await;
        assert_eq!(status, 422, "{template}: {body}");
        assert_eq!(body["error"]["code"], "template_limit", "{template}: {body}");
    }
    let healthz = gateway.get("/healthz").send().await.unwrap();
    assert_eq!(healthz.status(), 200, "the gateway still serves");
    let peak = peak_rss_kib(&gateway);
    eprintln!("gateway peak RSS (VmHWM): {peak} KiB");
    assert!(peak < 128 * 1024, "the gateway's peak RSS is {peak} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_map_stops_at_the_cap_its_row_stays_small_and_usage_counts_it() {
    let gateway = start().await;
    let map = |actor: &str| {
        format!(
            "steps:\n  - id: each\n    map:\n      items: \"{{{{ range(256) | list }}}}\"\n      max_items: 256\n      concurrency: 16\n      actor: {actor}\n      input: {{i: \"{{{{ item }}}}\"}}\n"
        )
    };
    let leaf = actor("leaf", "steps:\n  - return: \"{{ input.i }} {{ 'padding' * 40 }}\"\n");
    let middle = actor(
        "middle",
        &format!("actors: {{leaf: {{path: leaf.yaml}}}}\n{}", map("leaf")),
    );
    let top = actor(
        "top",
        &format!(
            "budget: {{max_steps: 100000}}\nactors: {{middle: {{path: middle.yaml}}}}\n{}",
            map("middle")
        ),
    );
    let id = publish(&gateway, &top, json!({"middle.yaml": middle, "leaf.yaml": leaf})).await;
    let before = op(&gateway, "billing.usage.month", json!({})).await;

    let started = Instant::now();
    let (status, body) = invoke(&gateway, &id).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "run_limit", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("1024"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());

    // The row keeps a reference; the trail itself is in the blob store and
    // `runs.get` reads it back whole.
    let request_id = body["service"]["request_id"].as_str().unwrap().to_string();
    let database = format!(
        "sqlite://{}",
        gateway.dir.path().join("data").join("tollgate.db").display()
    );
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&database).await.unwrap();
    let mut row: Option<(i64, String)> = None;
    for _ in 0..100 {
        row = sqlx::query_as(
            "SELECT CAST(LENGTH(provenance) + LENGTH(attempts) + LENGTH(model) AS BIGINT), provenance \
             FROM request_log WHERE request_id = $1",
        )
        .bind(&request_id)
        .fetch_optional(&pool)
        .await
        .unwrap();
        if row.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pool.close().await;
    let (row_bytes, provenance) = row.expect("the run's row is written");
    assert!(row_bytes <= 16 * 1024, "the row holds {row_bytes} bytes");
    let provenance: Value = serde_json::from_str(&provenance).unwrap();
    assert_eq!(provenance["stored"], "blob", "{provenance}");
    assert!(provenance["digest"].as_str().unwrap().starts_with("sha256:"));
    let run = op(&gateway, "runs.get", json!({"run_id": request_id})).await;
    let trail = serde_json::to_string(&run["trail"]).unwrap();
    assert!(trail.len() > 16 * 1024, "{}", trail.len());
    assert!(trail.len() <= 5 << 20, "{}", trail.len());
    assert_eq!(run["trail"]["run_id"], body["run_id"]);

    let after = op(&gateway, "billing.usage.month", json!({})).await;
    assert_eq!(
        after["requests"].as_u64().unwrap(),
        before["requests"].as_u64().unwrap() + 1,
        "{before} → {after}"
    );
}

/// 48 compiles of a large actor at once from one key: two run, the rest are
/// refused at once with RESOURCE_EXHAUSTED (and pass when retried), so they
/// never pile up in memory together.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_compiles_are_bounded_per_workspace() {
    let gateway = start().await;
    let steps: String = (0..1500)
        .map(|i| format!("  - id: s{i}\n    llm: {{model: m, prompt: \"p {{{{ input.x }}}} {i}\"}}\n"))
        .collect();
    let source = actor(
        "wide",
        &format!("models: {{m: {{candidates: [mock/small]}}}}\nsteps:\n{steps}"),
    );
    let compiles = (0..48).map(|_| {
        method(
            &gateway,
            Some(&gateway.api_key),
            "actors.compile",
            json!({"source": source}),
        )
    });
    let results = futures_util::future::join_all(compiles).await;
    let compiled = results.iter().filter(|result| result.is_ok()).count();
    let refused: Vec<String> = results
        .iter()
        .filter_map(|result| result.as_ref().err())
        .map(|(reason, message)| {
            assert_eq!(reason, "RESOURCE_EXHAUSTED", "{message}");
            message.clone()
        })
        .collect();
    assert!(compiled >= 1, "{refused:?}");
    assert!(!refused.is_empty(), "all 48 compiles ran at once");
    assert!(refused[0].contains("try again in 1 s"), "{}", refused[0]);
    assert_eq!(compiled + refused.len(), 48);
    eprintln!(
        "{compiled} compiled, {} refused; gateway peak RSS {} KiB",
        refused.len(),
        peak_rss_kib(&gateway)
    );
    op(&gateway, "actors.compile", json!({"source": source})).await;
}

/// On a plan without a monthly limit, `billing.usage.month` counts the
/// request log: a template-only run is in it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_only_run_shows_in_the_months_usage_on_an_unlimited_plan() {
    let gateway = start().await;
    gateway.admin(&["plan", "set", "--workspace", &gateway.workspace_id, "--plan", "pro"]);
    let id = publish(
        &gateway,
        &actor("hello", "steps:\n  - return: \"{{ 'hi' }}\"\n"),
        json!({}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await; // the plan cache
    let before = op(&gateway, "billing.usage.month", json!({})).await;
    assert_eq!(before["plan"], "pro", "{before}");
    let (status, body) = invoke(&gateway, &id).await;
    assert_eq!(status, 200, "{body}");
    let mut counted = 0;
    for _ in 0..100 {
        let after = op(&gateway, "billing.usage.month", json!({})).await;
        counted = after["requests"].as_u64().unwrap() - before["requests"].as_u64().unwrap();
        if counted > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(counted, 1, "the run is not in the month's usage");
}

/// A template-only run is a request of the plan's month: past the limit the
/// next run is refused with 429 before it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_only_runs_count_against_the_monthly_limit() {
    let mock = start_mock(Default::default()).await;
    let config = standard_config(mock, "[billing.plans.free]\nmonthly_requests = 2\n");
    let gateway = Gateway::start(&config).await;
    op(&gateway, "namespaces.create", json!({"name": "acts"})).await;
    let id = publish(
        &gateway,
        &actor("hello", "steps:\n  - return: \"{{ 'hi' }}\"\n"),
        json!({}),
    )
    .await;
    for _ in 0..2 {
        let (status, body) = invoke(&gateway, &id).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = invoke(&gateway, &id).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "plan_limit_reached", "{body}");
    let month = op(&gateway, "billing.usage.month", json!({})).await;
    assert_eq!(
        (month["requests"].as_u64(), month["remaining"].as_u64()),
        (Some(2), Some(0)),
        "{month}"
    );
}

/// A template nesting lists as deep as its fuel allows fails with a
/// documented error; the gateway does not overflow a stack and abort.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deeply_nesting_template_does_not_abort_the_gateway() {
    let gateway = start().await;
    let nest = "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}ok";
    let id = publish(
        &gateway,
        &actor("deep", &format!("steps:\n  - return: \"{nest}\"\n")),
        json!({}),
    )
    .await;
    let (status, body) = invoke(&gateway, &id).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "template_limit", "{body}");
    gateway.assert_still_serving().await;
}
