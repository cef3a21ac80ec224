//! OpenID Connect sign-in, the protocol side (docs/console.md): a provider's
//! `[[auth.oidc]]` entry, discovery, the authorization request (code flow
//! with PKCE S256, `state`, `nonce`), the code exchange, and the ID token's
//! checks: signature against the provider's JWKS (RS256 or ES256 only, so
//! `alg: none` and HS256 with a public key are refused before any key is
//! used), issuer, audience (and `azp`), expiry, and the nonce. The HTTP
//! routes, sessions and user creation are `signin.rs`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use tollgate_core::secret::Secret;

/// One identity provider, `[[auth.oidc]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OidcProviderConfig {
    /// Short name, used in URLs (`/auth/oidc/{name}/login`): a-z, 0-9, `-`.
    pub name: String,
    /// The issuer URL; discovery reads `{issuer}/.well-known/openid-configuration`,
    /// and ID tokens must carry exactly this `iss`.
    pub issuer: String,
    pub client_id: String,
    /// The client secret, or `client_secret_env` naming a variable holding it.
    /// Public clients (PKCE only) leave both out.
    #[serde(default)]
    pub client_secret: Option<Secret>,
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The button's label; defaults to `name`.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Scopes asked for; `openid` is always included.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
}

fn default_scopes() -> Vec<String> {
    vec!["openid".into(), "email".into(), "profile".into()]
}

impl OidcProviderConfig {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.name.is_empty()
                && self.name.len() <= 40
                && self
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "[[auth.oidc]] name '{}' must be 1 to 40 of a-z, 0-9 and '-'",
            self.name
        );
        let issuer = url::Url::parse(&self.issuer)
            .map_err(|e| anyhow::anyhow!("[[auth.oidc]] {}: issuer is not a URL: {e}", self.name))?;
        anyhow::ensure!(
            matches!(issuer.scheme(), "https" | "http"),
            "[[auth.oidc]] {}: issuer must be an https URL",
            self.name
        );
        anyhow::ensure!(
            !self.client_id.is_empty(),
            "[[auth.oidc]] {}: client_id is empty",
            self.name
        );
        Ok(())
    }

    fn secret(&self) -> Option<String> {
        if let Some(secret) = &self.client_secret {
            return Some(secret.expose().to_string());
        }
        self.client_secret_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
    }
}

/// The provider's discovery document (the fields used).
#[derive(Clone, Debug, Deserialize)]
pub struct Discovery {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
}

/// What an accepted ID token says about the user.
#[derive(Clone, Debug, Deserialize)]
pub struct Claims {
    pub sub: String,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub email_verified: Option<bool>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    #[serde(default)]
    aud: Audience,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(untagged)]
enum Audience {
    #[default]
    None,
    /// Tried first: a list of audiences.
    Many(Vec<String>),
    /// A single audience (jsonwebtoken has already checked it is ours).
    One(serde::de::IgnoredAny),
}

/// Why an ID token or a sign-in was refused. The message is safe to show.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the identity provider could not be reached or answered badly: {0}")]
    Provider(String),
    #[error("the ID token was refused: {0}")]
    Token(String),
}

/// How long discovery documents and key sets are reused.
const CACHE_FOR: Duration = Duration::from_secs(300);
/// An unknown `kid` refetches the key set at most this often (key rotation).
const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// Clock skew allowed on `exp`, `nbf` and `iat`.
const LEEWAY_SECS: u64 = 60;

/// A configured provider with its cached discovery document and keys.
pub struct Provider {
    pub config: OidcProviderConfig,
    http: reqwest::Client,
    cache: Mutex<ProviderCache>,
}

#[derive(Default)]
struct ProviderCache {
    discovery: Option<(Instant, Discovery)>,
    /// The signing keys of the provider's JWKS, when fetched.
    keys: Option<(Instant, Vec<Jwk>)>,
}

#[derive(Clone)]
struct Jwk {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

impl Provider {
    pub fn new(config: OidcProviderConfig, http: reqwest::Client) -> Self {
        Self {
            config,
            http,
            cache: Mutex::new(ProviderCache::default()),
        }
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    pub fn display_name(&self) -> &str {
        self.config.display_name.as_deref().unwrap_or(&self.config.name)
    }

    pub async fn discovery(&self) -> Result<Discovery, OidcError> {
        if let Some((at, discovery)) = &self.cache.lock().expect("oidc cache").discovery
            && at.elapsed() < CACHE_FOR
        {
            return Ok(discovery.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let discovery: Discovery = self.get_json(&url).await?;
        // The document must be the issuer's own (OpenID Connect Discovery §4.3).
        if discovery.issuer != self.config.issuer {
            return Err(OidcError::Provider(format!(
                "discovery names issuer '{}', not the configured '{}'",
                discovery.issuer, self.config.issuer
            )));
        }
        self.cache.lock().expect("oidc cache").discovery = Some((Instant::now(), discovery.clone()));
        Ok(discovery)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, OidcError> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| OidcError::Provider(format!("GET {url}: {}", e.without_url())))?;
        if !response.status().is_success() {
            return Err(OidcError::Provider(format!("GET {url}: status {}", response.status())));
        }
        response
            .json()
            .await
            .map_err(|e| OidcError::Provider(format!("GET {url}: {}", e.without_url())))
    }

    /// The authorization URL the browser is sent to.
    pub fn authorize_url(&self, discovery: &Discovery, redirect_uri: &str, login: &Login) -> String {
        let mut scopes = self.config.scopes.clone();
        if !scopes.iter().any(|s| s == "openid") {
            scopes.insert(0, "openid".into());
        }
        let mut url = match url::Url::parse(&discovery.authorization_endpoint) {
            Ok(url) => url,
            Err(_) => return discovery.authorization_endpoint.clone(),
        };
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", &login.state)
            .append_pair("nonce", &login.nonce)
            .append_pair("code_challenge", &pkce_challenge(&login.pkce_verifier))
            .append_pair("code_challenge_method", "S256");
        url.into()
    }

    /// Exchanges the code for tokens and returns the verified ID token's claims.
    pub async fn exchange(
        &self,
        discovery: &Discovery,
        code: &str,
        redirect_uri: &str,
        login: &Login,
    ) -> Result<Claims, OidcError> {
        let mut form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code.to_string()),
            ("redirect_uri", redirect_uri.to_string()),
            ("code_verifier", login.pkce_verifier.clone()),
            ("client_id", self.config.client_id.clone()),
        ];
        let mut request = self.http.post(&discovery.token_endpoint);
        if let Some(secret) = self.config.secret() {
            let basic = discovery
                .token_endpoint_auth_methods_supported
                .as_ref()
                .is_none_or(|methods| methods.iter().any(|m| m == "client_secret_basic"));
            if basic {
                request = request.basic_auth(form_encode(&self.config.client_id), Some(form_encode(&secret)));
            } else {
                form.push(("client_secret", secret));
            }
        }
        let response = request
            .form(&form)
            .send()
            .await
            .map_err(|e| OidcError::Provider(format!("token endpoint: {}", e.without_url())))?;
        let status = response.status();
        let body: serde_json::Value = response
            .json()
            .await
            .map_err(|e| OidcError::Provider(format!("token endpoint: {}", e.without_url())))?;
        if !status.is_success() {
            let error = body["error"].as_str().unwrap_or("unknown error");
            return Err(OidcError::Provider(format!("token endpoint refused the code: {error}")));
        }
        let id_token = body["id_token"]
            .as_str()
            .ok_or_else(|| OidcError::Provider("the token response has no id_token".into()))?;
        self.verify(discovery, id_token, &login.nonce).await
    }

    /// Checks an ID token: algorithm, signature, issuer, audience, expiry, nonce.
    pub async fn verify(&self, discovery: &Discovery, id_token: &str, nonce: &str) -> Result<Claims, OidcError> {
        let refuse = |why: String| OidcError::Token(why);
        // The algorithm is read first and must be an asymmetric one we allow:
        // `none` does not even parse as an algorithm, and HS256 (which would
        // use a public key as an HMAC secret) is refused here.
        let header = jsonwebtoken::decode_header(id_token).map_err(|e| refuse(format!("unreadable header: {e}")))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(refuse(format!(
                "algorithm {:?} is not allowed (RS256 or ES256 only)",
                header.alg
            )));
        }
        let key = self.key(discovery, header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.client_id]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let data = jsonwebtoken::decode::<Claims>(id_token, &key, &validation).map_err(|e| refuse(e.to_string()))?;
        let claims = data.claims;
        let matches_nonce = claims
            .nonce
            .as_deref()
            .is_some_and(|got| bool::from(got.as_bytes().ct_eq(nonce.as_bytes())));
        if !matches_nonce {
            return Err(refuse("the nonce is not this sign-in's".into()));
        }
        // With several audiences, the token must have been issued to us (azp).
        let audiences = match &claims.aud {
            Audience::Many(many) => many.len(),
            _ => 1,
        };
        if (audiences > 1 || claims.azp.is_some()) && claims.azp.as_deref() != Some(self.config.client_id.as_str()) {
            return Err(refuse("azp is not this client".into()));
        }
        Ok(claims)
    }

    /// The verification key for `kid`, refetching the set once when the kid
    /// is unknown (the provider may have rotated its keys).
    async fn key(&self, discovery: &Discovery, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, OidcError> {
        let (cached, stale) = {
            let cache = self.cache.lock().expect("oidc cache");
            match &cache.keys {
                Some((at, keys)) => (Some(keys.clone()), at.elapsed() >= REFETCH_AFTER),
                None => (None, true),
            }
        };
        if let Some(keys) = &cached
            && let Some(key) = pick(keys, kid, alg)
        {
            return Ok(key);
        }
        if cached.is_some() && !stale {
            return Err(OidcError::Token("signed by a key the provider does not publish".into()));
        }
        let set: serde_json::Value = self.get_json(&discovery.jwks_uri).await?;
        let keys = parse_jwks(&set);
        self.cache.lock().expect("oidc cache").keys = Some((Instant::now(), keys.clone()));
        pick(&keys, kid, alg).ok_or_else(|| OidcError::Token("signed by a key the provider does not publish".into()))
    }
}

/// A key of the right family for `alg`, by `kid`, or the only such key when
/// the token names none.
fn pick(keys: &[Jwk], kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    let fitting: Vec<&Jwk> = keys.iter().filter(|k| k.alg == alg).collect();
    match kid {
        Some(kid) => fitting
            .iter()
            .find(|k| k.kid.as_deref() == Some(kid))
            .map(|k| k.key.clone()),
        None if fitting.len() == 1 => Some(fitting[0].key.clone()),
        None => None,
    }
}

/// The signing keys of a JWKS: RSA keys for RS256 and P-256 keys for ES256.
/// Encryption keys, symmetric keys and anything unreadable are skipped.
fn parse_jwks(set: &serde_json::Value) -> Vec<Jwk> {
    let mut keys = Vec::new();
    for jwk in set["keys"].as_array().into_iter().flatten() {
        if jwk.get("use").and_then(|u| u.as_str()).is_some_and(|u| u != "sig") {
            continue;
        }
        let text = |name: &str| jwk.get(name).and_then(|v| v.as_str());
        let declared = text("alg");
        let (alg, key) = match (text("kty"), text("crv")) {
            (Some("RSA"), _) => match (text("n"), text("e")) {
                (Some(n), Some(e)) => (Algorithm::RS256, DecodingKey::from_rsa_components(n, e)),
                _ => continue,
            },
            (Some("EC"), Some("P-256")) => match (text("x"), text("y")) {
                (Some(x), Some(y)) => (Algorithm::ES256, DecodingKey::from_ec_components(x, y)),
                _ => continue,
            },
            _ => continue,
        };
        let Ok(key) = key else { continue };
        let name = match alg {
            Algorithm::RS256 => "RS256",
            _ => "ES256",
        };
        if declared.is_some_and(|d| d != name) {
            continue;
        }
        keys.push(Jwk {
            kid: text("kid").map(str::to_string),
            alg,
            key,
        });
    }
    keys
}

/// One sign-in in flight: what the callback must match.
#[derive(Clone, Debug)]
pub struct Login {
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

impl Login {
    pub fn new() -> Self {
        Self {
            state: super::sessions::random_token(),
            nonce: super::sessions::random_token(),
            pkce_verifier: super::sessions::random_token(),
        }
    }
}

impl Default for Login {
    fn default() -> Self {
        Self::new()
    }
}

/// RFC 7636 S256: base64url(SHA-256(verifier)).
pub fn pkce_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// RFC 6749 §2.3.1: client credentials are form-encoded before HTTP Basic.
fn form_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The configured providers, by name.
pub struct Providers {
    by_name: HashMap<String, Provider>,
    order: Vec<String>,
}

impl Providers {
    pub fn new(configs: &[OidcProviderConfig], http: reqwest::Client) -> anyhow::Result<Self> {
        let mut by_name = HashMap::new();
        let mut order = Vec::new();
        for config in configs {
            config.check()?;
            anyhow::ensure!(
                !by_name.contains_key(&config.name),
                "[[auth.oidc]] name '{}' is used twice",
                config.name
            );
            order.push(config.name.clone());
            by_name.insert(config.name.clone(), Provider::new(config.clone(), http.clone()));
        }
        Ok(Self { by_name, order })
    }

    pub fn get(&self, name: &str) -> Option<&Provider> {
        self.by_name.get(name)
    }

    /// In configuration order.
    pub fn iter(&self) -> impl Iterator<Item = &Provider> {
        self.order.iter().filter_map(|name| self.by_name.get(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_matches_the_rfc_example() {
        // RFC 7636 appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn keeps_only_signing_keys_it_can_use() {
        let set = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB", "kid": "enc"},
            {"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA", "kid": "p384"},
            {"kty": "RSA", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB", "kid": "rsa"},
        ]});
        let keys = parse_jwks(&set);
        assert_eq!(keys.len(), 1, "only the RSA signing key");
        assert!(pick(&keys, Some("rsa"), Algorithm::RS256).is_some());
        assert!(pick(&keys, Some("rsa"), Algorithm::ES256).is_none());
        assert!(pick(&keys, None, Algorithm::RS256).is_some());
        assert!(pick(&keys, Some("other"), Algorithm::RS256).is_none());
    }

    #[test]
    fn refuses_bad_names_and_issuers() {
        let config = |name: &str, issuer: &str| OidcProviderConfig {
            name: name.into(),
            issuer: issuer.into(),
            client_id: "c".into(),
            client_secret: None,
            client_secret_env: None,
            display_name: None,
            scopes: default_scopes(),
        };
        assert!(config("corp", "https://id.example.com").check().is_ok());
        assert!(config("Corp!", "https://id.example.com").check().is_err());
        assert!(config("corp", "not a url").check().is_err());
    }
}
