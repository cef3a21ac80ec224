//! Golden-file tests for adapters (feature `golden`, for dev-dependencies).
//!
//! A golden file is `{"exchanges": [...]}`. Each exchange holds:
//! - `context`: the call (`upstream_model`, `base_url`, optional `stream`,
//!   `max_output_tokens`, `continuation`, `request_id`);
//! - `request`: the caller's OpenAI body;
//! - then either `expected_request_error` (`{class, message}`: the adapter
//!   refuses the request) or `upstream_request` (`method`, `url`, `headers`,
//!   `auth`, `body`): what the adapter must send;
//! - then any of: an upstream `response` (with optional `response_headers`)
//!   and `expected_response` or `expected_response_error`; an upstream
//!   `stream` and `expected_chunks` (including what `finish` returns) or
//!   `expected_stream_error`; an upstream HTTP `error` (`status`, `headers`,
//!   `body`) and `expected_error`;
//! - `expected_usage`: the counts the adapter reports (`input`, `output`,
//!   `cache_read`, `cache_write`, `reasoning`; only the keys given are checked).
//!
//! A `stream` item is an event's payload: a string is sent as is, a JSON value
//! as its text, and `{"event": name, "data": payload}` also names the event
//! (AWS event-stream types, typed SSE events).
//!
//! Inputs are handed to the adapter as written in the file (key order kept),
//! since key order can survive translation. No golden may name a credential
//! header or contain a credential-looking string.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::{Adapter, AdapterError, AuthSlot, CallContext, Event, ResponseHead};

/// The golden files of one adapter and what none of them may contain.
pub struct Goldens<'a> {
    /// The folder of `*.json` golden files.
    pub dir: &'a str,
    /// Headers that carry (or derive from) credentials: only the host sets them.
    pub secret_headers: &'a [&'a str],
    /// Lowercase strings no golden may contain (test keys, key prefixes).
    pub secret_markers: &'a [&'a str],
}

/// The inputs of an exchange as raw JSON text.
#[derive(Deserialize)]
struct RawGolden {
    exchanges: Vec<RawExchange>,
}

#[derive(Deserialize)]
struct RawExchange {
    request: Box<RawValue>,
    #[serde(default)]
    response: Option<Box<RawValue>>,
    #[serde(default)]
    stream: Option<Vec<Box<RawValue>>>,
}

impl Goldens<'_> {
    /// Runs every exchange of every file through adapter `A`, panicking with
    /// the file, exchange and part on the first difference.
    pub fn check<A: Adapter>(&self) {
        let files = self.files();
        assert!(files.len() >= 5, "golden files missing from {}", self.dir);
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let lower = text.to_ascii_lowercase();
            for marker in self.secret_markers {
                assert!(
                    !lower.contains(marker),
                    "{path:?} holds a secret-looking string ({marker})"
                );
            }
            let golden: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            let raw: RawGolden = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let exchanges = golden["exchanges"].as_array().expect("`exchanges` is an array");
            for (index, (exchange, raw)) in exchanges.iter().zip(&raw.exchanges).enumerate() {
                self.run::<A>(&format!("{name} exchange {index}"), exchange, raw);
            }
        }
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(self.dir))
            .unwrap_or_else(|e| panic!("{}: {e}", self.dir))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        files
    }

    fn run<A: Adapter>(&self, at: &str, exchange: &Value, raw: &RawExchange) {
        let mut adapter = A::new(context(&exchange["context"]), raw.request.get().as_bytes().to_vec());
        let request = match adapter.request() {
            Ok(request) => request,
            Err(error) => {
                assert_eq!(
                    Some(&error_json(&error)),
                    exchange.get("expected_request_error"),
                    "{at}: request"
                );
                return;
            }
        };
        let expected = &exchange["upstream_request"];
        let headers: Map<String, Value> = request
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        for secret in self.secret_headers {
            assert!(
                !headers.contains_key(*secret),
                "{at}: adapter set secret header {secret}"
            );
            assert!(
                expected["headers"].get(secret).is_none(),
                "{at}: golden names secret header {secret}"
            );
        }
        let actual = json!({
            "method": request.method,
            "url": request.url,
            "headers": headers,
            "auth": auth_name(&request.auth),
            "body": serde_json::from_slice::<Value>(&request.body).unwrap(),
        });
        assert_eq!(&actual, expected, "{at}: upstream request");

        if let Some(body) = &raw.response {
            let head = head(200, &exchange["response_headers"]);
            match adapter.response(head, body.get().as_bytes().to_vec()) {
                Ok(out) => assert_eq!(parse(&out), exchange["expected_response"], "{at}: response"),
                Err(error) => assert_eq!(
                    error_json(&error),
                    exchange["expected_response_error"],
                    "{at}: response"
                ),
            }
        }
        if let Some(stream) = &raw.stream {
            let events = stream.iter().map(|item| event(item)).collect();
            let result = adapter.on_events(events).and_then(|mut chunks| {
                chunks.extend(adapter.finish()?);
                Ok(chunks)
            });
            match result {
                Ok(chunks) => {
                    let chunks: Vec<Value> = chunks.iter().map(|c| parse(c)).collect();
                    assert_eq!(Value::from(chunks), exchange["expected_chunks"], "{at}: chunks");
                }
                Err(error) => assert_eq!(error_json(&error), exchange["expected_stream_error"], "{at}: stream"),
            }
        }
        if let Some(error) = exchange.get("error") {
            let status = error["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .expect("error.status");
            let classified =
                adapter.classify_error(head(status, &error["headers"]), error["body"].to_string().into_bytes());
            assert_eq!(error_json(&classified), exchange["expected_error"], "{at}: error");
        }
        if let Some(expected) = exchange.get("expected_usage").and_then(Value::as_object) {
            let usage = adapter
                .usage()
                .unwrap_or_else(|| panic!("{at}: the adapter reported no usage"));
            let reported = json!({
                "input": usage.input,
                "output": usage.output,
                "cache_read": usage.cache_read,
                "cache_write": usage.cache_write,
                "reasoning": usage.reasoning,
            });
            for (key, want) in expected {
                assert!(reported.get(key).is_some(), "{at}: unknown usage field {key}");
                assert_eq!(&reported[key], want, "{at}: usage.{key}");
            }
        }
    }
}

fn context(spec: &Value) -> CallContext {
    CallContext {
        request_id: spec["request_id"].as_str().unwrap_or("req-golden").into(),
        upstream_model: spec["upstream_model"].as_str().expect("context.upstream_model").into(),
        base_url: spec["base_url"].as_str().expect("context.base_url").into(),
        stream: spec["stream"].as_bool().unwrap_or(false),
        attempt: 0,
        max_output_tokens: spec["max_output_tokens"].as_u64().map(|n| n as u32),
        continuation: spec["continuation"].as_str().map(str::to_owned),
    }
}

/// One stream item (see the module docs) as an event.
fn event(item: &RawValue) -> Event {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Framed<'a> {
        event: String,
        #[serde(borrow)]
        data: &'a RawValue,
    }
    let payload = |raw: &RawValue| match serde_json::from_str::<String>(raw.get()) {
        Ok(text) => text.into_bytes(),
        Err(_) => raw.get().as_bytes().to_vec(),
    };
    match serde_json::from_str::<Framed>(item.get()) {
        Ok(framed) => Event {
            name: Some(framed.event),
            data: payload(framed.data),
        },
        Err(_) => Event {
            name: None,
            data: payload(item),
        },
    }
}

fn head(status: u16, headers: &Value) -> ResponseHead {
    let mut list = vec![("content-type".to_owned(), "application/json".to_owned())];
    if let Some(map) = headers.as_object() {
        list.extend(
            map.iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("header values are strings").to_owned())),
        );
    }
    ResponseHead { status, headers: list }
}

fn auth_name(auth: &AuthSlot) -> String {
    match auth {
        AuthSlot::None => "none".into(),
        AuthSlot::Bearer => "bearer".into(),
        AuthSlot::Header(name) => format!("header:{name}"),
        AuthSlot::Query(name) => format!("query:{name}"),
        AuthSlot::AwsSigv4(service) => format!("aws-sigv4:{service}"),
    }
}

fn error_json(error: &AdapterError) -> Value {
    json!({"class": error.class.to_string(), "message": error.message})
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "the adapter wrote invalid JSON ({e}): {}",
            String::from_utf8_lossy(bytes)
        )
    })
}
