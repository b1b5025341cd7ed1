//! The watchdog that outlives the drill: `lockwatch drill-watchdog` (hidden), started before
//! anything is frozen, in a process group of its own (a Ctrl-C at the terminal does not
//! reach it). The drill writes `freezing` before it freezes and `thawed` once it thawed;
//! the watchdog thaws the target itself when the drill's pipe closes without `thawed` (the
//! drill was killed) or when `--for` plus a grace has passed (the drill is frozen or stuck).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::signal::unix::{SignalKind, signal};

use super::freezer;
use super::target::{CgroupVersion, Frozen};

/// After `--for`, how long the watchdog leaves the thaw to the drill.
pub const GRACE: Duration = Duration::from_secs(2);

/// The drill's handle on its watchdog.
pub struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Watchdog {
    /// Start `program drill-watchdog` for `frozen`, to thaw it `hold` + [`GRACE`] after the
    /// drill says `freezing`.
    pub async fn spawn(program: &Path, frozen: &Frozen, hold: Duration) -> std::io::Result<Watchdog> {
        let mut cmd = Command::new(program);
        cmd.arg("drill-watchdog")
            .arg("--hold-ms")
            .arg(hold.as_millis().to_string());
        match frozen {
            Frozen::Pid(p) => cmd.arg("--thaw").arg(format!("pid:{p}")),
            Frozen::Cgroup { path, .. } => cmd.arg("--thaw").arg(format!("cgroup:{}", path.display())),
            Frozen::Commands { thaw, .. } => cmd.arg("--thaw-cmd").arg(thaw),
        };
        let mut child = cmd
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(false)
            .spawn()?;
        // It says `ready` once its signal handlers are in place.
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        match tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await {
            Ok(Ok(Some(l))) if l == "ready" => {}
            other => {
                let _ = child.start_kill();
                return Err(std::io::Error::other(format!("the watchdog did not start: {other:?}")));
            }
        }
        let stdin = child.stdin.take();
        Ok(Watchdog { child, stdin })
    }

    /// The drill is about to freeze: the watchdog's clock starts.
    pub async fn freezing(&mut self) -> std::io::Result<()> {
        self.say("freezing").await
    }

    /// The drill thawed the target itself: the watchdog ends without touching it.
    pub async fn thawed(mut self) {
        let _ = self.say("thawed").await;
        self.stdin = None;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }

    async fn say(&mut self, what: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| std::io::Error::other("closed"))?;
        stdin.write_all(format!("{what}\n").as_bytes()).await?;
        stdin.flush().await
    }
}

/// What the hidden subcommand is given.
#[derive(Debug, Clone)]
pub struct WatchdogArgs {
    /// `pid:N` or `cgroup:PATH`.
    pub thaw: Option<String>,
    pub thaw_cmd: Option<String>,
    pub hold: Duration,
}

/// The target as the watchdog thaws it, not checked again (the drill did that).
fn target(args: &WatchdogArgs) -> Option<Frozen> {
    if let Some(cmd) = &args.thaw_cmd {
        return Some(Frozen::Commands {
            freeze: String::new(),
            thaw: cmd.clone(),
        });
    }
    let spec = args.thaw.as_deref()?;
    if let Some(p) = spec.strip_prefix("pid:") {
        return p.parse().ok().map(Frozen::Pid);
    }
    let path = Path::new(spec.strip_prefix("cgroup:")?).to_path_buf();
    let version = match path.join("cgroup.freeze").is_file() {
        true => CgroupVersion::V2,
        false => CgroupVersion::V1,
    };
    Some(Frozen::Cgroup { path, version })
}

/// The watchdog's life: `ready`, then wait for `freezing`; thaw when the pipe closes after
/// it without `thawed`, when `hold` + [`GRACE`] pass, or on a terminating signal.
pub async fn main(args: WatchdogArgs) -> std::io::Result<()> {
    let frozen = target(&args).ok_or_else(|| std::io::Error::other("nothing to thaw"))?;
    let mut signals = Vec::new();
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
        SignalKind::quit(),
    ] {
        signals.push(signal(kind)?);
    }
    let (tx, mut rx) = tokio::sync::mpsc::channel::<&'static str>(4);
    for mut s in signals {
        let tx = tx.clone();
        tokio::spawn(async move {
            if s.recv().await.is_some() {
                let _ = tx.send("signal").await;
            }
        });
    }
    let stdin_tx = tx.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match line.trim() {
                "freezing" => {
                    let _ = stdin_tx.send("freezing").await;
                }
                "thawed" => {
                    let _ = stdin_tx.send("thawed").await;
                    return;
                }
                _ => {}
            }
        }
        let _ = stdin_tx.send("closed").await;
    });
    drop(tx);
    let mut out = tokio::io::stdout();
    out.write_all(b"ready\n").await?;
    out.flush().await?;
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let next = match deadline {
            Some(d) => match tokio::time::timeout_at(d, rx.recv()).await {
                Ok(m) => m,
                Err(_) => {
                    thaw(
                        &frozen,
                        "--for and its grace have passed and the drill has not thawed it",
                    );
                    return Ok(());
                }
            },
            None => rx.recv().await,
        };
        match (next, deadline.is_some()) {
            (Some("freezing"), _) => deadline = Some(tokio::time::Instant::now() + args.hold + GRACE),
            (Some("thawed"), _) => return Ok(()),
            (Some(_) | None, true) => {
                thaw(&frozen, "the drill ended without thawing it");
                return Ok(());
            }
            // Nothing was frozen yet: nothing to do.
            (Some(_) | None, false) => return Ok(()),
        }
    }
}

fn thaw(frozen: &Frozen, why: &str) {
    let what = match frozen {
        Frozen::Commands { thaw, .. } => format!("`{thaw}`"),
        other => other.spec(),
    };
    match freezer::thaw(frozen) {
        Ok(()) => eprintln!("lockwatch drill watchdog: thawed {what}: {why}"),
        Err(e) => eprintln!("lockwatch drill watchdog: could not thaw {what} ({why}): {e}; thaw it by hand"),
    }
}
