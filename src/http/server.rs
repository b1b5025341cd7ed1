//! The HTTP server: an accept loop over hyper's HTTP/1.1 connections, so that no client can
//! hold the exporter. Each connection takes a slot (`slots`): at `max_connections` the
//! connection idle the longest gives way to the newcomer, so `/metrics` is answered however
//! many idle or slow connections someone holds; a request head (TLS handshake included)
//! must arrive within `header_timeout`, a kept-alive connection may idle `idle_timeout`
//! (bodies are the push's, bounded by `body_timeout` there). Accept errors (out of file
//! descriptors) make an idle connection give way, else back off: never a busy loop. The
//! router and TLS settings are `Live`: a reload swaps them for the next request and handshake.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus::{IntCounter, IntCounterVec, IntGauge};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::slots::{Closed, Held, Slots, Watched};
use crate::config::HttpLimits;
use crate::metrics::Registry;
use crate::vocab::metric;

/// First and longest wait after an accept error that no idle connection could relieve.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long requests in progress may take to finish once shutdown began.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The server's families: connections open, closed by the server, accept errors.
#[derive(Clone)]
pub(crate) struct ServerMetrics {
    open: IntGauge,
    closed: IntCounterVec,
    accept_errors: IntCounter,
}

impl ServerMetrics {
    pub(crate) fn register(r: &Registry) -> Result<Self, prometheus::Error> {
        let m = ServerMetrics {
            open: r
                .int_gauges(
                    metric::HTTP_CONNECTIONS,
                    "HTTP connections open (TLS handshakes included).",
                    &[],
                )?
                .with_label_values(&[] as &[&str]),
            closed: r.counters(
                metric::HTTP_CONNECTIONS_CLOSED_TOTAL,
                "HTTP connections the exporter closed: no request head within header_timeout, idle past idle_timeout, or idle the longest when a new connection needed room.",
                &["reason"],
            )?,
            accept_errors: r
                .counters(
                    metric::HTTP_ACCEPT_ERRORS_TOTAL,
                    "Failed accepts of HTTP connections (out of file descriptors and the like).",
                    &[],
                )?
                .with_label_values(&[] as &[&str]),
        };
        for reason in Closed::ALL {
            m.closed.with_label_values(&[reason.as_str()]);
        }
        Ok(m)
    }
}

/// What answers: the router, and the TLS settings of new connections. A reload sends a new
/// one; each request (kept-alive connections included) is answered by the latest.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) app: Router,
    pub(crate) tls: Option<TlsAcceptor>,
}

impl Live {
    pub(crate) fn new(app: Router, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        Live {
            app,
            tls: tls.map(TlsAcceptor::from),
        }
    }
}

/// What every connection task needs.
#[derive(Clone)]
struct Shared {
    live: watch::Receiver<Live>,
    limits: HttpLimits,
    metrics: ServerMetrics,
    shutdown: CancellationToken,
}

/// Serve the latest of `live` on `listener` (HTTPS with its `tls`) until `shutdown`; then
/// take no more connections, close the idle ones and let requests in progress finish, for
/// at most [`SHUTDOWN_GRACE`].
pub(crate) async fn serve(
    listener: TcpListener,
    live: watch::Receiver<Live>,
    limits: HttpLimits,
    metrics: ServerMetrics,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    warn_if_over_fd_limit(limits.max_connections);
    let shared = Shared {
        live,
        limits,
        metrics,
        shutdown: shutdown.clone(),
    };
    let slots = Slots::new(limits.max_connections);
    let mut conns = JoinSet::new();
    let mut backoff = BACKOFF_MIN;
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => {
                backoff = BACKOFF_MIN;
                a
            }
            Err(e) => {
                backoff = accept_failed(&e, &slots, &shared.metrics, backoff).await;
                continue;
            }
        };
        let held = tokio::select! {
            _ = shutdown.cancelled() => break,
            held = slots.admit() => held,
        };
        shared.metrics.open.set(slots.len() as i64);
        let shared = shared.clone();
        let slots = slots.clone();
        conns.spawn(async move {
            connection(stream, peer, held, &shared).await;
            shared.metrics.open.set(slots.len() as i64);
        });
    }
    drop(listener);
    let finished = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, finished).await.is_err() {
        tracing::info!(
            open = slots.len(),
            "requests still in progress after the shutdown grace: closing them"
        );
        conns.abort_all();
    }
    Ok(())
}

/// After a failed accept: nothing to wait for when the client gave up; out of file
/// descriptors (or memory), an idle connection gives way and the accept is tried again at
/// once; with none to give way, a wait that doubles up to [`BACKOFF_MAX`]. The next wait.
async fn accept_failed(e: &std::io::Error, slots: &Slots, metrics: &ServerMetrics, backoff: Duration) -> Duration {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
    ) {
        return backoff;
    }
    metrics.accept_errors.inc();
    if backoff == BACKOFF_MIN {
        tracing::warn!(error = %e, open = slots.len(),
            "accepting an HTTP connection failed; closing the connection idle the longest, else waiting (raise the file-descriptor limit or lower server.max_connections)");
    }
    if slots.evict_one() {
        slots.wait_freed(BACKOFF_MIN).await;
        return BACKOFF_MIN;
    }
    tokio::time::sleep(backoff).await;
    (backoff * 2).min(BACKOFF_MAX)
}

/// One connection: the TLS handshake when asked, then HTTP/1.1 until it ends or the server
/// ends it (a timeout, giving way, shutdown).
async fn connection(stream: TcpStream, peer: SocketAddr, held: Held, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let tls = shared.live.borrow().tls.clone();
    let Some(acceptor) = tls else {
        return http(stream, held, shared).await;
    };
    let slot = held.slot.clone();
    let Some((deadline, _)) = slot.deadline(&shared.limits) else {
        return;
    };
    let handshake = tokio::select! {
        _ = shared.shutdown.cancelled() => return,
        _ = slot.evicted() => {
            shared.metrics.closed.with_label_values(&[Closed::Evicted.as_str()]).inc();
            return;
        }
        done = tokio::time::timeout_at(deadline, acceptor.accept(stream)) => done,
    };
    match handshake {
        Ok(Ok(tls)) => http(tls, held, shared).await,
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => {
            shared
                .metrics
                .closed
                .with_label_values(&[Closed::HeaderTimeout.as_str()])
                .inc();
            tracing::debug!(%peer, "TLS handshake timed out");
        }
    }
}

async fn http<I>(io: I, held: Held, shared: &Shared)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = held.slot.clone();
    let live = shared.live.clone();
    let in_service = slot.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = in_service.begin();
        let app = live.borrow().app.clone();
        async move {
            let response = app.oneshot(request).await;
            drop(busy);
            response
        }
    });
    let io = TokioIo::new(Watched::new(io, slot.clone()));
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        let deadline = slot.deadline(&shared.limits).filter(|_| !closing);
        let (at, why) = deadline.unwrap_or((tokio::time::Instant::now() + BACKOFF_MAX, Closed::IdleTimeout));
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = slot.changed() => {}
            _ = tokio::time::sleep_until(at), if deadline.is_some() => {
                // Still due (nothing began meanwhile): closed by dropping it.
                if slot.deadline(&shared.limits).is_some_and(|(t, _)| t <= tokio::time::Instant::now()) {
                    shared.metrics.closed.with_label_values(&[why.as_str()]).inc();
                    return;
                }
            }
            _ = slot.evicted(), if !closing => {
                if slot.idle() {
                    shared.metrics.closed.with_label_values(&[Closed::Evicted.as_str()]).inc();
                    return;
                }
                slot.decline();
            }
            _ = shared.shutdown.cancelled(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Warn when `max_connections` (plus a reserve for Redis connections and log files) does
/// not fit the process's file-descriptor limit: accepts would then fail before the limit.
fn warn_if_over_fd_limit(max_connections: usize) {
    const RESERVE: u64 = 64;
    if let Ok((soft, _)) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        && (max_connections as u64).saturating_add(RESERVE) > soft
    {
        tracing::warn!(
            max_connections,
            fd_limit = soft,
            "server.max_connections does not fit the file-descriptor limit (with 64 for Redis and log files): past it, idle connections give way to new ones at each failed accept"
        );
    }
}
