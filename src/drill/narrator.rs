//! How a run speaks: the `Narrator` trait every finding, step, countdown and rollback line
//! of a staged drill, and every moment of a freeze drill, goes through, and the console narrators of the binary — `Plain` (pipes and logs: the
//! pause is one line), `Terminal` (redraws the countdown in place) and `Interactive`
//! (explains each gated step and waits for Enter). The run decides; a narrator only tells.

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::plan::Keys;
use super::report::{CounterCheck, Judged, Step};

/// What [`Narrator::gate`] returns: ready when the step may run.
pub type Gate<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What the run says, in the order it happens: a staged drill's moments first, then a
/// freeze drill's (`Witnessing` to `Observing`, with its notes).
#[derive(Debug, Clone, Copy)]
pub enum Said<'a> {
    /// Before the scenario: the run, the pre-flight findings, and the plan on the keys of
    /// the first cycle.
    Intro {
        run_id: &'a str,
        /// The scenario's name, and its plan as numbered lines.
        scenario: &'a str,
        plan: &'a str,
        findings: &'a [(String, String)],
        namespace: &'a str,
        ttl: Duration,
        keys: &'a Keys,
    },
    /// A step of the narrated cycle. (Sustained cycles record only their deviations, in
    /// the report, and say nothing.)
    Step(&'a Step),
    /// The exporter's counters after the cycle; `watched`: transitions and takeovers were
    /// among them (the exporter watches the target's notifications).
    Counters { checks: &'a [CounterCheck], watched: bool },
    /// Lock alerts pending or firing in Prometheus at the end.
    Alerts(&'a [(String, String)]),
    /// The sustained cycles are over.
    Sustained { cycles: u64, seconds: f64 },
    /// The run was cancelled; the rollback follows.
    Interrupted,
    /// What the rollback did, one finding each.
    RolledBack(&'a [String]),
    /// A freeze drill watches the namespace's commands for `lead` before it freezes.
    Witnessing { lead: Duration },
    /// A freeze drill freezes `spec` (`pid:N`, `cgroup:PATH`, the commands) for `hold`.
    Freezing { spec: &'a str, hold: Duration },
    /// The freeze landed, by `method`; `held` locks of `namespace` held; the thaw in `hold`.
    Frozen {
        method: &'a str,
        held: usize,
        namespace: &'a str,
        hold: Duration,
    },
    /// Every 5 s of a freeze drill's wait: `left` until `until` (the thaw, the end).
    Waiting { left: Duration, until: &'a str },
    /// `spec` thawed by `by` (the drill, the watchdog, the kernel), `why` when not as planned.
    Thawed {
        spec: &'a str,
        by: &'a str,
        why: Option<&'a str>,
    },
    /// The thaw of `spec` failed with `error`: it may still be frozen; `by_hand` thaws it.
    ThawFailed {
        spec: &'a str,
        error: &'a str,
        by_hand: &'a str,
    },
    /// The freeze drill watches the woken worker for `observe`.
    Observing { observe: Duration },
    /// A freeze drill's note, said as it is added to the report.
    Note(&'a str),
}

/// Something under way, told repeatedly; a terminal redraws it, a pipe gets one line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Progress {
    /// Worker A (`pid`) was just frozen; its lock expires in `ttl`.
    PauseStarted { pid: i32, ttl: Duration },
    /// About every 100 ms while A is frozen.
    Paused { pid: i32, left: Duration },
    /// The TTL has run out; the run now watches Redis expire the key.
    PauseOver,
    /// Worker A's renewal was just held in the network; the lock expires in `ttl`.
    HeldStarted { ttl: Duration },
    /// About every 100 ms while A's renewal is held.
    Held { left: Duration },
    /// After each sustained cycle.
    Sustaining {
        cycles: u64,
        elapsed: Duration,
        of: Duration,
    },
}

/// What a drill run speaks through.
pub trait Narrator: Send {
    fn say(&mut self, said: Said<'_>);

    /// Progress of the pause and of sustained cycles; by default not told.
    fn progress(&mut self, _progress: Progress) {}

    /// Before a gated step of the narrated cycle, with what it will do. Ready at once by
    /// default; the interactive narrator explains it and waits for Enter.
    fn gate<'a>(&'a mut self, _explain: &'a str) -> Gate<'a> {
        Box::pin(std::future::ready(()))
    }
}

/// The narrator of `lockwatch drill` on stderr: interactive (reading stdin) when asked,
/// with the countdown redrawn when `live` (stderr is a terminal).
pub fn console(interactive: bool, live: bool) -> Box<dyn Narrator> {
    let err = std::io::stderr();
    if interactive {
        Box::new(Interactive::new(
            err,
            tokio::io::BufReader::new(tokio::io::stdin()),
            live,
        ))
    } else if live {
        Box::new(Terminal::new(err))
    } else {
        Box::new(Plain::new(err))
    }
}

/// For pipes and logs: every line once, the pause as a single line.
pub struct Plain<W>(Text<W>);

impl<W: Write + Send> Plain<W> {
    pub fn new(out: W) -> Self {
        Plain(Text(out))
    }

    pub fn into_inner(self) -> W {
        self.0.0
    }
}

impl<W: Write + Send> Narrator for Plain<W> {
    fn say(&mut self, said: Said<'_>) {
        self.0.say(said);
    }

    fn progress(&mut self, progress: Progress) {
        self.0.once(progress);
    }
}

/// For a person at a terminal: the countdown and the sustained cycles redrawn in place.
pub struct Terminal<W>(Text<W>);

impl<W: Write + Send> Terminal<W> {
    pub fn new(out: W) -> Self {
        Terminal(Text(out))
    }

    pub fn into_inner(self) -> W {
        self.0.0
    }
}

impl<W: Write + Send> Narrator for Terminal<W> {
    fn say(&mut self, said: Said<'_>) {
        self.0.say(said);
    }

    fn progress(&mut self, progress: Progress) {
        self.0.live(progress);
    }
}

/// `--interactive`: before each gated step, explain it and wait for a line on `input`.
pub struct Interactive<W, R> {
    text: Text<W>,
    input: R,
    live: bool,
}

impl<W: Write + Send, R: AsyncBufRead + Unpin + Send> Interactive<W, R> {
    pub fn new(out: W, input: R, live: bool) -> Self {
        Interactive {
            text: Text(out),
            input,
            live,
        }
    }

    pub fn into_inner(self) -> W {
        self.text.0
    }
}

impl<W: Write + Send, R: AsyncBufRead + Unpin + Send> Narrator for Interactive<W, R> {
    fn say(&mut self, said: Said<'_>) {
        self.text.say(said);
    }

    fn progress(&mut self, progress: Progress) {
        if self.live {
            self.text.live(progress);
        } else {
            self.text.once(progress);
        }
    }

    fn gate<'a>(&'a mut self, explain: &'a str) -> Gate<'a> {
        Box::pin(async move {
            let out = &mut self.text.0;
            let _ = write!(out, "\nnext: {explain}\npress Enter to run it… ");
            let _ = out.flush();
            let mut line = String::new();
            // End of input runs the rest straight through, as no answer can come.
            let _ = self.input.read_line(&mut line).await;
        })
    }
}

/// The console's wording, shared by the console narrators. Write errors are ignored: a
/// closed stderr must not stop the run before its rollback.
struct Text<W>(W);

impl<W: Write> Text<W> {
    fn say(&mut self, said: Said<'_>) {
        let _ = self.write(said);
        let _ = self.0.flush();
    }

    fn write(&mut self, said: Said<'_>) -> std::io::Result<()> {
        let out = &mut self.0;
        match said {
            Said::Intro {
                run_id,
                scenario,
                plan,
                findings,
                namespace,
                ttl,
                keys,
            } => {
                writeln!(out, "lockwatch drill {run_id}: {}", scenario.replace('-', " "))?;
                for (k, v) in findings {
                    writeln!(out, "  {k}: {v}")?;
                }
                let ttl = crate::duration::format(ttl);
                writeln!(
                    out,
                    "plan (namespace {namespace}, ttl {ttl}, lock {lock}, fence {fence}, resource {res}):
{plan}   then: lockwatch's counters, alert states, rollback",
                    lock = keys.lock,
                    fence = keys.fence,
                    res = keys.resource
                )?;
            }
            Said::Step(step) => {
                writeln!(
                    out,
                    "{} step {}: {}\n    happened: {}\n    expected: {}",
                    mark(step.ok),
                    step.n,
                    step.title,
                    step.happened,
                    step.expected
                )?;
                if let Some(c) = &step.consequence {
                    writeln!(out, "    DEVIATION: {c}")?;
                }
                for c in &step.check {
                    writeln!(out, "    see it yourself: {c}")?;
                }
            }
            Said::Counters { checks, watched } => {
                for c in checks {
                    writeln!(out, "{} {} {}", mark(c.ok), c.series, c.words())?;
                }
                if checks.iter().any(|c| c.judged_by == Judged::Namespace) {
                    writeln!(
                        out,
                        "  (judged by the namespace counters: the run's key's history was not available; other traffic in the namespace moves them too)"
                    )?;
                }
                if !watched {
                    writeln!(
                        out,
                        "  (transitions and takeovers not checked: the exporter does not watch this target's notifications)"
                    )?;
                }
            }
            Said::Alerts(alerts) => {
                for (n, s) in alerts {
                    writeln!(out, "alert {n}: {s}")?;
                }
                if alerts.is_empty() {
                    writeln!(
                        out,
                        "no lock alert pending or firing (one run is not a sustained ratio)"
                    )?;
                }
            }
            Said::Sustained { cycles, seconds } => {
                writeln!(out, "\n  sustained: {cycles} cycles in {seconds:.0}s")?;
            }
            Said::Interrupted => writeln!(out, "\ninterrupted: rolling back")?,
            Said::RolledBack(lines) => {
                for r in lines {
                    writeln!(out, "rollback: {r}")?;
                }
            }
            Said::Witnessing { lead } => writeln!(
                out,
                "watching the namespace's commands for {} before the freeze",
                crate::duration::format(lead)
            )?,
            Said::Freezing { spec, hold } => {
                writeln!(out, "freezing {spec} for {}", crate::duration::format(hold))?;
            }
            Said::Frozen {
                method,
                held,
                namespace,
                hold,
            } => writeln!(
                out,
                "frozen ({method}); {held} lock(s) of namespace {namespace} held; thawing in {}",
                crate::duration::format(hold)
            )?,
            Said::Waiting { left, until } => writeln!(out, "{} s to {until}", left.as_secs())?,
            Said::Thawed {
                spec,
                by: "drill",
                why: None,
            } => writeln!(out, "thawed {spec}")?,
            Said::Thawed { spec, by, why } => {
                writeln!(out, "thawed {spec} by the {by}: {}", why.unwrap_or_default())?;
            }
            Said::ThawFailed { spec, error, by_hand } => writeln!(
                out,
                "THE THAW FAILED: {spec} may still be frozen ({error}); thaw it by hand: {by_hand}"
            )?,
            Said::Observing { observe } => writeln!(
                out,
                "watching the woken worker for {}",
                crate::duration::format(observe)
            )?,
            Said::Note(line) => writeln!(out, "{line}")?,
        }
        Ok(())
    }

    /// Progress as one line where it starts, for pipes.
    fn once(&mut self, progress: Progress) {
        match progress {
            Progress::PauseStarted { pid, ttl } => {
                let _ = writeln!(
                    self.0,
                    "    A paused (pid {pid}): the lock expires in {:.1}s",
                    ttl.as_secs_f64()
                );
            }
            Progress::HeldStarted { ttl } => {
                let _ = writeln!(
                    self.0,
                    "    A's renewal held in the network: the lock expires in {:.1}s",
                    ttl.as_secs_f64()
                );
            }
            _ => {}
        }
    }

    /// Progress redrawn in place, for a terminal.
    fn live(&mut self, progress: Progress) {
        let out = &mut self.0;
        let _ = match progress {
            Progress::PauseStarted { .. } | Progress::HeldStarted { .. } => return,
            Progress::Held { left } => write!(
                out,
                "\r    A's renewal held in the network: the lock expires in {:>5.1}s ",
                left.as_secs_f64()
            ),
            Progress::Paused { pid, left } => write!(
                out,
                "\r    A paused (pid {pid}): the lock expires in {:>5.1}s ",
                left.as_secs_f64()
            ),
            Progress::PauseOver => writeln!(out),
            Progress::Sustaining { cycles, elapsed, of } => write!(
                out,
                "\r  sustained: {cycles} cycles in {:.0}s of {:.0}s ",
                elapsed.as_secs_f64(),
                of.as_secs_f64()
            ),
        };
        let _ = out.flush();
    }
}

fn mark(ok: bool) -> &'static str {
    if ok { "✓" } else { "✗" }
}

#[cfg(test)]
#[path = "narrator_tests.rs"]
mod tests;
