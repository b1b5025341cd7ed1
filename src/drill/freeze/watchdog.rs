//! The drill's handle on its watchdog, `lockwatch drill-watchdog` (hidden; its life is in
//! `keeper`): the process that freezes and thaws the target, so that the freeze outlives no
//! way the drill can end. The drill writes `freeze` and `thaw`; the watchdog answers with
//! one JSON line per step ([`Said`]). A closed pipe is the drill's death to the watchdog,
//! and the watchdog's to the drill.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::notice::Notice;
use super::target::Frozen;

/// After `--for`, how long the watchdog leaves the thaw to the drill.
pub const GRACE: Duration = Duration::from_secs(2);

/// How long a freeze may take: the commands' limit and the kernel's, with a margin.
pub const FREEZE_LIMIT: Duration = Duration::from_secs(75);

/// How long a confirmed thaw may take: a command's 60 s three times, the pauses between, a
/// margin.
pub const THAW_LIMIT: Duration = Duration::from_secs(200);

/// What the watchdog says, one JSON object per line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "said", rename_all = "snake_case")]
pub enum Said {
    /// Listening; the cgroups it moved into and what it could not leave.
    Ready { moved: Vec<String>, stayed: Vec<String> },
    /// The freeze landed at `at_ms` (wall clock).
    Frozen {
        at_ms: i64,
        method: String,
        note: Option<String>,
    },
    /// The freeze failed; it was undone unless `left_frozen` (the undo failed too).
    FreezeFailed { error: String, left_frozen: bool },
    /// Thawed and confirmed; `at_ms` is taken just before the thaw. `why`: the watchdog's own
    /// reason when the drill did not ask.
    Thawed { at_ms: i64, why: Option<String> },
    /// The thaw failed after its retries.
    ThawFailed { error: String },
}

/// What became of the watchdog, as the drill sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    Said(Said),
    /// Its pipe closed: it died (or exited after its last word).
    Gone,
    /// No answer within the step's limit: alive, or not, but not heard.
    Silent,
}

/// The drill's handle on its watchdog.
pub struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
    said: mpsc::Receiver<Said>,
    /// The cgroups it moved into and what it could not leave.
    pub moved: Vec<String>,
    pub stayed: Vec<String>,
}

impl Watchdog {
    /// Start `program drill-watchdog` for `frozen`, which thaws it `hold` + [`GRACE`] after
    /// the freeze landed unless the drill does first; `notice` tells the exporter.
    pub async fn spawn(
        program: &Path,
        frozen: &Frozen,
        hold: Duration,
        notice: Option<&Notice>,
    ) -> std::io::Result<Watchdog> {
        let mut cmd = Command::new(program);
        cmd.arg("drill-watchdog")
            .arg("--hold-ms")
            .arg(hold.as_millis().to_string());
        match frozen {
            Frozen::Pid(p) => cmd.arg("--thaw").arg(format!("pid:{p}")),
            Frozen::Cgroup { path, .. } => cmd.arg("--thaw").arg(format!("cgroup:{}", path.display())),
            Frozen::Commands { freeze, thaw } => cmd.arg("--freeze-cmd").arg(freeze).arg("--thaw-cmd").arg(thaw),
        };
        if let Some(n) = notice {
            cmd.arg("--notice")
                .arg(serde_json::to_string(n).map_err(std::io::Error::other)?);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(false)
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, mut said) = mpsc::channel(8);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                if let Ok(s) = serde_json::from_str::<Said>(&l)
                    && tx.send(s).await.is_err()
                {
                    return;
                }
            }
        });
        let (moved, stayed) = match tokio::time::timeout(Duration::from_secs(10), said.recv()).await {
            Ok(Some(Said::Ready { moved, stayed })) => (moved, stayed),
            other => {
                let _ = child.start_kill();
                return Err(std::io::Error::other(format!("the watchdog did not start: {other:?}")));
            }
        };
        let stdin = child.stdin.take();
        Ok(Watchdog {
            child,
            stdin,
            said,
            moved,
            stayed,
        })
    }

    /// Ask for the freeze; its answer (`Frozen` or `FreezeFailed`), or `Gone`.
    pub async fn freeze(&mut self) -> Heard {
        if self.tell("freeze").await.is_err() {
            return Heard::Gone;
        }
        match tokio::time::timeout(FREEZE_LIMIT, self.said.recv()).await {
            Ok(Some(s)) => Heard::Said(s),
            Ok(None) => Heard::Gone,
            Err(_) => Heard::Silent,
        }
    }

    /// Its next word, or `Gone` (for a `select!` while the target is frozen).
    pub async fn heard(&mut self) -> Heard {
        match self.said.recv().await {
            Some(s) => Heard::Said(s),
            None => Heard::Gone,
        }
    }

    /// Ask for the thaw and wait for its confirmation (`Thawed` or `ThawFailed`), or `Gone`.
    /// A thaw it did on its own while the drill was not listening (stopped, frozen) is
    /// answered first: its word is still in the pipe after it exits.
    pub async fn thaw(&mut self) -> Heard {
        while let Ok(s) = self.said.try_recv() {
            if matches!(s, Said::Thawed { .. } | Said::ThawFailed { .. }) {
                return Heard::Said(s);
            }
        }
        if self.tell("thaw").await.is_err() {
            return match tokio::time::timeout(Duration::from_secs(1), self.said.recv()).await {
                Ok(Some(s)) => Heard::Said(s),
                _ => Heard::Gone,
            };
        }
        self.last_word(THAW_LIMIT).await
    }

    /// Its next word within `limit`: `Gone` once its pipe closed, `Silent` when none came.
    pub async fn last_word(&mut self, limit: Duration) -> Heard {
        match tokio::time::timeout(limit, self.said.recv()).await {
            Ok(Some(s)) => Heard::Said(s),
            Ok(None) => Heard::Gone,
            Err(_) => Heard::Silent,
        }
    }

    /// Its process id (also its process group's, and its session's: it leads them).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Close the pipe without waiting: a watchdog holding a freeze (or landing one) thaws it.
    pub fn hang_up(&mut self) {
        self.stdin = None;
    }

    /// Close the pipe and reap it: a watchdog still holding a freeze thaws it at once.
    pub async fn close(mut self) {
        self.stdin = None;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }

    async fn tell(&mut self, what: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| std::io::Error::other("closed"))?;
        stdin.write_all(format!("{what}\n").as_bytes()).await?;
        stdin.flush().await
    }
}
