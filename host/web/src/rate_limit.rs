//! Request-rate limits, kept in memory by each gateway process (governor's
//! GCRA: one timestamp per key, updated with a compare-and-swap, so a check
//! costs a map lookup and no I/O):
//! - per API key on the data plane (`[auth] key_requests_per_minute`, and a
//!   key's own `requests_per_minute`, which can only tighten it);
//! - per client IP for `accounts.signup` (`[control_plane] signup_per_minute`),
//!   with the client found behind trusted proxies by [`client_ip`].

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http::HeaderMap;
use serde::{Deserialize, Serialize};

/// Drop idle keys from a limiter's map every this many checks, so keys (or
/// addresses) seen once do not pile up.
const HOUSEKEEPING_EVERY: u64 = 4096;

/// A keyed limiter allowing `per_minute` requests a minute with bursts of as
/// many, plus its housekeeping counter.
struct Keyed<K: std::hash::Hash + Eq + Clone> {
    limiter: DefaultKeyedRateLimiter<K>,
    checks: AtomicU64,
}

impl<K: std::hash::Hash + Eq + Clone> Keyed<K> {
    fn per_minute(per_minute: NonZeroU32, clock: &DefaultClock) -> Self {
        Self {
            limiter: RateLimiter::dashmap_with_clock(Quota::per_minute(per_minute), clock.clone()),
            checks: AtomicU64::new(0),
        }
    }

    /// `Err` holds how long until `key` may try again.
    fn check(&self, key: &K, clock: &DefaultClock) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % HOUSEKEEPING_EVERY == HOUSEKEEPING_EVERY - 1 {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(clock.now()))
    }
}

/// The request rate a key is held to: the gateway default (0: none) and the
/// key's own limit, whichever is lower. A key's own limit never loosens the
/// gateway's.
pub fn effective_per_minute(default: u32, own: Option<u32>) -> Option<NonZeroU32> {
    let own = own.and_then(NonZeroU32::new);
    match NonZeroU32::new(default) {
        None => own,
        Some(default) => Some(own.map_or(default, |own| own.min(default))),
    }
}

/// Per-key request limits for the data plane.
pub struct KeyRateLimiter {
    default_per_minute: u32,
    clock: DefaultClock,
    /// One keyed limiter per distinct rate (the default, and each per-key
    /// override in use), keyed by key id.
    by_rate: RwLock<HashMap<NonZeroU32, Arc<Keyed<String>>>>,
}

impl KeyRateLimiter {
    /// `default_per_minute` 0: keys without their own limit are unlimited.
    pub fn new(default_per_minute: u32) -> Self {
        Self {
            default_per_minute,
            clock: DefaultClock::default(),
            by_rate: RwLock::new(HashMap::new()),
        }
    }

    pub fn default_per_minute(&self) -> u32 {
        self.default_per_minute
    }

    /// Counts one request by the key `key_id`, whose own limit (if it has
    /// one) is `own_per_minute`. `Err` holds how long until it may call again.
    /// (`&String`: the limiter's map is keyed by `String`, and a `&str` would
    /// cost every request an allocation.)
    #[allow(clippy::ptr_arg)]
    pub fn check(&self, key_id: &String, own_per_minute: Option<u32>) -> Result<(), Duration> {
        let Some(rate) = effective_per_minute(self.default_per_minute, own_per_minute) else {
            return Ok(());
        };
        let found = self.by_rate.read().expect("rate limiter poisoned").get(&rate).cloned();
        let keyed = match found {
            Some(keyed) => keyed,
            None => self
                .by_rate
                .write()
                .expect("rate limiter poisoned")
                .entry(rate)
                .or_insert_with(|| Arc::new(Keyed::per_minute(rate, &self.clock)))
                .clone(),
        };
        keyed.check(key_id, &self.clock)
    }
}

/// Per-client-IP limit for sign-up. IPv6 clients are limited per /64, the
/// block one host usually gets, so rotating addresses within it gains nothing.
pub struct IpRateLimiter {
    /// `None`: the limit is 0, nothing is permitted.
    keyed: Option<Keyed<IpAddr>>,
    clock: DefaultClock,
}

impl IpRateLimiter {
    pub fn per_minute(per_minute: u32) -> Self {
        let clock = DefaultClock::default();
        Self {
            keyed: NonZeroU32::new(per_minute).map(|rate| Keyed::per_minute(rate, &clock)),
            clock,
        }
    }

    /// Counts one attempt from `client` (`None`: unknown, which shares one
    /// budget). `Err` holds how long until it may try again; `Duration::MAX`
    /// when the limit is 0.
    pub fn check(&self, client: Option<IpAddr>) -> Result<(), Duration> {
        let Some(keyed) = &self.keyed else {
            return Err(Duration::MAX);
        };
        let key = match client.map(|ip| ip.to_canonical()) {
            Some(IpAddr::V6(v6)) => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
            Some(v4) => v4,
            None => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        keyed.check(&key, &self.clock)
    }
}

/// Whole seconds to put in `Retry-After`: rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

/// A proxy whose `X-Forwarded-For` is believed: an address or a CIDR block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TrustedProxy(ipnet::IpNet);

impl TryFrom<String> for TrustedProxy {
    type Error = String;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        let text = text.trim();
        if let Ok(net) = text.parse::<ipnet::IpNet>() {
            return Ok(TrustedProxy(net.trunc()));
        }
        text.parse::<IpAddr>()
            .map(|ip| TrustedProxy(ipnet::IpNet::from(ip)))
            .map_err(|_| format!("'{text}' is neither an IP address nor a CIDR block (e.g. 10.0.0.0/8)"))
    }
}

impl From<TrustedProxy> for String {
    fn from(proxy: TrustedProxy) -> String {
        proxy.0.to_string()
    }
}

/// Whether `ip` is one of the trusted proxies.
pub fn is_trusted(ip: IpAddr, trusted: &[TrustedProxy]) -> bool {
    let ip = ip.to_canonical();
    trusted.iter().any(|proxy| proxy.0.contains(&ip))
}

/// The client's address: the socket peer, unless the peer is a trusted proxy;
/// then the right-most `X-Forwarded-For` entry that is not a trusted proxy
/// (entries left of it could have been written by the client). An entry that
/// is not an address stops the walk at the hop that forwarded it.
pub fn client_ip(peer: Option<IpAddr>, headers: &HeaderMap, trusted: &[TrustedProxy]) -> Option<IpAddr> {
    let peer = peer?.to_canonical();
    if !is_trusted(peer, trusted) {
        return Some(peer);
    }
    let forwarded: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .collect();
    let mut client = peer;
    for entry in forwarded.iter().rev() {
        let Some(ip) = parse_forwarded(entry) else {
            return Some(client);
        };
        client = ip;
        if !is_trusted(ip, trusted) {
            return Some(ip);
        }
    }
    Some(client)
}

/// `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1` or `[2001:db8::1]:5678`.
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .or_else(|_| entry.parse::<std::net::SocketAddr>().map(|s| s.ip()))
        .ok()
        .map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key as the limiter sees it: its id and its own limit, if any.
    struct Key(String, Option<u32>);

    impl KeyRateLimiter {
        fn check_key(&self, key: &Key) -> Result<(), Duration> {
            self.check(&key.0, key.1)
        }
    }

    fn key(id: &str, own: Option<u32>) -> Key {
        Key(id.into(), own)
    }

    #[test]
    fn a_keys_own_limit_only_tightens() {
        let n = |v| NonZeroU32::new(v);
        assert_eq!(effective_per_minute(0, None), None);
        assert_eq!(effective_per_minute(0, Some(5)), n(5));
        assert_eq!(effective_per_minute(60, None), n(60));
        assert_eq!(effective_per_minute(60, Some(5)), n(5));
        assert_eq!(effective_per_minute(60, Some(600)), n(60));
        assert_eq!(effective_per_minute(60, Some(0)), n(60));
    }

    #[test]
    fn keys_are_limited_separately_with_a_retry_time() {
        let limiter = KeyRateLimiter::new(2);
        let a = key("key_a", None);
        assert!(limiter.check_key(&a).is_ok());
        assert!(limiter.check_key(&a).is_ok());
        let wait = limiter.check_key(&a).unwrap_err();
        assert!(
            wait > Duration::from_secs(20) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(retry_after_secs(wait), wait.as_secs() + 1);
        assert!(
            limiter.check_key(&key("key_b", None)).is_ok(),
            "another key has its own budget"
        );
        let tight = key("key_c", Some(1));
        assert!(limiter.check_key(&tight).is_ok());
        assert!(limiter.check_key(&tight).is_err(), "its own limit of 1");
        let unlimited = KeyRateLimiter::new(0);
        assert!((0..1000).all(|_| unlimited.check_key(&a).is_ok()));
    }

    #[test]
    fn sign_up_budgets_are_per_address_and_per_ipv6_block() {
        let limiter = IpRateLimiter::per_minute(1);
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert!(limiter.check(ip("192.0.2.1")).is_ok());
        assert!(limiter.check(ip("192.0.2.1")).is_err());
        assert!(
            limiter.check(ip("::ffff:192.0.2.1")).is_err(),
            "mapped IPv4 is the same client"
        );
        assert!(limiter.check(ip("192.0.2.2")).is_ok());
        assert!(limiter.check(ip("2001:db8:0:1::1")).is_ok());
        assert!(limiter.check(ip("2001:db8:0:1::2")).is_err(), "same /64");
        assert!(limiter.check(ip("2001:db8:0:2::1")).is_ok());
        assert_eq!(IpRateLimiter::per_minute(0).check(ip("192.0.2.9")), Err(Duration::MAX));
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted: Vec<TrustedProxy> = ["10.0.0.0/8".to_string(), "192.0.2.7".to_string()]
            .into_iter()
            .map(|t| TrustedProxy::try_from(t).unwrap())
            .collect();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "6.6.6.6, 203.0.113.5, 10.1.2.3".parse().unwrap());
        // Untrusted peer: its header is ignored.
        assert_eq!(
            client_ip(Some(ip("198.51.100.1")), &headers, &trusted),
            Some(ip("198.51.100.1"))
        );
        // Trusted peer: right-most untrusted entry; the spoofable left part is ignored.
        assert_eq!(
            client_ip(Some(ip("10.0.0.1")), &headers, &trusted),
            Some(ip("203.0.113.5"))
        );
        assert_eq!(
            client_ip(Some(ip("192.0.2.7")), &headers, &trusted),
            Some(ip("203.0.113.5"))
        );
        // No header: the proxy itself.
        assert_eq!(
            client_ip(Some(ip("10.0.0.1")), &HeaderMap::new(), &trusted),
            Some(ip("10.0.0.1"))
        );
        // Garbage stops the walk at the hop that forwarded it.
        headers.insert("x-forwarded-for", "203.0.113.5, junk, 10.9.9.9".parse().unwrap());
        assert_eq!(
            client_ip(Some(ip("10.0.0.1")), &headers, &trusted),
            Some(ip("10.9.9.9"))
        );
        headers.insert("x-forwarded-for", "[2001:db8::5]:443".parse().unwrap());
        assert_eq!(
            client_ip(Some(ip("10.0.0.1")), &headers, &trusted),
            Some(ip("2001:db8::5"))
        );
        assert_eq!(client_ip(None, &headers, &trusted), None);
        assert!(TrustedProxy::try_from("not-an-ip".to_string()).is_err());
    }
}
