//! The watchdog's life (`lockwatch drill-watchdog`): it leaves the drill's session and
//! cgroups (`escape`), says `ready`, freezes on `freeze` (`stop`: a ptrace stop for a
//! process, so that even its own death resumes the worker), and thaws, confirmed, on the
//! first of: the drill's `thaw`; the drill's pipe closing (it died: at once); `--for` +
//! [`GRACE`] after the freeze *landed* (the drill is stopped, frozen or stuck); a signal. A
//! freeze that lands after the drill is gone is undone at once. It tells the exporter
//! (`notice`). Its stderr is the drill's, written without ever panicking.

use std::io::Write;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::escape;
use super::notice::Notice;
use super::stop::Held;
use super::target::Frozen;
use super::watchdog::{GRACE, Said};
use crate::locks::recent::wall_ms;

/// What the hidden subcommand is given.
#[derive(Debug, Clone)]
pub struct WatchdogArgs {
    /// `pid:N` or `cgroup:PATH`.
    pub thaw: Option<String>,
    pub freeze_cmd: Option<String>,
    pub thaw_cmd: Option<String>,
    pub hold: Duration,
    /// The exporter to tell, as JSON.
    pub notice: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    Freeze,
    Thaw,
    /// The drill's pipe closed.
    Closed,
    Signal,
}

/// A line on the drill's stderr; a closed one is no reason to stop.
fn log(line: &str) {
    let _ = writeln!(std::io::stderr(), "lockwatch drill watchdog: {line}");
}

/// The target as the watchdog freezes and thaws it, not checked again (the drill did that).
fn target(args: &WatchdogArgs) -> Option<Frozen> {
    match (&args.freeze_cmd, &args.thaw_cmd) {
        (Some(freeze), Some(thaw)) => Some(Frozen::Commands {
            freeze: freeze.clone(),
            thaw: thaw.clone(),
        }),
        _ => Frozen::named(args.thaw.as_deref()?),
    }
}

/// The drill's words and the signals, on one channel.
fn listen() -> std::io::Result<mpsc::Receiver<Heard>> {
    let (tx, rx) = mpsc::channel(8);
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
        SignalKind::quit(),
    ] {
        let mut s = signal(kind)?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while s.recv().await.is_some() {
                let _ = tx.send(Heard::Signal).await;
            }
        });
    }
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let heard = match line.trim() {
                "freeze" => Heard::Freeze,
                "thaw" => Heard::Thaw,
                _ => continue,
            };
            if tx.send(heard).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Heard::Closed).await;
    });
    Ok(rx)
}

/// One line to the drill; a drill that is gone does not hear it.
async fn say(s: &Said) {
    if let Ok(line) = serde_json::to_string(s) {
        let mut out = tokio::io::stdout();
        let _ = out.write_all(format!("{line}\n").as_bytes()).await;
        let _ = out.flush().await;
    }
}

/// The watchdog, from `ready` to the confirmed thaw.
pub async fn main(args: WatchdogArgs) -> std::io::Result<()> {
    let frozen = target(&args).ok_or_else(|| std::io::Error::other("nothing to freeze"))?;
    let notice: Option<Notice> = args.notice.as_deref().and_then(|n| serde_json::from_str(n).ok());
    let escaped = escape::escape();
    let mut rx = listen()?;
    say(&Said::Ready {
        moved: escaped.moved,
        stayed: escaped.stayed,
    })
    .await;
    // Nothing is frozen until the drill asks.
    if rx.recv().await != Some(Heard::Freeze) {
        return Ok(());
    }
    let f = frozen.clone();
    let mut freezing = tokio::task::spawn_blocking(move || Held::stop(&f));
    let mut gone: Option<&'static str> = None;
    let stopped = loop {
        tokio::select! {
            r = &mut freezing => break r.map_err(|e| (format!("the freeze did not finish: {e}"), true)).and_then(|r| r),
            h = rx.recv(), if gone.is_none() => gone = Some(match h {
                Some(Heard::Signal) => "the watchdog was signalled while freezing",
                _ => "the drill ended while the freeze was landing",
            }),
        }
    };
    // The clock starts when the freeze has landed.
    let (at_ms, landed) = (wall_ms(), tokio::time::Instant::now());
    let (held, method, note) = match stopped {
        Ok(s) => s,
        Err((error, left_frozen)) => {
            say(&Said::FreezeFailed { error, left_frozen }).await;
            return Ok(());
        }
    };
    if let Some(why) = gone {
        return thaw(held, &frozen, notice.as_ref(), (at_ms, None), Some(why), false).await;
    }
    say(&Said::Frozen { at_ms, method, note }).await;
    // Told aside: a slow exporter must not hold the thaw back.
    let told = notice.clone().map(|n| {
        tokio::spawn(async move {
            if let Err(e) = n.tell("frozen", at_ms, at_ms, "watchdog").await {
                log(&e.to_string());
            }
        })
    });
    let deadline = landed + args.hold + GRACE;
    let why = tokio::select! {
        () = tokio::time::sleep_until(deadline) => Some("--for and its grace have passed and the drill has not thawed it"),
        h = rx.recv() => match h {
            Some(Heard::Thaw) => None,
            Some(Heard::Signal) => Some("the watchdog was signalled"),
            _ => Some("the drill ended without thawing it"),
        },
    };
    thaw(held, &frozen, notice.as_ref(), (at_ms, told), why, why.is_none()).await
}

/// Thaw and confirm, say so to the drill, the exporter and (when the drill did not ask) stderr.
async fn thaw(
    held: Held,
    frozen: &Frozen,
    notice: Option<&Notice>,
    (since_ms, told): (i64, Option<tokio::task::JoinHandle<()>>),
    why: Option<&'static str>,
    asked: bool,
) -> std::io::Result<()> {
    let at_ms = wall_ms();
    let done = tokio::task::spawn_blocking(move || held.thaw())
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
    let what = match frozen {
        Frozen::Commands { thaw, .. } => format!("`{thaw}`"),
        other => other.spec(),
    };
    let by = if asked { "drill" } else { "watchdog" };
    let (said, state) = match done {
        Ok(()) => {
            if let Some(why) = why {
                log(&format!("thawed {what}: {why}"));
            }
            (
                Said::Thawed {
                    at_ms,
                    why: why.map(String::from),
                },
                "thawed",
            )
        }
        Err(error) => {
            log(&format!(
                "could not thaw {what} ({}): {error}; thaw it by hand: {}",
                why.unwrap_or("the drill asked"),
                super::stop::by_hand(frozen)
            ));
            (Said::ThawFailed { error }, "thaw_failed")
        }
    };
    say(&said).await;
    // The exporter hears of the freeze before its thaw.
    if let Some(t) = told {
        let _ = t.await;
    }
    if let Some(n) = notice
        && let Err(e) = n.tell(state, since_ms, wall_ms(), by).await
    {
        log(&e.to_string());
    }
    Ok(())
}
