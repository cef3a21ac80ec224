//! The model endpoints besides chat (docs/endpoints.md) against the real
//! gateway and the mock provider: embeddings, moderations, images, speech,
//! transcriptions and rerank carry the provider, the exact cost and the
//! request id, move the wallet by exactly that cost, fall over like chat,
//! and are refused (402, no upstream call) when the wallet cannot hold
//! their worst case; concurrent image requests never overspend; uploads are
//! bounded and a malformed form is a 400.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};
use tollgate_core::money::Nanos;

use crate::common::{Gateway, assert_error_shape, mock_chat_requests, nanos, standard_config, start_mock};

/// The standard config plus provider `emb`, whose models serve embeddings
/// (one fails with 429, one with 500: the mock's model-name faults) or
/// moderations, at 20 USD per million input tokens so costs are visible.
fn config(mock: SocketAddr) -> String {
    standard_config(
        mock,
        &format!(
            r#"
[providers.emb]
adapter = "openai-compatible"
base_url = "http://{mock}/v1"
api_key = "sk-test-upstream"
models = [
  {{ id = "small-embed", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "limited-embed", upstream = "fail-429", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "broken-embed", upstream = "fail-500", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "moderate", operations = ["moderation"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "image", operations = ["image_generation", "image_edit"], image_prices = {{ "standard/1024x1024" = "0.04", "hd/1024x1024" = "0.08" }} }},
  {{ id = "limited-image", upstream = "fail-500", operations = ["image_generation", "image_edit"], image_prices = {{ "*" = "0.04" }} }},
  {{ id = "limited-moderate", upstream = "fail-429", operations = ["moderation"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "tts", operations = ["speech"], speech_price_per_mchars = "15" }},
  {{ id = "limited-tts", upstream = "fail-429", operations = ["speech"], speech_price_per_mchars = "15" }},
  {{ id = "whisper", operations = ["transcription", "translation"], audio_price_per_second = "0.0001" }},
  {{ id = "limited-whisper", upstream = "fail-429", operations = ["transcription", "translation"], audio_price_per_second = "0.0001" }},
  {{ id = "rerank", operations = ["rerank"], search_price = "0.002" }},
  {{ id = "limited-rerank", upstream = "fail-500", operations = ["rerank"], search_price = "0.002" }},
]
[providers.bad-ops]
adapter = "misbehaving"
base_url = "http://{mock}/v1"
api_key = "sk-test-upstream"
models = [
  {{ id = "trap", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "loop", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "oom", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
  {{ id = "fine", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
]
[providers.chat-only]
adapter = "anthropic"
base_url = "http://{mock}"
api_key = "sk-test-upstream"
models = [
  {{ id = "embed", operations = ["embeddings"], input_price_per_mtok = "20", output_price_per_mtok = "0" }},
]
"#
        ),
    )
}

async fn post(gateway: &Gateway, path: &str, body: Value) -> (u16, Value) {
    let response = gateway.post(path).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text}"));
    (status, json)
}

fn cost(body: &Value) -> i64 {
    nanos(body["service"]["cost_usd"].as_str().unwrap())
}

#[tokio::test]
async fn embeddings_are_billed_exactly_and_fall_over_like_chat() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;

    let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    let (status, body) = post(
        &gateway,
        "/v1/embeddings",
        json!({"model": "emb/small-embed", "input": ["hello world", "three words here"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "list");
    assert_eq!(body["provider"], "emb");
    assert_eq!(body["model"], "emb/small-embed");
    assert!(body["service"]["request_id"].as_str().unwrap().starts_with("req_"));
    let data = body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[1]["index"], 1);
    assert_eq!(data[0]["embedding"].as_array().unwrap().len(), 8);
    // 5 words are 5 prompt tokens at 20 USD per million: 100,000 nano-USD.
    assert_eq!(body["usage"]["prompt_tokens"], 5);
    assert_eq!(body["usage"]["total_tokens"], 5);
    assert_eq!(cost(&body), 100_000);
    assert_eq!((body["usage"]["cost"].as_f64().unwrap() * 1e9).round() as i64, 100_000);
    let after = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    assert_eq!(before - after, 100_000, "the wallet moves by exactly the cost shown");

    // Base64: the same vector as little-endian f32s.
    let (status, encoded) = post(
        &gateway,
        "/v1/embeddings",
        json!({"model": "emb/small-embed", "input": "hello world", "encoding_format": "base64"}),
    )
    .await;
    assert_eq!(status, 200, "{encoded}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let floats: Vec<f64> = bytes
        .chunks(4)
        .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
        .collect();
    let plain: Vec<f64> = data[0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(floats.len(), plain.len());
    assert!(floats.iter().zip(&plain).all(|(a, b)| (a - b).abs() < 1e-6));

    // 429 and 500 from the first candidate: the second answers, billed once.
    for (primary, outcome) in [
        ("emb/limited-embed", "upstream_rate_limited"),
        ("emb/broken-embed", "upstream_error"),
    ] {
        let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
        let (status, body) = post(
            &gateway,
            "/v1/embeddings",
            json!({"model": primary, "models": ["emb/small-embed"], "input": "fall back"}),
        )
        .await;
        assert_eq!(status, 200, "{primary}: {body}");
        let attempts = body["service"]["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{body}");
        assert_eq!(attempts[0]["outcome"], outcome);
        assert_eq!(attempts[1]["outcome"], "success");
        assert_eq!(cost(&body), 40_000, "2 tokens at 20 USD per million");
        let after = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
        assert_eq!(before - after, 40_000, "{primary}");
    }
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");

    // A model for another operation is refused before any upstream call.
    let upstream = mock_chat_requests(mock).await;
    let (status, body) = post(&gateway, "/v1/embeddings", json!({"model": "mock/small", "input": "x"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "operation_not_supported");
    let (status, _, body) = gateway
        .chat(json!({"model": "emb/small-embed", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "operation_not_supported");
    let (status, body) = post(&gateway, "/v1/embeddings", json!({"model": "emb/small-embed"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["param"], "input");
    let (status, body) = post(&gateway, "/v1/embeddings", json!(["not", "an", "object"])).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(mock_chat_requests(mock).await, upstream, "nothing went upstream");

    // A model whose adapter serves chat only (Anthropic's, WIT 0.2.0) is
    // listed unavailable, saying why, and refused before any upstream call.
    let (status, body) = post(
        &gateway,
        "/v1/embeddings",
        json!({"model": "chat-only/embed", "input": "x"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "operation_not_supported");
    let listed = gateway.model("chat-only/embed").await;
    assert_eq!(listed["service"]["available"], false, "{listed}");
    let reason = listed["service"]["unavailable_reason"].as_str().unwrap();
    assert!(reason.contains("'anthropic' does not serve embeddings"), "{reason}");
    assert_eq!(mock_chat_requests(mock).await, upstream, "nothing went upstream");

    // The catalog says what each model serves.
    let listed = gateway.model("emb/small-embed").await;
    assert_eq!(listed["service"]["operations"], json!(["embeddings"]), "{listed}");
    assert_eq!(listed["service"]["available"], true, "{listed}");
    assert_eq!(
        gateway.model("mock/small").await["service"]["operations"],
        json!(["chat"])
    );
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn moderations_carry_the_provider_and_exact_cost() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let before = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    let (status, body) = post(
        &gateway,
        "/v1/moderations",
        json!({"model": "emb/limited-moderate", "models": ["emb/moderate"], "input": ["a calm sentence", "flagme please"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["provider"], "emb");
    assert_eq!(
        body["service"]["attempts"][0]["outcome"], "upstream_rate_limited",
        "{body}"
    );
    let results = body["results"].as_array().unwrap();
    assert_eq!(
        (results[0]["flagged"].as_bool(), results[1]["flagged"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(body["usage"]["prompt_tokens"], 5);
    assert_eq!(cost(&body), 100_000);
    let after = nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    assert_eq!(before - after, 100_000);
}

#[tokio::test]
async fn a_wallet_too_small_for_the_worst_case_is_refused_before_any_upstream_call() {
    let mock = start_mock(Default::default()).await;
    // The worst case counts every body byte as a token: about 60 bytes at
    // 20 USD per million is 1,200 nano-USD, more than the wallet's 1,000.
    let gateway = Gateway::start_with(&config(mock), "0.000001").await;
    let upstream = mock_chat_requests(mock).await;
    for (path, body) in [
        (
            "/v1/embeddings",
            json!({"model": "emb/small-embed", "input": "hello world"}),
        ),
        (
            "/v1/moderations",
            json!({"model": "emb/moderate", "input": "hello world"}),
        ),
        (
            "/v1/images/generations",
            json!({"model": "emb/image", "prompt": "x", "size": "1024x1024", "quality": "standard"}),
        ),
        (
            "/v1/audio/speech",
            json!({"model": "emb/tts", "input": "hello world", "voice": "alloy"}),
        ),
        (
            "/v1/rerank",
            json!({"model": "emb/rerank", "query": "q", "documents": ["a", "b"]}),
        ),
    ] {
        let (status, body) = post(&gateway, path, body).await;
        assert_eq!(status, 402, "{path}: {body}");
        assert_eq!(assert_error_shape(&body)["code"], "insufficient_balance", "{path}");
    }
    let image = reqwest::multipart::Part::bytes(b"\x89PNG".to_vec())
        .file_name("a.png")
        .mime_str("image/png")
        .unwrap();
    let uploads = [
        (
            "/v1/audio/transcriptions",
            transcription_form("emb/whisper", &[], wav(3)),
        ),
        ("/v1/audio/translations", transcription_form("emb/whisper", &[], wav(3))),
        (
            "/v1/images/edits",
            reqwest::multipart::Form::new()
                .text("model", "emb/image")
                .text("prompt", "x")
                .text("size", "1024x1024")
                .text("quality", "standard")
                .part("image", image),
        ),
    ];
    for (path, form) in uploads {
        let response = gateway.post(path).multipart(form).send().await.unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 402, "{path}: {body}");
        assert_eq!(assert_error_shape(&body)["code"], "insufficient_balance", "{path}");
    }
    assert_eq!(mock_chat_requests(mock).await, upstream, "nothing went upstream");
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

/// A mono 16-bit PCM WAV of `seconds` at 16 kHz.
fn wav(seconds: u32) -> Vec<u8> {
    let rate = 16_000u32;
    let data = seconds * rate * 2;
    let mut out = b"RIFF".to_vec();
    out.extend((36 + data).to_le_bytes());
    out.extend(b"WAVEfmt ");
    out.extend(16u32.to_le_bytes());
    out.extend(1u16.to_le_bytes());
    out.extend(1u16.to_le_bytes());
    out.extend(rate.to_le_bytes());
    out.extend((rate * 2).to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend(b"data");
    out.extend(data.to_le_bytes());
    out.extend(vec![0u8; data as usize]);
    out
}

fn transcription_form(model: &str, fallbacks: &[&str], audio: Vec<u8>) -> reqwest::multipart::Form {
    let mut form = reqwest::multipart::Form::new().text("model", model.to_string());
    for fallback in fallbacks {
        form = form.text("models", fallback.to_string());
    }
    form.part(
        "file",
        reqwest::multipart::Part::bytes(audio)
            .file_name("hello.wav")
            .mime_str("audio/wav")
            .unwrap(),
    )
}

#[tokio::test]
async fn images_speech_transcriptions_and_rerank_bill_their_units_exactly_and_fall_over() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let posted = || nanos(gateway.wallet()["posted_usd"].as_str().unwrap());
    let start = posted();
    let mut billed = 0;

    // Two hd images at 0.08 USD; the first candidate's 500 falls over.
    let (status, body) = post(
        &gateway,
        "/v1/images/generations",
        json!({"model": "emb/limited-image", "models": ["emb/image"], "prompt": "a lighthouse",
               "n": 2, "size": "1024x1024", "quality": "hd"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert_eq!(body["provider"], "emb");
    assert_eq!(body["usage"]["images"], 2);
    let attempts = body["service"]["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["outcome"], "upstream_error", "{body}");
    assert_eq!(cost(&body), 160_000_000);
    billed += cost(&body);
    // A kind the model has no price for is refused before any upstream call.
    let (status, body) = post(
        &gateway,
        "/v1/images/generations",
        json!({"model": "emb/image", "prompt": "x", "size": "256x256", "quality": "standard"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        assert_error_shape(&body)["message"]
            .as_str()
            .unwrap()
            .contains("no price"),
        "{body}"
    );

    // Speech: 11 characters at 15 USD per million; the audio comes back as
    // sent, the cost in headers. A 429 first falls over.
    let response = gateway
        .post("/v1/audio/speech")
        .json(&json!({"model": "emb/limited-tts", "models": ["emb/tts"], "input": "hello world", "voice": "alloy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "audio/mpeg");
    assert_eq!(headers["x-tollgate-provider"], "emb");
    let speech_cost = nanos(headers["x-tollgate-cost-usd"].to_str().unwrap());
    assert_eq!(speech_cost, 165_000);
    assert!(headers["x-request-id"].to_str().unwrap().starts_with("req_"));
    let audio = response.bytes().await.unwrap();
    assert!(audio.starts_with(b"ID3"));
    billed += speech_cost;

    // A 3-second WAV: 3 s at 0.0001 USD per second, from the mock's usage.
    let response = gateway
        .post("/v1/audio/transcriptions")
        .multipart(transcription_form("emb/limited-whisper", &["emb/whisper"], wav(3)))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(body["text"].as_str().unwrap().contains("hello.wav"), "{body}");
    assert_eq!(body["usage"]["type"], "duration");
    assert_eq!(body["usage"]["seconds"], 3.0);
    assert_eq!(body["service"]["attempts"][0]["outcome"], "upstream_rate_limited");
    assert_eq!(cost(&body), 300_000);
    billed += cost(&body);

    // A translation asked for as text: the transcript comes back as text,
    // its cost in headers.
    let form = transcription_form("emb/limited-whisper", &["emb/whisper"], wav(2)).text("response_format", "text");
    let response = gateway
        .post("/v1/audio/translations")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let translation_cost = nanos(response.headers()["x-tollgate-cost-usd"].to_str().unwrap());
    // The mock reports no duration in text: the WAV header's 2 s are billed.
    assert_eq!(translation_cost, 200_000);
    assert!(response.text().await.unwrap().contains("hello.wav"));
    billed += translation_cost;

    // An image edit: a form with the image, one standard image at 0.04.
    let image = reqwest::multipart::Part::bytes(b"\x89PNG".to_vec())
        .file_name("a.png")
        .mime_str("image/png")
        .unwrap();
    let form = reqwest::multipart::Form::new()
        .text("model", "emb/limited-image")
        .text("models", "emb/image")
        .text("prompt", "add a boat")
        .text("size", "1024x1024")
        .text("quality", "standard")
        .part("image", image);
    let response = gateway.post("/v1/images/edits").multipart(form).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["service"]["attempts"][0]["outcome"], "upstream_error", "{body}");
    assert_eq!(cost(&body), 40_000_000);
    billed += cost(&body);
    // Each is logged as its own kind.
    let row: Value =
        serde_json::from_str(&gateway.admin(&["request", body["service"]["request_id"].as_str().unwrap()])).unwrap();
    assert_eq!(row["kind"], "image_edit", "{row}");

    // Rerank, Cohere's shape: 150 documents are two searches at 0.002 USD.
    let documents: Vec<String> = (0..150).map(|i| format!("document {i} about tea")).collect();
    let (status, body) = post(
        &gateway,
        "/v1/rerank",
        json!({"model": "emb/limited-rerank", "models": ["emb/rerank"], "query": "about tea", "documents": documents, "top_n": 3}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"].as_array().unwrap().len(), 3);
    assert_eq!(body["usage"]["search_units"], 2);
    assert_eq!(cost(&body), 4_000_000);
    billed += cost(&body);

    assert_eq!(start - posted(), billed, "the wallet moves by exactly the costs shown");
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
    let listed = gateway.model("emb/image").await;
    assert_eq!(listed["pricing"]["image"]["hd/1024x1024"], "0.080000000", "{listed}");
}

#[tokio::test]
async fn uploads_are_bounded_and_malformed_forms_refused_while_the_gateway_keeps_serving() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    let upstream = mock_chat_requests(mock).await;
    // 100 MB, over the 25 MiB upload limit: refused at the limit.
    let huge = vec![0u8; 100 << 20];
    let response = gateway
        .post("/v1/audio/transcriptions")
        .multipart(transcription_form("emb/whisper", &[], huge))
        .send()
        .await;
    match response {
        Ok(response) => {
            assert_eq!(response.status(), 413);
            let body: Value = response.json().await.unwrap();
            assert_eq!(assert_error_shape(&body)["code"], "request_too_large");
        }
        // The server may close the connection before the client finished
        // sending; what matters is that nothing was taken in or sent on.
        Err(error) => assert!(error.is_request() || error.is_body(), "{error}"),
    }
    for (content_type, body) in [
        (
            "multipart/form-data; boundary=XYZ",
            &b"--XYZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nemb/whisper"[..],
        ),
        ("multipart/form-data", &b"no boundary at all"[..]),
        ("application/json", &br#"{"model":"emb/whisper"}"#[..]),
    ] {
        let response = gateway
            .post("/v1/audio/transcriptions")
            .header("content-type", content_type)
            .body(body.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{content_type}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(assert_error_shape(&body)["type"], "invalid_request_error", "{body}");
    }
    // A form without the file names what is missing.
    let form = reqwest::multipart::Form::new().text("model", "emb/whisper");
    let response = gateway
        .post("/v1/audio/transcriptions")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(assert_error_shape(&body)["param"], "file");
    assert_eq!(mock_chat_requests(mock).await, upstream, "nothing went upstream");
    gateway.assert_still_serving().await;
}

#[tokio::test]
async fn concurrent_image_requests_never_overspend_a_small_wallet() {
    let mock = start_mock(tollgate_mock_upstream::MockOptions {
        latency_ms: 20,
        ..Default::default()
    })
    .await;
    // 0.40 USD holds ten standard images at 0.04.
    let gateway = Arc::new(Gateway::start_with(&config(mock), "0.40").await);
    let mut tasks = Vec::new();
    for _ in 0..200 {
        let gateway = gateway.clone();
        tasks.push(tokio::spawn(async move {
            post(
                &gateway,
                "/v1/images/generations",
                json!({"model": "emb/image", "prompt": "x", "size": "1024x1024", "quality": "standard"}),
            )
            .await
        }));
    }
    let mut answered = 0;
    for task in tasks {
        let (status, body) = task.await.unwrap();
        match status {
            200 => answered += 1,
            402 => assert_eq!(assert_error_shape(&body)["code"], "insufficient_balance"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert!(answered <= 10, "{answered} images answered on a wallet holding 10");
    eprintln!("{answered} of 200 concurrent image requests answered on a wallet holding 10");
    assert!(answered >= 1);
    let wallet = gateway.settled_wallet().await;
    assert_eq!(wallet["pending_usd"], "0.000000000");
    let spent = 400_000_000 - nanos(wallet["posted_usd"].as_str().unwrap());
    assert_eq!(spent, answered * 40_000_000, "exactly the images answered");
    assert!(nanos(wallet["posted_usd"].as_str().unwrap()) >= 0, "never below zero");
}

async fn upload_batch_file(gateway: &Gateway, jsonl: String) -> String {
    let form = reqwest::multipart::Form::new().text("purpose", "batch").part(
        "file",
        reqwest::multipart::Part::bytes(jsonl.into_bytes())
            .file_name("lines.jsonl")
            .mime_str("application/jsonl")
            .unwrap(),
    );
    let response = gateway.post("/v1/files").multipart(form).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let file: Value = response.json().await.unwrap();
    assert_eq!(file["object"], "file");
    file["id"].as_str().unwrap().to_string()
}

async fn wait_for_batch(gateway: &Gateway, id: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let batch: Value = gateway
            .get(&format!("/v1/batches/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ["completed", "cancelled", "expired", "failed"].contains(&batch["status"].as_str().unwrap_or_default()) {
            return batch;
        }
        assert!(std::time::Instant::now() < deadline, "the batch did not end: {batch}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn file_lines(gateway: &Gateway, id: &Value) -> Vec<Value> {
    let text = gateway
        .get(&format!("/v1/files/{}/content", id.as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[tokio::test]
async fn a_batch_that_outruns_its_wallet_stops_cleanly_with_exact_billing() {
    let mock = start_mock(Default::default()).await;
    // One line at a time, so the wallet runs out at a known line: each holds
    // its worst case (every body byte a token at 20 USD per million: 20,000
    // nano-USD a byte) and bills 2 tokens (40,000). After 599 lines the worst
    // case is left: line 600 fits and the rest do not.
    let body = json!({"model": "emb/small-embed", "input": "hello world"});
    let worst_case = serde_json::to_vec(&body).unwrap().len() as i64 * 20_000;
    let credit = Nanos(599 * 40_000 + worst_case).usd_string();
    let gateway = Gateway::start_with(&format!("{}\n[batches]\nconcurrency = 1\n", config(mock)), &credit).await;
    gateway.admin(&[
        "plan",
        "set",
        "--workspace",
        &gateway.workspace_id,
        "--plan",
        "enterprise",
    ]);
    let line = |i: usize| {
        json!({"custom_id": format!("line-{i}"), "method": "POST", "url": "/v1/embeddings", "body": body}).to_string()
    };
    let jsonl: Vec<String> = (0..1000).map(line).collect();
    let file_id = upload_batch_file(&gateway, jsonl.join("\n")).await;
    let (status, batch) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": file_id, "endpoint": "/v1/embeddings", "completion_window": "24h"}),
    )
    .await;
    assert_eq!(status, 200, "{batch}");
    let batch = wait_for_batch(&gateway, batch["id"].as_str().unwrap()).await;
    assert_eq!(batch["status"], "completed", "{batch}");
    assert_eq!(
        batch["request_counts"],
        json!({"total": 1000, "completed": 600, "failed": 400})
    );
    let output = file_lines(&gateway, &batch["output_file_id"]).await;
    assert_eq!(output.len(), 600);
    assert!(output.iter().all(|l| l["response"]["status_code"] == 200));
    assert_eq!(output[0]["custom_id"], "line-0");
    assert_eq!(output[0]["response"]["body"]["provider"], "emb");
    let errors = file_lines(&gateway, &batch["error_file_id"]).await;
    assert_eq!(errors.len(), 400);
    assert!(errors.iter().all(
        |l| l["response"]["status_code"] == 402 && l["response"]["body"]["error"]["code"] == "insufficient_balance"
    ));
    // Exactly the 600 lines' cost, nothing held, and the books balance.
    let wallet = gateway.settled_wallet().await;
    assert_eq!(wallet["pending_usd"], "0.000000000");
    let billed: i64 = output
        .iter()
        .map(|l| nanos(l["response"]["body"]["service"]["cost_usd"].as_str().unwrap()))
        .sum();
    assert_eq!(billed, 600 * 40_000);
    assert_eq!(nanos(&credit) - nanos(wallet["posted_usd"].as_str().unwrap()), billed);
    assert!(gateway.admin(&["ledger-verify"]).contains("verified"));
    // Each line is a request of its own, logged under the batch.
    let request_id = output[5]["response"]["request_id"].as_str().unwrap();
    let trail: Value = serde_json::from_str(&gateway.admin(&["request", request_id])).unwrap();
    assert_eq!(trail["parent_request_id"], batch["id"], "{trail}");
}

#[tokio::test]
async fn batches_check_their_input_and_can_be_cancelled() {
    let mock = start_mock(tollgate_mock_upstream::MockOptions {
        latency_ms: 30,
        ..Default::default()
    })
    .await;
    let gateway = Gateway::start(&format!(
        "{}\n[batches]\nconcurrency = 1\nmax_running_per_workspace = 1\n",
        config(mock)
    ))
    .await;
    gateway.admin(&[
        "plan",
        "set",
        "--workspace",
        &gateway.workspace_id,
        "--plan",
        "enterprise",
    ]);
    // A line for another endpoint is refused with its line number.
    let bad = upload_batch_file(
        &gateway,
        json!({"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {}}).to_string(),
    )
    .await;
    let (status, body) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": bad, "endpoint": "/v1/chat/completions", "completion_window": "24h"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        assert_error_shape(&body)["message"]
            .as_str()
            .unwrap()
            .contains("Line 1")
    );
    // Another workspace's file, or none, is not found.
    let (status, _) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": "file-nope", "endpoint": "/v1/embeddings", "completion_window": "24h"}),
    )
    .await;
    assert_eq!(status, 404);

    // 200 chat lines at 30 ms each; cancelled after a moment.
    let lines: Vec<String> = (0..200)
        .map(|i| {
            json!({"custom_id": format!("c{i}"), "method": "POST", "url": "/v1/chat/completions",
                   "body": {"model": "mock/small", "messages": [{"role": "user", "content": "hi"}]}})
            .to_string()
        })
        .collect();
    let file = upload_batch_file(&gateway, lines.join("\n")).await;
    let (status, batch) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": {"job": "nightly"}}),
    )
    .await;
    assert_eq!(status, 200, "{batch}");
    assert_eq!(batch["metadata"]["job"], "nightly");
    // A workspace runs at most `max_running_per_workspace` batches at once
    // (set to 1 here): the next is refused until this one ends.
    let (status, body) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"}),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(assert_error_shape(&body)["code"], "too_many_batches");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let id = batch["id"].as_str().unwrap();
    let (status, cancelling) = post(&gateway, &format!("/v1/batches/{id}/cancel"), json!({})).await;
    assert_eq!(status, 200, "{cancelling}");
    let ended = wait_for_batch(&gateway, id).await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
    let completed = ended["request_counts"]["completed"].as_i64().unwrap();
    assert!(completed > 0 && completed < 200, "{ended}");
    let output = file_lines(&gateway, &ended["output_file_id"]).await;
    assert_eq!(output.len() as i64, completed);
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

#[tokio::test]
async fn a_batch_past_its_window_expires_with_what_ran() {
    let mock = start_mock(tollgate_mock_upstream::MockOptions {
        latency_ms: 50,
        ..Default::default()
    })
    .await;
    let gateway = Gateway::start(&format!("{}\n[batches]\nconcurrency = 1\n", config(mock))).await;
    gateway.admin(&[
        "plan",
        "set",
        "--workspace",
        &gateway.workspace_id,
        "--plan",
        "enterprise",
    ]);
    let lines: Vec<String> = (0..200)
        .map(|i| {
            json!({"custom_id": format!("e{i}"), "method": "POST", "url": "/v1/embeddings",
                   "body": {"model": "emb/small-embed", "input": "hello"}})
            .to_string()
        })
        .collect();
    let file = upload_batch_file(&gateway, lines.join("\n")).await;
    let (status, batch) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": file, "endpoint": "/v1/embeddings", "completion_window": "1s"}),
    )
    .await;
    assert_eq!(status, 200, "{batch}");
    let ended = wait_for_batch(&gateway, batch["id"].as_str().unwrap()).await;
    assert_eq!(ended["status"], "expired", "{ended}");
    let completed = ended["request_counts"]["completed"].as_i64().unwrap();
    assert!(completed > 0 && completed < 200, "{ended}");
    assert!(ended["expired_at"].is_number());
    assert_eq!(
        file_lines(&gateway, &ended["output_file_id"]).await.len() as i64,
        completed
    );
    // A window over a day is refused.
    let (status, _) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": file, "endpoint": "/v1/embeddings", "completion_window": "25h"}),
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_batch_whose_key_is_revoked_stops_and_fails() {
    let mock = start_mock(tollgate_mock_upstream::MockOptions {
        latency_ms: 30,
        ..Default::default()
    })
    .await;
    let gateway = Gateway::start(&format!("{}\n[batches]\nconcurrency = 1\n", config(mock))).await;
    gateway.admin(&[
        "plan",
        "set",
        "--workspace",
        &gateway.workspace_id,
        "--plan",
        "enterprise",
    ]);
    let created = crate::control_plane::helpers::method(
        &gateway,
        Some(&gateway.api_key),
        "keys.create",
        json!({"name": "batch"}),
    )
    .await
    .unwrap();
    let key = created["api_key"].as_str().unwrap();
    let http = reqwest::Client::new();
    let lines: Vec<String> = (0..200)
        .map(|i| {
            json!({"custom_id": format!("k{i}"), "method": "POST", "url": "/v1/embeddings",
                   "body": {"model": "emb/small-embed", "input": "hello"}})
            .to_string()
        })
        .collect();
    let form = reqwest::multipart::Form::new().text("purpose", "batch").part(
        "file",
        reqwest::multipart::Part::bytes(lines.join("\n").into_bytes()).file_name("k.jsonl"),
    );
    let file: Value = http
        .post(format!("{}/v1/files", gateway.url))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let batch: Value = http
        .post(format!("{}/v1/batches", gateway.url))
        .bearer_auth(key)
        .json(&json!({"input_file_id": file["id"], "endpoint": "/v1/embeddings", "completion_window": "24h"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    crate::control_plane::helpers::method(
        &gateway,
        Some(&gateway.api_key),
        "keys.revoke",
        json!({"key_id": created["key_id"]}),
    )
    .await
    .unwrap();
    // The owner's key still sees the workspace's batch.
    let ended = wait_for_batch(&gateway, batch["id"].as_str().unwrap()).await;
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(ended["errors"]["data"][0]["code"], "key_revoked");
    let completed = ended["request_counts"]["completed"].as_i64().unwrap();
    assert!(completed < 200, "{ended}");
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

/// The same batch flow on a shared Postgres (skipped without one): files,
/// a batch of embeddings lines, its results and its files read back.
#[tokio::test]
async fn batches_run_on_postgres() {
    let Some(schema) = crate::common::PgSchema::create().await else {
        return;
    };
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&format!("database_url = \"{}\"\n{}", schema.url, config(mock))).await;
    gateway.admin(&[
        "plan",
        "set",
        "--workspace",
        &gateway.workspace_id,
        "--plan",
        "enterprise",
    ]);
    let lines: Vec<String> = (0..20)
        .map(|i| {
            json!({"custom_id": format!("p{i}"), "method": "POST", "url": "/v1/embeddings",
                   "body": {"model": "emb/small-embed", "input": "hello world"}})
            .to_string()
        })
        .collect();
    let file = upload_batch_file(&gateway, lines.join("\n")).await;
    let (status, batch) = post(
        &gateway,
        "/v1/batches",
        json!({"input_file_id": file, "endpoint": "/v1/embeddings", "completion_window": "24h"}),
    )
    .await;
    assert_eq!(status, 200, "{batch}");
    let ended = wait_for_batch(&gateway, batch["id"].as_str().unwrap()).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(
        ended["request_counts"],
        json!({"total": 20, "completed": 20, "failed": 0})
    );
    let output = file_lines(&gateway, &ended["output_file_id"]).await;
    assert_eq!(output.len(), 20);
    let listed: Value = gateway.get("/v1/batches").send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["data"][0]["id"], batch["id"]);
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
}

/// A hostile adapter (built in the tests, WIT 0.3.0) that traps, spins or
/// eats memory when asked for an embedding fails only that request, holding
/// nothing; the next request, and the same adapter's well-behaved model, are
/// served.
#[tokio::test]
async fn a_hostile_adapter_on_the_operations_lane_fails_only_its_own_request() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&config(mock)).await;
    for (model, reason) in [("trap", "trapped"), ("loop", "time limit"), ("oom", "memory limit")] {
        let (status, body) = post(
            &gateway,
            "/v1/embeddings",
            json!({"model": format!("bad-ops/{model}"), "input": "hello"}),
        )
        .await;
        assert_eq!(status, 502, "{model}: {body}");
        let error = assert_error_shape(&body);
        assert_eq!(error["code"], "adapter_failed", "{model}");
        assert!(error["message"].as_str().unwrap().contains(reason), "{model}: {body}");
        // Falls over like any adapter fault.
        let (status, body) = post(
            &gateway,
            "/v1/embeddings",
            json!({"model": format!("bad-ops/{model}"), "models": ["emb/small-embed"], "input": "hello"}),
        )
        .await;
        assert_eq!(status, 200, "{model}: {body}");
        assert_eq!(body["provider"], "emb");
    }
    let (status, body) = post(
        &gateway,
        "/v1/embeddings",
        json!({"model": "bad-ops/fine", "input": "hello"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(gateway.settled_wallet().await["pending_usd"], "0.000000000");
    gateway.assert_still_serving().await;
}
