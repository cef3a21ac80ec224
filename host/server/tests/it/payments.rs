//! Payments with two gateways sharing one Postgres (the Python suite,
//! `test_payments.py`, covers the flows on SQLite): the fake Stripe in
//! mock-upstream delivers every event to both gateways at once, many times
//! over and out of order, and each top-up is credited exactly once. A
//! hostile signature header is refused for its size before any HMAC.

use crate::common;
use crate::control_plane::helpers::method;

use common::{Gateway, PgSchema, nanos, standard_config, start_mock};
use serde_json::{Value, json};

const WEBHOOK_SECRET: &str = "whsec_it_payments";

async fn fake(mock: std::net::SocketAddr, path: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("http://{mock}/__stripe/{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.text().await.unwrap()
    );
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deliveries_to_two_gateways_on_postgres_credit_each_top_up_once() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let config = format!(
        "database_url = \"{}\"\n{}",
        schema.url,
        standard_config(
            mock,
            &format!(
                "[billing.stripe]\napi_base = \"http://{mock}\"\nsecret_key = \"sk_test_it\"\nwebhook_secret = \"{WEBHOOK_SECRET}\"\n"
            )
        )
    );
    let first = Gateway::start_with(&config, "1").await;
    let second = first.another().await;
    for gateway in [&first, &second] {
        let url = format!("{}/v1/billing/stripe/webhook", gateway.url);
        fake(mock, "webhook_endpoints", json!({"url": url, "secret": WEBHOOK_SECRET})).await;
    }
    let initial = nanos(first.wallet()["posted_usd"].as_str().unwrap());

    // 24 top-ups of 5.01 … 5.24 USD: half paid at once, half paid by a method
    // that settles later (completed unpaid, then async_payment_succeeded).
    let mut expected = 0;
    let mut events = Vec::new();
    for i in 1..=24 {
        let amount = format!("5.{i:02}");
        expected += nanos(&amount);
        let opened = method(
            &first,
            Some(&first.api_key),
            "billing.topups.create",
            json!({"amount_usd": amount}),
        )
        .await
        .unwrap();
        let session = opened["session_id"].as_str().unwrap().to_string();
        let outcome = if i % 2 == 0 { "paid" } else { "async_pending" };
        let done = fake(
            mock,
            &format!("checkout/sessions/{session}/complete"),
            json!({"outcome": outcome, "deliver": false}),
        )
        .await;
        events.push(done["events"][0]["id"].as_str().unwrap().to_string());
        if outcome == "async_pending" {
            let settled = fake(
                mock,
                &format!("checkout/sessions/{session}/async"),
                json!({"succeeded": true, "deliver": false}),
            )
            .await;
            events.push(settled["events"][0]["id"].as_str().unwrap().to_string());
        }
    }

    // Every event five times over, all at once, newest first: each delivery
    // goes to both gateways.
    let deliveries = events
        .iter()
        .rev()
        .flat_map(|id| std::iter::repeat_n(id.clone(), 5))
        .map(|id| tokio::spawn(async move { fake(mock, &format!("events/{id}/deliver"), json!({})).await }));
    for delivered in futures_util::future::join_all(deliveries).await {
        let delivered = delivered.unwrap();
        for delivery in delivered["deliveries"].as_array().unwrap() {
            assert_eq!(delivery["status"], 200, "{delivered}");
        }
    }

    assert_eq!(
        nanos(second.wallet()["posted_usd"].as_str().unwrap()) - initial,
        expected,
        "each top-up credited exactly once"
    );
    let listed = method(&second, Some(&second.api_key), "billing.topups.list", json!({}))
        .await
        .unwrap();
    let states: Vec<&str> = listed["checkouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["paid"; 24]);
    assert!(first.admin(&["ledger-verify"]).contains("verified"));
}

/// CPU time (user + system) the process whose command line names `config`
/// has used so far: the gateway's own work, whatever else the machine runs.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn gateway_cpu(config: &std::path::Path) -> std::time::Duration {
    let needle = config.to_str().unwrap();
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(needle))
        })
        .expect("the gateway's process");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command: utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a system setting.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    std::time::Duration::from_millis(ticks * 1000 / per_second)
}

/// The webhook takes no key, so its signature check must cost an anonymous
/// caller next to nothing: a 95,000-entry `Stripe-Signature` over a 500 KB
/// body (29.6 s of CPU when every entry was an HMAC of the body) is refused
/// for its size before any HMAC.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_signature_header_is_refused_before_any_hmac() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(
        mock,
        &format!(
            "[billing.stripe]\napi_base = \"http://{mock}\"\nsecret_key = \"sk_test_it\"\nwebhook_secret = \"{WEBHOOK_SECRET}\"\nprevious_webhook_secrets = [\"whsec_it_old\"]\n"
        ),
    ))
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = format!("t={now}{}", ",v1=".repeat(95_000));
    let body = format!("{{\"id\":\"evt_x\",\"pad\":\"{}\"}}", "x".repeat(500 * 1000));

    let before = gateway_cpu(&gateway.config_path);
    let started = std::time::Instant::now();
    let response = gateway
        .post("/v1/billing/stripe/webhook")
        .header("stripe-signature", header)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    let answer: Value = response.json().await.unwrap();
    let spent = gateway_cpu(&gateway.config_path) - before;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "webhook_refused", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than 8192 bytes"),
        "{answer}"
    );
    // Receiving 0.9 MB and parsing its header costs a few ms; one HMAC per
    // entry cost seconds. The bounds leave room for a busy machine.
    assert!(elapsed < std::time::Duration::from_secs(2), "answered in {elapsed:?}");
    assert!(
        spent < std::time::Duration::from_millis(300),
        "the gateway spent {spent:?} of CPU"
    );
    gateway.assert_still_serving().await;
}
