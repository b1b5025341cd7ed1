//! Worker A of the drill: a real child process (`lockwatch drill-worker`, hidden) that the
//! drill drives over stdin/stdout, one JSON request and one JSON reply per line, and pauses
//! with SIGSTOP. It runs the lock operations with the scripts it is given and reports its
//! own failures to the exporter as lock events, the way an application would.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::access::scripts::{LockScripts, acquire, next_fence_expiring};

/// What the drill asks a worker to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Request {
    /// `INCR fence` for a token (the counter set to expire after `lease_ms`), then
    /// `SET key token NX PX ttl`.
    Acquire {
        key: String,
        fence_key: String,
        owner: String,
        ttl_ms: u64,
        lease_ms: u64,
    },
    Renew {
        key: String,
        token: String,
        ttl_ms: u64,
    },
    Release {
        key: String,
        token: String,
    },
    /// A compare-token write to the fenced resource (which, written, expires after `lease_ms`).
    /// `lock`: the lock whose fencing token it carries, named in the refusal it reports.
    Write {
        resource: String,
        fence: i64,
        value: String,
        lease_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lock: Option<String>,
    },
}

/// A worker's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// Redis accepted the operation.
    pub(crate) ok: bool,
    /// For an acquisition: the token set (`owner:fence`) and its fencing number.
    pub(crate) token: Option<String>,
    pub(crate) fence: Option<i64>,
    /// A Redis or I/O error, when the operation could not be run at all.
    pub(crate) error: Option<String>,
    /// The lock event reported to the exporter, if any (`op/outcome`).
    pub(crate) reported: Option<String>,
}

/// The Lua the worker runs, as sent on its stdin's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Scripts {
    pub(crate) release: String,
    pub(crate) renew: String,
}

/// Run one operation on `c` with `scripts` (the release and renew worker A was given).
pub(crate) async fn perform(
    c: &mut MultiplexedConnection,
    scripts: &LockScripts,
    req: &Request,
) -> redis::RedisResult<Reply> {
    let ok = match req {
        Request::Acquire {
            key,
            fence_key,
            owner,
            ttl_ms,
            lease_ms,
        } => {
            let fence = next_fence_expiring(c, fence_key, Duration::from_millis(*lease_ms)).await?;
            let token = format!("{owner}:{fence}");
            let set = acquire(c, key, &token, Duration::from_millis(*ttl_ms)).await?;
            return Ok(Reply {
                ok: set,
                token: Some(token),
                fence: Some(fence),
                ..Reply::default()
            });
        }
        Request::Renew { key, token, ttl_ms } => scripts.renew(c, key, token, Duration::from_millis(*ttl_ms)).await?,
        Request::Release { key, token } => scripts.release(c, key, token).await?,
        Request::Write {
            resource,
            fence,
            value,
            lease_ms,
            ..
        } => {
            let lease = Some(Duration::from_millis(*lease_ms));
            scripts.fenced_write(c, resource, *fence, value, lease).await?
        }
    };
    Ok(Reply { ok, ..Reply::default() })
}

/// The lock event a refused operation reports: `(op, outcome)`.
pub(crate) fn failure_event(req: &Request) -> Option<(&'static str, &'static str)> {
    match req {
        Request::Acquire { .. } => Some(("acquire", "busy")),
        Request::Renew { .. } => Some(("renew", "not_owned")),
        Request::Release { .. } => Some(("release", "not_owned")),
        Request::Write { .. } => Some(("write", "stale_fence")),
    }
}

/// The child side: the scripts on the first line of stdin, then requests until stdin
/// closes, each answered on stdout. Refusals are pushed to `exporter`, with the config's
/// push token when it has one.
pub(crate) async fn serve(
    mut conn: MultiplexedConnection,
    namespace: String,
    exporter: Option<String>,
    push_token: Option<String>,
) -> std::io::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let first = lines
        .next_line()
        .await?
        .ok_or_else(|| std::io::Error::other("no scripts on stdin"))?;
    let scripts: Scripts = serde_json::from_str(&first).map_err(std::io::Error::other)?;
    let scripts = LockScripts::custom(&scripts.release, &scripts.renew);
    // Cached now, each later operation is one EVALSHA: a request held in the network then
    // reaches Redis whole, even while this process is frozen. A script Redis refuses to load
    // fails later, in the step that runs it.
    let _ = scripts.load(&mut conn).await;
    let mut out = tokio::io::stdout();
    let http = reqwest::Client::new();
    while let Some(line) = lines.next_line().await? {
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply {
                error: Some(format!("bad request: {e}")),
                ..Reply::default()
            },
            Ok(req) => match perform(&mut conn, &scripts, &req).await {
                Err(e) => Reply {
                    error: Some(e.to_string()),
                    ..Reply::default()
                },
                Ok(mut r) => {
                    if !r.ok
                        && let (Some(url), Some((op, outcome))) = (&exporter, failure_event(&req))
                    {
                        let key = match &req {
                            Request::Acquire { key, .. }
                            | Request::Renew { key, .. }
                            | Request::Release { key, .. } => Some(key.as_str()),
                            Request::Write { lock, .. } => lock.as_deref(),
                        };
                        let event =
                            serde_json::json!({"namespace": namespace, "op": op, "outcome": outcome, "key": key});
                        let mut post = http
                            .post(format!("{}/api/v1/events", url.trim_end_matches('/')))
                            .header("content-type", "application/x-ndjson")
                            .body(format!("{event}\n"));
                        if let Some(t) = &push_token {
                            post = post.bearer_auth(t);
                        }
                        let sent = post.send().await;
                        r.reported = match sent {
                            Ok(resp) if resp.status().is_success() => Some(format!("{op}/{outcome}")),
                            Ok(resp) => Some(format!("{op}/{outcome} refused: {}", resp.status())),
                            Err(e) => Some(format!("{op}/{outcome} not sent: {e}")),
                        };
                    }
                    r
                }
            },
        };
        let mut text = serde_json::to_string(&reply).unwrap_or_else(|_| "{}".into());
        text.push('\n');
        out.write_all(text.as_bytes()).await?;
        out.flush().await?;
    }
    Ok(())
}

/// Make the kernel kill this process (SIGKILL: also when stopped) when the drill that
/// started it ends, however it ends; and exit now if `parent` is already gone (it died
/// before the request could be made, and this process was handed to another parent).
pub(crate) fn die_with_parent(parent: Option<i32>) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    match parent {
        Some(p) if nix::unistd::getppid().as_raw() != p => {
            Err(std::io::Error::other("the drill that started worker A has ended"))
        }
        _ => Ok(()),
    }
}

/// The parent's handle on worker A.
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    pub(crate) pid: i32,
    stopped: bool,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    #[error("cannot start worker A ({0})")]
    Spawn(std::io::Error),
    #[error("worker A stopped answering ({0})")]
    Io(#[from] std::io::Error),
    #[error("worker A sent a bad reply: {0}")]
    Reply(String),
    #[error("cannot signal worker A: {0}")]
    Signal(nix::Error),
    /// A Redis command of the drill itself (B's side, checks) failed.
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
}

impl Worker {
    /// Start `program drill-worker` with `args`, scripts on its stdin's first line.
    pub(crate) async fn spawn(program: &Path, args: &[String], scripts: &Scripts) -> Result<Worker, WorkerError> {
        let mut child = tokio::process::Command::new(program)
            .arg("drill-worker")
            .args(args)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(WorkerError::Spawn)?;
        let (Some(mut stdin), Some(stdout), Some(pid)) = (child.stdin.take(), child.stdout.take(), child.id()) else {
            return Err(WorkerError::Spawn(std::io::Error::other("no pipes")));
        };
        let mut first = serde_json::to_string(scripts).map_err(|e| WorkerError::Reply(e.to_string()))?;
        first.push('\n');
        stdin.write_all(first.as_bytes()).await?;
        Ok(Worker {
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            pid: pid as i32,
            stopped: false,
        })
    }

    pub(crate) async fn call(&mut self, req: &Request) -> Result<Reply, WorkerError> {
        self.send(req).await?;
        self.receive().await
    }

    /// Ask for `req` without waiting for the answer (its request may be held in the network).
    pub(crate) async fn send(&mut self, req: &Request) -> Result<(), WorkerError> {
        let mut line = serde_json::to_string(req).map_err(|e| WorkerError::Reply(e.to_string()))?;
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// The answer to the request sent last.
    pub(crate) async fn receive(&mut self) -> Result<Reply, WorkerError> {
        let reply = self
            .stdout
            .next_line()
            .await?
            .ok_or_else(|| WorkerError::Reply("worker A exited".into()))?;
        serde_json::from_str(&reply).map_err(|e| WorkerError::Reply(format!("{e}: {reply}")))
    }

    fn signal(&self, s: Signal) -> Result<(), WorkerError> {
        kill(Pid::from_raw(self.pid), s).map_err(WorkerError::Signal)
    }

    /// SIGSTOP: the process is frozen, as by a long GC pause. Returns once the kernel
    /// shows it stopped (where `/proc` says so; at most a second).
    pub(crate) async fn pause(&mut self) -> Result<(), WorkerError> {
        self.signal(Signal::SIGSTOP)?;
        self.stopped = true;
        let stat = format!("/proc/{}/stat", self.pid);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while std::time::Instant::now() < deadline {
            match std::fs::read_to_string(&stat) {
                Ok(s)
                    if s.rsplit_once(')')
                        .is_some_and(|(_, rest)| rest.trim_start().starts_with('T')) =>
                {
                    break;
                }
                Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// SIGCONT.
    pub(crate) fn resume(&mut self) -> Result<(), WorkerError> {
        self.signal(Signal::SIGCONT)?;
        self.stopped = false;
        Ok(())
    }

    /// Continue (if stopped) and end the process; wait for it.
    pub(crate) async fn end(mut self) -> std::io::Result<()> {
        if self.stopped {
            let _ = self.signal(Signal::SIGCONT);
        }
        let _ = self.child.start_kill();
        self.child.wait().await.map(|_| ())
    }
}
