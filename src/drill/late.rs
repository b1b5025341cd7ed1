//! Worker A's operations delayed in the network, through the drill's proxy: a renewal held
//! past the TTL (with A awake, or frozen as well), let through after B took the lock, and a
//! release or write that arrives late. Each must still be refused by Redis.

use std::time::Duration;

use super::cycle::{self, Cycle, Outcome};
use super::narrator::Narrator;
use super::proxy::Proxy;
use super::report::Lane;
use super::session::Session;
use super::worker::{Request, WorkerError};

/// How long A's request may take to reach the proxy once A was asked to send it.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(5);
/// How long Redis may take to answer a request the proxy let through.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// How long a late release or write is held before it goes on.
const LATE_BY: Duration = Duration::from_millis(300);

fn proxy<'a>(s: &'a Session<'_>) -> Result<&'a Proxy, WorkerError> {
    s.proxy
        .as_ref()
        .ok_or_else(|| WorkerError::Reply("the network proxy is not running".into()))
}

/// Hold A's traffic, ask A to send `req` (its `what`), and wait until its bytes are in the
/// proxy.
async fn send_held(s: &mut Session<'_>, req: &Request, what: &str) -> Result<bool, WorkerError> {
    proxy(s)?.hold();
    s.worker()?.send(req).await?;
    let held = proxy(s)?.wait_held(IN_FLIGHT_WAIT).await;
    if held {
        s.open(Lane::Proxy, format!("{what} held"));
    }
    Ok(held)
}

/// The proxy lets what it holds through; the timeline's held period, if one is open, ends.
fn let_through(s: &mut Session<'_>) -> Result<(), WorkerError> {
    proxy(s)?.release();
    if s.is_open(Lane::Proxy) {
        s.close(Lane::Proxy, "let through");
    }
    Ok(())
}

/// A renews; the proxy holds the request; with `freeze`, A is frozen as well. The TTL runs
/// out and Redis must expire the key while the renewal is still in flight.
pub(super) async fn renewal_held_past_ttl(
    s: &mut Session<'_>,
    narrator: &mut dyn Narrator,
    c: &Cycle,
    freeze: bool,
) -> Result<Outcome, WorkerError> {
    let req = Request::Renew {
        key: c.keys.lock.clone(),
        token: c.token_a.clone(),
        ttl_ms: s.plan.ttl_ms(),
    };
    if !send_held(s, &req, "renewal").await? {
        return Ok(Outcome::not_run("A's renewal never reached the network"));
    }
    let frozen = if freeze {
        let worker = s.worker()?;
        worker.pause().await?;
        let pid = worker.pid;
        s.open(Lane::WorkerA, "SIGSTOP");
        Some(pid)
    } else {
        None
    };
    let pttl = cycle::past_ttl(s, narrator, c, frozen).await?;
    Ok(cycle::expired(
        pttl,
        if freeze {
            "while A was frozen and its renewal in flight"
        } else {
            "while A's renewal was in flight"
        },
    ))
}

/// The proxy lets the held renewal through. With `frozen`, Redis answers while A is still
/// frozen (the answer waits in A's socket), and only then is A continued.
pub(super) async fn held_renewal_arrives(s: &mut Session<'_>, frozen: bool) -> Result<Outcome, WorkerError> {
    let before = proxy(s)?.replied();
    let_through(s)?;
    let mut answered_frozen = false;
    if frozen {
        answered_frozen = proxy(s)?.wait_replied(before, ANSWER_WAIT).await;
        if answered_frozen {
            s.mark(Lane::Redis, "answers A, frozen");
        }
        s.worker()?.resume()?;
        s.close(Lane::WorkerA, "SIGCONT");
    }
    let reply = s.worker()?.receive().await?;
    let mut outcome = cycle::refused(reply, "delayed renewal");
    if frozen {
        outcome.happened.push_str(if answered_frozen {
            " (Redis answered while A was still frozen)"
        } else {
            " (no answer from Redis while A was frozen)"
        });
    }
    Ok(outcome)
}

/// One of A's stale operations, held by the proxy for a moment and then let through: it
/// arrives late, and Redis must refuse it all the same.
pub(super) async fn stale_late(s: &mut Session<'_>, req: &Request, what: &str) -> Result<Outcome, WorkerError> {
    let in_flight = send_held(s, req, what).await?;
    if in_flight {
        tokio::time::sleep(LATE_BY).await;
    }
    let_through(s)?;
    let reply = s.worker()?.receive().await?;
    let mut outcome = cycle::refused(reply, &format!("late {what}"));
    if !in_flight {
        outcome.happened.push_str(" (it never waited in the network)");
    }
    Ok(outcome)
}
