//! The console's server side: `serve --demo` and the first-start hints, the
//! embedded files, sessions (API-key sign-in, CSRF, logout, revocation) and
//! OIDC sign-in against a fake identity provider run in this test, with each
//! way a token or callback must be refused.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::{get, post};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::signature::KeyPair;
use serde_json::{Value, json};
use sha2::Digest;

use crate::common::{BIN, Gateway, free_port, standard_config, start_mock};

// ---------------------------------------------------------------- serve --demo

/// Runs `tollgate serve` with `args` on a free port until `ready` has been
/// printed on stdout; returns the process and everything printed by then.
fn serve_until(data_dir: &std::path::Path, args: &[&str], ready: &str) -> (std::process::Child, String, String) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .args(["--listen", &listen, "--data-dir"])
        .arg(data_dir)
        .env(
            "TOLLGATE_CACHE_DIR",
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tollgate-component-cache"),
        )
        .env("RUST_LOG", "warn")
        .current_dir(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !text.contains(ready) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                text.push_str(&line);
                text.push('\n');
            }
            Err(_) => panic!("no '{ready}' within 120 s; printed so far:\n{text}"),
        }
    }
    // The hint block ends with a blank line; gather what follows briefly.
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(300)) {
        text.push_str(&line);
        text.push('\n');
    }
    (child, text, format!("http://{listen}"))
}

fn stop(mut child: std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn serve_demo_prints_a_key_and_a_curl_line_that_works_once() {
    let dir = tempfile::tempdir().unwrap();
    let (child, text, url) = serve_until(dir.path(), &["--demo"], "print(reply.choices");
    assert!(text.contains(&format!("{url}/console/")), "{text}");
    let key = text
        .split_whitespace()
        .find(|w| w.starts_with("tg_live_"))
        .unwrap_or_else(|| panic!("no key printed:\n{text}"))
        .trim_matches(|c| c == '\'' || c == '"')
        .to_string();
    // The curl line as printed, run by a shell.
    let start = text.find("curl -s").expect("a curl line");
    let end = text[start..].find("\n\n").map_or(text.len(), |e| start + e);
    let curl = &text[start..end];
    assert!(curl.contains(&key), "the curl line carries the printed key: {curl}");
    let output = Command::new("sh").arg("-c").arg(curl).output().unwrap();
    assert!(output.status.success(), "{curl}: {:?}", output);
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&output.stdout));
    });
    assert_eq!(
        answer["choices"][0]["message"]["content"], "You said: hello",
        "{answer}"
    );
    assert_eq!(answer["provider"], "demo");
    assert!(answer["usage"]["cost"].as_f64().unwrap() > 0.0, "{answer}");
    // The models are priced and the console is served.
    let console = reqwest::get(format!("{url}/console/")).await.unwrap();
    assert_eq!(console.status(), 200);
    // Only what can answer is available: the demo models, not the local
    // servers of the built-in catalog, which nobody here runs.
    let models: Value = reqwest::Client::new()
        .get(format!("{url}/v1/models?available=true"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let available: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(!available.is_empty(), "{models}");
    // Keys in the environment (OPENAI_API_KEY, …) would enable their providers too.
    let keyed = |id: &str| {
        let provider = id.split('/').next().unwrap();
        std::env::vars().any(|(name, _)| name.starts_with(&provider.to_uppercase().replace('-', "_")))
    };
    assert!(
        available.iter().all(|id| id.starts_with("demo/") || keyed(id)),
        "{available:?}"
    );
    stop(child);

    // A second start reuses the workspace and prints no key.
    let (child, again, _) = serve_until(dir.path(), &["--demo"], "Lost it?");
    assert!(!again.contains("tg_live_"), "{again}");
    assert!(again.contains("from an earlier start"), "{again}");
    stop(child);
}

#[tokio::test]
async fn a_first_start_without_accounts_says_how_to_make_one_or_bootstraps() {
    let dir = tempfile::tempdir().unwrap();
    let (child, text, _) = serve_until(dir.path(), &[], "No accounts yet");
    assert!(text.contains("tollgate admin create-account"), "{text}");
    assert!(!text.contains("tg_live_"), "{text}");
    stop(child);
    let (child, text, url) = serve_until(dir.path(), &["--bootstrap"], "shown only this once");
    let key = text
        .split_whitespace()
        .find(|w| w.starts_with("tg_live_"))
        .unwrap()
        .to_string();
    let wallet = reqwest::Client::new()
        .post(format!("{url}/a2a"))
        .bearer_auth(&key)
        .header("a2a-version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "workspaces/list"}))
        .send()
        .await
        .unwrap();
    let body: Value = wallet.json().await.unwrap();
    assert_eq!(body["result"]["workspaces"][0]["role"], "owner", "{body}");
    stop(child);
    // Accounts exist now: no hint, no key.
    let (child, text, _) = serve_until(dir.path(), &["--bootstrap"], "console:");
    assert!(!text.contains("tg_live_") && !text.contains("No accounts"), "{text}");
    stop(child);
}

// ---------------------------------------------------------------- sessions

fn cookie_value(response: &reqwest::Response, name: &str) -> Option<(String, String)> {
    response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| {
            let value = v[name.len() + 1..].split(';').next().unwrap().to_string();
            (value, v.to_string())
        })
}

async fn a2a(gateway: &Gateway, cookie: Option<&str>, csrf: Option<&str>, method: &str, params: Value) -> (u16, Value) {
    let mut request = gateway
        .http
        .post(format!("{}/a2a", gateway.url))
        .header("a2a-version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("tg_session={cookie}"));
    }
    if let Some(csrf) = csrf {
        request = request.header("x-csrf-token", csrf);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn sign_in(gateway: &Gateway, key: &str) -> (String, String, String) {
    let response = gateway
        .http
        .post(format!("{}/auth/session", gateway.url))
        .json(&json!({"api_key": key}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let (cookie, attributes) = cookie_value(&response, "tg_session").expect("a session cookie");
    let body: Value = response.json().await.unwrap();
    (cookie, body["csrf_token"].as_str().unwrap().to_string(), attributes)
}

#[tokio::test]
async fn a_key_session_acts_as_the_key_with_csrf_until_logout_or_revocation() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let (cookie, csrf, attributes) = sign_in(&gateway, &gateway.api_key).await;
    assert!(
        attributes.contains("HttpOnly") && attributes.contains("SameSite=Strict"),
        "{attributes}"
    );
    assert!(!attributes.contains("Secure"), "plain HTTP on loopback: {attributes}");

    // Not on loopback, the cookie is Secure.
    let remote = gateway
        .http
        .post(format!("{}/auth/session", gateway.url))
        .header("host", "gw.example.com")
        .json(&json!({"api_key": gateway.api_key}))
        .send()
        .await
        .unwrap();
    assert!(cookie_value(&remote, "tg_session").unwrap().1.contains("; Secure"));

    let (status, body) = a2a(&gateway, Some(&cookie), Some(&csrf), "wallet/get", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["workspace_id"], gateway.workspace_id.as_str());
    // No CSRF header, or a wrong one: refused, the op never runs.
    let (status, body) = a2a(&gateway, Some(&cookie), None, "keys/create", json!({"name": "x"})).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = a2a(
        &gateway,
        Some(&cookie),
        Some("wrong"),
        "keys/create",
        json!({"name": "x"}),
    )
    .await;
    assert_eq!(status, 403);
    let (_, keys) = a2a(&gateway, Some(&cookie), Some(&csrf), "keys/list", json!({})).await;
    assert_eq!(keys["result"]["keys"].as_array().unwrap().len(), 1, "{keys}");
    // The data plane takes the session too (the console lists models).
    let models = gateway
        .http
        .get(format!("{}/v1/models", gateway.url))
        .header("cookie", format!("tg_session={cookie}"))
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    // A bogus cookie is 401.
    let (status, _) = a2a(&gateway, Some("nonsense"), Some(&csrf), "wallet/get", json!({})).await;
    assert_eq!(status, 401);

    // Logout ends the session.
    let out = gateway
        .http
        .delete(format!("{}/auth/session", gateway.url))
        .header("cookie", format!("tg_session={cookie}"))
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    let (status, _) = a2a(&gateway, Some(&cookie), Some(&csrf), "wallet/get", json!({})).await;
    assert_eq!(status, 401);

    // A session made with a key ends when the key is revoked.
    let (_, created) = a2a(&gateway, None, None, "keys/create", json!({})).await;
    assert!(created["error"].is_object(), "no key, no session: {created}");
    let (cookie, csrf, _) = sign_in(&gateway, &gateway.api_key).await;
    let (_, created) = a2a(
        &gateway,
        Some(&cookie),
        Some(&csrf),
        "keys/create",
        json!({"name": "second"}),
    )
    .await;
    let second = created["result"]["api_key"].as_str().unwrap().to_string();
    let second_id = created["result"]["key_id"].as_str().unwrap().to_string();
    let (cookie2, csrf2, _) = sign_in(&gateway, &second).await;
    let (status, _) = a2a(&gateway, Some(&cookie2), Some(&csrf2), "wallet/get", json!({})).await;
    assert_eq!(status, 200);
    let (status, _) = a2a(
        &gateway,
        Some(&cookie),
        Some(&csrf),
        "keys/revoke",
        json!({"key_id": second_id}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = a2a(&gateway, Some(&cookie2), Some(&csrf2), "wallet/get", json!({})).await;
    assert_eq!(status, 401, "the revoked key's session is over");
    // A wrong key signs nobody in.
    let refused = gateway
        .http
        .post(format!("{}/auth/session", gateway.url))
        .json(&json!({"api_key": "tg_live_0000000000000000000000000000000000000000"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(cookie_value(&refused, "tg_session").is_none());
}

#[tokio::test]
async fn the_console_files_are_served_with_a_strict_policy() {
    let mock = start_mock(Default::default()).await;
    let gateway = Gateway::start(&standard_config(mock, "")).await;
    let root = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/", gateway.url))
        .send()
        .await
        .unwrap();
    assert!(root.status().is_redirection());
    assert_eq!(root.headers()["location"], "/console/");
    for path in tollgate::console::paths() {
        let response = gateway.get(&format!("/console/{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let csp = response.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    }
    let missing = gateway.get("/console/nope.js").send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let traversal = gateway.get("/console/../tollgate.toml").send().await.unwrap();
    assert_ne!(traversal.status(), 200);
}

// ---------------------------------------------------------------- OIDC

/// What the fake provider's token endpoint answers for the next code.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Token {
    Es256,
    Rs256,
    WrongAudience,
    Expired,
    AlgNone,
    Hs256WithPublicKey,
    UnknownKey,
    /// Signed correctly, but with the nonce of an earlier sign-in.
    OldNonce,
}

struct Idp {
    issuer: String,
    es_key: Vec<u8>,
    es_public: (String, String),
    other_es_key: Vec<u8>,
    scenario: Mutex<Token>,
    /// code → (nonce, code_challenge, subject)
    codes: Mutex<HashMap<String, (String, String, String)>>,
    used_nonces: Mutex<Vec<String>>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn new_es_key() -> (Vec<u8>, (String, String)) {
    let rng = ring::rand::SystemRandom::new();
    let alg = &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let pair = ring::signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    (pkcs8.as_ref().to_vec(), (b64(&point[1..33]), b64(&point[33..65])))
}

const RSA_DER: &[u8] = include_bytes!("fixtures/oidc-test-rsa.der");
const RSA_JWK: &str = include_str!("fixtures/oidc-test-rsa.jwk.json");
const CLIENT_ID: &str = "tollgate-test";

async fn start_idp() -> Arc<Idp> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address: SocketAddr = listener.local_addr().unwrap();
    let (es_key, es_public) = new_es_key();
    let idp = Arc::new(Idp {
        issuer: format!("http://{address}"),
        es_key,
        es_public,
        other_es_key: new_es_key().0,
        scenario: Mutex::new(Token::Es256),
        codes: Mutex::new(HashMap::new()),
        used_nonces: Mutex::new(Vec::new()),
    });
    let app = axum::Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .route("/token", post(token))
        .with_state(idp.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    idp
}

async fn discovery(State(idp): State<Arc<Idp>>) -> axum::Json<Value> {
    axum::Json(json!({
        "issuer": idp.issuer,
        "authorization_endpoint": format!("{}/authorize", idp.issuer),
        "token_endpoint": format!("{}/token", idp.issuer),
        "jwks_uri": format!("{}/jwks", idp.issuer),
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
    }))
}

async fn jwks(State(idp): State<Arc<Idp>>) -> axum::Json<Value> {
    let rsa: Value = serde_json::from_str(RSA_JWK).unwrap();
    axum::Json(json!({"keys": [
        {"kty": "EC", "crv": "P-256", "kid": "test-ec", "use": "sig", "alg": "ES256",
         "x": idp.es_public.0, "y": idp.es_public.1},
        rsa,
    ]}))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

async fn token(
    State(idp): State<Arc<Idp>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> (axum::http::StatusCode, axum::Json<Value>) {
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let bad = |error: &str| (axum::http::StatusCode::BAD_REQUEST, axum::Json(json!({"error": error})));
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:s3cret"))
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return bad("invalid_client");
    }
    let Some((nonce, challenge, subject)) = idp.codes.lock().unwrap().remove(&form["code"]) else {
        return bad("invalid_grant");
    };
    // PKCE: the verifier must hash to the challenge the login sent.
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    if b64(&sha2::Sha256::digest(verifier.as_bytes())) != challenge {
        return bad("invalid_grant");
    }
    let scenario = *idp.scenario.lock().unwrap();
    let nonce = match scenario {
        Token::OldNonce => idp.used_nonces.lock().unwrap().first().cloned().unwrap(),
        _ => nonce,
    };
    idp.used_nonces.lock().unwrap().push(nonce.clone());
    let mut claims = json!({
        "iss": idp.issuer, "sub": subject, "aud": CLIENT_ID, "iat": now(), "exp": now() + 300,
        "nonce": nonce, "email": format!("{subject}@example.com"), "email_verified": true, "name": "Ada",
    });
    if scenario == Token::WrongAudience {
        claims["aud"] = json!("someone-else");
    }
    if scenario == Token::Expired {
        claims["iat"] = json!(now() - 7200);
        claims["exp"] = json!(now() - 3600);
    }
    let es = |kid: &str, key: &[u8]| {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ec_der(key)).unwrap()
    };
    let id_token = match scenario {
        Token::Es256 | Token::WrongAudience | Token::Expired | Token::OldNonce => es("test-ec", &idp.es_key),
        Token::UnknownKey => es("test-ec", &idp.other_es_key),
        Token::Rs256 => {
            let mut header = Header::new(Algorithm::RS256);
            header.kid = Some("test-rsa".into());
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_der(RSA_DER)).unwrap()
        }
        Token::AlgNone => format!(
            "{}.{}.",
            b64(br#"{"alg":"none","typ":"JWT","kid":"test-ec"}"#),
            b64(claims.to_string().as_bytes())
        ),
        Token::Hs256WithPublicKey => {
            // The classic confusion: HMAC keyed with the provider's public key.
            let mut header = Header::new(Algorithm::HS256);
            header.kid = Some("test-rsa".into());
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(RSA_JWK.as_bytes())).unwrap()
        }
    };
    (
        axum::http::StatusCode::OK,
        axum::Json(json!({"access_token": "at", "token_type": "Bearer", "id_token": id_token})),
    )
}

struct Flow {
    state: String,
    cookie: String,
    code: String,
}

/// Starts a sign-in at the gateway and plays the provider's part of the
/// authorization step: records a code for the login's nonce and challenge.
async fn begin(gateway: &Gateway, idp: &Idp, subject: &str) -> Flow {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = client
        .get(format!("{}/auth/oidc/fake/login", gateway.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 302);
    let location = url::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap();
    assert!(location.as_str().starts_with(&format!("{}/authorize", idp.issuer)));
    let query: HashMap<String, String> = location.query_pairs().into_owned().collect();
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["client_id"], CLIENT_ID);
    assert!(query["scope"].split(' ').any(|s| s == "openid"));
    let (cookie, attributes) = cookie_value(&response, "tg_oidc_state").unwrap();
    assert!(attributes.contains("HttpOnly") && attributes.contains("SameSite=Lax"));
    assert_eq!(cookie, query["state"]);
    let code = format!("code-{}", query["state"]);
    idp.codes.lock().unwrap().insert(
        code.clone(),
        (
            query["nonce"].clone(),
            query["code_challenge"].clone(),
            subject.to_string(),
        ),
    );
    Flow {
        state: query["state"].clone(),
        cookie,
        code,
    }
}

async fn finish(gateway: &Gateway, flow: &Flow) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!(
            "{}/auth/oidc/fake/callback?code={}&state={}",
            gateway.url, flow.code, flow.state
        ))
        .header("cookie", format!("tg_oidc_state={}", flow.cookie))
        .send()
        .await
        .unwrap()
}

async fn sessions_in(gateway: &Gateway) -> i64 {
    let url = tollgate_core::db::sqlite_url(&gateway.dir.path().join("data").join("tollgate.db"));
    let database = tollgate_core::db::Database::open(&url, Default::default())
        .await
        .unwrap();
    sqlx::query_scalar("SELECT COUNT(*) FROM console_sessions")
        .fetch_one(&database.pool)
        .await
        .unwrap()
}

async fn session_of(gateway: &Gateway, response: &reqwest::Response) -> Value {
    let (cookie, _) = cookie_value(response, "tg_session").expect("a session cookie");
    gateway
        .get("/auth/session")
        .header("cookie", format!("tg_session={cookie}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn oidc_sign_in_creates_the_user_once_and_refuses_every_bad_token() {
    let idp = start_idp().await;
    let mock = start_mock(Default::default()).await;
    let extra = format!(
        "[[auth.oidc]]\nname = \"fake\"\nissuer = \"{}\"\nclient_id = \"{CLIENT_ID}\"\nclient_secret = \"s3cret\"\n",
        idp.issuer
    );
    let gateway = Gateway::start(&standard_config(mock, &extra)).await;
    let providers: Value = gateway
        .get("/auth/providers")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(providers["oidc"][0]["login_url"], "/auth/oidc/fake/login");

    // First sign-in (ES256): a new user and workspace; the first key once.
    let flow = begin(&gateway, &idp, "ada").await;
    let done = finish(&gateway, &flow).await;
    assert_eq!(done.status(), 303, "{:?}", done.text().await);
    assert_eq!(done.headers()["location"], "/console/#/welcome");
    let info = session_of(&gateway, &done).await;
    assert_eq!(info["kind"], "oidc");
    assert_eq!(info["role"], "owner");
    let key = info["first_key"].as_str().expect("the first key").to_string();
    assert!(key.starts_with("tg_live_"));
    let again = session_of(&gateway, &done).await;
    assert!(again["first_key"].is_null(), "shown once: {again}");
    let chat = gateway
        .http
        .post(format!("{}/v1/chat/completions", gateway.url))
        .bearer_auth(&key)
        .json(&json!({"model": "mock/small", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    // The new workspace has the sign-up credit (0 by default): refused for
    // money, not for the key.
    assert_eq!(chat.status(), 402);
    let user = info["user_id"].clone();

    // Replaying that callback (same state and code) makes nothing.
    let before = sessions_in(&gateway).await;
    let replay = finish(&gateway, &flow).await;
    assert_eq!(replay.status(), 401);
    assert!(cookie_value(&replay, "tg_session").is_none());

    // The same subject again, RS256 this time: the same user, no new key.
    *idp.scenario.lock().unwrap() = Token::Rs256;
    let flow = begin(&gateway, &idp, "ada").await;
    let done = finish(&gateway, &flow).await;
    assert_eq!(done.status(), 303);
    assert_eq!(done.headers()["location"], "/console/");
    let info = session_of(&gateway, &done).await;
    assert_eq!(info["user_id"], user);
    assert!(info["first_key"].is_null());
    let before_negatives = sessions_in(&gateway).await;
    assert_eq!(before_negatives, before + 1);

    // Each refused, and no session made.
    for scenario in [
        Token::WrongAudience,
        Token::Expired,
        Token::AlgNone,
        Token::Hs256WithPublicKey,
        Token::UnknownKey,
        Token::OldNonce,
    ] {
        *idp.scenario.lock().unwrap() = scenario;
        let flow = begin(&gateway, &idp, "mallory").await;
        let refused = finish(&gateway, &flow).await;
        assert!(cookie_value(&refused, "tg_session").is_none(), "{scenario:?}");
        let status = refused.status();
        let body: Value = refused.json().await.unwrap();
        assert_eq!(status, 401, "{scenario:?}: {body}");
        assert_eq!(body["error"]["code"], "sign_in_failed", "{scenario:?}: {body}");
    }
    // A wrong state: the URL's state is not this browser's cookie.
    *idp.scenario.lock().unwrap() = Token::Es256;
    let mut flow = begin(&gateway, &idp, "mallory").await;
    flow.cookie = "someone-elses-state".into();
    let refused = finish(&gateway, &flow).await;
    assert_eq!(refused.status(), 401);
    assert!(cookie_value(&refused, "tg_session").is_none());
    assert_eq!(
        sessions_in(&gateway).await,
        before_negatives,
        "no refused sign-in made a session"
    );

    // An unknown provider is 404; a provider's own error is refused.
    assert_eq!(gateway.get("/auth/oidc/nope/login").send().await.unwrap().status(), 404);
    let denied = gateway
        .get("/auth/oidc/fake/callback?error=access_denied")
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    // A browser is sent back to the console with the reason, not left on JSON.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/auth/oidc/fake/callback?error=access_denied", gateway.url))
        .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(browser.status(), 303);
    let location = browser.headers()["location"].to_str().unwrap();
    assert!(
        location
            .starts_with("/console/#/signin-failed?reason=The+identity+provider+refused+the+sign-in%3A+access_denied"),
        "{location}"
    );
    assert!(cookie_value(&browser, "tg_session").is_none());
}
