//! Two gateways on one Postgres, each with its own data directory, as on two
//! hosts: packages published and installed through one load and answer
//! through the other, the built-ins included; a key's request rate holds
//! across both.

use std::time::{Duration, Instant};

use crate::common::{Gateway, PgSchema, standard_config, start_mock};
use crate::components::{install, publish_tool_caller, run};
use crate::control_plane::helpers::{EXTRA, chat_with, method};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_installed_through_one_gateway_answers_through_another_host() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let config = format!("database_url = \"{}\"\n{}", schema.url, standard_config(mock, ""));
    let first = Gateway::start(&config).await;
    let second = first.another_host("second-host").await;

    // A workspace's own package (its bytes only ever sent to the first) and
    // a built-in, both installed through the first gateway.
    publish_tool_caller(&first, "cluster").await;
    install(&first, json!({"package": "cluster/caller"})).await;
    install(&first, json!({"package": "tollgate/calculator"})).await;
    let installed = Instant::now();
    let input = json!({"tool": "calculator__evaluate", "arguments": {"expression": "6*7"}});
    let (status, body) = run(&first, input.clone()).await;
    assert_eq!(status, 200, "{body}");

    loop {
        let (status, body) = run(&second, input.clone()).await;
        if status == 200 {
            assert_eq!(body["output"]["content"], json!(["42"]), "{body}");
            break;
        }
        assert!(
            installed.elapsed() < Duration::from_secs(2),
            "the second gateway still answers {status} after {:?}: {body}",
            installed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "answered through the second gateway {:?} after the install",
        installed.elapsed()
    );
    let own_store = first.dir.path().join("second-host/registry/blobs/sha256");
    let digest =
        tollgate_registry::Digest::of(&std::fs::read(tollgate_plugin_host::TOOL_CALLER_TEST_COMPONENT).unwrap());
    assert!(
        own_store.join(digest.hex()).exists(),
        "the second gateway keeps the package it fetched in its own store"
    );
}

/// A key limited to 10 requests a minute gets 10 through two gateways
/// together, not 10 through each; the refusals say when to come back.
#[tokio::test]
async fn a_keys_rate_holds_across_gateways_on_one_postgres() {
    let Some(schema) = PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let config = format!("database_url = \"{}\"\n{}", schema.url, standard_config(mock, EXTRA));
    let first = Gateway::start(&config).await;
    let second = first.another_host("second-host").await;
    let created = method(
        &first,
        Some(&first.api_key),
        "keys.create",
        json!({"requests_per_minute": 10}),
    )
    .await
    .unwrap();
    let key = created["api_key"].as_str().unwrap();
    let mut admitted = 0;
    for i in 0..30 {
        let gateway = if i % 2 == 0 { &first } else { &second };
        let (status, headers, body) = chat_with(gateway, key).await;
        match status {
            200 => admitted += 1,
            429 => {
                let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
                assert!(
                    (1..=6).contains(&retry_after),
                    "one request comes back every 6 s: {retry_after}"
                );
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(admitted, 10, "10 a minute across both gateways");
}
