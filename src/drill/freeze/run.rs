//! One freeze drill from the watchdog's start to the verdict: the locks held at the
//! freeze, the freeze (with its countdown and the namespace's refusal counts followed),
//! the thaw, the observation, the histories read at the thaw and at the end, and the
//! judgement. Cancelling `cancel` (a signal) thaws at once; the report says interrupted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use super::found;
use super::identity::Identity;
use super::notice::Notice;
use super::observe::{Counting, Exporter};
use super::report::{FreezeReport, Witness as WitnessSummary};
use super::seen::{KeySeen, WallMs, Window, Witnessed};
use super::span::Span;
use super::stop;
use super::target::Frozen;
use super::verdict::{self, Finding, Verdict};
use super::watchdog::Watchdog;
use super::witness::{Phase, Witness};
use super::{FreezeError, Plan};
use crate::drill::narrator::{Narrator, Said};

/// How often the exporter is scraped while the drill waits.
const POLL: Duration = Duration::from_millis(250);

fn wall_ms() -> WallMs {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Run the drill `plan` settles, telling `narrator` as it goes.
pub async fn run(
    plan: Plan<'_>,
    narrator: &mut dyn Narrator,
    cancel: CancellationToken,
) -> Result<FreezeReport, FreezeError> {
    let frozen = plan.opts.frozen.clone();
    let exporter = Exporter::new(&plan.opts.exporter, &plan.target.name, &plan.ns.name);
    let mut report = FreezeReport {
        verdict: Verdict::NotExercised,
        result: String::new(),
        started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        target: plan.target.name.clone(),
        namespace: plan.ns.name.clone(),
        frozen: frozen.spec(),
        what: frozen.describe(),
        method: stop::method(&frozen).into(),
        for_ms: u64::try_from(plan.hold.as_millis()).unwrap_or(u64::MAX),
        observe_ms: u64::try_from(plan.observe.as_millis()).unwrap_or(u64::MAX),
        window: None,
        worker: String::new(),
        held_at_freeze: 0,
        locks: vec![],
        counted: vec![],
        witness: WitnessSummary::default(),
        timeline: vec![],
        alerts: vec![],
        notes: vec![],
        interrupted: false,
        thaw: Default::default(),
    };
    let program = match &plan.opts.program {
        Some(p) => p.clone(),
        None => {
            std::env::current_exe().map_err(|e| FreezeError::Failed(format!("cannot find lockwatch itself: {e}")))?
        }
    };
    let notice = Notice {
        exporter: plan.opts.exporter.clone(),
        id: format!("{}-{}", std::process::id(), wall_ms()),
        target: plan.target.name.clone(),
        namespace: plan.ns.name.clone(),
        frozen: frozen.spec(),
        what: report.what.clone(),
        for_ms: report.for_ms,
        thaw_by_hand: stop::by_hand(&frozen),
        token_file: plan.opts.push_token_file.clone(),
    };
    let watchdog = Watchdog::spawn(&program, &frozen, plan.hold, Some(&notice))
        .await
        .map_err(|e| FreezeError::Failed(format!("nothing was frozen: the watchdog could not start ({e})")))?;
    for stayed in &watchdog.stayed {
        let line = format!(
            "the watchdog could not leave {stayed}: if the drill and its watchdog die together there, {}",
            match frozen {
                Frozen::Pid(_) => "the kernel still ends a ptrace stop (not a SIGSTOP, where ptrace is refused)",
                _ => "the target stays frozen (the exporter's LockDrillLeftFrozen says so)",
            }
        );
        narrator.say(Said::Note(&line));
        report.notes.push(line);
    }
    let mut counting = Counting::default();
    if let Some(m) = exporter.scrape().await {
        counting.update(wall_ms(), exporter.refusals(&m));
    }
    let mut held: BTreeMap<String, Option<String>> = exporter
        .held()
        .await
        .map_err(|e| FreezeError::Failed(format!("nothing was frozen: {e}")))?
        .into_iter()
        .collect();
    let witness = match plan.opts.monitor {
        true => Some(Witness::start(plan.target, plan.ns.pattern.clone(), &frozen).await),
        false => None,
    };
    let mut identity = Identity::default();
    identity.learn(&frozen.pids());
    if witness.is_some() {
        narrator.say(Said::Witnessing { lead: plan.lead });
        tokio::select! {
            () = cancel.cancelled() => return Err(FreezeError::Failed("interrupted before anything was frozen".into())),
            () = tokio::time::sleep(plan.lead) => {}
        }
    }

    // The freeze: the watchdog freezes and thaws; its clock starts when the freeze landed.
    narrator.say(Said::Freezing {
        spec: &frozen.spec(),
        hold: plan.hold,
    });
    let stopped_before = match frozen {
        Frozen::Commands { .. } => Some(found::frozen_now()),
        _ => None,
    };
    let mut span = Span::land(watchdog, &frozen, Some(notice))
        .await
        .map_err(|e| match e.left_frozen {
            true => FreezeError::LeftFrozen(e.said),
            false => FreezeError::Failed(e.said),
        })?;
    let frozen_ms = span.landed_ms;
    let frozen_at = Instant::now() - Duration::from_millis(u64::try_from(wall_ms() - frozen_ms).unwrap_or(0));
    report.method = span.method.clone();
    if let Some(n) = span.note.take() {
        report.notes.push(n);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    if let Some(w) = &witness {
        w.enter(Phase::Frozen);
    }
    // A freeze by commands: the worker is what they stopped.
    let mut worker_pids = frozen.pids();
    if let Some(before) = stopped_before {
        let mine = super::target::self_and_ancestors();
        worker_pids = found::frozen_now()
            .difference(&before)
            .copied()
            .filter(|p| !mine.contains(p))
            .collect();
        report.notes.push(match worker_pids.is_empty() {
            true => "the freeze command stopped no process of this host that /proc shows (another host, a container runtime elsewhere): the worker's connections are told by their silence while it was frozen, and its log lines by the commands just before them".into(),
            false => format!(
                "the freeze command stopped pid(s) {} (found in /proc): taken as the worker",
                worker_pids.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
            ),
        });
        if let Some(w) = &witness {
            w.worker_found(worker_pids.clone());
        }
    }
    identity.learn(&worker_pids);
    identity.find_shared(&worker_pids);
    // A lock taken just before the freeze may have reached the exporter's table only now.
    if let Ok(now) = exporter.held().await {
        for (k, owner) in now {
            held.entry(k).or_insert(owner);
        }
    }
    report.held_at_freeze = held.len();
    narrator.say(Said::Frozen {
        method: &report.method,
        held: held.len(),
        namespace: &plan.ns.name,
        hold: plan.hold,
    });
    let interrupted = wait(
        &exporter,
        &mut counting,
        frozen_at + plan.hold,
        &cancel,
        narrator,
        "thaw",
        Some(&mut span),
    )
    .await;

    // The thaw; its moment is taken before: a worker may act the instant it runs again.
    let asked_ms = wall_ms();
    if let Some(w) = &witness {
        w.enter(Phase::Thawed);
    }
    span.thaw(asked_ms).await;
    let thawed_ms = span.ended_ms.unwrap_or(asked_ms).min(asked_ms);
    match (&span.thaw.failed, span.thaw.by.as_str()) {
        (Some(e), _) => {
            narrator.say(Said::ThawFailed {
                spec: &frozen.spec(),
                error: e,
                by_hand: &span.thaw.by_hand,
            });
            report
                .notes
                .push(format!("the thaw failed: {e}; thaw it by hand: {}", span.thaw.by_hand));
        }
        (None, "drill") if span.thaw.why.is_none() => narrator.say(Said::Thawed {
            spec: &frozen.spec(),
            by: "drill",
            why: None,
        }),
        (None, by) => {
            let why = span.thaw.why.clone().unwrap_or_default();
            narrator.say(Said::Thawed {
                spec: &frozen.spec(),
                by,
                why: Some(&why),
            });
            report.notes.push(format!(
                "the freeze ended after {} of the --for {}: thawed by the {by} ({why})",
                crate::duration::format(Duration::from_millis(span.thaw.frozen_ms)),
                crate::duration::format(plan.hold)
            ));
        }
    }
    if span.thaw.watchdog_died {
        report
            .notes
            .push("the watchdog died while the target was frozen".into());
    }
    report.thaw = span.thaw.clone();
    report.interrupted = interrupted;
    let mut keys: Vec<KeySeen> = held
        .iter()
        .map(|(k, owner)| KeySeen {
            key: k.clone(),
            held_at_freeze: owner.clone(),
            ..KeySeen::default()
        })
        .collect();
    read_histories(&exporter, &mut keys, &mut report.notes).await;
    let end_ms = if interrupted {
        thawed_ms
    } else {
        narrator.say(Said::Observing { observe: plan.observe });
        let end = Instant::now() + plan.observe;
        report.interrupted = wait(&exporter, &mut counting, end, &cancel, narrator, "the end", None).await;
        wall_ms()
    };
    identity.learn(&worker_pids);
    let witnessed = match witness {
        Some(w) => w.finish(&frozen).await,
        None => Witnessed::default(),
    };
    read_histories(&exporter, &mut keys, &mut report.notes).await;
    if keys.iter().any(|k| k.events.is_none()) {
        report.notes.push(
            "the exporter keeps no lock events per key (an older lockwatch): refusals are those counted for the whole namespace"
                .into(),
        );
    }
    let window = Window {
        frozen_ms,
        thawed_ms,
        end_ms,
    };
    report.counted = counting.moves.into_iter().filter(|c| c.at_ms >= frozen_ms).collect();
    if let Some(note) = unexplained(&keys, &report.counted, &window) {
        report.notes.push(note);
    }
    let period = plan.ns.renew_every.unwrap_or(plan.ns.ttl / 3);
    let judged = verdict::judge(&verdict::Evidence {
        keys: &keys,
        counted: &report.counted,
        witness: &witnessed,
        worker: &identity,
        window,
        period_ms: i64::try_from(period.as_millis()).unwrap_or(i64::MAX),
    });
    report.locks = judged.locks;
    report.notes.extend(judged.others);
    report.verdict = verdict::overall(&report.locks);
    report.window = Some(window);
    report.worker = identity.describe();
    report.witness = WitnessSummary {
        ran: witnessed.ran,
        unavailable: witnessed.unavailable,
        unsure: witnessed.unsure,
        worker_connections: witnessed.worker_addrs,
    };
    if let Some(Ok(alerts)) = crate::drill::probes::Probes::new(None, plan.opts.prometheus.clone())
        .lock_alerts()
        .await
    {
        report.alerts = alerts;
    }
    report.result = result(&report);
    report.build_timeline();
    Ok(report)
}

/// Scrape the exporter every [`POLL`] until `until`, saying the seconds left now and then;
/// `true` when cancelled first. While `span` is frozen, a freeze that ends early ends it.
async fn wait(
    exporter: &Exporter,
    counting: &mut Counting,
    until: Instant,
    cancel: &CancellationToken,
    narrator: &mut dyn Narrator,
    what: &str,
    mut span: Option<&mut Span>,
) -> bool {
    let mut last_said = Instant::now();
    while Instant::now() < until {
        let step = POLL.min(until.saturating_duration_since(Instant::now()));
        let ended = async {
            match span.as_deref_mut() {
                Some(s) => s.ended_early().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = cancel.cancelled() => return true,
            () = tokio::time::sleep(step) => {}
            true = ended => return false,
        }
        if let Some(m) = exporter.scrape().await {
            counting.update(wall_ms(), exporter.refusals(&m));
        }
        if last_said.elapsed() >= Duration::from_secs(5) {
            last_said = Instant::now();
            narrator.say(Said::Waiting {
                left: until.saturating_duration_since(Instant::now()),
                until: what,
            });
        }
    }
    false
}

/// Each key's history merged in; a key the exporter cannot answer for is said once.
async fn read_histories(exporter: &Exporter, keys: &mut [KeySeen], notes: &mut Vec<String>) {
    for k in keys.iter_mut() {
        match exporter.history(&k.key).await {
            Ok((t, e)) => k.merge(t, e),
            Err(e) => {
                let note = format!("history of {}: {e}", k.key);
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
        }
    }
}

/// Refusals counted for the namespace after the thaw beyond those whose log lines named one
/// of the keys held at the freeze (where the exporter keeps lock events per key): said,
/// since they are no evidence for any lock.
fn unexplained(keys: &[KeySeen], counted: &[super::seen::CountedRefusal], w: &Window) -> Option<String> {
    let in_window = |at: WallMs| at >= w.thawed_ms && at <= w.end_ms;
    let total: u64 = counted.iter().filter(|c| in_window(c.at_ms)).map(|c| c.by).sum();
    let mut keyed = 0u64;
    for k in keys {
        let events = k.events.as_ref()?;
        keyed += events.iter().filter(|e| e.is_refusal() && in_window(e.at_ms)).count() as u64;
    }
    (total > keyed).then(|| {
        format!(
            "{} refusal(s) counted for the namespace after the thaw named none of the locks held at the freeze (other holders', or log lines that name no key): not taken as evidence for any lock; if the worker's own refusals are among them, make its log lines name the lock key (a `key` field)",
            total - keyed
        )
    })
}

/// The report's last line.
fn result(r: &FreezeReport) -> String {
    let n = |v: Verdict| r.locks.iter().filter(|l| l.verdict == v).count();
    let head = match r.verdict {
        Verdict::Unsafe => format!(
            "unsafe: {} of the {} lock(s) the frozen worker held were handled unsafely after the thaw",
            n(Verdict::Unsafe),
            r.locks.len()
        ),
        Verdict::Safe => format!(
            "safe: on each of the {} lock(s) taken over, the woken worker stopped at once or its stale writes were refused",
            n(Verdict::Safe)
        ),
        Verdict::NotExercised if r.locks.iter().any(|l| l.finding == Finding::Unconfirmed) => {
            "not exercised: the woken worker noticed in time, but the witness could not confirm it stopped (see the notes); let the drill run MONITOR and retry".into()
        }
        Verdict::NotExercised if r.locks.is_empty() => format!(
            "not exercised: the frozen worker held no lock of namespace {} that expired or stopped renewing while it was frozen ({} held in all); retry at a busier moment or with a longer --for",
            r.namespace, r.held_at_freeze
        ),
        Verdict::NotExercised => {
            "not exercised: no lock the frozen worker held was taken over while it was frozen; retry at a busier moment or with a longer --for".into()
        }
    };
    match r.interrupted {
        true => format!("interrupted (the worker was thawed at once): {head}"),
        false => head,
    }
}
