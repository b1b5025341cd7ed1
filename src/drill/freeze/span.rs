//! The freeze from the drill's side, from landing to the confirmed thaw: the watchdog
//! freezes and thaws. When it dies the drill knows what that did: a ptrace stop ended with
//! it (the worker runs again now; the drill confirms and tells the exporter), a freezer's
//! stop did not (the drill ends what the watchdog left running, holds on and thaws at its
//! end itself, guarded). The thaw as it happened is the report's [`Thaw`].

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;

use super::freezer;
use super::guard::Armed;
use super::notice::Notice;
use super::ptrace;
use super::stop::{PTRACE, by_hand};
use super::target::Frozen;
use super::watchdog::{Heard, Said, THAW_LIMIT, Watchdog};
use crate::locks::recent::wall_ms;

/// How the freeze ended, for the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Thaw {
    /// `drill`, `watchdog`, `kernel` (its ptrace stop ended with the watchdog) or `nobody`
    /// (every thaw failed).
    pub by: String,
    /// Why, when the drill did not ask for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// How long it was frozen, measured: from the freeze landing to the thaw.
    pub frozen_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The command that thaws it by hand.
    pub by_hand: String,
    /// The cgroups the watchdog moved into, and what it could not leave.
    pub watchdog_moved: Vec<String>,
    pub watchdog_stayed: Vec<String>,
    /// The watchdog died while the target was frozen.
    pub watchdog_died: bool,
}

/// The landed freeze.
pub struct Span {
    frozen: Frozen,
    watchdog: Option<Watchdog>,
    armed: Option<Armed>,
    notice: Option<Notice>,
    pub landed_ms: i64,
    pub method: String,
    pub note: Option<String>,
    /// Set once it is thawed (or the thaw failed for good).
    pub ended_ms: Option<i64>,
    pub thaw: Thaw,
}

/// Why the freeze did not land; nothing is left frozen unless `left_frozen`.
#[derive(Debug, thiserror::Error)]
#[error("{said}")]
pub struct NotLanded {
    pub said: String,
    pub left_frozen: bool,
}

/// End whatever a dead watchdog left running: a freeze or thaw command, which shares its
/// process group (it leads one, having made its own session).
fn end_orphans(watchdog_pid: Option<u32>) {
    if let Some(pid) = watchdog_pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// After the watchdog's death: its orphans ended, then `f` thawed here and confirmed (a
/// ptrace stop ends with its tracer: that it did is confirmed too); `Err` when it failed.
async fn after_the_watchdog(watchdog_pid: Option<u32>, f: &Frozen) -> Result<(), String> {
    end_orphans(watchdog_pid);
    let f = f.clone();
    tokio::task::spawn_blocking(move || {
        if let Frozen::Pid(pid) = &f {
            ptrace::resumed(*pid).map_err(|e| e.to_string())?;
        }
        freezer::thaw(&f).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r)
}

impl Span {
    /// Ask `watchdog` to freeze, and wait for the freeze to land (a signal meanwhile is the
    /// caller's to act on once it has: the countdown thaws at once).
    pub async fn land(mut watchdog: Watchdog, frozen: &Frozen, notice: Option<Notice>) -> Result<Span, NotLanded> {
        let heard = watchdog.freeze().await;
        let thaw = Thaw {
            by_hand: by_hand(frozen),
            watchdog_moved: watchdog.moved.clone(),
            watchdog_stayed: watchdog.stayed.clone(),
            ..Thaw::default()
        };
        match heard {
            Heard::Said(Said::Frozen { at_ms, method, note }) => Ok(Span {
                frozen: frozen.clone(),
                watchdog: Some(watchdog),
                armed: None,
                notice,
                landed_ms: at_ms,
                method,
                note,
                ended_ms: None,
                thaw,
            }),
            Heard::Said(Said::FreezeFailed { error, left_frozen }) => {
                watchdog.close().await;
                Err(NotLanded {
                    said: format!("the freeze failed: {error}"),
                    left_frozen,
                })
            }
            other => {
                // Gone, or silent: whatever it stopped or still runs is ended here.
                let pid = watchdog.pid();
                watchdog.hang_up();
                let (undone, left_frozen) = match after_the_watchdog(pid, frozen).await {
                    Ok(()) => ("nothing is left frozen".to_string(), false),
                    Err(e) => (
                        format!("the thaw failed: {e}; thaw it by hand: {}", by_hand(frozen)),
                        true,
                    ),
                };
                let what = match other {
                    Heard::Silent => "did not answer",
                    _ => "died",
                };
                Err(NotLanded {
                    said: format!("the watchdog {what} while freezing: {undone}"),
                    left_frozen,
                })
            }
        }
    }

    /// The watchdog's next word while frozen: `true` when the freeze ended (the watchdog
    /// thawed it, or died with its ptrace stop). Pending forever once nothing more can come.
    pub async fn ended_early(&mut self) -> bool {
        let Some(w) = self.watchdog.as_mut() else {
            return std::future::pending().await;
        };
        match w.heard().await {
            Heard::Said(Said::Thawed { at_ms, why }) => {
                self.ended("watchdog", why, at_ms);
                self.watchdog = None;
                true
            }
            Heard::Said(Said::ThawFailed { error }) => {
                self.thaw.failed = Some(error);
                self.ended("nobody", None, wall_ms());
                self.watchdog = None;
                true
            }
            Heard::Said(_) | Heard::Silent => false,
            Heard::Gone => {
                let at_ms = wall_ms();
                let pid = self.watchdog_gone();
                if self.method == PTRACE {
                    self.kernel_ended(pid, at_ms).await;
                    return true;
                }
                // A freezer's stop outlives it: the drill thaws at its end, guarded.
                self.armed = Some(Armed::arm(&self.frozen));
                false
            }
        }
    }

    /// The watchdog died with its ptrace stop: confirm the worker runs, tell the exporter.
    async fn kernel_ended(&mut self, watchdog_pid: Option<u32>, at_ms: i64) {
        let why = "the watchdog died, and the kernel ended its ptrace stop".to_string();
        match after_the_watchdog(watchdog_pid, &self.frozen).await {
            Ok(()) => {
                self.ended("kernel", Some(why), at_ms);
                self.tell("thawed", at_ms).await;
            }
            Err(e) => {
                self.thaw.failed = Some(format!("{why}, but: {e}"));
                self.ended("nobody", None, at_ms);
                self.tell("thaw_failed", at_ms).await;
            }
        }
    }

    /// Thaw it (unless it ended already), confirmed; `at_ms` is the moment just before.
    pub async fn thaw(&mut self, at_ms: i64) {
        if self.ended_ms.is_some() {
            return;
        }
        if let Some(w) = self.watchdog.as_mut() {
            match w.thaw().await {
                Heard::Said(Said::Thawed { at_ms: t, why }) => {
                    if let Some(w) = self.watchdog.take() {
                        w.close().await;
                    }
                    let by = if why.is_some() { "watchdog" } else { "drill" };
                    return self.ended(by, why, t);
                }
                Heard::Said(Said::ThawFailed { error }) => {
                    self.thaw.failed = Some(error);
                    return self.ended("nobody", None, at_ms);
                }
                Heard::Silent | Heard::Said(_) => {
                    // Alive but unheard: the thaw is not confirmed, and not run twice.
                    self.thaw.failed = Some(format!(
                        "the watchdog did not confirm the thaw within {} s",
                        THAW_LIMIT.as_secs()
                    ));
                    return self.ended("nobody", None, at_ms);
                }
                Heard::Gone => {
                    let pid = self.watchdog_gone();
                    if self.method == PTRACE {
                        return self.kernel_ended(pid, at_ms).await;
                    }
                    end_orphans(pid);
                }
            }
        }
        // The watchdog is gone: the drill thaws it itself.
        match after_the_watchdog(None, &self.frozen).await {
            Ok(()) => {
                if let Some(a) = self.armed.take() {
                    a.disarm();
                }
                let why = "the watchdog had died: the drill thawed it itself".to_string();
                self.ended("drill", Some(why), at_ms);
                self.tell("thawed", at_ms).await;
            }
            Err(e) => {
                self.thaw.failed = Some(e);
                self.ended("nobody", None, at_ms);
                self.tell("thaw_failed", at_ms).await;
            }
        }
    }

    async fn tell(&self, state: &str, at_ms: i64) {
        if let Some(n) = &self.notice
            && let Err(e) = n.tell(state, self.landed_ms, at_ms, "drill").await
        {
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("lockwatch drill: {e}\n").as_bytes());
        }
    }

    /// The watchdog died: said in the report; its pid, for its orphans.
    fn watchdog_gone(&mut self) -> Option<u32> {
        self.thaw.watchdog_died = true;
        self.watchdog.take().and_then(|w| w.pid())
    }

    fn ended(&mut self, by: &str, why: Option<String>, at_ms: i64) {
        self.ended_ms = Some(at_ms);
        self.thaw.by = by.into();
        self.thaw.why = why;
        self.thaw.frozen_ms = u64::try_from(at_ms - self.landed_ms).unwrap_or(0);
    }
}
