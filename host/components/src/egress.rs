//! Where a component's outbound HTTP may go. Loopback, private, link-local,
//! CGNAT, metadata and other non-public addresses are refused unless the
//! operator listed the origin in `[components] allow_internal_origins`.
//!
//! The check runs on the addresses a connection would use: a literal IP host
//! is checked before the request is built, and a name is resolved by
//! [`PublicOnly`], which hands the connector only public addresses. So a name
//! that resolves (or re-resolves, as in DNS rebinding) to an internal
//! address never gets a packet sent to it. Spelling cannot dodge it: URLs are
//! parsed the WHATWG way (`2130706433`, `0x7f.1` and `127.1` are
//! `127.0.0.1`), and IPv6 forms that embed an IPv4 address are judged by
//! that address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::grants::Origin;

/// The outbound clients and the operator's allowlist, shared by every call.
pub struct Egress {
    /// Origins the operator lets components reach although they are internal.
    allowed_internal: Vec<Origin>,
    /// For every other origin: resolves names to public addresses only.
    public: reqwest::Client,
    /// For the allowed internal origins: resolves as the system does.
    internal: reqwest::Client,
}

/// Why a target was refused or could not be reached, in one text for every
/// cause, so a component cannot tell a refused address from a closed port or
/// a name that does not resolve.
pub(crate) fn unreachable(origin: &Origin) -> String {
    format!("no answer from {origin}: it could not be reached, or it is not one components may call")
}

impl Egress {
    pub fn new(allow_internal_origins: &[String]) -> anyhow::Result<Self> {
        let allowed_internal = allow_internal_origins
            .iter()
            .map(|text| Origin::parse(text).map_err(|e| anyhow::anyhow!("components.allow_internal_origins: {e}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            allowed_internal,
            public: client().dns_resolver(Arc::new(PublicOnly)).build()?,
            internal: client().build()?,
        })
    }

    /// Whether the operator allowed `origin` although it may be internal.
    pub fn allows_internal(&self, origin: &Origin) -> bool {
        self.allowed_internal.contains(origin)
    }

    /// The install-time check: an origin whose host is an internal address,
    /// or a `localhost` name, is refused unless the operator allowed it. Other
    /// names are checked when a request connects, as their addresses may change.
    pub fn check_origin(&self, origin: &Origin) -> Result<(), String> {
        if self.allows_internal(origin) {
            return Ok(());
        }
        let url = url::Url::parse(origin.as_str()).map_err(|e| format!("{origin}: {e}"))?;
        let internal = match url.host() {
            Some(url::Host::Ipv4(ip)) => is_internal(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => is_internal(IpAddr::V6(ip)),
            Some(url::Host::Domain(name)) => is_localhost_name(name),
            None => true,
        };
        if internal {
            return Err(format!(
                "origin {origin} is a loopback, private, link-local or other internal address; \
                 components may call it only if the operator lists it in [components] allow_internal_origins"
            ));
        }
        Ok(())
    }

    /// The client for a request to `url` (of `origin`): a tool server's
    /// `http`, and the tools concern's remote MCP client. `None` when its
    /// host is an internal address the operator did not allow.
    pub fn client_for(&self, origin: &Origin, url: &url::Url) -> Option<&reqwest::Client> {
        if self.allows_internal(origin) {
            return Some(&self.internal);
        }
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        // A literal address never reaches the resolver: it is checked here.
        match literal {
            Some(ip) if is_internal(ip) => None,
            _ => Some(&self.public),
        }
    }
}

/// No redirects (a 3xx comes back as it is, so a redirect cannot lead
/// anywhere the checks did not see) and no proxy from the environment.
fn client() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
}

/// `localhost` and names under it (RFC 6761), with or without a final dot.
fn is_localhost_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Resolves with the system resolver and keeps only public addresses, so the
/// connector can only connect to those. A name with none is an error.
struct PublicOnly;

#[derive(Debug, thiserror::Error)]
#[error("'{0}' resolves to no public address")]
struct NoPublicAddress(String);

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = resolved.filter(|address| !is_internal(address.ip())).collect();
            if public.is_empty() {
                tracing::debug!(%host, "component request refused: no public address");
                return Err(Box::new(NoPublicAddress(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Whether `ip` is anything but a public unicast address.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => internal_v4(v4),
            None => internal_v6(v6),
        },
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0 // "this network", 0.0.0.0 included
        || ip.is_loopback() // 127/8
        || ip.is_private() // 10/8, 172.16/12, 192.168/16
        || ip.is_link_local() // 169.254/16, the cloud metadata service included
        || (a == 100 && (64..128).contains(&b)) // 100.64/10, carrier-grade NAT
        || (a == 192 && b == 0 && c == 0) // 192.0.0/24, protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // 198.18/15, benchmarking
        || ip.is_documentation()
        || a >= 224 // multicast, reserved, broadcast
}

fn internal_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_unique_local() // fc00::/7, AWS's fd00:ec2::254 metadata included
        || ip.is_unicast_link_local() // fe80::/10
        || (first & 0xffc0) == 0xfec0 // fec0::/10, the old site-local
        || ip.is_multicast()
        || (first == 0x2001 && ip.segments()[1] == 0xdb8) // documentation
        || (first == 0x2001 && ip.segments()[1] == 0) // Teredo: a tunnel, not a server
        || (first == 0x100 && ip.segments()[1..4] == [0, 0, 0]) // 100::/64, discard
}

/// The IPv4 address an IPv6 address carries, for the forms that route to it:
/// mapped (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`, `64:ff9b:1::/48`) and 6to4 (`2002:aabb:ccdd::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = |hi: u16, lo: u16| Some(Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if ip.is_loopback() || ip.is_unspecified() {
        return None;
    }
    match s {
        [0, 0, 0, 0, 0, 0, hi, lo] => low(hi, lo),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => low(hi, lo),
        // Local-use NAT64: the whole prefix is the operator's own network.
        [0x64, 0xff9b, 1, ..] => Some(Ipv4Addr::UNSPECIFIED),
        [0x2002, hi, lo, ..] => low(hi, lo),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn internal(text: &str) -> bool {
        is_internal(text.parse().unwrap())
    }

    #[test]
    fn internal_addresses_in_every_family_and_form() {
        for text in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.0.1",
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.170",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:db8::1",
            "2001:0:4136:e378::1",
        ] {
            assert!(internal(text), "{text} is internal");
        }
        for text in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "169.253.255.255",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::",
        ] {
            assert!(!internal(text), "{text} is public");
        }
    }

    fn egress(allowed: &[&str]) -> Egress {
        Egress::new(&allowed.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn install_time_check_sees_through_spellings_and_honours_the_allowlist() {
        let policy = egress(&["http://127.0.0.1:9000", "http://localhost:9001"]);
        for text in [
            "http://127.0.0.1",
            "http://2130706433",
            "http://0x7f.1",
            "http://0177.0.0.1",
            "http://127.1:9002/x",
            "http://127.0.0.1.",
            "http://[::1]",
            "http://[::ffff:127.0.0.1]",
            "http://[::ffff:7f00:1]",
            "http://10.1.2.3",
            "http://169.254.169.254",
            "http://[fd00:ec2::254]",
            "http://localhost",
            "http://LOCALHOST.:9001",
            "http://api.localhost",
            "https://0.0.0.0",
        ] {
            let origin = Origin::parse(text).unwrap();
            let refused = policy.check_origin(&origin).expect_err(text);
            assert!(refused.contains("allow_internal_origins"), "{text}: {refused}");
        }
        for text in [
            "http://127.0.0.1:9000",
            "http://0x7f.0.0.1:9000",
            "http://localhost:9001",
            "https://api.example.com",
            "http://8.8.8.8",
        ] {
            let origin = Origin::parse(text).unwrap();
            assert_eq!(policy.check_origin(&origin), Ok(()), "{text}");
        }
        assert!(Egress::new(&["not a url".into()]).is_err());
    }

    #[test]
    fn literal_internal_hosts_get_no_client_unless_allowed() {
        let policy = egress(&["http://127.0.0.1:9000"]);
        let check = |text: &str| {
            let url = url::Url::parse(text).unwrap();
            policy.client_for(&Origin::of(&url).unwrap(), &url).is_some()
        };
        assert!(!check("http://127.0.0.1:9001/"));
        assert!(!check("http://[::ffff:a00:1]/"));
        assert!(check("http://127.0.0.1:9000/"));
        assert!(check("http://93.184.216.34/"));
        // Names go to the resolver, which filters what they resolve to.
        assert!(check("http://localhost:9001/"));
    }

    #[tokio::test]
    async fn the_resolver_drops_internal_addresses() {
        let resolve = |host: &'static str| async move {
            PublicOnly
                .resolve(host.parse().unwrap())
                .await
                .map(|addresses| addresses.collect::<Vec<_>>())
        };
        // /etc/hosts maps localhost to loopback: nothing is left.
        let error = resolve("localhost").await.unwrap_err();
        assert!(error.to_string().contains("no public address"), "{error}");
        assert!(resolve("127.0.0.1").await.is_err());
        assert!(resolve("0x7f.1").await.is_err());
        assert_eq!(
            resolve("1.1.1.1").await.unwrap(),
            vec![SocketAddr::from(([1, 1, 1, 1], 0))]
        );
    }
}
