//! The freeze from the drill's side, from landing to the confirmed thaw: the watchdog
//! freezes and thaws; when it dies the drill knows what that did (a ptrace stop ended with
//! it: the worker runs again now) and, for a freezer's stop, holds on and thaws at its end
//! itself, guarded. The thaw as it happened is the report's [`Thaw`].

use serde::Serialize;

use super::freezer;
use super::guard::Armed;
use super::notice::Notice;
use super::stop::{PTRACE, by_hand};
use super::target::Frozen;
use super::watchdog::{Heard, Said, Watchdog};

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

impl Span {
    /// Ask `watchdog` to freeze; `None` for `cancelled` first (the watchdog undoes a freeze
    /// that lands after).
    pub async fn land(
        mut watchdog: Watchdog,
        frozen: &Frozen,
        notice: Option<Notice>,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> Result<Option<Span>, NotLanded> {
        let heard = tokio::select! {
            h = watchdog.freeze() => h,
            () = cancelled => {
                watchdog.close().await;
                return Ok(None);
            }
        };
        let thaw = Thaw {
            by_hand: by_hand(frozen),
            watchdog_moved: watchdog.moved.clone(),
            watchdog_stayed: watchdog.stayed.clone(),
            ..Thaw::default()
        };
        match heard {
            Heard::Said(Said::Frozen { at_ms, method, note }) => Ok(Some(Span {
                frozen: frozen.clone(),
                watchdog: Some(watchdog),
                armed: None,
                notice,
                landed_ms: at_ms,
                method,
                note,
                ended_ms: None,
                thaw,
            })),
            Heard::Said(Said::FreezeFailed { error }) => {
                watchdog.close().await;
                Err(NotLanded {
                    left_frozen: error.contains("failed too"),
                    said: format!("the freeze failed: {error}"),
                })
            }
            other => {
                // Whatever a freezer stopped before the watchdog died is thawed here.
                let (undone, left_frozen) = match freezer::thaw(frozen) {
                    Ok(()) => ("nothing is left frozen".to_string(), false),
                    Err(e) => (
                        format!("the thaw failed: {e}; thaw it by hand: {}", by_hand(frozen)),
                        true,
                    ),
                };
                Err(NotLanded {
                    said: format!("the watchdog did not freeze ({other:?}): {undone}"),
                    left_frozen,
                })
            }
        }
    }

    /// The watchdog's next word while frozen: `true` when the freeze ended (the watchdog
    /// thawed it, or died with its ptrace stop). Pending forever once nothing more can come.
    pub async fn ended_early(&mut self, now_ms: i64) -> bool {
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
                self.ended("nobody", None, now_ms);
                self.watchdog = None;
                true
            }
            Heard::Said(_) => false,
            Heard::Gone => {
                self.watchdog = None;
                self.thaw.watchdog_died = true;
                if self.method == PTRACE {
                    self.ended(
                        "kernel",
                        Some("the watchdog died, and the kernel ended its ptrace stop".into()),
                        now_ms,
                    );
                    return true;
                }
                // A freezer's stop outlives it: the drill thaws at its end, guarded.
                self.armed = Some(Armed::arm(&self.frozen));
                false
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
                _ => {
                    self.watchdog = None;
                    self.thaw.watchdog_died = true;
                    if self.method == PTRACE {
                        return self.ended(
                            "kernel",
                            Some("the watchdog died, and the kernel ended its ptrace stop".into()),
                            at_ms,
                        );
                    }
                }
            }
        }
        // The watchdog is gone: the drill thaws it itself.
        let f = self.frozen.clone();
        let done = tokio::task::spawn_blocking(move || freezer::thaw(&f))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        match done {
            Ok(()) => {
                if let Some(a) = self.armed.take() {
                    a.disarm();
                }
                let why = "the watchdog had died: the drill thawed it itself".to_string();
                self.ended("drill", Some(why), at_ms);
                if let Some(n) = &self.notice {
                    let _ = n.tell("thawed", self.landed_ms, at_ms, "drill").await;
                }
            }
            Err(e) => {
                self.thaw.failed = Some(e);
                self.ended("nobody", None, at_ms);
                if let Some(n) = &self.notice {
                    let _ = n.tell("thaw_failed", self.landed_ms, at_ms, "drill").await;
                }
            }
        }
    }

    fn ended(&mut self, by: &str, why: Option<String>, at_ms: i64) {
        self.ended_ms = Some(at_ms);
        self.thaw.by = by.into();
        self.thaw.why = why;
        self.thaw.frozen_ms = u64::try_from(at_ms - self.landed_ms).unwrap_or(0);
    }
}
