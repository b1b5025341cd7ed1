//! The drill's network: a small TCP proxy on the loopback between worker A and Redis, for the
//! network-delay scenarios. Bytes from A to Redis pass straight through until the drill
//! holds them: then they wait in the proxy (A's request is in flight) until it lets them
//! go, in order. Replies flow back untouched and are counted, so the drill knows when Redis
//! has answered a request it let through.
//!
//! Closing it (or dropping it) ends the listener and every connection, and drops whatever
//! was still held: a held request never reaches Redis after the drill has ended.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::DrillError;
use super::plan::Plan;
use crate::access::connect::{self, NodeAddr};
use crate::config::{Config, TargetConfig};

/// Bytes held at most per connection; beyond this the proxy stops reading from A.
const MAX_HELD: usize = 1 << 20;
/// Connections from A at once (the worker opens one).
const MAX_CONNECTIONS: usize = 8;

/// What the connections share with the drill.
#[derive(Debug, Default)]
struct Counters {
    /// Bytes from A waiting in the proxy now.
    held: AtomicUsize,
    /// Bytes from Redis passed to A so far.
    replied: AtomicU64,
}

/// The proxy, listening on `addr` until closed.
pub(crate) struct Proxy {
    pub(crate) addr: SocketAddr,
    hold: watch::Sender<bool>,
    counters: Arc<Counters>,
    /// Ends the accept loop, which then ends every connection before it returns.
    stop: CancellationToken,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Where the proxy listens: worker A must be able to dial it by this name.
const LOOPBACK: &str = "127.0.0.1";

/// The proxy between worker A and the node the run works on, or why there can be none.
pub(crate) async fn for_plan(plan: &Plan<'_>) -> Result<Proxy, DrillError> {
    let why_not = match plan.target.connection.addr() {
        redis::ConnectionAddr::Unix(_) => Some("is reached over a unix socket"),
        redis::ConnectionAddr::TcpTls { .. } if plan.node.rsplit_once(':').map(|(h, _)| h) != Some(LOOPBACK) => Some(
            "is reached over TLS: worker A would check the server's certificate against the proxy's address, 127.0.0.1",
        ),
        _ => None,
    };
    if let Some(why) = why_not {
        return Err(DrillError::Usage(format!(
            "target {} {why}, and the network-delay scenarios put a TCP proxy on 127.0.0.1 between worker A and Redis; run them against a redis:// staging target, or use --scenario stale-holder",
            plan.target.name
        )));
    }
    Proxy::start(plan.node.clone()).await.map_err(DrillError::Proxy)
}

/// Worker A's connection through the proxy at `via` (`host:port`): the target's credentials,
/// database and TLS, the node serving `key` (where the drill points the proxy), and replies
/// awaited long enough for a request held past the namespace's TTL.
pub(crate) async fn connect_via(
    config: &Config,
    t: &TargetConfig,
    namespace: &str,
    key: Option<&str>,
    via: &str,
) -> redis::RedisResult<MultiplexedConnection> {
    let bad = || redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "bad --via", via.to_string()));
    let (host, port) = via.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let node = NodeAddr {
        host: host.trim_start_matches('[').trim_end_matches(']').to_string(),
        port,
    };
    let link = connect::link_for_key(t, key.unwrap_or_default().as_bytes()).await?;
    let link = link.at(&node).map_err(|e| e.source)?;
    let ttl = config.namespace(namespace).map_or(Duration::ZERO, |n| n.ttl);
    link.once_replying_within(connect::TIMEOUT + 2 * ttl + Duration::from_secs(5))
        .await
}

impl Proxy {
    /// Listen on a free port of 127.0.0.1 and forward each connection to `upstream`
    /// (`host:port`).
    pub(crate) async fn start(upstream: String) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind((LOOPBACK, 0)).await?;
        let addr = listener.local_addr()?;
        let (hold, held) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let shared = counters.clone();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let accept = tokio::spawn(async move {
            // The connections live in this set: when the accept loop ends, so do they (and
            // when the task is aborted instead, the set is dropped and they go with it).
            let mut conns = JoinSet::new();
            loop {
                tokio::select! {
                    () = stopped.cancelled() => {
                        drop(listener);
                        conns.shutdown().await;
                        return;
                    }
                    accepted = listener.accept() => {
                        let Ok((a, _)) = accepted else { continue };
                        if conns.len() >= MAX_CONNECTIONS {
                            continue;
                        }
                        conns.spawn(relay(a, upstream.clone(), held.clone(), shared.clone()));
                    }
                    Some(_) = conns.join_next() => {}
                }
            }
        });
        Ok(Proxy {
            addr,
            hold,
            counters,
            stop,
            accept,
        })
    }

    /// From now on, A's bytes wait in the proxy.
    pub(crate) fn hold(&self) {
        self.hold.send_replace(true);
    }

    /// Let A's held bytes through, in order, and pass what follows straight on.
    pub(crate) fn release(&self) {
        self.hold.send_replace(false);
    }

    /// Bytes from Redis passed to A so far.
    pub(crate) fn replied(&self) -> u64 {
        self.counters.replied.load(Ordering::Relaxed)
    }

    /// Wait (at most `limit`) until some of A's bytes are held: its request is in flight.
    pub(crate) async fn wait_held(&self, limit: Duration) -> bool {
        wait_until(limit, || self.counters.held.load(Ordering::Relaxed) > 0).await
    }

    /// Wait (at most `limit`) until Redis answered past `before` (a `replied` reading).
    pub(crate) async fn wait_replied(&self, before: u64, limit: Duration) -> bool {
        wait_until(limit, || self.replied() > before).await
    }

    /// Stop listening and cut every connection, and return once they are closed; held
    /// bytes are dropped, never delivered.
    pub(crate) async fn close(mut self) {
        self.stop.cancel();
        if tokio::time::timeout(Duration::from_secs(2), &mut self.accept)
            .await
            .is_err()
        {
            self.accept.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + limit;
    while !done() {
        if Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// One connection of A: to Redis with holding, back to A counted. Ends when either side
/// closes or fails.
async fn relay(a: TcpStream, upstream: String, held: watch::Receiver<bool>, counters: Arc<Counters>) {
    let Ok(r) = TcpStream::connect(&upstream).await else {
        return;
    };
    let _ = a.set_nodelay(true);
    let _ = r.set_nodelay(true);
    let (a_read, mut a_write) = a.into_split();
    let (mut r_read, r_write) = r.into_split();
    let back = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match r_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if a_write.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                    counters.replied.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    };
    tokio::select! {
        () = forward(a_read, r_write, held, &counters) => {}
        () = back => {}
    }
}

/// A's bytes to Redis: straight on, or held while `held` says so, then sent in order.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut held: watch::Receiver<bool>,
    counters: &Counters,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut waiting: Vec<u8> = Vec::new();
    loop {
        let holding = *held.borrow_and_update();
        if !holding && flush(&mut to, &mut waiting, counters).await.is_err() {
            return;
        }
        tokio::select! {
            read = from.read(&mut buf), if !(holding && waiting.len() >= MAX_HELD) => {
                let n = match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if *held.borrow() {
                    waiting.extend_from_slice(&buf[..n]);
                    counters.held.fetch_add(n, Ordering::Relaxed);
                } else if flush(&mut to, &mut waiting, counters).await.is_err()
                    || to.write_all(&buf[..n]).await.is_err()
                {
                    break;
                }
            }
            changed = held.changed() => {
                if changed.is_err() {
                    break;
                }
            }
        }
    }
    counters.held.fetch_sub(waiting.len(), Ordering::Relaxed);
}

/// Send what was held, in order (nothing when nothing was).
async fn flush(
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    waiting: &mut Vec<u8>,
    counters: &Counters,
) -> std::io::Result<()> {
    if waiting.is_empty() {
        return Ok(());
    }
    let sent = to.write_all(waiting).await;
    counters.held.fetch_sub(waiting.len(), Ordering::Relaxed);
    waiting.clear();
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers every read with "+<bytes read>\n" (a stand-in for Redis).
    async fn echo_server() -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
        let addr = l.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, task)
    }

    async fn read_some(s: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
        let mut buf = [0u8; 64];
        match tokio::time::timeout(limit, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => Some(buf[..n].to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_tls_target_elsewhere_than_the_loopback_is_refused() {
        use crate::config::Overrides;
        use crate::drill::Options;
        let text = "[[target]]\nname = \"staging\"\nurl = \"rediss://redis.example:6380\"\n\
             [[namespace]]\nname = \"drill\"\npattern = \"drill:lock:*\"\nfence_pattern = \"drill:fence:*\"\nttl = \"1s\"\n";
        let config = Config::from_toml(text, "t.toml", std::path::Path::new("."), &Overrides::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut plan = Plan::new(&config, &Options::new("t.toml")).unwrap_or_else(|e| panic!("{e}"));
        plan.node = "redis.example:6380".into();
        match for_plan(&plan).await {
            Err(DrillError::Usage(m)) => assert!(m.contains("over TLS") && m.contains("stale-holder"), "{m}"),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[tokio::test]
    async fn held_bytes_wait_and_then_arrive_in_order() {
        let (server, _task) = echo_server().await;
        let p = Proxy::start(server.to_string()).await.unwrap_or_else(|e| panic!("{e}"));
        let mut a = TcpStream::connect(p.addr).await.unwrap_or_else(|e| panic!("{e}"));
        a.write_all(b"one").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read_some(&mut a, Duration::from_secs(2)).await.as_deref(),
            Some(&b"one"[..])
        );
        p.hold();
        a.write_all(b"two").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(p.wait_held(Duration::from_secs(2)).await);
        assert_eq!(
            read_some(&mut a, Duration::from_millis(300)).await,
            None,
            "held, not delivered"
        );
        let before = p.replied();
        p.release();
        assert!(p.wait_replied(before, Duration::from_secs(2)).await);
        assert_eq!(
            read_some(&mut a, Duration::from_secs(2)).await.as_deref(),
            Some(&b"two"[..])
        );
        // Closed: held bytes are dropped, the connection cut, the port free.
        p.hold();
        a.write_all(b"three").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(p.wait_held(Duration::from_secs(2)).await);
        let addr = p.addr;
        p.close().await;
        assert!(TcpStream::connect(addr).await.is_err(), "still listening");
        assert_eq!(read_some(&mut a, Duration::from_secs(2)).await, None);
    }
}
