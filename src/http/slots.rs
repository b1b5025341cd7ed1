//! The connections the server holds, each in a slot: whether a request is in progress,
//! since when it is idle, since when a request's head has been arriving. From that, each
//! connection's deadline (header, idle), and which connection gives way when the limit is
//! reached: the one idle the longest — never one with a request in progress.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::config::HttpLimits;

/// Why the server closed a connection (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// No complete request head (or TLS handshake) within `header_timeout`.
    HeaderTimeout,
    /// Kept alive with no request for `idle_timeout`.
    IdleTimeout,
    /// Idle the longest when a new connection needed its slot or its file descriptor.
    Evicted,
}

impl Closed {
    pub(crate) const ALL: [Closed; 3] = [Closed::HeaderTimeout, Closed::IdleTimeout, Closed::Evicted];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Evicted => "evicted",
        }
    }
}

#[derive(Debug)]
struct State {
    /// Requests in progress (head read, response not yet handed over).
    busy: u32,
    /// Since when nothing is in progress (the accept, or the last response).
    idle_since: Instant,
    /// Bytes of a next request arrived at this time; its head is not complete yet.
    head_since: Option<Instant>,
    /// No request has been served yet: the header time counts from the accept.
    fresh: bool,
    /// Asked to give way.
    evicting: bool,
}

/// One connection's slot.
#[derive(Debug)]
pub(crate) struct Slot {
    id: u64,
    state: Mutex<State>,
    /// Its state changed: the deadline may have moved.
    changed: Notify,
    /// Asked to give way.
    evict: Notify,
}

impl Slot {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Nothing in progress: the connection may give way.
    pub(crate) fn idle(&self) -> bool {
        self.state().busy == 0
    }

    /// When the connection is to be closed, and why; `None` while a request is in progress.
    pub(crate) fn deadline(&self, limits: &HttpLimits) -> Option<(Instant, Closed)> {
        let s = self.state();
        match (s.busy, s.head_since, s.fresh) {
            (0, Some(t), _) => Some((t + limits.header_timeout, Closed::HeaderTimeout)),
            (0, None, true) => Some((s.idle_since + limits.header_timeout, Closed::HeaderTimeout)),
            (0, None, false) => Some((s.idle_since + limits.idle_timeout, Closed::IdleTimeout)),
            _ => None,
        }
    }

    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Resolves when the connection is asked to give way.
    pub(crate) async fn evicted(&self) {
        self.evict.notified().await;
    }

    /// It stays (a request began meanwhile): it may be asked again later.
    pub(crate) fn decline(&self) {
        self.state().evicting = false;
    }

    /// A request's head is complete and handed to the router: busy until the guard drops.
    pub(crate) fn begin(self: &Arc<Self>) -> Busy {
        let mut s = self.state();
        s.busy += 1;
        s.head_since = None;
        s.fresh = false;
        Busy(self.clone())
    }

    /// Bytes arrived: while idle, a request's head has begun.
    fn bytes_arrived(&self) {
        let mut s = self.state();
        if s.busy == 0 && s.head_since.is_none() {
            s.head_since = Some(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }
}

/// A request in progress on a slot.
pub(crate) struct Busy(Arc<Slot>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut s = self.0.state();
        s.busy = s.busy.saturating_sub(1);
        s.idle_since = Instant::now();
        drop(s);
        self.0.changed.notify_one();
    }
}

/// All slots, bounded by `limit`.
pub(crate) struct Slots {
    limit: usize,
    live: Mutex<(u64, HashMap<u64, Arc<Slot>>)>,
    /// A slot was given back.
    freed: Notify,
}

/// A slot held by a connection; given back on drop.
pub(crate) struct Held {
    pub(crate) slot: Arc<Slot>,
    slots: Arc<Slots>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.slots.lock().1.remove(&self.slot.id);
        self.slots.freed.notify_one();
    }
}

impl Slots {
    pub(crate) fn new(limit: usize) -> Arc<Slots> {
        Arc::new(Slots {
            limit,
            live: Mutex::new((0, HashMap::new())),
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, (u64, HashMap<u64, Arc<Slot>>)> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections open.
    pub(crate) fn len(&self) -> usize {
        self.lock().1.len()
    }

    /// A slot for a connection just accepted: at once below the limit; else once the
    /// connection idle the longest has given way (or any connection ended).
    pub(crate) async fn admit(self: &Arc<Self>) -> Held {
        loop {
            let freed = self.freed.notified();
            {
                let mut live = self.lock();
                if live.1.len() < self.limit {
                    live.0 += 1;
                    let slot = Arc::new(Slot {
                        id: live.0,
                        state: Mutex::new(State {
                            busy: 0,
                            idle_since: Instant::now(),
                            head_since: None,
                            fresh: true,
                            evicting: false,
                        }),
                        changed: Notify::new(),
                        evict: Notify::new(),
                    });
                    live.1.insert(slot.id, slot.clone());
                    return Held {
                        slot,
                        slots: self.clone(),
                    };
                }
            }
            self.evict_one();
            // A connection with a request in progress may decline: look again soon.
            let _ = tokio::time::timeout(Duration::from_millis(50), freed).await;
        }
    }

    /// Ask the connection idle the longest to give way, unless one is already asked.
    /// Whether one was asked.
    pub(crate) fn evict_one(&self) -> bool {
        let live = self.lock();
        let states: Vec<(Arc<Slot>, bool, Instant)> = live
            .1
            .values()
            .map(|slot| {
                let s = slot.state();
                (slot.clone(), s.busy == 0 && !s.evicting, s.idle_since)
            })
            .collect();
        drop(live);
        if states.iter().any(|(slot, _, _)| slot.state().evicting) {
            return true;
        }
        let Some((victim, _, _)) = states.iter().filter(|(_, idle, _)| *idle).min_by_key(|(_, _, t)| *t) else {
            return false;
        };
        victim.state().evicting = true;
        victim.evict.notify_one();
        true
    }

    /// Wait until a slot is given back (or `limit` passes).
    pub(crate) async fn wait_freed(&self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.freed.notified()).await;
    }
}

/// A connection's transport, telling its slot when bytes arrive (a request head begins).
pub(crate) struct Watched<I> {
    inner: I,
    slot: Arc<Slot>,
}

impl<I> Watched<I> {
    pub(crate) fn new(inner: I, slot: Arc<Slot>) -> Self {
        Watched { inner, slot }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.slot.bytes_arrived();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HttpLimits {
        HttpLimits {
            max_connections: 2,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(90),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_the_connection_state() {
        let slots = Slots::new(2);
        let held = slots.admit().await;
        let s = held.slot.clone();
        let accepted = Instant::now();
        assert_eq!(
            s.deadline(&limits()),
            Some((accepted + Duration::from_secs(10), Closed::HeaderTimeout))
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let busy = s.begin();
        assert_eq!(s.deadline(&limits()), None);
        tokio::time::advance(Duration::from_secs(100)).await;
        drop(busy);
        let done = Instant::now();
        assert_eq!(
            s.deadline(&limits()),
            Some((done + Duration::from_secs(90), Closed::IdleTimeout))
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        s.bytes_arrived();
        let head = Instant::now();
        assert_eq!(
            s.deadline(&limits()),
            Some((head + Duration::from_secs(10), Closed::HeaderTimeout))
        );
        s.bytes_arrived();
        assert_eq!(
            s.deadline(&limits()),
            Some((head + Duration::from_secs(10), Closed::HeaderTimeout))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_connection_idle_the_longest_gives_way_never_a_busy_one() {
        let slots = Slots::new(2);
        let first = slots.admit().await;
        tokio::time::advance(Duration::from_secs(1)).await;
        let second = slots.admit().await;
        let _busy = first.slot.begin();
        assert_eq!(slots.len(), 2);
        assert!(slots.evict_one());
        assert!(second.slot.state().evicting && !first.slot.state().evicting);
        // Asked once: a second call asks no one else meanwhile.
        assert!(slots.evict_one());
        assert!(!first.slot.state().evicting);
        second.slot.decline();
        drop(second);
        assert_eq!(slots.len(), 1);
        // Only the busy one is left: no one can give way.
        let third = slots.admit().await;
        let _busy3 = third.slot.begin();
        assert!(!slots.evict_one());
    }
}
