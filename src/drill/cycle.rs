//! The interpreter of the scenario table: one cycle of the run's scenario, step by step —
//! worker A through its child process, B on the drill's own connection with the safe
//! `LockScripts` — each outcome turned into a report step and told to the narrator. A's
//! operations delayed in the network are `late`'s.

use std::time::{Duration, Instant};

use super::late;
use super::marks;
use super::narrator::{Narrator, Progress, Said};
use super::plan::Keys;
use super::report::{Event, Lane, Step};
use super::scenario::{Action, StepSpec};
use super::session::Session;
use super::worker::{Request, WorkerError};
use crate::access::scripts::{self, next_fence_expiring};

/// How long past the TTL the drill waits for Redis to expire the key. B acquires as soon
/// as the key is gone, so the takeover falls inside the namespace's TTL window.
const EXPIRY_MARGIN: Duration = Duration::from_secs(2);
/// How often the pause's countdown is told.
const TICK: Duration = Duration::from_millis(100);

/// What one cycle has learnt so far.
pub(super) struct Cycle {
    pub(super) keys: Keys,
    /// Narrated: gates, steps and the countdown are told (the first cycle).
    pub(super) narrate: bool,
    pub(super) token_a: String,
    pub(super) fence_a: i64,
    token_b: String,
    fence_b: i64,
    b_value: String,
}

/// How a step went.
pub(super) struct Outcome {
    verdict: Verdict,
    pub(super) happened: String,
}

enum Verdict {
    AsExpected,
    /// The deviation the step's consequence describes.
    Deviated,
    /// The operation could not be run at all: a deviation, but not the one described.
    NotRun,
}

impl Outcome {
    pub(super) fn new(ok: bool, happened: impl Into<String>) -> Self {
        Outcome {
            verdict: if ok { Verdict::AsExpected } else { Verdict::Deviated },
            happened: happened.into(),
        }
    }

    /// The step could not be carried out as planned: a deviation without the step's meaning.
    pub(super) fn not_run(happened: impl Into<String>) -> Self {
        Outcome {
            verdict: Verdict::NotRun,
            happened: happened.into(),
        }
    }
}

/// One cycle of the run's scenario on the keys of `n`. Narrated, each step is told and
/// recorded; otherwise (sustained cycles) only deviations are recorded.
pub(crate) async fn run(
    s: &mut Session<'_>,
    narrator: &mut dyn Narrator,
    n: u64,
    narrate: bool,
) -> Result<(), WorkerError> {
    let keys = s.plan.keys(n);
    s.created
        .extend([keys.lock.clone(), keys.fence.clone(), keys.resource.clone()]);
    s.lease.hold([keys.fence.clone(), keys.resource.clone()]);
    let mut c = Cycle {
        keys,
        narrate,
        token_a: String::new(),
        fence_a: 0,
        token_b: String::new(),
        fence_b: 0,
        b_value: String::new(),
    };
    s.recording = narrate;
    for spec in s.opts.scenario.steps() {
        if narrate && let Some(explain) = spec.gate {
            narrator.gate(explain).await;
        }
        let outcome = perform(s, narrator, &mut c, spec.action).await?;
        let not_run = matches!(outcome.verdict, Verdict::NotRun);
        let step = step(s, spec, outcome, &c);
        let (lane, what) = marks::of(spec.action, step.ok);
        s.record(Event {
            step: Some(step.n),
            ..Event::at(step.at_ms, lane, if not_run { "not run" } else { what }, step.ok)
        });
        if narrate {
            narrator.say(Said::Step(&step));
            s.report.steps.push(step);
        } else if !step.ok {
            s.report.steps.push(step);
        }
    }
    // B is done: it releases its lock the safe way.
    let released = s.b.release(&mut s.conn, &c.keys.lock, &c.token_b).await?;
    s.record(Event::at(s.at_ms(), Lane::WorkerB, "B releases", released));
    s.stop_recording();
    Ok(())
}

/// The report's step: the spec with the cycle's keys and tokens filled in, and the outcome.
fn step(s: &Session<'_>, spec: &StepSpec, outcome: Outcome, c: &Cycle) -> Step {
    let fill = |t: &str| {
        t.replace("{lock}", &c.keys.lock)
            .replace("{fence}", &c.keys.fence)
            .replace("{resource}", &c.keys.resource)
            .replace("{fence_a}", &c.fence_a.to_string())
            .replace("{fence_b}", &c.fence_b.to_string())
    };
    Step {
        n: s.next_n(),
        title: spec.title.into(),
        at_ms: s.at_ms(),
        happened: outcome.happened,
        expected: fill(spec.expected),
        ok: matches!(outcome.verdict, Verdict::AsExpected),
        check: spec.check.iter().map(|a| s.plan.cli(&fill(a))).collect(),
        consequence: match outcome.verdict {
            Verdict::Deviated => spec.consequence.map(String::from),
            Verdict::AsExpected | Verdict::NotRun => None,
        },
    }
}

async fn perform(
    s: &mut Session<'_>,
    narrator: &mut dyn Narrator,
    c: &mut Cycle,
    action: Action,
) -> Result<Outcome, WorkerError> {
    let ttl = s.plan.ns.ttl;
    let ttl_ms = s.plan.ttl_ms();
    let lease = s.lease.duration;
    let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    let lock = c.keys.lock.clone();
    Ok(match action {
        Action::AAcquires => {
            let req = Request::Acquire {
                key: lock.clone(),
                fence_key: c.keys.fence.clone(),
                owner: format!("A-{}", s.plan.run_id),
                ttl_ms,
                lease_ms,
            };
            let a = s.worker()?.call(&req).await?;
            c.token_a = a.token.unwrap_or_default();
            c.fence_a = a.fence.unwrap_or(0);
            if a.ok {
                Outcome::new(true, format!("A holds {lock} with fencing token {}", c.fence_a))
            } else {
                Outcome::new(
                    false,
                    format!("A's SET NX was refused ({})", a.error.unwrap_or_default()),
                )
            }
        }
        Action::BTriesWhileAHolds => {
            let early = format!("B-{}-early", s.plan.run_id);
            if scripts::acquire(&mut s.conn, &lock, &early, ttl).await? {
                Outcome::new(false, "B's SET NX succeeded while A held the lock")
            } else {
                Outcome::new(true, "B's SET NX returned nil")
            }
        }
        Action::APausedPastTtl => {
            let worker = s.worker()?;
            worker.pause().await?;
            let pid = worker.pid;
            s.open(Lane::WorkerA, "SIGSTOP");
            let pttl = past_ttl(s, narrator, c, Some(pid)).await?;
            expired(pttl, "while A was frozen")
        }
        Action::BAcquires => {
            c.fence_b = next_fence_expiring(&mut s.conn, &c.keys.fence, lease).await?;
            c.token_b = format!("B-{}:{}", s.plan.run_id, c.fence_b);
            let b_ttl = Duration::from_millis(ttl_ms.saturating_mul(4));
            let got = scripts::acquire(&mut s.conn, &lock, &c.token_b, b_ttl).await?;
            Outcome::new(
                got && c.fence_b > c.fence_a,
                format!(
                    "B's SET NX {}; fencing token {} (A had {})",
                    if got { "succeeded" } else { "was refused" },
                    c.fence_b,
                    c.fence_a
                ),
            )
        }
        Action::BWrites => {
            c.b_value = format!("written by B with token {}", c.fence_b);
            let wrote =
                s.b.fenced_write(&mut s.conn, &c.keys.resource, c.fence_b, &c.b_value, Some(lease))
                    .await?;
            Outcome::new(
                wrote,
                format!(
                    "compare-token write with {}: {}",
                    c.fence_b,
                    if wrote { "accepted" } else { "refused" }
                ),
            )
        }
        Action::AWakesAndRenews => {
            s.worker()?.resume()?;
            s.close(Lane::WorkerA, "SIGCONT");
            let req = Request::Renew {
                key: lock,
                token: c.token_a.clone(),
                ttl_ms,
            };
            stale(s, &req, "renewal").await?
        }
        Action::AReleases => {
            let req = Request::Release {
                key: lock,
                token: c.token_a.clone(),
            };
            stale(s, &req, "release").await?
        }
        Action::AWritesStale => stale(s, &stale_write(c, lease_ms), "write").await?,
        Action::BIsIntact => b_is_intact(s, c).await?,
        Action::ARenewalHeldPastTtl => late::renewal_held_past_ttl(s, narrator, c, false).await?,
        Action::APausedWithRenewalHeld => late::renewal_held_past_ttl(s, narrator, c, true).await?,
        Action::ADelayedRenewalArrives => late::held_renewal_arrives(s, false).await?,
        Action::ADelayedRenewalArrivesWhileFrozen => late::held_renewal_arrives(s, true).await?,
        Action::AReleasesLate => {
            let req = Request::Release {
                key: lock,
                token: c.token_a.clone(),
            };
            late::stale_late(s, &req, "release").await?
        }
        Action::AWritesStaleLate => late::stale_late(s, &stale_write(c, lease_ms), "write").await?,
    })
}

/// A's write to the resource with its old fencing token.
fn stale_write(c: &Cycle, lease_ms: u64) -> Request {
    Request::Write {
        resource: c.keys.resource.clone(),
        fence: c.fence_a,
        value: format!("written by A with token {}", c.fence_a),
        lease_ms,
        lock: Some(c.keys.lock.clone()),
    }
}

/// The outcome of waiting for the key to expire: `pttl` -2 is as expected.
pub(super) fn expired(pttl: i64, while_: &str) -> Outcome {
    if pttl == -2 {
        Outcome::new(true, format!("PTTL is -2: Redis expired the key {while_}"))
    } else {
        Outcome::new(false, format!("PTTL is {pttl}: the key is still there"))
    }
}

/// Wait out the TTL telling the countdown — of A frozen (`frozen`: its pid) or of A's
/// request held in the network — then wait (at most [`EXPIRY_MARGIN`]) for Redis to expire
/// the key: its last PTTL.
pub(super) async fn past_ttl(
    s: &mut Session<'_>,
    narrator: &mut dyn Narrator,
    c: &Cycle,
    frozen: Option<i32>,
) -> Result<i64, WorkerError> {
    let ttl = s.plan.ns.ttl;
    let until = Instant::now() + ttl;
    if c.narrate {
        narrator.progress(match frozen {
            Some(pid) => Progress::PauseStarted { pid, ttl },
            None => Progress::HeldStarted { ttl },
        });
    }
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if c.narrate {
            narrator.progress(match frozen {
                Some(pid) => Progress::Paused { pid, left },
                None => Progress::Held { left },
            });
        }
        tokio::time::sleep(TICK.min(left)).await;
    }
    if c.narrate {
        narrator.progress(Progress::PauseOver);
    }
    // Redis expires a key at its deadline or a little after: wait for it to be gone.
    let give_up = Instant::now() + EXPIRY_MARGIN;
    loop {
        let pttl: i64 = redis::cmd("PTTL").arg(&c.keys.lock).query_async(&mut s.conn).await?;
        if pttl == -2 || Instant::now() > give_up {
            return Ok(pttl);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One of A's stale operations, which Redis must refuse. `what` names it in the outcome.
async fn stale(s: &mut Session<'_>, req: &Request, what: &str) -> Result<Outcome, WorkerError> {
    let reply = s.worker()?.call(req).await?;
    Ok(refused(reply, what))
}

/// What A's reply to a stale operation says: refused as it must be, accepted, or not run.
pub(super) fn refused(reply: super::worker::Reply, what: &str) -> Outcome {
    match (reply.error, reply.ok) {
        (Some(e), _) => Outcome::not_run(format!("A's {what} failed to run: {e}")),
        (None, true) => Outcome::new(false, format!("A's {what} was ACCEPTED")),
        (None, false) => {
            let reported = reply
                .reported
                .map(|r| format!("; A reported {r} to the exporter"))
                .unwrap_or_default();
            Outcome::new(true, format!("refused{reported}"))
        }
    }
}

/// B's lock still B's, with time left, and the resource holding B's write.
async fn b_is_intact(s: &mut Session<'_>, c: &Cycle) -> Result<Outcome, WorkerError> {
    let holder: Option<String> = redis::cmd("GET").arg(&c.keys.lock).query_async(&mut s.conn).await?;
    let pttl: i64 = redis::cmd("PTTL").arg(&c.keys.lock).query_async(&mut s.conn).await?;
    let value: Option<String> = redis::cmd("HGET")
        .arg(&c.keys.resource)
        .arg("value")
        .query_async(&mut s.conn)
        .await?;
    let b_holds = holder.as_deref() == Some(c.token_b.as_str());
    let ok = b_holds && pttl > 0 && value.as_deref() == Some(c.b_value.as_str());
    let who = if b_holds {
        "is B"
    } else if holder.is_none() {
        "NONE"
    } else {
        "is not B"
    };
    Ok(Outcome::new(
        ok,
        format!(
            "lock holder {who}, PTTL {pttl} ms, resource \"{}\"",
            value.unwrap_or_default()
        ),
    ))
}
