//! A TCP proxy in front of Postgres that a test can cut, so a gateway
//! pointed at it sees a real database outage: [`DbProxy::cut`] drops every
//! open connection and closes each new one as soon as it is accepted (as a
//! load balancer with no backend would), [`DbProxy::restore`] forwards again.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy; it stops when dropped.
pub struct DbProxy {
    pub address: SocketAddr,
    /// `true` while cut. Each connection's task watches it and drops its
    /// sockets when it turns `true`.
    cut: Arc<watch::Sender<bool>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for DbProxy {
    fn drop(&mut self) {
        self.accepting.abort();
        // Ends every connection still open.
        self.cut.send_replace(true);
    }
}

impl DbProxy {
    /// A proxy on 127.0.0.1 (a free port) forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> DbProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let cut = Arc::new(watch::channel(false).0);
        let accepting = tokio::spawn(accept(listener, upstream, cut.clone()));
        DbProxy {
            address,
            cut,
            accepting,
        }
    }

    /// `url` (a `postgres://` URL, query and all) with its host and port
    /// replaced by the proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let mut url = url::Url::parse(url).unwrap();
        url.set_host(Some(&self.address.ip().to_string())).unwrap();
        url.set_port(Some(self.address.port())).unwrap();
        url.to_string()
    }

    /// The host and port `url` points at, to proxy to.
    pub fn upstream_of(url: &str) -> SocketAddr {
        let url = url::Url::parse(url).unwrap();
        let host = url.host_str().unwrap();
        let port = url.port().unwrap_or(5432);
        std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
            .unwrap()
            .next()
            .unwrap()
    }

    /// Drops every open connection and refuses new ones until [`DbProxy::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, cut: Arc<watch::Sender<bool>>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let mut watching = cut.subscribe();
        if *watching.borrow_and_update() {
            // Cut: accepted only to be closed at once.
            drop(client);
            continue;
        }
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            let (mut client, mut server) = (client, server);
            tokio::select! {
                _ = copy_bidirectional(&mut client, &mut server) => {}
                _ = watching.wait_for(|cut| *cut) => {}
            }
            // Both sockets drop here: the gateway sees its connection end.
        });
    }
}
